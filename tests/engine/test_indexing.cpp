// Indexing ops (embedding, slice), integer index inputs and tied parameters: forward values
// against a direct reference, gradients against central finite differences, the kernel contract,
// and the errors a user can cause (an index out of range, a wrong .npy dtype or shape).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/network_json.h"
#include "engine/npy.h"
#include "engine/op_harness.h"
#include "engine/ops/op.h"
#include "engine/schedule.h"
#include "engine/simulator.h"

namespace rl {
namespace {

using testing::check_accumulate;
using testing::check_forward;
using testing::check_repeatable;
using testing::Floats;

struct IndexCase : testing::OpHarness {
    explicit IndexCase(uint32_t seed = 11) : OpHarness(seed, "indexing") {}
};

void check_gradients(IndexCase& c) {
    testing::check_gradients(c, 1e-2, 1e-3, 1e-2);
}

// --- embedding ---------------------------------------------------------------------------------

TEST(OpGradient, EmbeddingSumsRepeatedRowsInLookupOrder) {
    IndexCase c;
    const ValueId ids = c.labels("ids", Shape{3, 4}, 5);
    // Repeats: row 2 three times, row 0 twice; row 4 never (its gradient must be exactly 0).
    c.values.at(ids).i = {2, 0, 2, 1, 3, 2, 0, 1, 3, 1, 1, 0};
    c.op(OpKind::Embedding, {ids}, {{"num_embeddings", int64_t{5}}, {"dim", int64_t{3}}});
    EXPECT_EQ(c.out_shape(), (Shape{3, 4, 3}));
    std::vector<double> want;
    for (int32_t r : c.values.at(ids).i)
        for (int j = 0; j < 3; ++j) want.push_back(c.params[0][static_cast<size_t>(r * 3 + j)]);
    check_forward(c, want, 0);
    check_gradients(c);
    check_repeatable(c);
    const Floats dy = c.random(36);
    const auto g = c.backward(dy);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(g.params[0][static_cast<size_t>(4 * 3 + j)], 0.0f);
    // Row 2's gradient: dY of lookups 0, 2, 5, summed in that order.
    for (int j = 0; j < 3; ++j) {
        const float s = (dy[static_cast<size_t>(0 * 3 + j)] + dy[static_cast<size_t>(2 * 3 + j)]) +
                        dy[static_cast<size_t>(5 * 3 + j)];
        EXPECT_EQ(g.params[0][static_cast<size_t>(2 * 3 + j)], s);
    }
}

TEST(OpGradient, EmbeddingOfConstantPositions) {
    IndexCase c;
    c.op(OpKind::Embedding, {},
         {{"num_embeddings", int64_t{7}},
          {"dim", int64_t{2}},
          {"first", int64_t{2}},
          {"index_shape", std::vector<int64_t>{1, 4}}});
    EXPECT_EQ(c.out_shape(), (Shape{1, 4, 2}));
    std::vector<double> want;
    for (int r = 2; r < 6; ++r)
        for (int j = 0; j < 2; ++j) want.push_back(c.params[0][static_cast<size_t>(r * 2 + j)]);
    check_forward(c, want, 0);
    check_gradients(c);
}

// Any constant indices (Swin's relative position index into its bias table): rows in the given
// order, repeats summed in lookup order, an unread row's gradient exactly 0; the indices take a
// declared workspace (their i32 copy), forward and backward.
TEST(OpGradient, EmbeddingOfConstantIndicesSumsRepeatsInLookupOrder) {
    IndexCase c;
    const std::vector<int64_t> ind = {3, 0, 3, 1, 5, 3, 0, 2};  // row 4 unread, row 3 three times
    c.op(OpKind::Embedding, {},
         {{"num_embeddings", int64_t{6}},
          {"dim", int64_t{3}},
          {"index_shape", std::vector<int64_t>{2, 4}},
          {"indices", ind}});
    EXPECT_EQ(c.out_shape(), (Shape{2, 4, 3}));
    const Node& n = c.n();
    EXPECT_EQ(op_def(OpKind::Embedding).fwd_workspace(c.g, n), 8u * 4u);
    EXPECT_EQ(op_def(OpKind::Embedding).bwd_workspace(c.g, n), 8u * 4u);
    std::vector<double> want;
    for (int64_t r : ind)
        for (int j = 0; j < 3; ++j) want.push_back(c.params[0][static_cast<size_t>(r * 3 + j)]);
    check_forward(c, want, 0);
    check_gradients(c);
    check_repeatable(c);
    const Floats dy = c.random(24);
    const auto g = c.backward(dy);
    for (int j = 0; j < 3; ++j) {
        EXPECT_EQ(g.params[0][static_cast<size_t>(4 * 3 + j)], 0.0f);
        const float s = (dy[static_cast<size_t>(0 * 3 + j)] + dy[static_cast<size_t>(2 * 3 + j)]) +
                        dy[static_cast<size_t>(5 * 3 + j)];
        EXPECT_EQ(g.params[0][static_cast<size_t>(3 * 3 + j)], s);
    }
}

TEST(OpForward, EmbeddingRefusesConstantIndicesOutsideItsTableOrMiscounted) {
    testing::expect_error(
        [](Graph& g) {
            g.add_node("bias", OpKind::Embedding, std::vector<std::string>{},
                       {{"num_embeddings", int64_t{4}},
                        {"dim", int64_t{2}},
                        {"index_shape", std::vector<int64_t>{3}},
                        {"indices", std::vector<int64_t>{0, 4, 1}}});
        },
        {"bias", "index 4 at position 1", "4 rows"});
    testing::expect_error(
        [](Graph& g) {
            g.add_node("bias", OpKind::Embedding, std::vector<std::string>{},
                       {{"num_embeddings", int64_t{4}},
                        {"dim", int64_t{2}},
                        {"index_shape", std::vector<int64_t>{2, 2}},
                        {"indices", std::vector<int64_t>{0, 1, 2}}});
        },
        {"bias", "3 values", "4 lookups"});
}

TEST(OpForward, EmbeddingRefusesIndicesOutsideItsTable) {
    testing::expect_error(
        [](Graph& g) {
            g.add_input("ids", DType::I32, Shape{4}, 9);
            g.add_node("emb", OpKind::Embedding, std::vector<std::string>{"ids"},
                       {{"num_embeddings", int64_t{8}}, {"dim", int64_t{2}}});
        },
        {"emb", "ids", "[0, 9)", "8 rows"});
    testing::expect_error(
        [](Graph& g) {
            g.add_input("x", DType::F32, Shape{4});
            g.add_node("emb", OpKind::Embedding, std::vector<std::string>{"x"},
                       {{"num_embeddings", int64_t{8}}, {"dim", int64_t{2}}});
        },
        {"emb", "f32", "i32"});
    testing::expect_error(
        [](Graph& g) {
            g.add_node("pos", OpKind::Embedding, std::vector<std::string>{},
                       {{"num_embeddings", int64_t{4}},
                        {"dim", int64_t{2}},
                        {"first", int64_t{2}},
                        {"index_shape", std::vector<int64_t>{3}}});
        },
        {"pos", "[2, 5)", "4 rows"});
    // An index corrupted after the checks is still caught by the kernel, not read.
    IndexCase c;
    const ValueId ids = c.labels("ids", Shape{3}, 4);
    c.op(OpKind::Embedding, {ids}, {{"num_embeddings", int64_t{4}}, {"dim", int64_t{2}}});
    c.values.at(ids).i[1] = 4;
    try {
        c.forward();
        FAIL() << "expected rl::Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("index 4"), std::string::npos) << e.what();
    }
}

// --- slice -------------------------------------------------------------------------------------

TEST(OpGradient, SliceOfEachAxis) {
    for (int axis = 0; axis < 3; ++axis) {
        SCOPED_TRACE(axis);
        IndexCase c;
        const Shape s{3, 5, 4};
        const ValueId x = c.input("x", s);
        const int64_t start = 1, end = s[axis] - 1;
        c.op(OpKind::Slice, {x}, {{"axis", int64_t{axis}}, {"start", start}, {"end", end}});
        std::vector<double> want;
        for (int a = 0; a < 3; ++a)
            for (int b = 0; b < 5; ++b)
                for (int d = 0; d < 4; ++d) {
                    const int at[3] = {a, b, d};
                    if (at[axis] >= start && at[axis] < end)
                        want.push_back(c.data(x)[static_cast<size_t>((a * 5 + b) * 4 + d)]);
                }
        check_forward(c, want, 0);
        check_gradients(c);
        check_accumulate(c);
        check_repeatable(c);
    }
}

TEST(OpForward, SliceRefusesAnEmptyOrOutsideRange) {
    for (auto [start, end] : {std::pair<int64_t, int64_t>{2, 2}, {0, 6}, {-1, 3}}) {
        testing::expect_error(
            [&](Graph& g) {
                g.add_input("x", DType::F32, Shape{2, 5});
                g.add_node("cut", OpKind::Slice, std::vector<std::string>{"x"},
                           {{"axis", int64_t{1}}, {"start", start}, {"end", end}});
            },
            {"cut", "0 <= start < end <= 5"});
    }
}

// --- pad ---------------------------------------------------------------------------------------

// Zeros around the input on every axis (ONNX pads: begins, then ends): forward against a direct
// reference, gradients against central differences (the backward is the slice of dY).
TEST(OpGradient, PadAddsZerosOnEveryAxis) {
    const std::vector<std::vector<int64_t>> cases = {
        {0, 0, 1, 1, 0, 0, 1, 1},  // Inception's avg_pool padding before an AveragePool (NCHW)
        {0, 0, 0, 0, 0, 2, 3, 0},  // Swin's F.pad of [B, H, W, C] up to whole windows (NHWC)
        {1, 0, 2, 3, 2, 1, 0, 2},  // every axis, both sides, the last one too
    };
    for (const auto& pads : cases) {
        SCOPED_TRACE(format_dims(Shape(pads)));
        IndexCase c;
        const Shape s{2, 3, 4, 3};
        const ValueId x = c.input("x", s);
        c.op(OpKind::Pad, {x}, {{"pads", pads}});
        Shape out = s;
        for (int a = 0; a < 4; ++a)
            out.dims[static_cast<size_t>(a)] += pads[static_cast<size_t>(a)] + pads[a + 4];
        std::vector<double> want;
        for (int64_t i = 0; i < out.numel(); ++i) {
            int64_t rest = i, src = 0, stride = 1;
            bool inside = true;
            for (int a = 3; a >= 0; --a) {
                const int64_t coord = rest % out[a] - pads[static_cast<size_t>(a)];
                rest /= out[a];
                inside = inside && coord >= 0 && coord < s[a];
                src += coord * stride;
                stride *= s[a];
            }
            want.push_back(inside ? c.data(x)[static_cast<size_t>(src)] : 0.0);
        }
        check_forward(c, want, 0);
        check_gradients(c);
        check_accumulate(c);
        check_repeatable(c);
    }
}

TEST(OpForward, PadRefusesNegativeOrMiscountedPads) {
    testing::expect_error(
        [&](Graph& g) {
            g.add_input("x", DType::F32, Shape{2, 5});
            g.add_node("p", OpKind::Pad, std::vector<std::string>{"x"},
                       {{"pads", std::vector<int64_t>{0, -1, 0, 0}}});
        },
        {"p", "negative"});
    testing::expect_error(
        [&](Graph& g) {
            g.add_input("x", DType::F32, Shape{2, 5});
            g.add_node("p", OpKind::Pad, std::vector<std::string>{"x"},
                       {{"pads", std::vector<int64_t>{0, 1}}});
        },
        {"p", "2 per axis"});
    testing::expect_error(
        [&](Graph& g) {
            g.add_input("x", DType::F32, Shape{2, 5});
            g.add_node("p", OpKind::Pad, std::vector<std::string>{"x"},
                       {{"pads", std::vector<int64_t>{0, int64_t{1} << 62, 0, int64_t{1} << 62}}});
        },
        {"p", "more than 2^40"});
}

// --- causal mask -------------------------------------------------------------------------------

TEST(OpGradient, CausalMaskFillsAboveTheDiagonalAndPassesNoGradientThere) {
    IndexCase c;
    const ValueId x = c.input("x", Shape{2, 3, 4, 4});
    c.op(OpKind::CausalMask, {x});
    const Floats y = c.forward();
    for (size_t k = 0; k < y.size(); ++k) {
        const size_t col = k % 4, row = (k / 4) % 4;
        if (col > row)
            EXPECT_TRUE(std::isinf(y[k]) && y[k] < 0) << k;
        else
            EXPECT_EQ(y[k], c.data(x)[k]) << k;
    }
    const Floats dy = c.random(y.size());
    const auto g = c.backward(dy);
    const Floats& dx = g.inputs.at(x);
    for (size_t k = 0; k < dx.size(); ++k) EXPECT_EQ(dx[k], (k % 4) > ((k / 4) % 4) ? 0 : dy[k]);
    check_accumulate(c);
    check_repeatable(c);
}

// --- tied parameters ---------------------------------------------------------------------------

// tokens -> embedding (table [7, 4]) -> tanh -> linear head [7, 4] -> sum_squares. With `tied`,
// the head reads the embedding's table; without, it has its own copy of the same values.
Graph tied_or_not(bool tied, const std::shared_ptr<const std::vector<float>>& table) {
    Graph g("tied", 5);
    g.add_input("tokens", DType::I32, Shape{2, 5}, 7);
    g.add_node("tok", OpKind::Embedding, std::vector<std::string>{"tokens"},
               {{"num_embeddings", int64_t{7}}, {"dim", int64_t{4}}}, {},
               {ParamSource{"tok.weight", table}});
    g.add_node("act", OpKind::Tanh, std::vector<std::string>{"tok"});
    g.add_node(
        "head", OpKind::Linear, std::vector<std::string>{"act"},
        {{"out_features", int64_t{7}}, {"bias", int64_t{0}}}, {},
        {tied ? ParamSource{"tok.weight", nullptr, true} : ParamSource{"head.weight", table}});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"head"});
    g.finalize();
    return g;
}

