// Moving slices up the graph (engine/networks/slice_narrowing.h): which nodes it narrows and where
// it stops, and that the narrowed graph computes the same loss and gradients as the original.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/networks/onnx_import.h"
#include "engine/networks/slice_narrowing.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

Attrs slice_of(int64_t axis, int64_t start, int64_t end) {
    return Attrs{{"axis", axis}, {"start", start}, {"end", end}};
}

const Shape& output_shape_of(const Graph& g, const std::string& node) {
    const auto id = g.find_node(node);
    EXPECT_TRUE(id.has_value()) << node;
    return g.output_of(*id).shape;
}

bool narrowed(const SliceNarrowing& r, const std::string& node) {
    return std::find(r.narrowed.begin(), r.narrowed.end(), node) != r.narrowed.end();
}

// A pre-norm transformer block whose head reads token 0, as ViT's classifier does.
Graph class_token_block() {
    Graph g("cls", 7);
    g.add_input("x", DType::F32, Shape{2, 6, 8});
    g.add_node("ln1", OpKind::LayerNorm, std::vector<std::string>{"x"});
    for (const char* p : {"q", "k", "v"})
        g.add_node(p, OpKind::Linear, std::vector<std::string>{"ln1"}, {{"out_features", 8}});
    g.add_node("scores", OpKind::MatMul, std::vector<std::string>{"q", "k"},
               {{"transpose_b", 1}, {"alpha", 0.35}});
    g.add_node("attn", OpKind::Softmax, std::vector<std::string>{"scores"});
    g.add_node("ctx", OpKind::MatMul, std::vector<std::string>{"attn", "v"});
    g.add_node("proj", OpKind::Linear, std::vector<std::string>{"ctx"}, {{"out_features", 8}});
    g.add_node("r1", OpKind::Add, std::vector<std::string>{"x", "proj"});
    g.add_node("ln2", OpKind::LayerNorm, std::vector<std::string>{"r1"});
    g.add_node("fc1", OpKind::Linear, std::vector<std::string>{"ln2"}, {{"out_features", 16}});
    g.add_node("act", OpKind::Gelu, std::vector<std::string>{"fc1"});
    g.add_node("fc2", OpKind::Linear, std::vector<std::string>{"act"}, {{"out_features", 8}});
    // A per-feature scale (LayerScale): a parameter broadcast over the tokens.
    g.add_node("scaled", OpKind::Mul, std::vector<std::string>{"fc2"}, {{"param_shape", Dims{8}}});
    g.add_node("r2", OpKind::Add, std::vector<std::string>{"r1", "scaled"});
    g.add_node("ln", OpKind::LayerNorm, std::vector<std::string>{"r2"});
    g.add_node("cls", OpKind::Slice, std::vector<std::string>{"ln"}, slice_of(1, 0, 1));
    g.add_node("flat", OpKind::Reshape, std::vector<std::string>{"cls"}, {{"shape", Dims{2, 8}}});
    g.add_node("head", OpKind::Linear, std::vector<std::string>{"flat"}, {{"out_features", 3}});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"head"});
    g.finalize();
    return g;
}

// Loss and parameter gradients of one `none` step (parameters matched by name).
Execution step(const Graph& g) {
    auto backend = make_cpu_backend(1);
    const Plan none = plan_with(g, CostModel{}, Spec{"none", {}});
    return execute(g, none.schedule, *backend, RunData::seeded(g));
}

