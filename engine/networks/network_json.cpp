#include "engine/networks/network_json.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>

#include "engine/atomic_file.h"
#include "engine/errors.h"
#include "engine/json_text.h"
#include "engine/networks/abstract_network.h"
#include "engine/ops/op.h"

namespace rl {

namespace {

// ordered_json keeps keys in file order: attrs keep their order, and the writer's output reads
// top-down (format, version, name, ...) instead of alphabetically.
using Json = nlohmann::ordered_json;

constexpr const char* kFormat = "rematlab-network";
constexpr int64_t kVersion = 1;
constexpr uint64_t kMaxFileBytes = uint64_t{256} << 20;

// --- reading ---------------------------------------------------------------------------------

struct Reader {
    const std::string& origin;

    [[noreturn]] void fail(const std::string& where, const std::string& why) const {
        throw Error(origin + ": " + (where.empty() ? "" : where + ": ") + why);
    }

    static std::string kind(const Json& j) {
        switch (j.type()) {
            case Json::value_t::null:
                return "null";
            case Json::value_t::object:
                return "an object";
            case Json::value_t::array:
                return "an array";
            case Json::value_t::string:
                return "a string";
            case Json::value_t::boolean:
                return "a boolean";
            case Json::value_t::number_integer:
            case Json::value_t::number_unsigned:
                return "an integer";
            case Json::value_t::number_float:
                return "a number";
            default:
                return "something else";
        }
    }

    // Rejects fields the format does not know: a typo ("atrs") would otherwise be silently lost.
    void only_fields(const Json& obj, const std::string& where,
                     std::initializer_list<const char*> allowed) const {
        for (auto it = obj.begin(); it != obj.end(); ++it) {
            bool ok = false;
            for (const char* a : allowed) ok = ok || it.key() == a;
            if (ok) continue;
            std::string list;
            for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
            fail(where, "unknown field \"" + it.key() + "\" (valid fields: " + list + ")");
        }
    }

    const Json& field(const Json& obj, const char* key, const std::string& where) const {
        auto it = obj.find(key);
        if (it == obj.end()) fail(where, std::string("missing field \"") + key + "\"");
        return *it;
    }

    std::string string_field(const Json& obj, const char* key, const std::string& where) const {
        const Json& v = field(obj, key, where);
        if (!v.is_string())
            fail(where, std::string("\"") + key + "\" must be a string, not " + kind(v));
        return v.get<std::string>();
    }

    int64_t int_value(const Json& v, const std::string& what, const std::string& where) const {
        if (v.is_number_integer()) {
            if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})
                fail(where, what + " is too large");
            return v.get<int64_t>();
        }
        fail(where, what + " must be an integer, not " + kind(v));
    }

    Shape shape_value(const Json& v, const std::string& where) const {
        if (!v.is_array()) fail(where, "\"shape\" must be an array of integers, not " + kind(v));
        Shape s;
        for (const Json& d : v) s.dims.push_back(int_value(d, "every \"shape\" entry", where));
        return s;
    }

    AttrValue attr_value(const Json& v, const std::string& key, const std::string& where) const {
        const std::string what = "attribute \"" + key + "\"";
        if (v.is_boolean()) return int64_t{v.get<bool>() ? 1 : 0};
        if (v.is_number_integer()) return int_value(v, what, where);
        if (v.is_number_float()) return v.get<double>();
        if (v.is_string()) return v.get<std::string>();
        if (v.is_array()) {
            std::vector<int64_t> list;
            for (const Json& e : v) {
                if (!e.is_number_integer())
                    fail(where,
                         what + ": a list attribute must hold integers only, found " + kind(e));
                list.push_back(int_value(e, what, where));
            }
            return list;
        }
        fail(where, what + " must be an integer, a number, a string or a list of integers, not " +
                        kind(v));
    }

    std::vector<std::string> string_list(const Json& obj, const char* key, const std::string& where,
                                         bool required) const {
        std::vector<std::string> out;
        auto it = obj.find(key);
        if (it == obj.end()) {
            if (required) fail(where, std::string("missing field \"") + key + "\"");
            return out;
        }
        if (!it->is_array())
            fail(where,
                 std::string("\"") + key + "\" must be an array of strings, not " + kind(*it));
        for (const Json& e : *it) {
            if (!e.is_string())
                fail(where,
                     std::string("\"") + key + "\" must hold strings only, found " + kind(e));
            out.push_back(e.get<std::string>());
        }
        return out;
    }