Schedule keep_all(const Graph& g) {
    ScheduleBuilder b(g);
    for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);
    for (NodeId n = g.num_nodes() - 1; n >= 0; --n)
        if (g.needs_backward(n)) b.backward(n);
    return b.finish();
}

std::shared_ptr<const std::vector<float>> table_values() {
    auto v = std::make_shared<std::vector<float>>();
    for (int k = 0; k < 28; ++k) v->push_back(std::sin(0.7f * static_cast<float>(k)));
    return v;
}

TEST(TiedParameters, OneGradientTheSumOfBothUses) {
    const auto table = table_values();
    const Graph tied = tied_or_not(true, table), untied = tied_or_not(false, table);
    ASSERT_EQ(tied.num_params(), 1);
    ASSERT_EQ(untied.num_params(), 2);
    const Param& p = tied.param(0);
    EXPECT_EQ(p.readers, (std::vector<NodeId>{0, 2}));
    EXPECT_EQ(p.owner, 2);  // the last reader creates the gradient
    auto backend = make_cpu_backend(1);
    const Schedule st = keep_all(tied), su = keep_all(untied);
    const Execution rt = execute(tied, st, *backend, RunData::seeded(tied));
    const Execution ru = execute(untied, su, *backend, RunData::seeded(untied));
    EXPECT_EQ(rt.loss, ru.loss);
    ASSERT_EQ(rt.param_grads.size(), 1u);
    // The head's share (created first, backwards run in decreasing node order) plus the
    // embedding's, bit for bit what adding the two untied gradients gives.
    for (size_t k = 0; k < 28; ++k) {
        const float want = ru.param_grads[1][k] + ru.param_grads[0][k];
        EXPECT_EQ(rt.param_grads[0][k], want) << k;
    }
    // One gradient buffer, not two, plus the embedding's share as backward scratch: predicted
    // == measured.
    const Simulation sim = simulate(tied, st, CostModel{});
    EXPECT_EQ(sim.peak_bytes, rt.peak_bytes);
    EXPECT_EQ(sim.peak_by_category[static_cast<size_t>(Category::ParamGrads)], 28u * 4);
    const LivenessTables t(tied);
    EXPECT_EQ(t.bwd_workspace[0], 28u * 4);
    EXPECT_EQ(t.bwd_workspace[2], 0u);
}

