#include "engine/networks/presets.h"

#include <cmath>
#include <map>

#include "engine/errors.h"
#include "engine/networks/network_json.h"
#include "engine/networks/onnx_import.h"

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

// GPT as Korthikanti et al. count it ("Reducing Activation Recomputation in Large Transformer
// Models", MLSys 2023, arXiv 2205.05198, section 4): pre-norm layers of attention with dropout on
// the softmax and after the output projection, and a 4h MLP with GELU and dropout; a final
// LayerNorm and a vocabulary head. Dropout keeps a one-byte mask (dropout_mask nodes).
//
// tp=t builds the graph of ONE tensor-parallel rank (Megatron-LM): heads and MLP columns split t
// ways, collective nodes (no FLOPs) where the ranks communicate — f (all_reduce_grad) before each
// column-parallel block, g (all_reduce) after each row-parallel one. sp=1 shards LayerNorm and
// dropout along the rows (sequence): f becomes an all-gather tagged `sp_gather`, g a
// reduce-scatter. The attention core (QK^T, softmax, its dropout mask and dropout, attention over
// V) is tagged `attn_core`: recomputing it is the paper's selective recomputation.
//
// Per layer, the paper's Table 2 (bytes, 16-bit activations): s·b·h·(34 + 5·a·s/h) without
// parallelism. docs/scale.md reproduces the table with `rematlab-cli plan --per-layer`.
Graph build_gpt(const Spec& spec, const ParamValues& v) {
    const int64_t layers = v.get_int("layers"), h = v.get_int("d_model"), a = v.get_int("heads"),
                  seq = v.get_int("seq"), batch = v.get_int("batch"), vocab = v.get_int("vocab"),
                  t = v.get_int("tp"), sp = v.get_int("sp");
    const double p = v.get_float("dropout");
    DType dtype{};
    if (!dtype_from_name(v.get_string("dtype"), dtype) || !is_floating(dtype))
        throw Error("dtype=" + v.get_string("dtype") +
                    " is not an activation dtype; use f32, bf16 or f16");
    const auto num = [](int64_t n) { return std::to_string(n); };
    if (h % a != 0)
        throw Error("d_model=" + num(h) + " is not divisible by heads=" + num(a) +
                    "; choose d_model as a multiple of heads");
    if (a % t != 0)
        throw Error("heads=" + num(a) + " is not divisible by tp=" + num(t) +
                    ": each tensor-parallel rank takes heads/tp whole heads; choose tp among the "
                    "divisors of heads");
    if (vocab % t != 0)
        throw Error("vocab=" + num(vocab) + " is not divisible by tp=" + num(t) +
                    ": the head is split by vocabulary columns; pad vocab to a multiple of tp");
    if (sp && t == 1)
        throw Error("sp=1 shards LayerNorm and dropout over the tp ranks; it needs tp > 1");
    if (sp && seq % t != 0)
        throw Error("seq=" + num(seq) + " is not divisible by tp=" + num(t) +
                    ": sequence parallelism gives each rank seq/tp positions");
    if (!(p >= 0 && p < 1))
        throw Error("dropout=" + std::to_string(p) + " must be a probability in [0, 1)");
    const int64_t dh = h / a, a_t = a / t, h_t = h / t;
    const int64_t rows = batch * seq, local_rows = sp ? rows / t : rows;
    Graph g = start(spec, v);
    ValueId x = g.add_input("x", dtype, {local_rows, h});
    const ValueId labels = g.add_input("labels", DType::I32, {rows}, vocab / t);
    auto out = [&](NodeId n) { return g.node(n).output; };
    auto comm = [&](const std::string& name, ValueId in, const char* kind, Tags tags) {
        if (t == 1) return in;
        tags.push_back("comm");
        return out(add(g, name, OpKind::Collective, {in},
                       Attrs{{"kind", std::string(kind)}, {"ranks", t}}, std::move(tags)));
    };
    // f: before a column-parallel block; g: after a row-parallel one (Megatron's names).
    auto f = [&](const std::string& name, ValueId in, const std::string& b) {
        return sp ? comm(name, in, "all_gather", Tags{b, "sp_gather"})
                  : comm(name, in, "all_reduce_grad", Tags{b});
    };
    auto g_op = [&](const std::string& name, ValueId in, const std::string& b) {
        return comm(name, in, sp ? "reduce_scatter" : "all_reduce", Tags{b});
    };
    auto dropout = [&](const std::string& name, ValueId in, Tags tags) {
        if (p == 0) return in;
        Tags mask_tags = tags;
        mask_tags.push_back("dropout_mask");
        const NodeId m = add(g, name + "_mask", OpKind::DropoutMask, {in}, Attrs{{"p", p}},
                             std::move(mask_tags));
        tags.push_back("dropout");
        return out(add(g, name, OpKind::Dropout, {in, out(m)}, Attrs{{"p", p}}, std::move(tags)));
    };

    for (int64_t i = 0; i < layers; ++i) {
        const std::string b = block(i);
        const std::string at = b + ".attn.";
        const NodeId ln1 = add(g, b + ".ln1", OpKind::LayerNorm, {x}, {}, Tags{b, "attn", "ln"});
        const ValueId qkv_in = f(at + "f", out(ln1), b);
        auto project = [&](const std::string& which) {
            const NodeId pr = add(g, at + which, OpKind::Linear, {qkv_in}, linear_attrs(h_t),
                                  Tags{"dot", b, "attn", which});
            const NodeId split =
                add(g, at + which + "_split", OpKind::Reshape, {out(pr)},
                    shape_attrs({batch, seq, a_t, dh}), Tags{b, "attn", "reshape"});
            const NodeId perm = add(g, at + which + "_heads", OpKind::Transpose, {out(split)},
                                    perm_attrs({0, 2, 1, 3}), Tags{b, "attn", "transpose"});
            return out(add(g, at + which + "_bh", OpKind::Reshape, {out(perm)},
                           shape_attrs({batch * a_t, seq, dh}), Tags{b, "attn", "reshape"}));
        };
        const ValueId q = project("q");
        const ValueId k = project("k");
        const ValueId vv = project("v");
        const NodeId scores = add(
            g, at + "scores", OpKind::MatMul, {q, k},
            Attrs{{"transpose_b", int64_t{1}}, {"alpha", 1.0 / std::sqrt(static_cast<double>(dh))}},
            Tags{"dot", b, "attn", "scores", "attn_core"});
        const NodeId probs = add(g, at + "probs", OpKind::Softmax, {out(scores)}, {},
                                 Tags{b, "attn", "softmax", "attn_core"});
        const ValueId dropped =
            dropout(at + "probs_drop", out(probs), Tags{b, "attn", "attn_core"});
        const NodeId ctx = add(g, at + "ctx", OpKind::MatMul, {dropped, vv}, {},
                               Tags{"dot", b, "attn", "ctx", "attn_core"});
        const NodeId split = add(g, at + "ctx_split", OpKind::Reshape, {out(ctx)},
                                 shape_attrs({batch, a_t, seq, dh}), Tags{b, "attn", "reshape"});
        const NodeId perm = add(g, at + "ctx_perm", OpKind::Transpose, {out(split)},
                                perm_attrs({0, 2, 1, 3}), Tags{b, "attn", "transpose"});
        const NodeId merged = add(g, at + "ctx_merge", OpKind::Reshape, {out(perm)},
                                  shape_attrs({rows, h_t}), Tags{b, "attn", "reshape"});
        const NodeId proj = add(g, at + "out", OpKind::Linear, {out(merged)}, linear_attrs(h),
                                Tags{"dot", b, "attn", "out"});
        const ValueId proj_g = g_op(at + "g", out(proj), b);
        const ValueId proj_d = dropout(at + "drop", proj_g, Tags{b, "attn"});
        const NodeId res1 =
            add(g, at + "residual", OpKind::Add, {x, proj_d}, {}, Tags{b, "attn", "residual"});

        const std::string m = b + ".mlp.";
        const NodeId ln2 =
            add(g, b + ".ln2", OpKind::LayerNorm, {out(res1)}, {}, Tags{b, "mlp", "ln"});
        const ValueId fc1_in = f(m + "f", out(ln2), b);
        const NodeId fc1 = add(g, m + "fc1", OpKind::Linear, {fc1_in}, linear_attrs(4 * h_t),
                               Tags{"dot", b, "mlp", "fc1"});
        const NodeId act = add(g, m + "act", OpKind::Gelu, {out(fc1)}, {}, Tags{b, "mlp", "act"});
        const NodeId fc2 = add(g, m + "fc2", OpKind::Linear, {out(act)}, linear_attrs(h),
                               Tags{"dot", b, "mlp", "fc2"});
        const ValueId fc2_g = g_op(m + "g", out(fc2), b);
        const ValueId fc2_d = dropout(m + "drop", fc2_g, Tags{b, "mlp"});
        const NodeId res2 =
            add(g, m + "residual", OpKind::Add, {out(res1), fc2_d}, {}, Tags{b, "mlp", "residual"});
        x = out(res2);
    }
    const NodeId ln = add(g, "final_ln", OpKind::LayerNorm, {x}, {}, Tags{"final", "ln"});
    const ValueId head_in = f("head_f", out(ln), "head");
    // Vocabulary-parallel head: this rank's vocab/tp columns (its labels stand in for its share).
    const NodeId head =
        add(g, "head", OpKind::Linear, {head_in}, linear_attrs(vocab / t), Tags{"dot", "head"});
    add(g, "loss", OpKind::CrossEntropy, {out(head), labels}, {}, Tags{"loss"});
    return g;
}