    Graph read(const Json& root) const {
        if (!root.is_object())
            fail("", "a network file holds a JSON object, not " + kind(root) +
                         " (see docs/network-format.md)");
        auto fmt = root.find("format");
        if (fmt == root.end() || !fmt->is_string() || fmt->get<std::string>() != kFormat)
            fail("", std::string("not a RematLab network file: it needs \"format\": \"") + kFormat +
                         "\" (see docs/network-format.md), and it is not a node-link benchmark "
                         "graph either (those have arrays \"nodes\" and \"links\")");
        const int64_t version = int_value(field(root, "version", ""), "\"version\"", "");
        if (version > kVersion)
            fail("", "the file uses network format version " + std::to_string(version) +
                         ", but this RematLab reads versions up to " + std::to_string(kVersion) +
                         "; upgrade RematLab to open it");
        if (version < 1) fail("", "\"version\" must be 1 or more, got " + std::to_string(version));
        only_fields(root, "", {"format", "version", "name", "seed", "inputs", "nodes"});

        std::string name = "network";
        if (root.contains("name")) name = string_field(root, "name", "");
        uint64_t seed = 1;
        if (root.contains("seed")) {
            const int64_t s = int_value(root["seed"], "\"seed\"", "");
            if (s < 0) fail("", "\"seed\" must not be negative");
            seed = static_cast<uint64_t>(s);
        }
        Graph g(name, seed);

        const Json& inputs = field(root, "inputs", "");
        if (!inputs.is_array()) fail("", "\"inputs\" must be an array, not " + kind(inputs));
        for (size_t i = 0; i < inputs.size(); ++i) {
            const Json& in = inputs[i];
            std::string where = "input " + std::to_string(i);
            if (!in.is_object()) fail(where, "must be an object, not " + kind(in));
            if (in.contains("name") && in["name"].is_string())
                where += " ('" + in["name"].get<std::string>() + "')";
            only_fields(in, where, {"name", "dtype", "shape", "classes"});
            const std::string in_name = string_field(in, "name", where);
            const std::string dtype_text = string_field(in, "dtype", where);
            DType dtype{};
            if (!dtype_from_name(dtype_text, dtype))
                fail(where, "unknown dtype \"" + dtype_text + "\" (valid: f32, bf16, f16, i32)");
            if (dtype == DType::U8)
                fail(where,
                     "dtype \"u8\" is for dropout masks, which dropout_mask nodes compute; "
                     "an input is f32, bf16, f16 or i32");
            const Shape shape = shape_value(field(in, "shape", where), where);
            int64_t classes = 0;
            if (in.contains("classes")) {
                if (dtype != DType::I32) fail(where, "\"classes\" is only for i32 (labels) inputs");
                classes = int_value(in["classes"], "\"classes\"", where);
            } else if (dtype == DType::I32) {
                fail(where, "an i32 (labels) input needs \"classes\" (labels lie in [0, classes))");
            }
            try {
                g.add_input(in_name, dtype, shape, classes);
            } catch (const Error& e) {
                fail("", e.what());
            }
        }

        const Json& nodes = field(root, "nodes", "");
        if (!nodes.is_array()) fail("", "\"nodes\" must be an array, not " + kind(nodes));
        for (size_t i = 0; i < nodes.size(); ++i) {
            const Json& n = nodes[i];
            std::string where = "node " + std::to_string(i);
            if (!n.is_object()) fail(where, "must be an object, not " + kind(n));
            if (n.contains("name") && n["name"].is_string())
                where += " ('" + n["name"].get<std::string>() + "')";
            only_fields(n, where, {"name", "op", "inputs", "attrs", "tags", "tie"});
            const std::string node_name = string_field(n, "name", where);
            const std::string op_text = string_field(n, "op", where);
            const auto op = op_from_name(op_text);
            if (!op) fail(where, "unknown op \"" + op_text + "\"; valid ops: " + op_names_joined());
            const auto in_names = string_list(n, "inputs", where, true);
            Attrs attrs;
            if (auto a = n.find("attrs"); a != n.end()) {
                if (!a->is_object()) fail(where, "\"attrs\" must be an object, not " + kind(*a));
                for (auto it = a->begin(); it != a->end(); ++it)
                    attrs.set(it.key(), attr_value(it.value(), it.key(), where));
            }
            auto tags = string_list(n, "tags", where, false);
            // "tie": per parameter slot, in declaration order, the name of an earlier node's
            // parameter this node reads too (tied weights), or "" for a parameter of its own.
            std::vector<ParamSource> params;
            for (const std::string& t : string_list(n, "tie", where, false))
                params.push_back(ParamSource{t, nullptr, !t.empty()});
            try {
                g.add_node(node_name, *op, in_names, std::move(attrs), std::move(tags), params);
            } catch (const Error& e) {
                fail("", e.what());
            }
        }
        // A network of opaque nodes (written by `rematlab-cli network` from a benchmark graph)
        // is plan-only, as the benchmark graph it came from.
        bool opaque = !g.nodes().empty();
        for (const Node& node : g.nodes()) opaque = opaque && node.op == OpKind::Opaque;
        g.set_plan_only(opaque);
        try {
            g.finalize();
        } catch (const Error& e) {
            fail("", e.what());
        }
        return g;
    }
};

