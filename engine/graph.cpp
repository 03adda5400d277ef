#include "engine/graph.h"

#include <algorithm>
#include <cstdio>

#include "engine/errors.h"
#include "engine/ops/op.h"

namespace rl {

bool Node::has_tag(std::string_view t) const {
    return std::find(tags.begin(), tags.end(), t) != tags.end();
}

Graph::Graph(std::string name, uint64_t seed) : name_(std::move(name)), seed_(seed) {}

namespace {
void check_name(const std::string& name, const char* what) {
    if (name.empty())
        throw Error(std::string(what) + " with an empty name; give every " + what +
                    " a unique name");
    // Names are printed, written into DOT and used for file names: no NUL, newline or escape.
    for (size_t i = 0; i < name.size(); ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c < 0x20 || c == 0x7f) {
            char code[8];
            std::snprintf(code, sizeof code, "0x%02x", c);
            std::string shown;
            for (char k : name)
                shown += static_cast<unsigned char>(k) < 0x20 || k == 0x7f ? '?' : k;
            throw Error(std::string(what) + " '" + shown +
                        "': the name holds a control character (" + code + " at byte " +
                        std::to_string(i) + "); use printable characters");
        }
    }
}
}  // namespace

ValueId Graph::add_input(const std::string& name, DType dtype, const Shape& shape,
                         int64_t label_classes) {
    check_name(name, "input");
    if (finalized_) throw Error("input '" + name + "': the graph is already finalized");
    if (find_value(name)) throw Error("input '" + name + "': the name is already used");
    Value v;
    v.name = name;
    v.dtype = dtype;
    v.shape = shape;
    v.bytes = checked_bytes(dtype, shape, "input '" + name + "'");
    v.label_classes = label_classes;
    if (dtype == DType::U8)
        throw Error("input '" + name +
                    "': u8 holds dropout masks, which a dropout_mask node computes; an input is "
                    "f32, bf16, f16 or i32 (labels)");
    if (dtype == DType::I32 && label_classes <= 0)
        throw Error("input '" + name + "': an i32 (labels) input needs classes > 0");
    values_.push_back(std::move(v));
    const auto id = static_cast<ValueId>(values_.size() - 1);
    inputs_.push_back(id);
    value_index_.emplace(name, id);
    return id;
}

NodeId Graph::add_node(const std::string& name, OpKind op, const std::vector<std::string>& inputs,
                       Attrs attrs, std::vector<std::string> tags,
                       const std::vector<ParamSource>& params) {
    std::vector<ValueId> ids;
    for (const auto& in : inputs) {
        auto v = find_value(in);
        if (!v)
            throw Error("node '" + name + "': input '" + in +
                        "' is not defined before it (inputs must name a graph input or an "
                        "earlier node)");
        ids.push_back(*v);
    }
    return add_node(name, op, ids, std::move(attrs), std::move(tags), params);
}