// --- convolutional networks (NCHW) ---------------------------------------------------------

ParamSpec choice_param(std::string key, std::string def, std::string help,
                       std::vector<std::string> choices) {
    ParamSpec p;
    p.key = std::move(key);
    p.type = ParamType::Choice;
    p.default_value = std::move(def);
    p.help = std::move(help);
    p.choices = std::move(choices);
    return p;
}

// Adds the layers of a CNN with the conventional tags: "dot" first on conv2d and linear, then
// the node's block (or "stem"/"head"), then its roles.
class Cnn {
  public:
    explicit Cnn(Graph& g) : g_(g) {}

    // A square convolution with "same" padding (kernel/2); without bias when a batchnorm
    // follows.
    ValueId conv(const std::string& name, ValueId x, int64_t out, int64_t kernel, int64_t stride,
                 Tags tags, int64_t groups = 1, bool bias = false) {
        Attrs a{{"out_channels", out}, {"kernel", kernel}};
        if (stride != 1) a.set("stride", stride);
        if (kernel / 2 != 0) a.set("padding", kernel / 2);
        if (groups != 1) a.set("groups", groups);
        if (!bias) a.set("bias", int64_t{0});
        tags.insert(tags.begin(), "dot");
        return node(name, OpKind::Conv2d, {x}, std::move(a), std::move(tags));
    }
    ValueId node(const std::string& name, OpKind op, const std::vector<ValueId>& inputs,
                 Attrs attrs, Tags tags) {
        return g_.node(add(g_, name, op, inputs, std::move(attrs), std::move(tags))).output;
    }
    ValueId bn(const std::string& name, ValueId x, const Tags& tags) {
        return node(name, OpKind::BatchNorm, {x}, {}, with(tags, "bn"));
    }
    ValueId relu(const std::string& name, ValueId x, const Tags& tags) {
        return node(name, OpKind::Relu, {x}, {}, with(tags, "act"));
    }
    // conv (no bias), batchnorm, relu: names <p>conv<s>, <p>bn<s>, <p>relu<s>.
    ValueId conv_bn_relu(const std::string& p, const std::string& s, ValueId x, int64_t out,
                         int64_t kernel, int64_t stride, const Tags& tags, int64_t groups = 1) {
        x = conv(p + "conv" + s, x, out, kernel, stride, with(tags, "conv"), groups);
        x = bn(p + "bn" + s, x, tags);
        return relu(p + "relu" + s, x, tags);
    }
    // Global average pooling, flatten, a linear classifier and cross-entropy on `labels`.
    void classifier_head(ValueId x, ValueId labels, int64_t classes) {
        x = node("head.pool", OpKind::AvgPool2d, {x}, {{"global", int64_t{1}}},
                 Tags{"head", "pool"});
        x = node("head.flatten", OpKind::Flatten, {x}, {}, Tags{"head", "flatten"});
        x = node("head.fc", OpKind::Linear, {x}, linear_attrs(classes), Tags{"dot", "head", "fc"});
        node("loss", OpKind::CrossEntropy, {x, labels}, {}, Tags{"loss"});
    }
    int64_t spatial(ValueId v) const { return g_.value(v).shape[2]; }