TEST(TiedParameters, ShapeMismatchAndUnknownNamesAreRefused) {
    testing::expect_error(
        [](Graph& g) {
            g.add_input("tokens", DType::I32, Shape{3}, 6);
            g.add_node("tok", OpKind::Embedding, std::vector<std::string>{"tokens"},
                       {{"num_embeddings", int64_t{6}}, {"dim", int64_t{4}}});
            g.add_node("head", OpKind::Linear, std::vector<std::string>{"tok"},
                       {{"out_features", int64_t{5}}, {"bias", int64_t{0}}}, {},
                       {ParamSource{"tok.weight", nullptr, true}});
        },
        {"head", "tok.weight", "f32[6,4]", "f32[5,4]", "same shape"});
    testing::expect_error(
        [](Graph& g) {
            g.add_input("x", DType::F32, Shape{3, 4});
            g.add_node("head", OpKind::Linear, std::vector<std::string>{"x"},
                       {{"out_features", int64_t{5}}}, {}, {ParamSource{"nope", nullptr, true}});
        },
        {"head", "'nope'", "does not exist"});
}

TEST(TiedParameters, NetworkFilesKeepTheTie) {
    const Graph g = load_network_file(REMATLAB_SOURCE_DIR "/resources/networks/tied-lm.json");
    const auto head = g.find_node("head");
    ASSERT_TRUE(head);
    const Param& w = g.param(g.node(*head).params[0]);
    EXPECT_EQ(w.name, "tok.weight");
    EXPECT_EQ(w.readers.size(), 2u);
    const Graph again = network_from_json(network_to_json(g), "<round trip>");
    EXPECT_EQ(again.num_params(), g.num_params());
    EXPECT_EQ(again.param(again.node(*again.find_node("head")).params[0]).name, "tok.weight");
}

