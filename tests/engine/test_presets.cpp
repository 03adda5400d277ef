#include <gtest/gtest.h>

#include <set>

#include "engine/errors.h"
#include "engine/graph_compare.h"
#include "engine/networks/presets.h"
#include "engine/ops/op.h"
#include "engine/test_util.h"

namespace rl {
namespace {

using testing::contains;
using testing::error_of;

const Node& node_named(const Graph& g, std::string_view name) {
    auto n = g.find_node(name);
    EXPECT_TRUE(n.has_value()) << "no node " << name;
    return g.node(n.value_or(0));
}

Shape shape_of(const Graph& g, std::string_view name) {
    return g.output_of(g.find_node(name).value()).shape;
}

TEST(Presets, ListHasSchemasWithDefaultsAndSeed) {
    std::set<std::string> names;
    for (const auto& p : presets()) {
        names.insert(p.name);
        EXPECT_FALSE(p.about.empty()) << p.name;
        bool has_seed = false;
        for (const auto& s : p.schema) {
            EXPECT_FALSE(s.default_value.empty()) << p.name << "." << s.key;
            EXPECT_FALSE(s.help.empty()) << p.name << "." << s.key;
            has_seed = has_seed || (s.key == "seed" && s.default_value == "1");
        }
        EXPECT_TRUE(has_seed) << p.name;
    }
    EXPECT_EQ(names, (std::set<std::string>{"mlp", "chain", "resmlp", "transformer", "gpt", "vgg",
                                            "resnet", "unet", "mobilenet"}));
}

TEST(Presets, EveryPresetBuildsSmallAndFinalizedAtDefaults) {
    for (const auto& p : presets()) {
        SCOPED_TRACE(p.name);
        const Graph g = build_preset(parse_spec(p.name));
        EXPECT_TRUE(g.finalized());
        EXPECT_EQ(g.name(), p.name);
        EXPECT_EQ(g.seed(), 1u);
        EXPECT_EQ(g.node(g.loss_node()).name, "loss");
        EXPECT_TRUE(g.output_of(g.loss_node()).shape.dims.empty() ||
                    g.output_of(g.loss_node()).shape.numel() == 1);
        // A CPU step at defaults is far below a second: a few MFLOP and well under a MiB.
        EXPECT_LT(g.forward_flops(), 5e7);
        EXPECT_LT(g.activation_bytes() + g.param_bytes(), 8u << 20);
        for (const Node& n : g.nodes()) {
            EXPECT_FALSE(n.tags.empty()) << n.name;
            EXPECT_EQ(n.has_tag("dot"), op_def(n.op).is_dot) << n.name;
            const bool in_block = n.name.rfind("block", 0) == 0 || n.name.rfind("layer", 0) == 0;
            if (in_block) {
                // Its block tag is the first component of its name ("block3.fc" -> "block3").
                std::string b = n.name.substr(0, n.name.find('.'));
                if (b.rfind("layer", 0) == 0) b = "block" + b.substr(5);
                EXPECT_TRUE(n.has_tag(b)) << n.name;
            }
        }
    }
}

TEST(Presets, MlpStructure) {
    const Graph g = build_preset(parse_spec("mlp"));
    EXPECT_EQ(g.num_nodes(), 2 * 8 + 1);
    EXPECT_EQ(g.num_params(), 2 * 8);
    EXPECT_EQ(g.inputs().size(), 1u);
    EXPECT_EQ(g.value(g.inputs()[0]).shape, (Shape{32, 64}));
    const Node& fc = node_named(g, "block3.fc");
    EXPECT_EQ(fc.op, OpKind::Linear);
    EXPECT_EQ(fc.tags, (std::vector<std::string>{"dot", "block3", "fc"}));
    EXPECT_EQ(fc.attrs.get_int("out_features"), 64);
    const Node& act = node_named(g, "block3.act");
    EXPECT_EQ(act.op, OpKind::Relu);
    EXPECT_EQ(act.tags, (std::vector<std::string>{"block3", "act"}));
    EXPECT_EQ(g.node(g.loss_node()).op, OpKind::SumSquares);

    const Graph h = build_preset(parse_spec("mlp:depth=3,width=16,batch=4,act=tanh,seed=7"));
    EXPECT_EQ(h.name(), "mlp:depth=3,width=16,batch=4,act=tanh,seed=7");
    EXPECT_EQ(h.seed(), 7u);
    EXPECT_EQ(h.num_nodes(), 7);
    EXPECT_EQ(node_named(h, "block2.act").op, OpKind::Tanh);
    EXPECT_EQ(shape_of(h, "block2.fc"), (Shape{4, 16}));
    EXPECT_EQ(node_named(build_preset(parse_spec("mlp:act=gelu")), "block0.act").op, OpKind::Gelu);
    EXPECT_EQ(node_named(build_preset(parse_spec("mlp:act=sigmoid")), "block0.act").op,
              OpKind::Sigmoid);
}

TEST(Presets, ChainStructure) {
    const Graph g = build_preset(parse_spec("chain:l=5"));
    EXPECT_EQ(g.num_nodes(), 6);
    for (int i = 0; i < 5; ++i) {
        const Node& n = node_named(g, "layer" + std::to_string(i));
        EXPECT_EQ(n.op, OpKind::Linear);
        EXPECT_TRUE(n.has_tag("dot"));
        EXPECT_TRUE(n.has_tag("block" + std::to_string(i)));
    }
    EXPECT_EQ(build_preset(parse_spec("chain")).num_nodes(), 17);
}

TEST(Presets, ResMlpStructure) {
    const Graph g = build_preset(parse_spec("resmlp"));
    EXPECT_EQ(g.num_nodes(), 5 * 4 + 2);
    EXPECT_EQ(g.num_params(), 6 * 4 + 2);
    EXPECT_EQ(shape_of(g, "block1.fc1"), (Shape{32, 256}));
    EXPECT_EQ(shape_of(g, "block1.fc2"), (Shape{32, 64}));
    const Node& add = node_named(g, "block1.add");
    EXPECT_EQ(add.op, OpKind::Add);
    // Residual: the block's input (block0.add) and its fc2.
    EXPECT_EQ(g.value(add.inputs[0]).name, "block0.add");
    EXPECT_EQ(g.value(add.inputs[1]).name, "block1.fc2");
    EXPECT_EQ(g.value(node_named(g, "block0.ln").inputs[0]).name, "x");
    EXPECT_EQ(node_named(g, "final_ln").op, OpKind::LayerNorm);
    EXPECT_EQ(shape_of(build_preset(parse_spec("resmlp:width=8,hidden=12")), "block0.fc1"),
              (Shape{32, 12}));
}

TEST(Presets, TransformerStructure) {
    const Graph g = build_preset(parse_spec("transformer"));
    EXPECT_EQ(g.num_nodes(), 26 * 2 + 3);
    ASSERT_EQ(g.inputs().size(), 2u);
    const Value& x = g.value(g.inputs()[0]);
    const Value& labels = g.value(g.inputs()[1]);
    EXPECT_EQ(x.shape, (Shape{32, 64}));
    EXPECT_EQ(labels.dtype, DType::I32);
    EXPECT_EQ(labels.shape, (Shape{32}));
    EXPECT_EQ(labels.label_classes, 32);

    EXPECT_EQ(shape_of(g, "block0.attn.q_split"), (Shape{2, 16, 4, 16}));
    EXPECT_EQ(shape_of(g, "block0.attn.q_heads"), (Shape{2, 4, 16, 16}));
    EXPECT_EQ(shape_of(g, "block0.attn.k_bh"), (Shape{8, 16, 16}));
    const Node& scores = node_named(g, "block1.attn.scores");
    EXPECT_EQ(scores.op, OpKind::MatMul);
    EXPECT_EQ(scores.attrs.get_int("transpose_b"), 1);
    EXPECT_DOUBLE_EQ(scores.attrs.get_float("alpha", 0), 0.25);
    EXPECT_EQ(shape_of(g, "block1.attn.scores"), (Shape{8, 16, 16}));
    EXPECT_EQ(node_named(g, "block1.attn.probs").op, OpKind::Softmax);
    EXPECT_EQ(shape_of(g, "block1.attn.ctx"), (Shape{8, 16, 16}));
    EXPECT_EQ(shape_of(g, "block1.attn.ctx_merge"), (Shape{32, 64}));
    EXPECT_EQ(shape_of(g, "block1.mlp.fc1"), (Shape{32, 256}));
    EXPECT_EQ(node_named(g, "block1.mlp.act").op, OpKind::Gelu);
    EXPECT_EQ(shape_of(g, "head"), (Shape{32, 32}));
    EXPECT_EQ(g.node(g.loss_node()).op, OpKind::CrossEntropy);

    EXPECT_TRUE(node_named(g, "block0.attn.q").has_tag("attn"));
    EXPECT_TRUE(node_named(g, "block0.attn.q").has_tag("dot"));
    EXPECT_TRUE(node_named(g, "block0.mlp.fc2").has_tag("mlp"));
    EXPECT_TRUE(node_named(g, "block0.ln1").has_tag("ln"));
    EXPECT_TRUE(node_named(g, "head").has_tag("dot"));
    const Node& res = node_named(g, "block1.attn.residual");
    EXPECT_EQ(g.value(res.inputs[0]).name, "block0.mlp.residual");

    const Graph small = build_preset(parse_spec("transformer:layers=1,d_model=12,heads=3,seq=5"));
    EXPECT_EQ(small.num_nodes(), 29);
    EXPECT_EQ(shape_of(small, "block0.attn.v_bh"), (Shape{6, 5, 4}));
    EXPECT_DOUBLE_EQ(node_named(small, "block0.attn.scores").attrs.get_float("alpha", 0), 0.5);
}

int count_ops(const Graph& g, OpKind k) {
    int n = 0;
    for (const Node& node : g.nodes()) n += node.op == k;
    return n;
}

std::string input_name(const Graph& g, std::string_view node, size_t i) {
    return g.value(node_named(g, node).inputs[i]).name;
}

TEST(Presets, VggStructure) {
    const Graph g = build_preset(parse_spec("vgg"));
    ASSERT_EQ(g.inputs().size(), 2u);
    EXPECT_EQ(g.value(g.inputs()[0]).shape, (Shape{2, 3, 32, 32}));
    EXPECT_EQ(count_ops(g, OpKind::Conv2d), 8);
    EXPECT_EQ(count_ops(g, OpKind::Linear), 3);
    EXPECT_EQ(count_ops(g, OpKind::MaxPool2d), 5);
    EXPECT_EQ(count_ops(g, OpKind::Dropout), 2);
    EXPECT_EQ(count_ops(g, OpKind::BatchNorm), 0);
    EXPECT_EQ(shape_of(g, "block0.conv1"), (Shape{2, 8, 32, 32}));
    EXPECT_EQ(shape_of(g, "block2.conv2"), (Shape{2, 32, 8, 8}));
    EXPECT_EQ(shape_of(g, "block4.pool"), (Shape{2, 64, 1, 1}));
    EXPECT_EQ(shape_of(g, "head.fc1"), (Shape{2, 64}));
    EXPECT_EQ(shape_of(g, "head.fc3"), (Shape{2, 10}));
    EXPECT_EQ(node_named(g, "block1.conv1").tags,
              (std::vector<std::string>{"dot", "block1", "conv"}));
    EXPECT_EQ(g.node(g.loss_node()).op, OpKind::CrossEntropy);

    const Graph deep = build_preset(parse_spec("vgg:depth=16,width=4,size=8,bn=1,hidden=16"));
    EXPECT_EQ(count_ops(deep, OpKind::Conv2d), 13);
    EXPECT_EQ(count_ops(deep, OpKind::BatchNorm), 13);
    // An 8x8 image is 1x1 after three pools: the last two stages keep it.
    EXPECT_EQ(count_ops(deep, OpKind::MaxPool2d), 3);
    EXPECT_EQ(shape_of(deep, "head.fc2"), (Shape{2, 16}));
}

TEST(Presets, ResNetStructure) {
    const Graph g = build_preset(parse_spec("resnet"));
    // CIFAR stem at size 32, 8 basic blocks, 3 downsampling shortcuts.
    EXPECT_EQ(count_ops(g, OpKind::Conv2d), 1 + 16 + 3);
    EXPECT_EQ(count_ops(g, OpKind::Add), 8);
    EXPECT_FALSE(g.find_node("stem.pool"));
    EXPECT_EQ(shape_of(g, "stem.conv"), (Shape{2, 8, 32, 32}));
    EXPECT_EQ(shape_of(g, "block2.conv1"), (Shape{2, 16, 16, 16}));
    EXPECT_EQ(shape_of(g, "block2.down"), (Shape{2, 16, 16, 16}));
    EXPECT_EQ(shape_of(g, "block7.out"), (Shape{2, 64, 4, 4}));
    EXPECT_EQ(shape_of(g, "head.pool"), (Shape{2, 64, 1, 1}));
    EXPECT_EQ(input_name(g, "block1.add", 0), "block0.out");  // identity shortcut
    EXPECT_EQ(input_name(g, "block1.add", 1), "block1.bn2");
    EXPECT_EQ(input_name(g, "block2.add", 0), "block2.down_bn");
    EXPECT_TRUE(node_named(g, "block2.down").has_tag("shortcut"));
    EXPECT_TRUE(node_named(g, "block2.down").has_tag("stage1"));
    EXPECT_EQ(node_named(g, "block0.conv1").attrs.get_int("bias"), 0);

    EXPECT_EQ(count_ops(build_preset(parse_spec("resnet:depth=34,width=4,size=8")), OpKind::Add),
              16);
    const Graph r50 = build_preset(parse_spec("resnet:depth=50,width=4,size=64"));
    EXPECT_EQ(count_ops(r50, OpKind::Conv2d), 1 + 48 + 4);
    EXPECT_EQ(shape_of(r50, "stem.conv"), (Shape{2, 4, 32, 32}));
    EXPECT_EQ(shape_of(r50, "stem.pool"), (Shape{2, 4, 16, 16}));
    EXPECT_EQ(shape_of(r50, "block0.conv3"), (Shape{2, 16, 16, 16}));
    EXPECT_EQ(shape_of(r50, "block15.out"), (Shape{2, 128, 2, 2}));
    EXPECT_EQ(input_name(r50, "block0.add", 0), "block0.down_bn");
    EXPECT_FALSE(build_preset(parse_spec("resnet:size=64,stem=cifar")).find_node("stem.pool"));
}

TEST(Presets, UNetStructure) {
    const Graph g = build_preset(parse_spec("unet:size=32"));
    ASSERT_EQ(g.inputs().size(), 1u);
    EXPECT_EQ(count_ops(g, OpKind::Concat), 3);
    EXPECT_EQ(count_ops(g, OpKind::UpsampleNearest2d), 3);
    EXPECT_EQ(count_ops(g, OpKind::MaxPool2d), 3);
    EXPECT_EQ(shape_of(g, "block0.relu2"), (Shape{2, 8, 32, 32}));
    EXPECT_EQ(shape_of(g, "block3.relu2"), (Shape{2, 64, 4, 4}));
    // The long skips: level l's encoder output feeds its pool and, much later, the decoder.
    EXPECT_EQ(input_name(g, "block6.concat", 0), "block0.relu2");
    EXPECT_EQ(input_name(g, "block6.concat", 1), "block6.up_conv");
    EXPECT_EQ(input_name(g, "block4.concat", 0), "block2.relu2");
    EXPECT_EQ(g.value(g.find_value("block0.relu2").value()).consumers.size(), 2u);
    EXPECT_EQ(shape_of(g, "block6.concat"), (Shape{2, 16, 32, 32}));
    EXPECT_EQ(shape_of(g, "head.conv"), (Shape{2, 2, 32, 32}));
    EXPECT_EQ(g.node(g.loss_node()).op, OpKind::SumSquares);
    EXPECT_TRUE(node_named(g, "block5.concat").has_tag("skip"));

    const std::string e = error_of([] { build_preset(parse_spec("unet:depth=3,size=20")); });
    EXPECT_TRUE(contains(e, "size=20") && contains(e, "2^depth = 8")) << e;
    EXPECT_FALSE(error_of([] { build_preset(parse_spec("unet:depth=11")); }).empty());
}

TEST(Presets, MobileNetStructure) {
    const Graph g = build_preset(parse_spec("mobilenet"));
    EXPECT_EQ(count_ops(g, OpKind::Conv2d), 1 + 2 * 13);
    EXPECT_EQ(shape_of(g, "stem.conv"), (Shape{2, 8, 16, 16}));
    const Node& dw = node_named(g, "block1.dw");
    EXPECT_EQ(dw.attrs.get_int("groups"), 16);
    EXPECT_EQ(g.param(dw.params[0]).shape, (Shape{16, 1, 3, 3}));
    EXPECT_EQ(shape_of(g, "block1.dw"), (Shape{2, 16, 8, 8}));
    EXPECT_EQ(shape_of(g, "block1.pw"), (Shape{2, 32, 8, 8}));
    EXPECT_EQ(shape_of(g, "block12.pw_relu"), (Shape{2, 256, 1, 1}));
    EXPECT_TRUE(dw.has_tag("depthwise"));
    EXPECT_TRUE(dw.has_tag("dot"));
    EXPECT_EQ(shape_of(g, "head.fc"), (Shape{2, 10}));
}

TEST(Presets, DeterministicForTheSameSpec) {
    for (const auto& p : presets()) {
        SCOPED_TRACE(p.name);
        const Graph a = build_preset(parse_spec(p.name));
        const Graph b = build_preset(parse_spec(p.name));
        testing::expect_same_graph(a, b);
    }
    EXPECT_EQ(build_preset(parse_spec("chain:seed=5")).seed(), 5u);
}

TEST(Presets, BadParametersAreErrors) {
    std::string e = error_of([] { build_preset(parse_spec("mlp:depht=3")); });
    EXPECT_TRUE(contains(e, "unknown parameter 'depht'") && contains(e, "depth, width")) << e;
    e = error_of([] { build_preset(parse_spec("mlp:depth=0")); });
    EXPECT_TRUE(contains(e, "'depth'") && contains(e, "'0'") && contains(e, ">= 1")) << e;
    e = error_of([] { build_preset(parse_spec("mlp:act=swish")); });
    EXPECT_TRUE(contains(e, "'swish'") && contains(e, "relu, gelu, tanh, sigmoid")) << e;
    e = error_of([] { build_preset(parse_spec("transformer:d_model=30,heads=4")); });
    EXPECT_TRUE(contains(e, "d_model=30") && contains(e, "heads=4") && contains(e, "divisible"))
        << e;
    e = error_of([] { build_preset(parse_spec("mlp:width=4000000000,batch=4000000000")); });
    EXPECT_TRUE(contains(e, "too many elements") || contains(e, "overflow")) << e;
}

TEST(Presets, UnknownPresetListsNamesAndMentionsFiles) {
    const std::string e = error_of([] { build_preset(parse_spec("mpl:depth=3")); });
    EXPECT_TRUE(contains(e, "'mpl'")) << e;
    EXPECT_TRUE(contains(e, "mlp, chain, resmlp, transformer")) << e;
    EXPECT_TRUE(contains(e, ".json")) << e;
    EXPECT_EQ(error_of([] { load_network("mpl"); }),
              error_of([] { build_preset(parse_spec("mpl")); }));
}

TEST(Presets, LoadNetworkTakesPresetSpecsAndPaths) {
    const Graph g = load_network("mlp:depth=2");
    EXPECT_EQ(g.num_nodes(), 5);
    // A path (by '/' or by extension) goes to the file loader, which reports the missing file.
    for (const char* path : {"./nope.json", "nope.json", "dir/nope"}) {
        const std::string e = error_of([&] { load_network(path); });
        EXPECT_TRUE(contains(e, path) && contains(e, "no such file")) << e;
    }
}

}  // namespace
}  // namespace rl