    static Tags with(Tags t, std::string role) {
        t.push_back(std::move(role));
        return t;
    }

  private:
    Graph& g_;
};

struct ImageInputs {
    ValueId x, labels;
};

ImageInputs image_inputs(Graph& g, const ParamValues& v, bool with_labels) {
    const int64_t batch = v.get_int("batch"), size = v.get_int("size"),
                  channels = v.get_int("in_channels");
    ImageInputs in{g.add_input("x", DType::F32, {batch, channels, size, size}), kNoId};
    if (with_labels) in.labels = g.add_input("labels", DType::I32, {batch}, v.get_int("classes"));
    return in;
}

// VGG (Simonyan & Zisserman 2014): stages of 3x3 convolutions + relu, each ending in a 2x2 max
// pool (skipped once the image is 1x1, so small sizes work), then three linear layers with
// dropout. Channels are width·(1, 2, 4, 8, 8) per stage (width=64 is the paper's).
Graph build_vgg(const Spec& spec, const ParamValues& v) {
    static const std::map<std::string, std::vector<std::vector<int64_t>>, std::less<>> configs = {
        {"11", {{1}, {2}, {4, 4}, {8, 8}, {8, 8}}},
        {"13", {{1, 1}, {2, 2}, {4, 4}, {8, 8}, {8, 8}}},
        {"16", {{1, 1}, {2, 2}, {4, 4, 4}, {8, 8, 8}, {8, 8, 8}}},
        {"19", {{1, 1}, {2, 2}, {4, 4, 4, 4}, {8, 8, 8, 8}, {8, 8, 8, 8}}},
    };
    const int64_t width = v.get_int("width"), classes = v.get_int("classes");
    const int64_t hidden = v.get_int("hidden") == 0 ? 8 * width : v.get_int("hidden");
    const bool use_bn = v.get_int("bn") != 0;
    Graph g = start(spec, v);
    Cnn net(g);
    auto [x, labels] = image_inputs(g, v, true);
    const auto& stages = configs.at(v.get_string("depth"));
    for (size_t s = 0; s < stages.size(); ++s) {
        const std::string b = block(static_cast<int64_t>(s));
        const Tags tags{b};
        for (size_t j = 0; j < stages[s].size(); ++j) {
            const std::string k = std::to_string(j + 1);
            x = net.conv(b + ".conv" + k, x, width * stages[s][j], 3, 1, Tags{b, "conv"}, 1,
                         !use_bn);
            if (use_bn) x = net.bn(b + ".bn" + k, x, tags);
            x = net.relu(b + ".relu" + k, x, tags);
        }
        if (net.spatial(x) >= 2)
            x = net.node(b + ".pool", OpKind::MaxPool2d, {x}, {{"kernel", int64_t{2}}},
                         Tags{b, "pool"});
    }
    x = net.node("head.flatten", OpKind::Flatten, {x}, {}, Tags{"head", "flatten"});
    for (int i = 1; i <= 2; ++i) {
        const std::string k = std::to_string(i);
        x = net.node("head.fc" + k, OpKind::Linear, {x}, linear_attrs(hidden),
                     Tags{"dot", "head", "fc"});
        x = net.node("head.relu" + k, OpKind::Relu, {x}, {}, Tags{"head", "act"});
        x = net.node("head.drop" + k, OpKind::Dropout, {x}, {{"p", 0.5}}, Tags{"head", "dropout"});
    }
    x = net.node("head.fc3", OpKind::Linear, {x}, linear_attrs(classes), Tags{"dot", "head", "fc"});
    net.node("loss", OpKind::CrossEntropy, {x, labels}, {}, Tags{"loss"});
    return g;
}