// --- writing ---------------------------------------------------------------------------------

Json attr_json(const AttrValue& v, const std::string& where) {
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    if (auto* d = std::get_if<double>(&v)) {
        if (!std::isfinite(*d))
            throw Error(where + ": a non-finite number cannot be written to a network file");
        return *d;
    }
    if (auto* s = std::get_if<std::string>(&v)) return *s;
    Json list = Json::array();
    for (int64_t e : std::get<std::vector<int64_t>>(v)) list.push_back(e);
    return list;
}

// The name a parameter gets when this file is read back: files hold no parameter names, so it
// is "<node>.<suffix>" of the node that declares it (a tie must name that, not a given name
// such as an ONNX initializer's).
std::string json_param_name(const Graph& g, NodeId node, ParamId p) {
    const Node& n = g.node(node);
    const Inferred inf = op_def(n.op).infer(g, n);
    for (size_t k = 0; k < n.params.size() && k < inf.params.size(); ++k)
        if (n.params[k] == p) return n.name + "." + inf.params[k].suffix;
    return g.param(p).name;
}

Json graph_json(const Graph& g) {
    Json root;
    root["format"] = kFormat;
    root["version"] = kVersion;
    root["name"] = g.name();
    root["seed"] = g.seed();
    Json inputs = Json::array();
    for (ValueId id : g.inputs()) {
        const Value& v = g.value(id);
        Json in;
        in["name"] = v.name;
        in["dtype"] = std::string(dtype_name(v.dtype));
        in["shape"] = v.shape.dims;
        if (v.dtype == DType::I32) in["classes"] = v.label_classes;
        inputs.push_back(std::move(in));
    }
    root["inputs"] = std::move(inputs);
    Json nodes = Json::array();
    for (const Node& n : g.nodes()) {
        Json node;
        node["name"] = n.name;
        node["op"] = std::string(op_name(n.op));
        Json ins = Json::array();
        for (ValueId in : n.inputs) ins.push_back(g.value(in).name);
        node["inputs"] = std::move(ins);
        if (!n.attrs.items().empty()) {
            Json attrs = Json::object();
            for (const auto& [k, v] : n.attrs.items())
                attrs[k] = attr_json(v, "node '" + n.name + "' attribute '" + k + "'");
            node["attrs"] = std::move(attrs);
        }
        if (!n.tags.empty()) node["tags"] = n.tags;
        const NodeId self = *g.find_node(n.name);
        Json tie = Json::array();
        bool tied = false;
        for (ParamId p : n.params) {
            const NodeId first = g.param(p).readers.front();
            const bool other = first != self;
            tie.push_back(other ? json_param_name(g, first, p) : std::string());
            tied = tied || other;
        }
        if (tied) node["tie"] = std::move(tie);
        nodes.push_back(std::move(node));
    }
    root["nodes"] = std::move(nodes);
    return root;
}

