#include "engine/networks/abstract_graph.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/errors.h"

namespace rl::general {

using nlohmann::json;

int64_t AbstractGraph::num_edges() const {
    int64_t e = 0;
    for (const auto& s : succs) e += static_cast<int64_t>(s.size());
    return e;
}

double AbstractGraph::total_duration() const {
    double d = 0;
    for (const auto& n : nodes) d += n.duration;
    return d;
}

AbstractGraph make_abstract_graph(std::string name, std::vector<AbstractNode> nodes,
                                  const std::vector<std::pair<int32_t, int32_t>>& edges) {
    AbstractGraph g;
    g.name = std::move(name);
    g.nodes = std::move(nodes);
    const auto n = static_cast<size_t>(g.nodes.size());
    g.preds.assign(n, {});
    g.succs.assign(n, {});
    for (const auto& [s, d] : edges) {
        if (s < 0 || d < 0 || static_cast<size_t>(s) >= n || static_cast<size_t>(d) >= n)
            throw Error("edge " + std::to_string(s) + " -> " + std::to_string(d) +
                        ": no such node (the graph has " + std::to_string(n) + ")");
        if (s >= d)
            throw Error("edge '" + g.nodes[static_cast<size_t>(s)].name + "' -> '" +
                        g.nodes[static_cast<size_t>(d)].name +
                        "' goes against the node order (a cycle, a self-loop or an order that is "
                        "not topological)");
        g.preds[static_cast<size_t>(d)].push_back(s);
        g.succs[static_cast<size_t>(s)].push_back(d);
    }
    auto tidy = [](std::vector<int32_t>& v) {
        std::sort(v.begin(), v.end());
        v.erase(std::unique(v.begin(), v.end()), v.end());
    };
    for (auto& v : g.preds) tidy(v);
    for (auto& v : g.succs) tidy(v);
    return g;
}

namespace {

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
    throw Error(origin + ": " + what);
}

// A node reference: ints and strings alike, as JSON text.
std::string key_of(const json& v) {
    return v.dump();
}

double number_field(const json& node, const char* field, const std::string& origin,
                    const std::string& where) {
    const auto it = node.find(field);
    if (it == node.end() || !it->is_number())
        fail(origin, where + ": field '" + field + "' is missing or not a number");
    const double x = it->get<double>();
    if (!(x >= 0) || !std::isfinite(x))
        fail(origin,
             where + ": field '" + field + "' must be a finite number >= 0, not " + it->dump());
    return x;
}

uint64_t bytes_field(const json& node, const char* field, const std::string& origin,
                     const std::string& where) {
    const auto it = node.find(field);
    if (it == node.end() || !(it->is_number_unsigned() || it->is_number_integer()))
        fail(origin, where + ": field '" + field + "' is missing or not a whole number of bytes");
    if (it->is_number_integer() && it->get<int64_t>() < 0)
        fail(origin, where + ": field '" + field + "' is negative (" + it->dump() + ")");
    return it->get<uint64_t>();
}

}  // namespace