// ResNet (He et al. 2016): basic blocks (18, 34) or bottleneck blocks (50, expansion 4), with a
// 1x1 convolution + batchnorm on the shortcut where the shape changes. Stage s has width·2^s
// channels (width=64 is the paper's). The ImageNet stem (7x7/2 conv, 3x3/2 max pool) shrinks the
// image 4x; the CIFAR stem (one 3x3 conv) keeps small images whole.
Graph build_resnet(const Spec& spec, const ParamValues& v) {
    const std::string depth = v.get_string("depth");
    const bool bottleneck = depth == "50";
    const std::vector<int64_t> counts =
        depth == "18" ? std::vector<int64_t>{2, 2, 2, 2} : std::vector<int64_t>{3, 4, 6, 3};
    const int64_t width = v.get_int("width"), size = v.get_int("size");
    std::string stem = v.get_string("stem");
    if (stem == "auto") stem = size >= 64 ? "imagenet" : "cifar";
    Graph g = start(spec, v);
    Cnn net(g);
    auto [x, labels] = image_inputs(g, v, true);
    const Tags stem_tags{"stem"};
    if (stem == "imagenet") {
        x = net.conv_bn_relu("stem.", "", x, width, 7, 2, stem_tags);
        x = net.node("stem.pool", OpKind::MaxPool2d, {x},
                     {{"kernel", int64_t{3}}, {"stride", int64_t{2}}, {"padding", int64_t{1}}},
                     Tags{"stem", "pool"});
    } else {
        x = net.conv_bn_relu("stem.", "", x, width, 3, 1, stem_tags);
    }
    int64_t channels = width, index = 0;
    for (size_t s = 0; s < counts.size(); ++s) {
        const int64_t mid = width << s, out = bottleneck ? 4 * mid : mid;
        for (int64_t j = 0; j < counts[s]; ++j, ++index) {
            const std::string b = block(index) + ".";
            const Tags tags{block(index), "stage" + std::to_string(s)};
            const int64_t stride = s > 0 && j == 0 ? 2 : 1;
            ValueId y = x;
            if (bottleneck) {
                y = net.conv_bn_relu(b, "1", y, mid, 1, 1, tags);
                y = net.conv_bn_relu(b, "2", y, mid, 3, stride, tags);
                y = net.conv(b + "conv3", y, out, 1, 1, Cnn::with(tags, "conv"));
                y = net.bn(b + "bn3", y, tags);
            } else {
                y = net.conv_bn_relu(b, "1", y, mid, 3, stride, tags);
                y = net.conv(b + "conv2", y, out, 3, 1, Cnn::with(tags, "conv"));
                y = net.bn(b + "bn2", y, tags);
            }
            ValueId shortcut = x;
            if (stride != 1 || channels != out) {
                const Tags sc = Cnn::with(tags, "shortcut");
                shortcut = net.conv(b + "down", x, out, 1, stride, Cnn::with(sc, "conv"));
                shortcut = net.bn(b + "down_bn", shortcut, sc);
            }
            const ValueId sum =
                net.node(b + "add", OpKind::Add, {shortcut, y}, {}, Cnn::with(tags, "residual"));
            x = net.relu(b + "out", sum, tags);
            channels = out;
        }
    }
    net.classifier_head(x, labels, v.get_int("classes"));
    return g;
}