NodeId Graph::add_node(const std::string& name, OpKind op, const std::vector<ValueId>& inputs,
                       Attrs attrs, std::vector<std::string> tags,
                       const std::vector<ParamSource>& params) {
    check_name(name, "node");
    if (finalized_) throw Error("node '" + name + "': the graph is already finalized");
    if (find_value(name) || find_node(name))
        throw Error("node '" + name + "': the name is already used; node names must be unique");
    const OpDef& def = op_def(op);
    const int n_in = static_cast<int>(inputs.size());
    if (n_in < def.min_inputs || n_in > def.max_inputs)
        throw Error("node '" + name + "' (" + std::string(def.name) + "): takes " +
                    std::to_string(def.min_inputs) +
                    (def.max_inputs != def.min_inputs ? "-" + std::to_string(def.max_inputs)
                                                      : std::string()) +
                    " inputs, got " + std::to_string(n_in));
    for (ValueId v : inputs)
        if (v < 0 || v >= num_values())
            throw Error("node '" + name + "': input id " + std::to_string(v) + " does not exist");

    Node node;
    node.name = name;
    node.op = op;
    node.attrs = std::move(attrs);
    node.inputs = inputs;
    node.tags = std::move(tags);
    Inferred inf;
    try {
        inf = def.infer(*this, node);
    } catch (const Error& e) {
        throw Error("node '" + name + "' (" + std::string(def.name) + "): " + e.what());
    }
    if (params.size() > inf.params.size())
        throw Error("node '" + name + "' (" + std::string(def.name) +
                    "): " + std::to_string(params.size()) + " parameters given, but it has " +
                    std::to_string(inf.params.size()));
    // Check every parameter before changing the graph, so a refused node leaves no trace.
    std::vector<Param> new_params;
    std::vector<ParamId> tied(inf.params.size(), kNoId);
    for (size_t i = 0; i < inf.params.size(); ++i) {
        const ParamDecl& pd = inf.params[i];
        const ParamSource* src = i < params.size() ? &params[i] : nullptr;
        if (src && src->tie) {
            ParamId found = kNoId;
            for (ParamId q = 0; q < num_params() && found == kNoId; ++q)
                if (params_[static_cast<size_t>(q)].name == src->name) found = q;
            if (found == kNoId)
                throw Error("node '" + name + "': parameter '" + src->name +
                            "' to tie to does not exist; a tied parameter must belong to an "
                            "earlier node");
            const Param& q = params_[static_cast<size_t>(found)];
            if (q.shape != pd.shape)
                throw Error("node '" + name + "': parameter '" + src->name + "' is " +
                            format_type(DType::F32, q.shape) + " but its " + pd.suffix +
                            " here is " + format_type(DType::F32, pd.shape) +
                            "; a tied parameter must have the same shape");
            if (src->values)
                throw Error("node '" + name + "': tied parameter '" + src->name +
                            "' cannot be given values of its own");
            for (ParamId t : tied)
                if (t == found)
                    throw Error("node '" + name + "': parameter '" + src->name +
                                "' is tied twice in one node");
            tied[i] = found;
            continue;
        }
        Param p;
        p.name = src && !src->name.empty() ? src->name : name + "." + pd.suffix;
        p.shape = pd.shape;
        p.bytes = checked_bytes(DType::F32, pd.shape, "parameter '" + p.name + "'");
        p.init = pd.init;
        p.fan_in = pd.fan_in;
        if (param_names_.count(p.name))
            throw Error("node '" + name + "': parameter name '" + p.name +
                        "' is already used; parameter names must be unique");
        for (const Param& q : new_params)
            if (q.name == p.name)
                throw Error("node '" + name + "': parameter name '" + p.name +
                            "' is given twice; parameter names must be unique");
        if (src && src->values) {
            if (src->values->size() != static_cast<size_t>(pd.shape.numel()))
                throw Error("node '" + name + "': parameter '" + p.name + "' " +
                            format_type(DType::F32, pd.shape) + " needs " +
                            std::to_string(pd.shape.numel()) + " values, but " +
                            std::to_string(src->values->size()) + " were given");
            p.init = ParamInit::Given;
            p.values = src->values;
        }
        if (src && src->stored) {
            const StoredLayout& st = *src->stored;
            const int64_t n =
                checked_numel(Shape(st.dims), "parameter '" + p.name + "' in its file");
            if (n != pd.shape.numel() || (st.transposed && pd.shape.rank() != 2))
                throw Error("node '" + name + "': parameter '" + p.name + "' " +
                            format_type(DType::F32, pd.shape) + " cannot be stored as " +
                            (st.transposed ? "the transpose of " : "") +
                            format_dims(Shape(st.dims)) + " in its file");
            if (st.transposed || st.dims != pd.shape.dims) p.stored = st;
        }
        new_params.push_back(std::move(p));
    }
    // An op infers f32 for a floating output; the output takes its inputs' floating dtype, so a
    // network built on bf16 inputs computes in bf16 throughout.
    if (inf.dtype == DType::F32) {
        std::optional<DType> floating;
        for (ValueId v : inputs) {
            const Value& in = value(v);
            if (!is_floating(in.dtype)) continue;
            if (floating && *floating != in.dtype)
                throw Error("node '" + name + "' (" + std::string(def.name) + "): its inputs mix " +
                            std::string(dtype_name(*floating)) + " and " +
                            std::string(dtype_name(in.dtype)) + " ('" + in.name +
                            "'); a network computes in one floating dtype");
            floating = in.dtype;
        }
        if (floating) inf.dtype = *floating;
    }
    const auto id = static_cast<NodeId>(nodes_.size());
    Value out;
    out.name = name;
    out.dtype = inf.dtype;
    out.shape = inf.shape;
    out.bytes = checked_bytes(inf.dtype, inf.shape, "node '" + name + "' output");
    out.producer = id;
    values_.push_back(std::move(out));
    node.output = static_cast<ValueId>(values_.size() - 1);
    value_index_.emplace(name, node.output);
    size_t next_new = 0;
    for (size_t i = 0; i < inf.params.size(); ++i) {
        if (tied[i] != kNoId) {
            Param& q = params_[static_cast<size_t>(tied[i])];
            q.owner = id;
            q.readers.push_back(id);
            node.params.push_back(tied[i]);
            continue;
        }
        Param& p = new_params[next_new++];
        p.owner = id;
        p.readers = {id};
        param_names_.insert(p.name);
        params_.push_back(std::move(p));
        node.params.push_back(static_cast<ParamId>(params_.size() - 1));
    }
    nodes_.push_back(std::move(node));
    return id;
}