void expect_same_step(const Graph& a, const Graph& b) {
    const Execution ra = step(a), rb = step(b);
    EXPECT_NEAR(ra.loss, rb.loss, 1e-6 * std::max(1.0, std::fabs(ra.loss)));
    ASSERT_EQ(a.num_params(), b.num_params());
    struct Diff {
        std::string name;
        double scale = 0, worst = 0;
    };
    std::vector<Diff> diffs;
    double largest = 0;
    for (ParamId p = 0; p < a.num_params(); ++p) {
        ParamId pb = kNoId;
        for (ParamId k = 0; k < b.num_params(); ++k)
            if (b.param(k).name == a.param(p).name) pb = k;
        ASSERT_NE(pb, kNoId) << a.param(p).name;
        const auto& ga = ra.param_grads[static_cast<size_t>(p)];
        const auto& gb = rb.param_grads[static_cast<size_t>(pb)];
        ASSERT_EQ(ga.size(), gb.size());
        Diff d{a.param(p).name};
        for (size_t i = 0; i < ga.size(); ++i) {
            d.scale = std::max(d.scale, static_cast<double>(std::fabs(ga[i])));
            d.worst = std::max(d.worst, static_cast<double>(std::fabs(ga[i] - gb[i])));
        }
        largest = std::max(largest, d.scale);
        diffs.push_back(d);
    }
    ASSERT_GT(largest, 0.0);
    // The rows a GEMM computes change its blocking, so the kept rows may round differently: a
    // few ulps of each gradient's scale. A gradient zero in exact arithmetic (a key bias under
    // softmax) is cancellation noise of the terms it sums, sized by the network's gradients.
    for (const Diff& d : diffs)
        EXPECT_LE(d.worst, 2e-6 * std::max(d.scale, 0.05 * largest))
            << d.name << " (scale " << d.scale << ")";
}

TEST(SliceNarrowing, ClassTokenHeadNarrowsTheLastBlockToOneToken) {
    const Graph g = class_token_block();
    const SliceNarrowing r = narrow_slices(g);
    // Queries, attention rows, projection, MLP and both residual sums run for token 0 only; the
    // keys and values still need every token, and so does the norm all three read.
    for (const char* n : {"q", "scores", "attn", "ctx", "proj", "r1", "ln2", "fc1", "act", "fc2",
                          "scaled", "r2", "ln"})
        EXPECT_TRUE(narrowed(r, n)) << n;
    for (const char* n : {"ln1", "k", "v"}) EXPECT_FALSE(narrowed(r, n)) << n;
    EXPECT_EQ(output_shape_of(r.graph, "q"), Shape({2, 1, 8}));
    EXPECT_EQ(output_shape_of(r.graph, "scores"), Shape({2, 1, 6}));
    EXPECT_EQ(output_shape_of(r.graph, "fc1"), Shape({2, 1, 16}));
    EXPECT_EQ(output_shape_of(r.graph, "k"), Shape({2, 6, 8}));
    EXPECT_FALSE(r.graph.find_node("cls").has_value());  // it moved up: none is left there
    // What is left are the slices on the values other nodes read whole: ln1 (for q) and x.
    int slices = 0;
    for (const Node& n : r.graph.nodes())
        if (n.op == OpKind::Slice) {
            ++slices;
            EXPECT_TRUE(n.has_tag(kNarrowedTag)) << n.name;
            const std::string in = r.graph.value(n.inputs[0]).name;
            EXPECT_TRUE(in == "ln1" || in == "x") << n.name << " reads " << in;
        }
    EXPECT_EQ(slices, 2);
    EXPECT_LT(r.flops_after, 0.6 * r.flops_before);
    EXPECT_EQ(r.graph.num_params(), g.num_params());
    expect_same_step(g, r.graph);

    // The narrowed graph is a graph like any other: every strategy keeps both invariants.
    const CostModel costs = CostModel::analytic(r.graph, DeviceRates{});
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(r.graph);
    const auto reference =
        execute(r.graph, plan_with(r.graph, costs, Spec{"none", {}}).schedule, *backend, data)
            .param_grads;
    for (const char* s : {"sqrt-n", "optimal", "dtr"}) {
        SCOPED_TRACE(s);
        const Plan plan = plan_with(r.graph, costs, Spec{s, {}});
        const Execution run = execute(r.graph, plan.schedule, *backend, data);
        EXPECT_EQ(simulate(r.graph, plan.schedule, costs).peak_bytes, run.peak_bytes);
        EXPECT_EQ(run.param_grads, reference);
    }
}