// U-Net (Ronneberger et al. 2015): `depth` levels of two conv-bn-relu layers and a 2x2 max pool,
// a bottom level, then per level a nearest 2x upsampling, a 3x3 convolution, the concatenation
// with the encoder's output of that level (the long skip connection) and two conv-bn-relu
// layers; a 1x1 convolution gives the output, and the loss is ½·Σ y². Level l has
// channels·2^l channels.
Graph build_unet(const Spec& spec, const ParamValues& v) {
    const int64_t depth = v.get_int("depth"), channels = v.get_int("channels"),
                  size = v.get_int("size");
    const int64_t factor = int64_t{1} << depth;  // depth <= 10 (the schema's bound)
    if (size % factor != 0)
        throw Error("size=" + std::to_string(size) +
                    " is not a multiple of 2^depth = " + std::to_string(factor) + "; each of the " +
                    std::to_string(depth) + " levels halves the image (e.g. size=" +
                    std::to_string(std::max<int64_t>(1, size / factor) * factor) + ")");
    Graph g = start(spec, v);
    Cnn net(g);
    ValueId x = image_inputs(g, v, false).x;
    std::vector<ValueId> skips;
    int64_t index = 0;
    auto level = [&](ValueId in, int64_t ch, const Tags& tags) {
        const std::string b = block(index) + ".";
        in = net.conv_bn_relu(b, "1", in, ch, 3, 1, tags);
        return net.conv_bn_relu(b, "2", in, ch, 3, 1, tags);
    };
    for (int64_t l = 0; l < depth; ++l, ++index) {
        const Tags tags{block(index), "down"};
        x = level(x, channels << l, tags);
        skips.push_back(x);
        x = net.node(block(index) + ".pool", OpKind::MaxPool2d, {x}, {{"kernel", int64_t{2}}},
                     Cnn::with(tags, "pool"));
    }
    x = level(x, channels << depth, Tags{block(index), "bottom"});
    ++index;
    for (int64_t l = depth - 1; l >= 0; --l, ++index) {
        const std::string b = block(index) + ".";
        const Tags tags{block(index), "up"};
        x = net.node(b + "up", OpKind::UpsampleNearest2d, {x}, {{"scale", int64_t{2}}},
                     Cnn::with(tags, "upsample"));
        x = net.conv(b + "up_conv", x, channels << l, 3, 1, Cnn::with(tags, "conv"), 1, true);
        x = net.node(b + "concat", OpKind::Concat, {skips[static_cast<size_t>(l)], x}, {},
                     Cnn::with(tags, "skip"));
        x = level(x, channels << l, tags);
    }
    x = net.conv("head.conv", x, v.get_int("out_channels"), 1, 1, Tags{"head", "conv"}, 1, true);
    net.node("loss", OpKind::SumSquares, {x}, {}, Tags{"loss"});
    return g;
}