void Graph::finalize() {
    if (finalized_) return;
    if (nodes_.empty()) throw Error("network '" + name_ + "' has no nodes");
    for (auto& v : values_) v.consumers.clear();
    for (NodeId n = 0; n < num_nodes(); ++n) {
        const Node& node = nodes_[static_cast<size_t>(n)];
        const bool loss = op_def(node.op).is_loss;
        if (plan_only_ && (loss || !node.params.empty()))
            throw Error("node '" + node.name + "' (" + std::string(op_name(node.op)) +
                        "): a plan-only network has no loss and no parameters");
        if (plan_only_) {
            for (ValueId in : node.inputs) {
                auto& cons = values_[static_cast<size_t>(in)].consumers;
                if (cons.empty() || cons.back() != n) cons.push_back(n);
            }
            continue;
        }
        if (loss && n != loss_node())
            throw Error("node '" + node.name + "' is a loss (" + std::string(op_name(node.op)) +
                        ") but not the last node; a network has exactly one loss, at the end");
        if (!loss && n == loss_node())
            throw Error("the last node '" + node.name + "' (" + std::string(op_name(node.op)) +
                        ") is not a loss; end the network with sum_squares or cross_entropy");
        for (ValueId in : node.inputs) {
            auto& cons = values_[static_cast<size_t>(in)].consumers;
            if (cons.empty() || cons.back() != n) cons.push_back(n);
        }
    }
    if (plan_only_) {  // no gradients: every node's output has requires_grad false
        for (Value& v : values_) v.requires_grad = false;
        check_total_bytes();
        finalized_ = true;
        return;
    }
    for (const Node& node : nodes_) {
        const Value& out = values_[static_cast<size_t>(node.output)];
        if (out.consumers.empty() && &node != &nodes_.back())
            throw Error("node '" + node.name +
                        "': its output is never used; every node must lead to the loss");
    }
    for (ValueId in : inputs_)
        if (values_[static_cast<size_t>(in)].consumers.empty())
            throw Error("input '" + values_[static_cast<size_t>(in)].name + "' is never used");
    if (params_.empty())
        throw Error("network '" + name_ + "' has no parameters, so there is nothing to train");
    check_total_bytes();
    // A value needs a gradient when some parameter lies upstream of it and it reaches the loss
    // through an input that is not a derivative input (OpDef::derivative_inputs).
    std::vector<uint8_t> upstream(values_.size(), 0), reaches(values_.size(), 0);
    for (const Node& node : nodes_) {
        bool up = !node.params.empty();
        for (ValueId in : node.inputs) up = up || upstream[static_cast<size_t>(in)];
        upstream[static_cast<size_t>(node.output)] = up;
    }
    reaches[static_cast<size_t>(nodes_.back().output)] = 1;
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
        const Node& node = *it;
        if (!reaches[static_cast<size_t>(node.output)]) {
            if (!node.params.empty())
                throw Error("node '" + node.name + "' (" + std::string(op_name(node.op)) +
                            ") owns parameters, but its output reaches the loss only as a "
                            "derivative input, so its parameters would get no gradient");
            continue;
        }
        const uint32_t derivative = op_def(node.op).derivative_inputs;
        for (size_t k = 0; k < node.inputs.size(); ++k)
            if (!((derivative >> k) & 1u)) reaches[static_cast<size_t>(node.inputs[k])] = 1;
    }
    for (size_t n = 0; n < nodes_.size(); ++n) {
        const Node& node = nodes_[n];
        const uint32_t derivative = op_def(node.op).derivative_inputs;
        for (size_t k = 0; k < node.inputs.size(); ++k) {
            const ValueId in = node.inputs[k];
            if (((derivative >> k) & 1u) && reaches[static_cast<size_t>(in)] &&
                upstream[static_cast<size_t>(in)])
                throw Error("node '" + node.name + "': input " + std::to_string(k) + " ('" +
                            values_[static_cast<size_t>(in)].name +
                            "') is a derivative input, which passes no gradient, but the value "
                            "also reaches the loss as an ordinary input; give the derivative a "
                            "node of its own");
        }
    }
    for (size_t v = 0; v < values_.size(); ++v)
        values_[v].requires_grad = upstream[v] && reaches[v];
    finalized_ = true;
}