// --- index inputs ------------------------------------------------------------------------------

struct TempDir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() /
        ("rl-indexing-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    TempDir() { std::filesystem::create_directories(path); }
    ~TempDir() { std::filesystem::remove_all(path); }
};

// A .npy file with a given descr and raw data.
void write_raw_npy(const std::filesystem::path& p, const std::string& descr, const Shape& shape,
                   const void* data, size_t bytes) {
    std::string dims;
    for (int64_t d : shape.dims) dims += std::to_string(d) + ",";
    std::string header =
        "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    std::ofstream out(p, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    const uint16_t len = static_cast<uint16_t>(header.size());
    out.put(static_cast<char>(len & 0xff));
    out.put(static_cast<char>(len >> 8));
    out << header;
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

TEST(IndexInputs, Int64AndInt32NpyFilesGiveTheSameTokens) {
    TempDir dir;
    const std::vector<int64_t> ids64 = {3, 0, 15, 7, 7, 2, 9, 1, 0, 14, 5, 6};
    std::vector<int32_t> ids32(ids64.begin(), ids64.end());
    write_raw_npy(dir.path / "a.npy", "<i8", Shape{2, 6}, ids64.data(), 96);
    write_raw_npy(dir.path / "b.npy", "<i4", Shape{2, 6}, ids32.data(), 48);
    Shape sa, sb;
    EXPECT_EQ(read_npy_indices((dir.path / "a.npy").string(), sa), ids64);
    EXPECT_EQ(read_npy_indices((dir.path / "b.npy").string(), sb), ids64);
    EXPECT_EQ(sa, (Shape{2, 6}));
    EXPECT_EQ(sb, (Shape{2, 6}));

    const Graph g = load_network_file(REMATLAB_SOURCE_DIR "/resources/networks/tied-lm.json");
    GivenInput in{"tokens", sa, {}, ids64, true};
    const RunData d = RunData::seeded(g, {in});
    const auto* tokens = reinterpret_cast<const int32_t*>(d.inputs[0].data());
    EXPECT_EQ(std::vector<int32_t>(tokens, tokens + 12), ids32);
}

TEST(IndexInputs, WrongDtypeShapeOrRangeIsAClearError) {
    TempDir dir;
    const std::vector<float> f(12, 1.0f);
    write_raw_npy(dir.path / "f.npy", "<f4", Shape{2, 6}, f.data(), 48);
    Shape s;
    try {
        read_npy_indices((dir.path / "f.npy").string(), s);
        FAIL() << "expected rl::Error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("f.npy"), std::string::npos) << msg;
        EXPECT_NE(msg.find("'<f4'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("int64"), std::string::npos) << msg;
    }
    const Graph g = load_network_file(REMATLAB_SOURCE_DIR "/resources/networks/tied-lm.json");
    auto expect = [&](const GivenInput& in, std::vector<std::string> parts) {
        try {
            (void)RunData::seeded(g, {in});
            ADD_FAILURE() << "expected rl::Error";
        } catch (const Error& e) {
            const std::string msg = e.what();
            for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
        }
    };
    std::vector<int64_t> ids(12, 1);
    expect(GivenInput{"tokens", Shape{3, 4}, {}, ids, true}, {"tokens", "[3,4]", "i32[2,6]"});
    ids[7] = 16;
    expect(GivenInput{"tokens", Shape{2, 6}, {}, ids, true},
           {"tokens", "index 16", "[1,1]", "[0, 16)"});
    ids[7] = -1;
    expect(GivenInput{"tokens", Shape{2, 6}, {}, ids, true}, {"tokens", "index -1"});
    expect(GivenInput{"tokens", Shape{2, 6}, std::vector<float>(12, 0.0f)},
           {"tokens", "i32[2,6]", "integer indices"});
}

}  // namespace
}  // namespace rl