AbstractGraph abstract_graph_from_json(const std::string& text, const std::string& origin) {
    json doc;
    try {
        doc = json::parse(text);
    } catch (const json::parse_error& e) {
        fail(origin,
             std::string("not valid JSON (") + e.what() + "); expected a networkx node-link graph");
    }
    if (!doc.is_object() || !doc.contains("nodes") || !doc["nodes"].is_array() ||
        !doc.contains("links") || !doc["links"].is_array())
        fail(origin,
             "not a node-link graph: expected an object with arrays 'nodes' and 'links' (the "
             "formats of Checkmate's and Moccasin's benchmark graphs)");
    const json& jnodes = doc["nodes"];
    const json& jlinks = doc["links"];
    if (jnodes.empty()) fail(origin, "the graph has no nodes");
    if (doc.contains("directed") && doc["directed"].is_boolean() && !doc["directed"].get<bool>())
        fail(origin, "the graph is undirected; a computation graph must be directed");
    const json graph_attrs = doc.value("graph", json::object());

    std::string name = std::filesystem::path(origin).stem().string();
    if (graph_attrs.is_object() && graph_attrs.contains("name") && graph_attrs["name"].is_string())
        name = graph_attrs["name"].get<std::string>();

    // Which family: Moccasin's nodes carry out_cost, Checkmate's cost_ram.
    const json& first = jnodes.front();
    const bool moccasin = first.is_object() && first.contains("out_cost");
    const bool checkmate = first.is_object() && first.contains("cost_ram");
    if (!moccasin && !checkmate)
        fail(origin,
             "node 0: neither Moccasin's fields {name, out_cost, duration} nor Checkmate's {id, "
             "cost_cpu, cost_ram}; cannot tell the format");
    const char* id_field = moccasin ? "name" : "id";

    std::map<std::string, size_t> file_index;  // node reference -> index in the file
    std::vector<AbstractNode> file_nodes;
    std::vector<json> ids;
    for (size_t i = 0; i < jnodes.size(); ++i) {
        const json& jn = jnodes[i];
        const std::string where = "node " + std::to_string(i);
        if (!jn.is_object()) fail(origin, where + ": not an object");
        if (!jn.contains(id_field))
            fail(origin, where + ": field '" + id_field + "' (the node's id) is missing");
        const json& id = jn[id_field];
        if (!file_index.emplace(key_of(id), i).second)
            fail(origin, where + ": duplicate id " + id.dump());
        AbstractNode node;
        if (moccasin) {
            node.name = id.is_string() ? id.get<std::string>() : id.dump();
            node.duration = number_field(jn, "duration", origin, where);
            node.out_bytes = bytes_field(jn, "out_cost", origin, where);
        } else {
            node.name = jn.value("name", id.dump());
            node.duration = number_field(jn, "cost_cpu", origin, where);
            node.out_bytes = bytes_field(jn, "cost_ram", origin, where);
            if (jn.contains("backward")) {
                if (!jn["backward"].is_boolean())
                    fail(origin, where + ": field 'backward' must be true or false");
                node.backward = jn["backward"].get<bool>();
            }
        }
        file_nodes.push_back(std::move(node));
        ids.push_back(id);
    }

    // The order: Moccasin's graph.order; Checkmate's ids ascending.
    std::vector<size_t> order;  // position -> file index
    if (moccasin) {
        if (!graph_attrs.is_object() || !graph_attrs.contains("order") ||
            !graph_attrs["order"].is_array())
            fail(origin, "graph.order is missing: Moccasin's graphs list the node order there");
        const json& jorder = graph_attrs["order"];
        std::vector<uint8_t> seen(file_nodes.size(), 0);
        for (size_t p = 0; p < jorder.size(); ++p) {
            const auto it = file_index.find(key_of(jorder[p]));
            if (it == file_index.end())
                fail(origin,
                     "graph.order[" + std::to_string(p) + "]: no node with id " + jorder[p].dump());
            if (seen[it->second]++)
                fail(origin, "graph.order[" + std::to_string(p) + "]: node " + jorder[p].dump() +
                                 " listed twice");
            order.push_back(it->second);
        }
        if (order.size() != file_nodes.size())
            fail(origin, "graph.order lists " + std::to_string(order.size()) +
                             " nodes, the graph has " + std::to_string(file_nodes.size()));
    } else {
        for (size_t i = 0; i < file_nodes.size(); ++i)
            if (!ids[i].is_number_integer())
                fail(origin, "node " + std::to_string(i) + ": id " + ids[i].dump() +
                                 " is not an integer (Checkmate's ids give the order)");
        order.resize(file_nodes.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
            return ids[a].get<int64_t>() < ids[b].get<int64_t>();
        });
    }
    std::vector<int32_t> position(file_nodes.size());
    std::vector<AbstractNode> nodes;
    for (size_t p = 0; p < order.size(); ++p) {
        position[order[p]] = static_cast<int32_t>(p);
        nodes.push_back(file_nodes[order[p]]);
    }

    std::vector<std::pair<int32_t, int32_t>> edges;
    for (size_t l = 0; l < jlinks.size(); ++l) {
        const json& jl = jlinks[l];
        const std::string where = "link " + std::to_string(l);
        const char* sf = moccasin ? "0" : "source";
        const char* tf = moccasin ? "1" : "target";
        if (!jl.is_object() || !jl.contains(sf) || !jl.contains(tf))
            fail(origin, where + ": expected fields '" + sf + "' and '" + tf + "'");
        const auto s = file_index.find(key_of(jl[sf]));
        const auto t = file_index.find(key_of(jl[tf]));
        if (s == file_index.end())
            fail(origin, where + ": source " + jl[sf].dump() + " is not a node");
        if (t == file_index.end())
            fail(origin, where + ": target " + jl[tf].dump() + " is not a node");
        const int32_t ps = position[s->second], pt = position[t->second];
        if (ps >= pt)
            fail(origin, where + " (" + jl[sf].dump() + " -> " + jl[tf].dump() +
                             "): goes against the node order" +
                             (ps == pt ? " (a self-loop)" : " (the order is not topological)"));
        edges.emplace_back(ps, pt);
    }
    return make_abstract_graph(std::move(name), std::move(nodes), edges);
}

AbstractGraph load_abstract_graph(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open the graph file (does it exist and is it readable?)");
    std::ostringstream ss;
    ss << in.rdbuf();
    return abstract_graph_from_json(ss.str(), path);
}

}  // namespace rl::general