// Every peak is a sum of tensor sizes: refuse a network whose tensors and their gradients do not
// add up well inside 64 bits, naming the largest tensor, before anything is planned or allocated.
void Graph::check_total_bytes() const {
    constexpr uint64_t kLimit = uint64_t{1} << 62;
    uint64_t total = 0, largest = 0;
    std::string largest_name, largest_type;
    auto add = [&](const std::string& name, DType t, const Shape& shape, uint64_t bytes) {
        total = bytes > kLimit / 2 || total > kLimit ? kLimit + 1 : total + 2 * bytes;
        if (bytes > largest) {
            largest = bytes;
            largest_name = name;
            largest_type = format_type(t, shape);
        }
    };
    for (const Param& p : params_) add(p.name, DType::F32, p.shape, p.bytes);
    for (const Value& v : values_) add(v.name, v.dtype, v.shape, v.bytes);
    if (total <= kLimit) return;
    throw Error("network '" + name_ +
                "' is too large: its tensors and their gradients add up to more than 2^62 "
                "bytes; the largest, '" +
                largest_name + "' " + largest_type + ", alone takes " + std::to_string(largest) +
                " bytes; use smaller sizes");
}

DType Graph::float_dtype() const {
    for (const Value& v : values_)
        if (is_floating(v.dtype)) return v.dtype;
    return DType::F32;
}

Graph Graph::with_float_dtype(DType t) const {
    if (!is_floating(t))
        throw Error("network '" + name_ + "': " + std::string(dtype_name(t)) +
                    " is not a floating dtype (use f32, bf16 or f16)");
    Graph copy = *this;
    for (Value& v : copy.values_) {
        if (!is_floating(v.dtype)) continue;
        v.dtype = t;
        v.bytes = checked_bytes(t, v.shape, "value '" + v.name + "'");
    }
    copy.check_total_bytes();
    return copy;
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
    auto it = value_index_.find(std::string(name));
    if (it == value_index_.end()) return std::nullopt;
    return it->second;
}

std::optional<NodeId> Graph::find_node(std::string_view name) const {
    auto v = find_value(name);
    if (!v || value(*v).is_input()) return std::nullopt;
    return value(*v).producer;
}

uint64_t Graph::param_bytes() const {
    uint64_t b = 0;
    for (const auto& p : params_) b += p.bytes;
    return b;
}

uint64_t Graph::input_bytes() const {
    uint64_t b = 0;
    for (ValueId v : inputs_) b += value(v).bytes;
    return b;
}

uint64_t Graph::activation_bytes() const {
    uint64_t b = 0;
    for (const auto& n : nodes_) b += value(n.output).bytes;
    return b;
}

double Graph::forward_flops() const {
    double f = 0;
    for (const auto& n : nodes_) f += op_def(n.op).cost(*this, n).fwd_flops;
    return f;
}

Shape stored_shape(const Param& p) {
    return p.stored ? Shape(p.stored->dims) : p.shape;
}

std::vector<float> to_stored_layout(const Param& p, const float* values) {
    const auto n = static_cast<size_t>(p.shape.numel());
    if (!p.stored || !p.stored->transposed) return std::vector<float>(values, values + n);
    // Ours [rows, cols] row-major; the file's [cols, rows]: out[c, r] = ours[r, c].
    const int64_t rows = p.shape[0], cols = p.shape[1];
    std::vector<float> out(n);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
            out[static_cast<size_t>(c * rows + r)] = values[static_cast<size_t>(r * cols + c)];
    return out;
}

}  // namespace rl
