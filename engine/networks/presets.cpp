#include "engine/networks/presets.h"

#include <cmath>

#include "engine/errors.h"
#include "engine/networks/network_json.h"

namespace rl {

namespace {

using Tags = std::vector<std::string>;

ParamSpec int_param(std::string key, int64_t def, std::string help, int64_t min = 1) {
    ParamSpec p;
    p.key = std::move(key);
    p.type = ParamType::Int;
    p.default_value = std::to_string(def);
    p.help = std::move(help);
    p.min = min;
    return p;
}

ParamSpec seed_param() {
    return int_param("seed", 1, "seed of the deterministic parameter initialisation", 0);
}

// Graph::add_node with value ids only: a braced list of ids is otherwise ambiguous with the
// overload taking value names.
NodeId add(Graph& g, const std::string& name, OpKind op, const std::vector<ValueId>& inputs,
           Attrs attrs, Tags tags) {
    return g.add_node(name, op, inputs, std::move(attrs), std::move(tags));
}

std::string block(int64_t i) {
    return "block" + std::to_string(i);
}

// Attribute helpers: the op attribute names are part of the file format (docs/network-format.md).
Attrs linear_attrs(int64_t out_features) {
    return Attrs{{"out_features", out_features}};
}
Attrs shape_attrs(Dims dims) {
    return Attrs{{"shape", std::move(dims)}};
}
Attrs perm_attrs(Dims perm) {
    return Attrs{{"perm", std::move(perm)}};
}

Graph start(const Spec& spec, const ParamValues& v) {
    return Graph(format_spec(spec), static_cast<uint64_t>(v.get_int("seed")));
}

Graph build_mlp(const Spec& spec, const ParamValues& v) {
    const int64_t depth = v.get_int("depth"), width = v.get_int("width"),
                  batch = v.get_int("batch");
    const std::string act_name = v.get_string("act");
    OpKind act = OpKind::Relu;
    if (act_name == "gelu") act = OpKind::Gelu;
    if (act_name == "tanh") act = OpKind::Tanh;
    if (act_name == "sigmoid") act = OpKind::Sigmoid;
    Graph g = start(spec, v);
    ValueId x = g.add_input("x", DType::F32, {batch, width});
    for (int64_t i = 0; i < depth; ++i) {
        const std::string b = block(i);
        const NodeId fc =
            add(g, b + ".fc", OpKind::Linear, {x}, linear_attrs(width), Tags{"dot", b, "fc"});
        const NodeId a = add(g, b + ".act", act, {g.node(fc).output}, {}, Tags{b, "act"});
        x = g.node(a).output;
    }
    add(g, "loss", OpKind::SumSquares, {x}, {}, Tags{"loss"});
    return g;
}

Graph build_chain(const Spec& spec, const ParamValues& v) {
    const int64_t l = v.get_int("l"), width = v.get_int("width"), batch = v.get_int("batch");
    Graph g = start(spec, v);
    ValueId x = g.add_input("x", DType::F32, {batch, width});
    for (int64_t i = 0; i < l; ++i) {
        const NodeId fc = add(g, "layer" + std::to_string(i), OpKind::Linear, {x},
                              linear_attrs(width), Tags{"dot", block(i), "fc"});
        x = g.node(fc).output;
    }
    add(g, "loss", OpKind::SumSquares, {x}, {}, Tags{"loss"});
    return g;
}

Graph build_resmlp(const Spec& spec, const ParamValues& v) {
    const int64_t depth = v.get_int("depth"), width = v.get_int("width"),
                  batch = v.get_int("batch");
    const int64_t hidden = v.get_int("hidden") == 0 ? 4 * width : v.get_int("hidden");
    Graph g = start(spec, v);
    ValueId x = g.add_input("x", DType::F32, {batch, width});
    auto out = [&](NodeId n) { return g.node(n).output; };
    for (int64_t i = 0; i < depth; ++i) {
        const std::string b = block(i);
        const NodeId ln = add(g, b + ".ln", OpKind::LayerNorm, {x}, {}, Tags{b, "mlp", "ln"});
        const NodeId fc1 = add(g, b + ".fc1", OpKind::Linear, {out(ln)}, linear_attrs(hidden),
                               Tags{"dot", b, "mlp", "fc1"});
        const NodeId act = add(g, b + ".act", OpKind::Gelu, {out(fc1)}, {}, Tags{b, "mlp", "act"});
        const NodeId fc2 = add(g, b + ".fc2", OpKind::Linear, {out(act)}, linear_attrs(width),
                               Tags{"dot", b, "mlp", "fc2"});
        const NodeId sum = add(g, b + ".add", OpKind::Add, {x, out(fc2)}, {}, Tags{b, "residual"});
        x = out(sum);
    }
    const NodeId ln = add(g, "final_ln", OpKind::LayerNorm, {x}, {}, Tags{"final", "ln"});
    add(g, "loss", OpKind::SumSquares, {out(ln)}, {}, Tags{"loss"});
    return g;
}

Graph build_transformer(const Spec& spec, const ParamValues& v) {
    const int64_t layers = v.get_int("layers"), d_model = v.get_int("d_model"),
                  heads = v.get_int("heads"), seq = v.get_int("seq"), batch = v.get_int("batch"),
                  vocab = v.get_int("vocab");
    if (d_model % heads != 0)
        throw Error("d_model=" + std::to_string(d_model) +
                    " is not divisible by heads=" + std::to_string(heads) +
                    "; choose d_model as a multiple of heads (e.g. d_model=" +
                    std::to_string(heads * std::max<int64_t>(1, d_model / heads)) + ")");
    const int64_t dh = d_model / heads;
    const int64_t rows = batch * seq;
    Graph g = start(spec, v);
    ValueId x = g.add_input("x", DType::F32, {rows, d_model});
    const ValueId labels = g.add_input("labels", DType::I32, {rows}, vocab);
    auto out = [&](NodeId n) { return g.node(n).output; };

    for (int64_t i = 0; i < layers; ++i) {
        const std::string b = block(i);
        const std::string a = b + ".attn.";
        const NodeId ln1 = add(g, b + ".ln1", OpKind::LayerNorm, {x}, {}, Tags{b, "attn", "ln"});
        // q, k, v: [rows, d_model] -> [batch*heads, seq, dh]
        auto project = [&](const std::string& which) {
            const NodeId p = add(g, a + which, OpKind::Linear, {out(ln1)}, linear_attrs(d_model),
                                 Tags{"dot", b, "attn", which});
            const NodeId split =
                add(g, a + which + "_split", OpKind::Reshape, {out(p)},
                    shape_attrs({batch, seq, heads, dh}), Tags{b, "attn", "reshape"});
            const NodeId perm = add(g, a + which + "_heads", OpKind::Transpose, {out(split)},
                                    perm_attrs({0, 2, 1, 3}), Tags{b, "attn", "transpose"});
            const NodeId merged =
                add(g, a + which + "_bh", OpKind::Reshape, {out(perm)},
                    shape_attrs({batch * heads, seq, dh}), Tags{b, "attn", "reshape"});
            return out(merged);
        };
        const ValueId q = project("q");
        const ValueId k = project("k");
        const ValueId vv = project("v");
        const NodeId scores = add(
            g, a + "scores", OpKind::MatMul, {q, k},
            Attrs{{"transpose_b", int64_t{1}}, {"alpha", 1.0 / std::sqrt(static_cast<double>(dh))}},
            Tags{"dot", b, "attn", "scores"});
        const NodeId probs =
            add(g, a + "probs", OpKind::Softmax, {out(scores)}, {}, Tags{b, "attn", "softmax"});
        const NodeId ctx =
            add(g, a + "ctx", OpKind::MatMul, {out(probs), vv}, {}, Tags{"dot", b, "attn", "ctx"});
        const NodeId split = add(g, a + "ctx_split", OpKind::Reshape, {out(ctx)},
                                 shape_attrs({batch, heads, seq, dh}), Tags{b, "attn", "reshape"});
        const NodeId perm = add(g, a + "ctx_perm", OpKind::Transpose, {out(split)},
                                perm_attrs({0, 2, 1, 3}), Tags{b, "attn", "transpose"});
        const NodeId merged = add(g, a + "ctx_merge", OpKind::Reshape, {out(perm)},
                                  shape_attrs({rows, d_model}), Tags{b, "attn", "reshape"});
        const NodeId proj = add(g, a + "out", OpKind::Linear, {out(merged)}, linear_attrs(d_model),
                                Tags{"dot", b, "attn", "out"});
        const NodeId res1 =
            add(g, a + "residual", OpKind::Add, {x, out(proj)}, {}, Tags{b, "attn", "residual"});

        const std::string m = b + ".mlp.";
        const NodeId ln2 =
            add(g, b + ".ln2", OpKind::LayerNorm, {out(res1)}, {}, Tags{b, "mlp", "ln"});
        const NodeId fc1 = add(g, m + "fc1", OpKind::Linear, {out(ln2)}, linear_attrs(4 * d_model),
                               Tags{"dot", b, "mlp", "fc1"});
        const NodeId act = add(g, m + "act", OpKind::Gelu, {out(fc1)}, {}, Tags{b, "mlp", "act"});
        const NodeId fc2 = add(g, m + "fc2", OpKind::Linear, {out(act)}, linear_attrs(d_model),
                               Tags{"dot", b, "mlp", "fc2"});
        const NodeId res2 = add(g, m + "residual", OpKind::Add, {out(res1), out(fc2)}, {},
                                Tags{b, "mlp", "residual"});
        x = out(res2);
    }
    const NodeId ln = add(g, "final_ln", OpKind::LayerNorm, {x}, {}, Tags{"final", "ln"});
    const NodeId head =
        add(g, "head", OpKind::Linear, {out(ln)}, linear_attrs(vocab), Tags{"dot", "head"});
    add(g, "loss", OpKind::CrossEntropy, {out(head), labels}, {}, Tags{"loss"});
    return g;
}

struct PresetEntry {
    PresetInfo info;
    Graph (*build)(const Spec&, const ParamValues&);
};

const std::vector<PresetEntry>& entries() {
    static const std::vector<PresetEntry> all = [] {
        std::vector<PresetEntry> e;
        ParamSpec act;
        act.key = "act";
        act.type = ParamType::Choice;
        act.default_value = "relu";
        act.help = "activation after each linear layer";
        act.choices = {"relu", "gelu", "tanh", "sigmoid"};
        e.push_back({{"mlp",
                      "stack of linear + activation blocks, sum-of-squares loss",
                      {int_param("depth", 8, "number of linear + activation blocks"),
                       int_param("width", 64, "features of every layer"),
                       int_param("batch", 32, "rows of the input"), act, seed_param()}},
                     build_mlp});
        e.push_back({{"chain",
                      "homogeneous chain of linear layers without activations (Revolve's case)",
                      {int_param("l", 16, "number of linear layers"),
                       int_param("width", 64, "features of every layer"),
                       int_param("batch", 32, "rows of the input"), seed_param()}},
                     build_chain});
        e.push_back({{"resmlp",
                      "residual MLP blocks (layernorm, fc1, gelu, fc2, add), final layernorm",
                      {int_param("depth", 4, "number of residual blocks"),
                       int_param("width", 64, "features of the residual stream"),
                       int_param("hidden", 0, "hidden features of each block; 0 means 4*width", 0),
                       int_param("batch", 32, "rows of the input"), seed_param()}},
                     build_resmlp});
        e.push_back({{"transformer",
                      "pre-norm transformer encoder with a vocabulary head and cross-entropy",
                      {int_param("layers", 2, "number of transformer blocks"),
                       int_param("d_model", 64, "width of the residual stream"),
                       int_param("heads", 4, "attention heads (must divide d_model)"),
                       int_param("seq", 16, "sequence length"),
                       int_param("batch", 2, "sequences per batch"),
                       int_param("vocab", 32, "classes of the output head"), seed_param()}},
                     build_transformer});
        return e;
    }();
    return all;
}

std::string preset_names() {
    std::string out;
    for (const auto& e : entries()) out += (out.empty() ? "" : ", ") + e.info.name;
    return out;
}

}  // namespace

const std::vector<PresetInfo>& presets() {
    static const std::vector<PresetInfo> infos = [] {
        std::vector<PresetInfo> v;
        for (const auto& e : entries()) v.push_back(e.info);
        return v;
    }();
    return infos;
}

Graph build_preset(const Spec& spec) {
    for (const auto& e : entries()) {
        if (e.info.name != spec.name) continue;
        const ParamValues values = ParamValues::resolve(e.info.schema, spec);
        try {
            Graph g = e.build(spec, values);
            g.finalize();
            return g;
        } catch (const Error& err) {
            throw Error(format_spec(spec) + ": " + err.what());
        }
    }
    throw Error("unknown network preset '" + spec.name + "'; valid presets: " + preset_names() +
                " (a network file path needs a '/' or the .json extension, e.g. ./" + spec.name +
                ".json)");
}

Graph load_network(const std::string& spec) {
    const bool is_path = spec.find('/') != std::string::npos ||
                         (spec.size() >= 5 && spec.compare(spec.size() - 5, 5, ".json") == 0);
    if (is_path) return load_network_file(spec);
    return build_preset(parse_spec(spec));
}

}  // namespace rl