// Containers at depth 0 and 1 are spread over lines (2-space indent); deeper ones sit on one line,
// so each input and each node is one line: short files that diff well.
void emit(const Json& j, int depth, std::string& out) {
    const bool container = j.is_object() || j.is_array();
    if (!container || j.empty()) {
        out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
        return;
    }
    const bool spread = depth < 2;
    const std::string pad(static_cast<size_t>(2 * (depth + 1)), ' ');
    const std::string close_pad(static_cast<size_t>(2 * depth), ' ');
    out += j.is_object() ? '{' : '[';
    bool first = true;
    auto sep = [&] {
        if (!first) out += spread ? "," : ", ";
        if (spread) out += "\n" + pad;
        first = false;
    };
    if (j.is_object()) {
        for (auto it = j.begin(); it != j.end(); ++it) {
            sep();
            out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace) + ": ";
            emit(it.value(), depth + 1, out);
        }
    } else {
        for (const Json& e : j) {
            sep();
            emit(e, depth + 1, out);
        }
    }
    if (spread) out += "\n" + close_pad;
    out += j.is_object() ? '}' : ']';
}

}  // namespace

Graph network_from_json(const std::string& text, const std::string& origin) {
    if (text.size() > kMaxFileBytes)
        throw Error(origin + ": the network description is " + std::to_string(text.size() >> 20) +
                    " MiB; network files are limited to 256 MiB");
    // JSON allows a key twice in an object and nlohmann keeps one of them: a file that says
    // "seed" twice would load with either, silently. Refuse it instead.
    struct DuplicateKey {
        std::string key;
    };
    std::vector<std::set<std::string>> keys;
    const Json::parser_callback_t no_duplicates = [&keys](int, Json::parse_event_t event,
                                                          Json& parsed) {
        if (event == Json::parse_event_t::object_start) {
            keys.emplace_back();
        } else if (event == Json::parse_event_t::object_end) {
            if (!keys.empty()) keys.pop_back();
        } else if (event == Json::parse_event_t::key && !keys.empty()) {
            std::string key = parsed.get<std::string>();
            if (!keys.back().insert(key).second) throw DuplicateKey{std::move(key)};
        }
        return true;
    };
    Json root;
    try {
        root = Json::parse(text, no_duplicates);
    } catch (const DuplicateKey& d) {
        throw Error(origin + ": the key \"" + d.key +
                    "\" appears twice in one object; keep only one of them");
    } catch (const Json::exception& e) {
        throw Error(json_parse_failure(text, origin, e));
    }
    // A node-link graph (Checkmate's or Moccasin's benchmark graphs) has no "format" but arrays
    // "nodes" and "links": it loads as a plan-only network (abstract_network.h).
    if (root.is_object() && !root.contains("format") && root.contains("nodes") &&
        root["nodes"].is_array() && root.contains("links") && root["links"].is_array())
        return network_from_abstract(general::abstract_graph_from_json(text, origin));
    try {
        return Reader{origin}.read(root);
    } catch (const Json::exception& e) {
        // The reader checks every type before it reads a value, so this is a gap in its checks;
        // still the user's file, still our error.
        throw Error(origin + ": unexpected content: " + json_error_detail(e.what()));
    }
}

Graph load_network_file(const std::string& path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (ec || !std::filesystem::exists(status))
        throw Error("cannot open network file '" + path + "': no such file");
    if (std::filesystem::is_directory(status))
        throw Error("cannot open network file '" + path + "': it is a directory");
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxFileBytes)
        throw Error("network file '" + path + "' is " + std::to_string(size >> 20) +
                    " MiB; network files are limited to 256 MiB");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open network file '" + path + "': " + std::strerror(errno));
    std::ostringstream buf;
    buf << in.rdbuf();
    if (in.bad()) throw Error("reading network file '" + path + "' failed");
    return network_from_json(buf.str(), path);
}

std::string network_to_json(const Graph& g) {
    std::string out;
    emit(graph_json(g), 0, out);
    out += '\n';
    return out;
}

void save_network_file(const Graph& g, const std::string& path) {
    write_file_atomically(path, {network_to_json(g)});
}

}  // namespace rl