TEST(SliceNarrowing, StopsWhereOtherRowsOrFeaturesAreRead) {
    {  // a slice of a linear's features: the weights would have to be cut
        Graph g("features", 1);
        g.add_input("x", DType::F32, Shape{2, 3, 8});
        g.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", 8}});
        g.add_node("part", OpKind::Slice, std::vector<std::string>{"fc"}, slice_of(2, 0, 4));
        g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"part"});
        g.finalize();
        const SliceNarrowing r = narrow_slices(g);
        EXPECT_TRUE(r.narrowed.empty());
        EXPECT_EQ(r.flops_after, r.flops_before);
    }
    {  // a value another node reads whole
        Graph g("shared", 1);
        g.add_input("x", DType::F32, Shape{4, 8});
        g.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", 8}});
        g.add_node("act", OpKind::Tanh, std::vector<std::string>{"fc"});
        g.add_node("top", OpKind::Slice, std::vector<std::string>{"act"}, slice_of(0, 0, 1));
        g.add_node("sum", OpKind::Add, std::vector<std::string>{"act", "act"});
        g.add_node("both", OpKind::Concat, std::vector<std::string>{"top", "sum"}, {{"axis", 0}});
        g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"both"});
        g.finalize();
        EXPECT_TRUE(narrow_slices(g).narrowed.empty());
    }
    {  // rows of a reshape that are not whole rows of its input
        Graph g("reshape", 1);
        g.add_input("x", DType::F32, Shape{6, 4});
        g.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", 4}});
        g.add_node("wide", OpKind::Reshape, std::vector<std::string>{"fc"},
                   {{"shape", Dims{4, 6}}});
        g.add_node("row", OpKind::Slice, std::vector<std::string>{"wide"}, slice_of(0, 1, 2));
        g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"row"});
        g.finalize();
        EXPECT_TRUE(narrow_slices(g).narrowed.empty());
    }
    {  // a parameter with a value per token: it would have to be cut
        Graph g("per_token", 1);
        g.add_input("x", DType::F32, Shape{2, 6, 8});
        g.add_node("pos", OpKind::Add, std::vector<std::string>{"x"},
                   {{"param_shape", Dims{6, 8}}});
        g.add_node("cls", OpKind::Slice, std::vector<std::string>{"pos"}, slice_of(1, 0, 1));
        g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"cls"});
        g.finalize();
        EXPECT_TRUE(narrow_slices(g).narrowed.empty());
    }
    {  // batch norm: every row enters the statistics
        Graph g("bn", 1);
        g.add_input("x", DType::F32, Shape{4, 3, 5, 5});
        g.add_node("bn", OpKind::BatchNorm, std::vector<std::string>{"x"});
        g.add_node("one", OpKind::Slice, std::vector<std::string>{"bn"}, slice_of(0, 0, 1));
        g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"one"});
        g.finalize();
        EXPECT_TRUE(narrow_slices(g).narrowed.empty());
    }
}

TEST(SliceNarrowing, ReshapesOnRowBoundariesAndSlicesOfSlicesAreFollowed) {
    Graph g("rows", 3);
    g.add_input("x", DType::F32, Shape{6, 4});
    g.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", 4}});
    g.add_node("act", OpKind::Relu, std::vector<std::string>{"fc"});
    g.add_node("pairs", OpKind::Reshape, std::vector<std::string>{"act"}, {{"shape", Dims{3, 8}}});
    g.add_node("mid", OpKind::Slice, std::vector<std::string>{"pairs"}, slice_of(0, 1, 3));
    g.add_node("one", OpKind::Slice, std::vector<std::string>{"mid"}, slice_of(0, 1, 2));
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"one"});
    g.finalize();
    const SliceNarrowing r = narrow_slices(g);
    // Row 2 of [3, 8] is rows 4 and 5 of [6, 4]: fc and relu compute those two rows only.
    EXPECT_EQ(output_shape_of(r.graph, "fc"), Shape({2, 4}));
    EXPECT_EQ(output_shape_of(r.graph, "act"), Shape({2, 4}));
    EXPECT_EQ(output_shape_of(r.graph, "pairs"), Shape({1, 8}));
    ASSERT_EQ(r.graph.num_nodes(), 5);  // one slice on x, fc, act, pairs, loss
    const Node& cut = r.graph.node(0);
    ASSERT_EQ(cut.op, OpKind::Slice);
    EXPECT_EQ(cut.attrs.get_int("axis"), 0);
    EXPECT_EQ(cut.attrs.get_int("start"), 4);
    EXPECT_EQ(cut.attrs.get_int("end"), 6);
    expect_same_step(g, r.graph);
}