// MobileNet v1 (Howard et al. 2017): a strided 3x3 stem, then 13 depthwise-separable blocks (a
// 3x3 depthwise conv-bn-relu and a 1x1 pointwise conv-bn-relu), channels from 2·width to
// 32·width (width=32 is the paper's), global average pooling and a linear classifier.
Graph build_mobilenet(const Spec& spec, const ParamValues& v) {
    static const std::vector<std::pair<int64_t, int64_t>> blocks = {
        {2, 1},  {4, 2},  {4, 1},  {8, 2},  {8, 1},  {16, 2}, {16, 1},
        {16, 1}, {16, 1}, {16, 1}, {16, 1}, {32, 2}, {32, 1}};  // (channels / width, stride)
    const int64_t width = v.get_int("width");
    Graph g = start(spec, v);
    Cnn net(g);
    auto [x, labels] = image_inputs(g, v, true);
    x = net.conv_bn_relu("stem.", "", x, width, 3, 2, Tags{"stem"});
    int64_t channels = width;
    for (size_t i = 0; i < blocks.size(); ++i) {
        const std::string b = block(static_cast<int64_t>(i));
        const Tags tags{b};
        x = net.conv(b + ".dw", x, channels, 3, blocks[i].second, Tags{b, "conv", "depthwise"},
                     channels);
        x = net.bn(b + ".dw_bn", x, tags);
        x = net.relu(b + ".dw_relu", x, tags);
        channels = width * blocks[i].first;
        x = net.conv(b + ".pw", x, channels, 1, 1, Tags{b, "conv", "pointwise"});
        x = net.bn(b + ".pw_bn", x, tags);
        x = net.relu(b + ".pw_relu", x, tags);
    }
    net.classifier_head(x, labels, v.get_int("classes"));
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
        {
            ParamSpec dropout;
            dropout.key = "dropout";
            dropout.type = ParamType::Float;
            dropout.default_value = "0.1";
            dropout.help = "dropout probability (0: no dropout nodes); each keeps a 1-byte mask";
            ParamSpec sp = int_param("sp", 0, "1: sequence parallelism over the tp ranks", 0);
            sp.max = 1;
            e.push_back(
                {{"gpt",
                  "GPT layers as Korthikanti et al. count them (pre-norm, dropout with 1-byte "
                  "masks), in bf16/f16/f32, as one tensor-parallel rank (tp) with sequence "
                  "parallelism (sp); the attention core is tagged attn_core",
                  {int_param("layers", 2, "number of transformer layers"),
                   int_param("d_model", 64, "hidden size h"),
                   int_param("heads", 4, "attention heads a (must divide d_model, and by tp)"),
                   int_param("seq", 16, "sequence length s"),
                   int_param("batch", 2, "micro-batch size b"),
                   int_param("vocab", 32, "vocabulary size (divisible by tp)"),
                   choice_param("dtype", "bf16",
                                "activation dtype: bytes planned in it; the CPU executes f32",
                                {"bf16", "f16", "f32"}),
                   dropout, int_param("tp", 1, "tensor-parallel size t: the graph is one rank's"),
                   sp, seed_param()}},
                 build_gpt});
        }
        auto image = [](int64_t size, int64_t batch) {
            return std::vector<ParamSpec>{
                int_param("size", size, "height and width of the input images"),
                int_param("batch", batch, "images per batch"),
                int_param("in_channels", 3, "channels of the input images")};
        };
        auto schema = [](std::vector<ParamSpec> a, const std::vector<ParamSpec>& b) {
            a.insert(a.end(), b.begin(), b.end());
            return a;
        };
        e.push_back(
            {{"vgg",
              "VGG: stages of 3x3 conv + relu and max pooling, three linear layers with dropout",
              schema({choice_param("depth", "11", "convolution + linear layers",
                                   {"11", "13", "16", "19"}),
                      int_param("width", 8, "channels of the first stage (the paper's is 64)"),
                      int_param("hidden", 0, "features of the linear layers; 0 means 8*width", 0),
                      int_param("bn", 0, "1: batchnorm after every convolution", 0)},
                     schema(image(32, 2),
                            {int_param("classes", 10, "classes of the output"), seed_param()}))},
             build_vgg});
        e.push_back(
            {{"resnet", "ResNet: basic (18, 34) or bottleneck (50) residual blocks with batchnorm",
              schema({choice_param("depth", "18", "layers", {"18", "34", "50"}),
                      int_param("width", 8, "channels of the first stage (the paper's is 64)"),
                      choice_param("stem", "auto",
                                   "imagenet: 7x7/2 conv and 3x3/2 max pool; cifar: one 3x3 "
                                   "conv; auto: imagenet from size 64",
                                   {"auto", "imagenet", "cifar"})},
                     schema(image(32, 2),
                            {int_param("classes", 10, "classes of the output"), seed_param()}))},
             build_resnet});
        ParamSpec unet_depth = int_param("depth", 3, "levels; size must be a multiple of 2^depth");
        unet_depth.max = 10;
        e.push_back(
            {{"unet",
              "U-Net: encoder and decoder joined by long skip connections (concat), "
              "sum-of-squares loss",
              schema(
                  {unet_depth,
                   int_param("channels", 8, "channels of the first level (the paper's is 64)")},
                  schema(image(16, 2), {int_param("out_channels", 2, "channels of the output map"),
                                        seed_param()}))},
             build_unet});
        e.push_back(
            {{"mobilenet",
              "MobileNet v1: depthwise-separable blocks (3x3 depthwise + 1x1 pointwise)",
              schema({int_param("width", 8, "channels of the stem (the paper's is 32)")},
                     schema(image(32, 2),
                            {int_param("classes", 10, "classes of the output"), seed_param()}))},
             build_mobilenet});
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

bool is_onnx_spec(const std::string& spec) {
    return spec.ends_with(".onnx");
}

bool is_preset_spec(const std::string& spec) {
    return !is_onnx_spec(spec) && spec.find('/') == std::string::npos && !spec.ends_with(".json");
}

Graph load_network(const std::string& spec, bool narrow_onnx_slices) {
    if (is_onnx_spec(spec)) {
        OnnxImportOptions opt;
        opt.narrow_slices = narrow_onnx_slices;
        return load_onnx_file(spec, opt);
    }
    if (!is_preset_spec(spec)) return load_network_file(spec);
    return build_preset(parse_spec(spec));
}

}  // namespace rl