// torchvision's attention runs sequence-first: a transpose maps the slice's axis to another one.
TEST(SliceNarrowing, TransposesCarryTheSliceToTheirInputsAxis) {
    Graph g("seq_first", 9);
    g.add_input("x", DType::F32, Shape{2, 6, 8});
    g.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", 8}});
    g.add_node("seq", OpKind::Transpose, std::vector<std::string>{"fc"}, {{"perm", Dims{1, 0, 2}}});
    g.add_node("act", OpKind::Tanh, std::vector<std::string>{"seq"});
    g.add_node("first", OpKind::Slice, std::vector<std::string>{"act"}, slice_of(0, 2, 3));
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"first"});
    g.finalize();
    const SliceNarrowing r = narrow_slices(g);
    EXPECT_EQ(output_shape_of(r.graph, "fc"), Shape({2, 1, 8}));
    EXPECT_EQ(output_shape_of(r.graph, "act"), Shape({1, 2, 8}));
    ASSERT_EQ(r.graph.node(0).op, OpKind::Slice);
    EXPECT_EQ(r.graph.node(0).attrs.get_int("axis"), 1);
    EXPECT_EQ(r.graph.node(0).attrs.get_int("start"), 2);
    expect_same_step(g, r.graph);
}

TEST(SliceNarrowing, EqualSlicesMergeAndWholeOnesGo) {
    Graph g("merge", 5);
    g.add_input("x", DType::F32, Shape{2, 5, 8});
    g.add_node("all", OpKind::Slice, std::vector<std::string>{"x"}, slice_of(-2, 0, 5));
    g.add_node("fc", OpKind::Linear, std::vector<std::string>{"all"}, {{"out_features", 8}});
    g.add_node("act", OpKind::Gelu, std::vector<std::string>{"fc"});
    g.add_node("a", OpKind::Slice, std::vector<std::string>{"act"}, slice_of(1, 0, 2));
    g.add_node("b", OpKind::Slice, std::vector<std::string>{"act"}, slice_of(1, 0, 2));
    g.add_node("sum", OpKind::Add, std::vector<std::string>{"a", "b"});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"sum"});
    g.finalize();
    const SliceNarrowing r = narrow_slices(g);
    EXPECT_FALSE(r.graph.find_node("all").has_value());  // it read x whole
    EXPECT_EQ(output_shape_of(r.graph, "act"), Shape({2, 2, 8}));
    EXPECT_EQ(output_shape_of(r.graph, "fc"), Shape({2, 2, 8}));
    int slices = 0;
    for (const Node& n : r.graph.nodes()) slices += n.op == OpKind::Slice;
    EXPECT_EQ(slices, 1);  // on x, rows 0..1
    expect_same_step(g, r.graph);
}

// The importer narrows by default (OnnxImportOptions::narrow_slices); PyTorch's tiny ViT reads its
// class token after the encoder. Its gradients against PyTorch's are checked with the other
// fixtures (test_onnx.cpp); here the narrowed and the original graph give the same step, and the
// narrowed one keeps fewer activations.
TEST(SliceNarrowing, OnnxImportNarrowsTinyVitsEncoderToItsClassToken) {
    if (!onnx_import_available()) GTEST_SKIP() << "built with -DREMATLAB_ONNX=OFF";
    const fs::path file =
        fs::path(REMATLAB_SOURCE_DIR) / "tests" / "fixtures" / "onnx" / "tiny_vit.onnx";
    OnnxImportOptions keep;
    keep.narrow_slices = false;
    const Graph whole = load_onnx_file(file.string(), keep);
    const Graph cut = load_onnx_file(file.string());
    int narrowed_nodes = 0;
    for (const Node& n : cut.nodes()) narrowed_nodes += n.has_tag(kNarrowedTag);
    for (const Node& n : whole.nodes()) EXPECT_FALSE(n.has_tag(kNarrowedTag)) << n.name;
    EXPECT_GE(narrowed_nodes, 10);
    // Its attention is sequence-first (transposes) and its queries a linear of their own.
    for (const char* n : {"/encoder/q", "/encoder/MatMul", "/encoder/Softmax", "/encoder/fc2"})
        EXPECT_TRUE(cut.node(*cut.find_node(n)).has_tag(kNarrowedTag)) << n;
    EXPECT_LT(cut.activation_bytes(), whole.activation_bytes());
    EXPECT_LT(cut.forward_flops(), whole.forward_flops());
    expect_same_step(whole, cut);
}

}  // namespace
}  // namespace rl
