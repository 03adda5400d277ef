// ONNX import: the fixtures exported by PyTorch (scripts/make-onnx-fixtures) load with their
// weights, their gradients match PyTorch's float64 reference, every strategy keeps the invariants
// on them; and bad files are refused with a message naming what is wrong.
//
// Malformed models are written here with a small protobuf encoder (the field numbers of
// onnx/onnx.proto), so the test needs no ONNX headers and can write what no exporter would.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/network_json.h"
#include "engine/networks/onnx_import.h"
#include "engine/networks/presets.h"
#include "engine/npy.h"
#include "engine/simulator.h"
#include "engine/test_util.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

using testing::read_bytes;

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(REMATLAB_SOURCE_DIR) / "tests" / "fixtures" / "onnx";

// --- a protobuf writer -----------------------------------------------------------------------

struct Pb {
    std::string b;

    Pb& varint(uint64_t v) {
        while (v >= 0x80) {
            b += static_cast<char>((v & 0x7f) | 0x80);
            v >>= 7;
        }
        b += static_cast<char>(v);
        return *this;
    }
    Pb& key(int field, int wire) { return varint(static_cast<uint64_t>(field) << 3 | wire); }
    Pb& i(int field, int64_t v) { return key(field, 0).varint(static_cast<uint64_t>(v)); }
    Pb& bytes(int field, const std::string& s) {
        key(field, 2).varint(s.size());
        b += s;
        return *this;
    }
    Pb& msg(int field, const Pb& m) { return bytes(field, m.b); }
    Pb& f32(int field, float v) {
        key(field, 5);
        char c[4];
        std::memcpy(c, &v, 4);
        b.append(c, 4);
        return *this;
    }
};

// onnx.proto field numbers.
namespace model {
constexpr int kIrVersion = 1, kGraph = 7, kOpset = 8;
}
namespace graph {
constexpr int kNode = 1, kName = 2, kInitializer = 5, kInput = 11, kOutput = 12;
}
namespace node {
constexpr int kInput = 1, kOutput = 2, kName = 3, kOpType = 4, kAttribute = 5;
}
namespace attr {
constexpr int kName = 1, kF = 2, kI = 3, kInts = 8, kType = 20;
constexpr int kFloat = 1, kInt = 2, kIntsType = 7;
}  // namespace attr
namespace tensor {
constexpr int kDims = 1, kDataType = 2, kFloatData = 4, kName = 8, kRawData = 9;
constexpr int kFloat = 1;
}  // namespace tensor

Pb value_info(const std::string& name, const std::vector<int64_t>& dims,
              const std::string& symbolic_dim = "") {
    Pb shape;
    for (int64_t d : dims) shape.msg(1, Pb().i(1, d));
    if (!symbolic_dim.empty()) shape.msg(1, Pb().bytes(2, symbolic_dim));
    Pb tensor_type;
    tensor_type.i(1, tensor::kFloat).msg(2, shape);
    Pb type;
    type.msg(1, tensor_type);
    return Pb().bytes(1, name).msg(2, type);
}

Pb make_node(const std::string& op, const std::vector<std::string>& in,
             const std::vector<std::string>& out, const std::string& name = "",
             const std::vector<Pb>& attrs = {}) {
    Pb n;
    for (const auto& s : in) n.bytes(node::kInput, s);
    for (const auto& s : out) n.bytes(node::kOutput, s);
    n.bytes(node::kName, name.empty() ? op + "_" + out.front() : name);
    n.bytes(node::kOpType, op);
    for (const auto& a : attrs) n.msg(node::kAttribute, a);
    return n;
}

Pb int_attr(const std::string& name, int64_t v) {
    return Pb().bytes(attr::kName, name).i(attr::kI, v).i(attr::kType, attr::kInt);
}
Pb float_attr(const std::string& name, float v) {
    return Pb().bytes(attr::kName, name).f32(attr::kF, v).i(attr::kType, attr::kFloat);
}
Pb ints_attr(const std::string& name, const std::vector<int64_t>& v) {
    Pb a;
    a.bytes(attr::kName, name);
    for (int64_t x : v) a.i(attr::kInts, x);
    return a.i(attr::kType, attr::kIntsType);
}

Pb float_tensor(const std::string& name, const std::vector<int64_t>& dims, size_t count) {
    Pb t;
    for (int64_t d : dims) t.i(tensor::kDims, d);
    t.i(tensor::kDataType, tensor::kFloat).bytes(tensor::kName, name);
    std::string raw(count * 4, '\0');
    for (size_t k = 0; k < count; ++k) {
        const float v = 0.01f * static_cast<float>(k % 17);
        std::memcpy(raw.data() + 4 * k, &v, 4);
    }
    return t.bytes(tensor::kRawData, raw);
}

// An INT64 initializer (starts, ends, axes of a Slice; indices of a Gather).
Pb int64_tensor(const std::string& name, const std::vector<int64_t>& dims,
                const std::vector<int64_t>& values) {
    Pb t;
    for (int64_t d : dims) t.i(tensor::kDims, d);
    t.i(tensor::kDataType, 7).bytes(tensor::kName, name);
    std::string raw(values.size() * 8, '\0');
    std::memcpy(raw.data(), values.data(), raw.size());
    return t.bytes(tensor::kRawData, raw);
}

struct ModelBuilder {
    Pb g;
    ModelBuilder() { g.bytes(graph::kName, "test"); }
    ModelBuilder& input(const std::string& name, const std::vector<int64_t>& dims,
                        const std::string& symbolic = "") {
        g.msg(graph::kInput, value_info(name, dims, symbolic));
        return *this;
    }
    ModelBuilder& output(const std::string& name) {
        g.msg(graph::kOutput, value_info(name, {}));
        return *this;
    }
    ModelBuilder& add(const Pb& node) {
        g.msg(graph::kNode, node);
        return *this;
    }
    ModelBuilder& init(const Pb& t) {
        g.msg(graph::kInitializer, t);
        return *this;
    }
    // x [4, 8] → Gemm(W [3, 8], b [3]) → y: the smallest valid model.
    ModelBuilder& small_linear(const std::string& w = "fc.weight", const std::string& b = "fc.bias",
                               const std::string& out = "y") {
        init(float_tensor(w, {3, 8}, 24));
        init(float_tensor(b, {3}, 3));
        return add(make_node("Gemm", {"x", w, b}, {out}, "/fc/Gemm", {int_attr("transB", 1)}));
    }
    std::string bytes() const {
        Pb m;
        m.i(model::kIrVersion, 8)
            .msg(model::kOpset, Pb().bytes(1, "").i(2, 13))
            .msg(model::kGraph, g);
        return m.b;
    }
};

std::string import_error(const std::string& bytes, const OnnxImportOptions& opt = {}) {
    try {
        network_from_onnx(bytes, "m.onnx", opt);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

#define EXPECT_REFUSED(bytes, ...)                         \
    do {                                                   \
        const std::string msg_ = import_error(bytes);      \
        for (const char* part_ : {__VA_ARGS__})            \
            EXPECT_NE(msg_.find(part_), std::string::npos) \
                << "'" << part_ << "' not in: " << msg_;   \
    } while (0)

// Every ONNX test skips, with the reason, in a build configured with -DREMATLAB_ONNX=OFF.
#define REQUIRE_ONNX()                                                                  \
    do {                                                                                \
        if (!onnx_import_available()) GTEST_SKIP() << "built with -DREMATLAB_ONNX=OFF"; \
    } while (0)

// --- the fixtures ------------------------------------------------------------------------------

struct Fixture {
    std::string name;
    Graph g;
    GivenInput input;                // the first input (x)
    std::vector<GivenInput> inputs;  // all of them
};

// NAME.input.npy for a model with one input x; NAME.input.<input>.npy each for several.
Fixture load_fixture(const std::string& name) {
    Fixture f{name, load_network((kFixtures / (name + ".onnx")).string()), {}, {}};
    for (ValueId v : f.g.inputs()) {
        GivenInput in;
        in.name = f.g.value(v).name;
        const fs::path one = kFixtures / (name + ".input.npy");
        const std::string path =
            (f.g.inputs().size() == 1 ? one : kFixtures / (name + ".input." + in.name + ".npy"))
                .string();
        // Token ids (int64) for a language model's integer input, float32 otherwise; an integer
        // attention mask is a float input here, its file int64 as PyTorch took it.
        in.is_indices = f.g.value(v).dtype == DType::I32;
        if (in.is_indices) {
            in.indices = read_npy_indices(path, in.shape);
        } else {
            try {
                in.values = read_npy_f32(path, in.shape);
            } catch (const Error&) {
                for (int64_t k : read_npy_indices(path, in.shape))
                    in.values.push_back(static_cast<float>(k));
            }
        }
        f.inputs.push_back(in);
    }
    f.input = f.inputs.front();
    return f;
}

class OnnxFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxFixture, GradientsMatchPyTorchFloat64Reference) {
    REQUIRE_ONNX();
    const Fixture f = load_fixture(GetParam());
    const RunData data = RunData::seeded(f.g, f.inputs);
    auto backend = make_cpu_backend(1);
    const Plan none = plan_with(f.g, CostModel{}, Spec{"none", {}});
    const Execution run = execute(f.g, none.schedule, *backend, data);

    double ref_loss = 0;
    std::ifstream(kFixtures / (GetParam() + ".loss.txt")) >> ref_loss;
    EXPECT_NEAR(run.loss, ref_loss, 1e-5 * std::fabs(ref_loss));

    const fs::path grads = kFixtures / (GetParam() + ".grads");
    std::set<std::string> expected, imported;
    for (const auto& e : fs::directory_iterator(grads)) expected.insert(e.path().stem().string());
    // PyTorch buffers read as tensors: ONNX does not tell them from parameters, so they are
    // imported as parameters (onnx_import.cpp, materialize) and have no PyTorch gradient.
    const std::set<std::string> buffers = GetParam() == "swin_v2_block"
                                              ? std::set<std::string>{"attn.relative_coords_table"}
                                              : std::set<std::string>{};
    for (ParamId p = 0; p < f.g.num_params(); ++p) {
        const Param& par = f.g.param(p);
        imported.insert(par.name);
        if (buffers.count(par.name)) continue;
        EXPECT_EQ(par.init, ParamInit::Given) << par.name;
        Shape ref_shape;
        const auto ref = read_npy_f32((grads / (par.name + ".npy")).string(), ref_shape);
        // Compared in the initializer's own layout (what --dump-grads writes).
        ASSERT_EQ(ref_shape, stored_shape(par)) << par.name;
        const auto got = to_stored_layout(par, run.param_grads[static_cast<size_t>(p)].data());
        double scale = 0, worst = 0;
        for (size_t k = 0; k < ref.size(); ++k) {
            scale = std::max(scale, static_cast<double>(std::fabs(ref[k])));
            worst = std::max(worst, static_cast<double>(std::fabs(ref[k] - got[k])));
        }
        // float32 arithmetic against a float64 reference: a few ulps of the tensor's scale. A
        // gradient that vanishes in exact arithmetic (a bias before a batchnorm: scale ~1e-15)
        // is float32 cancellation noise, sized by the O(1) gradients it sums rather than by its
        // own scale, and moved by the summation order of the GEMM library (engine/gemm.h):
        // 2.6e-6 with OpenBLAS in the sanitizer build. It gets 1e-5.
        const double bound = scale < 1e-10 ? 1e-5 : 2e-6 * std::max(scale, 1.0);
        EXPECT_LE(worst, bound) << par.name << " (scale " << scale << ")";
    }
    // Parameters keep their PyTorch (initializer) names, and every one was imported.
    expected.insert(buffers.begin(), buffers.end());
    EXPECT_EQ(imported, expected);
}

TEST_P(OnnxFixture, EveryStrategyKeepsPeakAndGradientInvariants) {
    REQUIRE_ONNX();
    const Fixture f = load_fixture(GetParam());
    const RunData data = RunData::seeded(f.g, f.inputs);
    auto backend = make_cpu_backend(1);
    const CostModel costs = CostModel::analytic(f.g, DeviceRates{});
    const Plan none = plan_with(f.g, costs, Spec{"none", {}});
    const auto reference = execute(f.g, none.schedule, *backend, data).param_grads;
    for (const Strategy* s : strategies()) {
        SCOPED_TRACE(std::string(s->name()));
        const Plan plan = plan_with(f.g, costs, Spec{std::string(s->name()), {}});
        ASSERT_NE(plan.status, PlanStatus::Infeasible) << plan.message;
        const Simulation sim = simulate(f.g, plan.schedule, costs);
        const Execution run = execute(f.g, plan.schedule, *backend, data);
        EXPECT_EQ(sim.peak_bytes, run.peak_bytes);
        for (size_t p = 0; p < reference.size(); ++p)
            EXPECT_EQ(0, std::memcmp(reference[p].data(), run.param_grads[p].data(),
                                     reference[p].size() * sizeof(float)))
                << f.g.param(static_cast<ParamId>(p)).name;
    }
}

INSTANTIATE_TEST_SUITE_P(
    PyTorchExports, OnnxFixture,
    ::testing::Values("mlp", "cnn", "transformer",
                      // broadcasting binary ops, activations, reduce_mean
                      "mobilenetv3_block", "mbconv_se", "convnext_block", "elementwise",
                      // indexing
                      "tiny_gpt", "shufflenet_unit", "shifted_windows", "tiny_vit",
                      // several inputs: token ids, segments, a mask
                      "tiny_bert",
                      // pad, einsum, a relative position bias table
                      "window_bias", "partition_attention", "swin_block", "patch_merging",
                      // ONNX initializers in layouts other than ours
                      "layouts",
                      // cosine attention, a logit scale, a continuous position bias: values
                      // computed from parameters and constants alone
                      "swin_v2_block"));

// BERT as people write it: token ids and segments index embeddings; the int64 attention mask
// is cast to float and becomes (1 - mask) * -10000, added to the scores.
TEST(OnnxImport, TinyBertMaskInputIsReadAsFloatAndMasks) {
    REQUIRE_ONNX();
    const Fixture f = load_fixture("tiny_bert");
    ASSERT_EQ(f.inputs.size(), 3u);
    const Value& ids = f.g.value(*f.g.find_value("ids"));
    const Value& segments = f.g.value(*f.g.find_value("segments"));
    const Value& mask = f.g.value(*f.g.find_value("mask"));
    EXPECT_EQ(ids.dtype, DType::I32);
    EXPECT_EQ(ids.label_classes, 20);
    EXPECT_EQ(segments.dtype, DType::I32);
    EXPECT_EQ(segments.label_classes, 2);
    EXPECT_EQ(mask.dtype, DType::F32);
    EXPECT_EQ(mask.shape, Shape({2, 6}));

    auto backend = make_cpu_backend(1);
    const Plan none = plan_with(f.g, CostModel{}, Spec{"none", {}});
    auto loss_with_mask = [&](const std::vector<float>& m) {
        std::vector<GivenInput> in = f.inputs;
        in[2].values = m;
        return execute(f.g, none.schedule, *backend, RunData::seeded(f.g, in)).loss;
    };
    const double given = loss_with_mask(f.inputs[2].values);
    double reference = 0;
    std::ifstream(kFixtures / "tiny_bert.loss.txt") >> reference;
    EXPECT_NEAR(given, reference, 1e-5 * reference);
    // The mask is read: attending everywhere gives another loss.
    EXPECT_GT(std::fabs(loss_with_mask(std::vector<float>(12, 1.0f)) - given), 1e-3 * reference);
    // A sequence with every position masked: PyTorch's finite -10000 form makes each of its
    // softmax rows uniform, never NaN.
    std::vector<float> none_attend = f.inputs[2].values;
    std::fill(none_attend.begin() + 6, none_attend.end(), 0.0f);
    EXPECT_TRUE(std::isfinite(loss_with_mask(none_attend)));
}

// Swin's, MaxViT's and Inception's pieces: both Pads become pad nodes, the bias table read by a
// constant index that does not count up is an embedding holding those indices, and the two
// Einsums are batched matmuls (the second without transposing B).
TEST(OnnxImport, WindowBiasPadsEinsumsAndAConstantIndexTable) {
    REQUIRE_ONNX();
    const Fixture f = load_fixture("window_bias");
    int pads = 0, tables = 0, matmuls = 0, transposed = 0;
    for (const Node& n : f.g.nodes()) {
        pads += n.op == OpKind::Pad;
        if (n.op == OpKind::Embedding && n.attrs.has("indices")) {
            ++tables;
            EXPECT_EQ(n.attrs.get_ints("indices").size(), 81u);  // 9 × 9 token pairs
            EXPECT_EQ(f.g.param(n.params[0]).name, "table");
        }
        if (n.op == OpKind::MatMul) {
            ++matmuls;
            transposed += n.attrs.get_int("transpose_b", 0) != 0;
        }
    }
    EXPECT_EQ(pads, 2);
    EXPECT_EQ(tables, 1);
    EXPECT_EQ(matmuls, 2);
    EXPECT_EQ(transposed, 1);
}

// GPT-2 as nanoGPT writes it: int64 token ids, embeddings, a causal tril mask, a head tied to
// the token embedding.
TEST(OnnxImport, TinyGptTokenIdsTiedHeadAndCausalMask) {
    REQUIRE_ONNX();
    const Fixture f = load_fixture("tiny_gpt");
    const Value& x = f.g.value(*f.g.find_value("x"));
    EXPECT_EQ(x.dtype, DType::I32);
    EXPECT_EQ(x.label_classes, 24);  // the rows of wte, the table it indexes
    int embeddings = 0, masks = 0, slices = 0;
    for (const Node& n : f.g.nodes()) {
        embeddings += n.op == OpKind::Embedding;
        masks += n.op == OpKind::CausalMask;
        slices += n.op == OpKind::Slice;
    }
    EXPECT_EQ(embeddings, 2);      // wte(idx), wpe(arange(T))
    EXPECT_EQ(masks, 2);           // one per block
    EXPECT_GE(slices, 2 * 3 + 2);  // q, k, v of each block; h[:, :-1] and h[:, 0:1]
    ParamId wte = kNoId;
    for (ParamId p = 0; p < f.g.num_params(); ++p)
        if (f.g.param(p).name == "wte.weight") wte = p;
    ASSERT_NE(wte, kNoId);
    // Read by the embedding and by both uses of the head: one parameter, three readers.
    EXPECT_EQ(f.g.param(wte).readers.size(), 3u);
    // The network format keeps the tie (under the name a file gives the parameter).
    const Graph again = network_from_json(network_to_json(f.g), "<tiny_gpt.json>");
    EXPECT_EQ(again.num_params(), f.g.num_params());
    // A token id outside the vocabulary is refused before the run, naming the input.
    GivenInput bad = f.input;
    bad.indices[3] = 24;
    try {
        (void)RunData::seeded(f.g, {bad});
        ADD_FAILURE() << "expected rl::Error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("index 24"), std::string::npos) << msg;
        EXPECT_NE(msg.find("[0, 24)"), std::string::npos) << msg;
    }
}

TEST(OnnxRefusals, MasksThatEmptyASoftmaxRowOrAreNotCausal) {
    REQUIRE_ONNX();
    EXPECT_REFUSED(read_bytes(kFixtures / "bad_mask_empty_row.onnx"), "Where", "every column",
                   "row 2", "all -inf");
    EXPECT_REFUSED(read_bytes(kFixtures / "bad_mask_not_causal.onnx"), "Where", "not causal");
}

TEST(OnnxRefusals, IntegerInputsOnlyAsEmbeddingIndices) {
    REQUIRE_ONNX();
    // An INT64 input that no Gather reads as embedding indices.
    ModelBuilder m;
    Pb tensor_type;
    tensor_type.i(1, 7).msg(2, Pb().msg(1, Pb().i(1, 4)).msg(1, Pb().i(1, 8)));  // INT64 [4, 8]
    m.g.msg(graph::kInput, Pb().bytes(1, "x").msg(2, Pb().msg(1, tensor_type)));
    m.small_linear().output("y");
    EXPECT_REFUSED(m.bytes(), "input 0 'x'", "holds integers", "embedding");
}

// Weights that `linear` holds as [out, in] but the file stores otherwise keep the file's layout on
// the way out: a MatMul weight [in, out], a Gemm weight with transB=0, a bias [1, out]. Weights
// already [out, in] (Gemm transB=1, MatMul by Transpose(W)) need nothing.
TEST(OnnxImport, ParametersRememberTheirInitializersLayout) {
    REQUIRE_ONNX();
    const Graph g = load_network((kFixtures / "layouts.onnx").string());
    struct Expect {
        const char* name;
        Shape ours, file;
        bool transposed;
    };
    const Expect expect[] = {
        {"mix.w_in_out", {12, 16}, {16, 12}, true},  {"mix.b_row", {12}, {1, 12}, false},
        {"mix.gemm_w", {7, 10}, {10, 7}, true},      {"mix.gemm_b", {7}, {7}, false},
        {"lin3d.weight", {10, 12}, {10, 12}, false}, {"head.weight", {5, 7}, {5, 7}, false}};
    for (const Expect& e : expect) {
        SCOPED_TRACE(e.name);
        const Param* par = nullptr;
        for (ParamId p = 0; p < g.num_params(); ++p)
            if (g.param(p).name == e.name) par = &g.param(p);
        ASSERT_NE(par, nullptr);
        EXPECT_EQ(par->shape, e.ours);
        EXPECT_EQ(stored_shape(*par), e.file);
        EXPECT_EQ(par->stored && par->stored->transposed, e.transposed);
        // The values read back in the file's order are the initializer's, element for element.
        const std::vector<float> v = to_stored_layout(*par, par->values->data());
        if (e.transposed)
            for (int64_t r = 0; r < e.ours[0]; ++r)
                for (int64_t c = 0; c < e.ours[1]; ++c)
                    ASSERT_EQ(v[static_cast<size_t>(c * e.ours[0] + r)],
                              (*par->values)[static_cast<size_t>(r * e.ours[1] + c)]);
        else
            EXPECT_EQ(v, *par->values);
    }
}

TEST(OnnxImport, FusesPyTorchPatternsIntoOurOps) {
    REQUIRE_ONNX();
    const Graph t = load_network((kFixtures / "transformer.onnx").string());
    int gelu = 0, layernorm = 0, linear = 0, matmul = 0;
    for (const Node& n : t.nodes()) {
        gelu += n.op == OpKind::Gelu;
        layernorm += n.op == OpKind::LayerNorm;
        linear += n.op == OpKind::Linear;
        matmul += n.op == OpKind::MatMul;
    }
    EXPECT_EQ(gelu, 1);
    EXPECT_EQ(layernorm, 2);
    EXPECT_EQ(linear, 6);  // q, k, v, proj, fc1, fc2: MatMul + Add(bias) each
    EXPECT_EQ(matmul, 2);  // the scores (with 1/√d as alpha) and the weighted values
    EXPECT_EQ(t.node(t.loss_node()).op, OpKind::SumSquares);

    const Graph c = load_network((kFixtures / "cnn.onnx").string());
    int bn = 0, conv = 0;
    for (const Node& n : c.nodes()) {
        bn += n.op == OpKind::BatchNorm;
        conv += n.op == OpKind::Conv2d;
    }
    EXPECT_EQ(bn, 2);
    EXPECT_EQ(conv, 3);
}

// How many nodes of each kind a fixture imports as.
std::map<OpKind, int> op_counts(const std::string& fixture) {
    const Graph g = load_network((kFixtures / (fixture + ".onnx")).string());
    std::map<OpKind, int> n;
    for (const Node& node : g.nodes()) ++n[node.op];
    return n;
}

// The elementwise fixtures keep their structure: PyTorch's x·hardsigmoid(x) (hardswish below
// opset 14) and its 9-node tanh-GELU fuse into one op each; squeeze-excitation, SiLU and layer
// scale are broadcasting Muls; x.mean over axes is reduce_mean.
TEST(OnnxImport, ElementwiseFormsMapOntoOurOps) {
    REQUIRE_ONNX();
    auto m = op_counts("mobilenetv3_block");
    EXPECT_EQ(m[OpKind::HardSwish], 2);
    EXPECT_EQ(m[OpKind::HardSigmoid], 1);  // the squeeze-excitation scale
    EXPECT_EQ(m[OpKind::Mul], 1);          // x [2,16,6,6] · scale [2,16,1,1]
    EXPECT_EQ(m[OpKind::ReduceMean], 1);
    auto e = op_counts("mbconv_se");
    EXPECT_EQ(e[OpKind::Sigmoid], 4);  // three SiLUs and the excitation
    EXPECT_EQ(e[OpKind::Mul], 4);
    auto c = op_counts("convnext_block");
    EXPECT_EQ(c[OpKind::LayerNorm], 1);
    EXPECT_EQ(c[OpKind::Linear], 2);
    EXPECT_EQ(c[OpKind::Transpose], 2);
    EXPECT_EQ(c[OpKind::Mul], 1);  // layer scale [8,1,1] · y [2,8,6,6], a parameter
    auto f = op_counts("elementwise");
    EXPECT_EQ(f[OpKind::GeluTanh], 1);
    EXPECT_EQ(f[OpKind::Clip], 2);
    EXPECT_EQ(f[OpKind::HardSwish], 1);
    EXPECT_EQ(f[OpKind::ReduceMean], 2);
    EXPECT_EQ(f[OpKind::Gelu], 0);
}

TEST(OnnxImport, CrossEntropyLossOnRequest) {
    REQUIRE_ONNX();
    OnnxImportOptions opt;
    opt.loss = ImportLoss::CrossEntropy;
    const Graph g = load_onnx_file((kFixtures / "mlp.onnx").string(), opt);
    EXPECT_EQ(g.node(g.loss_node()).op, OpKind::CrossEntropy);
    ASSERT_EQ(g.inputs().size(), 2u);
    EXPECT_EQ(g.value(g.inputs()[1]).label_classes, 10);
}

TEST(OnnxImport, SmallHandWrittenModelLoads) {
    REQUIRE_ONNX();
    const Graph g =
        network_from_onnx(ModelBuilder().input("x", {4, 8}).small_linear().output("y").bytes());
    ASSERT_EQ(g.num_params(), 2);
    EXPECT_EQ(g.param(0).name, "fc.weight");
    EXPECT_EQ(g.param(1).name, "fc.bias");
    EXPECT_EQ(g.value(g.node(0).output).shape, (Shape{4, 3}));
}

TEST(OnnxImport, ConvSamePaddingIsComputed) {
    REQUIRE_ONNX();
    Pb same;
    same.bytes(attr::kName, "auto_pad").bytes(4, "SAME_UPPER").i(attr::kType, 3);
    const Graph g = network_from_onnx(
        ModelBuilder()
            .input("x", {1, 2, 7, 7})
            .init(float_tensor("w", {4, 2, 3, 3}, 72))
            .add(make_node("Conv", {"x", "w"}, {"y"}, "c", {ints_attr("strides", {2, 2}), same}))
            .output("y")
            .bytes());
    EXPECT_EQ(g.output_of(0).shape, (Shape{1, 4, 4, 4}));  // ceil(7 / 2)
}

// --- refusals ----------------------------------------------------------------------------------

TEST(OnnxRefusals, NotOnnxEmptyTruncated) {
    REQUIRE_ONNX();
    EXPECT_REFUSED(std::string(), "empty");
    EXPECT_REFUSED(std::string("{\"format\": \"rematlab-network\"}"), "not a valid ONNX model");
    EXPECT_REFUSED(std::string("\x08\x01", 2), "not an ONNX model");
    const std::string full = read_bytes(kFixtures / "mlp.onnx");
    for (size_t cut : {full.size() / 2, full.size() - 1, size_t{7}})
        EXPECT_NE(import_error(full.substr(0, cut)), "(no error)") << "cut at " << cut;
    // Where the protobuf parse stopped, as a byte offset: a field tag with wire type 7 (none
    // such exists) right after a valid IR version.
    EXPECT_REFUSED(std::string("\x08\x08\x0f", 3), "stopped at byte 3 of 3");
}

TEST(OnnxRefusals, HugeProtobufFieldsAndFiles) {
    REQUIRE_ONNX();
    // A length prefix claiming ~2 GiB for the graph field: protobuf's limits stop it.
    Pb m;
    m.i(model::kIrVersion, 8).key(model::kGraph, 2).varint(uint64_t{2} << 30);
    m.b += "tiny";
    EXPECT_REFUSED(m.b, "not a valid ONNX model");
    OnnxImportOptions small;
    small.max_file_bytes = 16;
    EXPECT_NE(
        import_error(ModelBuilder().input("x", {4, 8}).small_linear().output("y").bytes(), small)
            .find("more than the limit of 16 bytes"),
        std::string::npos);
}

TEST(OnnxRefusals, NonPositiveSymbolicAndOverflowingDims) {
    REQUIRE_ONNX();
    EXPECT_REFUSED(ModelBuilder().input("x", {4, 0}).small_linear().output("y").bytes(),
                   "input 0 'x'", "dimension 1 is 0");
    EXPECT_REFUSED(ModelBuilder().input("x", {-4, 8}).small_linear().output("y").bytes(),
                   "dimension 0 is -4");
    EXPECT_REFUSED(ModelBuilder().input("x", {4}, "batch").small_linear().output("y").bytes(),
                   "symbolic ('batch')");
    // An initializer whose dimensions multiply past 2^62, and one with a negative dimension.
    Pb huge;
    huge.i(tensor::kDims, int64_t{1} << 40).i(tensor::kDims, int64_t{1} << 40);
    huge.i(tensor::kDataType, tensor::kFloat).bytes(tensor::kName, "big");
    EXPECT_REFUSED(ModelBuilder().init(huge).input("x", {4, 8}).small_linear().output("y").bytes(),
                   "'big'", "overflows 2^62");
    Pb negative;
    negative.i(tensor::kDims, -2).i(tensor::kDataType, tensor::kFloat).bytes(tensor::kName, "neg");
    EXPECT_REFUSED(
        ModelBuilder().init(negative).input("x", {4, 8}).small_linear().output("y").bytes(),
        "'neg'", "negative dimension");
    // An activation overflowing after shape inference: Reshape to 2^31·2^31·2^31 elements.
    Pb shape;
    shape.i(tensor::kDims, 3).i(tensor::kDataType, 7).bytes(tensor::kName, "s");
    for (int k = 0; k < 3; ++k) shape.i(7, int64_t{1} << 31);
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .init(shape)
                       .add(make_node("Reshape", {"x", "s"}, {"r"}))
                       .add(make_node("Relu", {"r"}, {"y"}))
                       .output("y")
                       .bytes(),
                   "Reshape", "overflows");
}

TEST(OnnxRefusals, TensorsAboveTheConfiguredLimit) {
    REQUIRE_ONNX();
    OnnxImportOptions opt;
    opt.max_tensor_bytes = 64;
    const std::string msg =
        import_error(ModelBuilder().input("x", {4, 8}).small_linear().output("y").bytes(), opt);
    EXPECT_NE(msg.find("more than the limit of 64 bytes per tensor"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'fc.weight'"), std::string::npos) << msg;
    // Data that does not match the declared shape is refused before it is copied.
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .init(float_tensor("w", {3, 8}, 5))
                       .add(make_node("Gemm", {"x", "w"}, {"y"}, "", {int_attr("transB", 1)}))
                       .output("y")
                       .bytes(),
                   "'w'", "24 elements", "holds 5");
}

TEST(OnnxRefusals, CyclesDanglingInputsDuplicateNames) {
    REQUIRE_ONNX();
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .add(make_node("Relu", {"b"}, {"a"}, "first"))
                       .add(make_node("Add", {"a", "x"}, {"b"}, "second"))
                       .add(make_node("Relu", {"b"}, {"y"}, "last"))
                       .output("y")
                       .bytes(),
                   "cycle", "'first'", "'second'");
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .add(make_node("Add", {"x", "ghost"}, {"a"}, "adder"))
                       .add(make_node("Relu", {"nobody"}, {"y"}, "relu"))
                       .output("y")
                       .bytes(),
                   "2 node input(s)", "'adder' (Add) reads 'ghost'",
                   "'relu' (Relu) reads 'nobody'");
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .add(make_node("Relu", {"x"}, {"a"}, "one"))
                       .add(make_node("Tanh", {"x"}, {"a"}, "two"))
                       .add(make_node("Relu", {"a"}, {"y"}))
                       .output("y")
                       .bytes(),
                   "output 'a' is also the output of", "'one'");
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .init(float_tensor("w", {3, 8}, 24))
                       .init(float_tensor("w", {3, 8}, 24))
                       .small_linear()
                       .output("y")
                       .bytes(),
                   "'w'", "used twice");
    // Tied weights: one initializer as the weight of two layers is one parameter, but only when
    // both read it in one layout (here g1 reads [in, out], g2 the transpose, [out, in]).
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .init(float_tensor("w", {8, 8}, 64))
                       .add(make_node("Gemm", {"x", "w"}, {"a"}, "g1"))
                       .add(make_node("Gemm", {"a", "w"}, {"y"}, "g2", {int_attr("transB", 1)}))
                       .output("y")
                       .bytes(),
                   "'w' is also a weight of", "another layout", "tied");
    const Graph tied = network_from_onnx(ModelBuilder()
                                             .input("x", {4, 8})
                                             .init(float_tensor("w", {8, 8}, 64))
                                             .add(make_node("Gemm", {"x", "w"}, {"a"}, "g1"))
                                             .add(make_node("Gemm", {"a", "w"}, {"y"}, "g2"))
                                             .output("y")
                                             .bytes(),
                                         "tied.onnx");
    ASSERT_EQ(tied.num_params(), 1);
    EXPECT_EQ(tied.param(0).name, "w");
    EXPECT_EQ(tied.param(0).readers.size(), 2u);
}

TEST(OnnxRefusals, WrongAttributeTypes) {
    REQUIRE_ONNX();
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .init(float_tensor("w", {3, 8}, 24))
                       .add(make_node("Gemm", {"x", "w"}, {"y"}, "g", {float_attr("transB", 1)}))
                       .output("y")
                       .bytes(),
                   "'g' (Gemm)", "attribute 'transB' is FLOAT, expected INT");
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {1, 2, 8, 8})
                       .init(float_tensor("w", {4, 2, 3, 3}, 72))
                       .add(make_node("Conv", {"x", "w"}, {"y"}, "c", {int_attr("pads", 1)}))
                       .output("y")
                       .bytes(),
                   "attribute 'pads' is INT, expected INTS");
}

TEST(OnnxRefusals, UnsupportedOpsAllAtOnceWithTheSupportedList) {
    REQUIRE_ONNX();
    const std::string msg = import_error(ModelBuilder()
                                             .input("x", {4, 8})
                                             .add(make_node("TopK", {"x"}, {"a"}, "topk"))
                                             .add(make_node("Relu", {"a"}, {"b"}))
                                             .add(make_node("LSTM", {"b"}, {"y"}, "lstm"))
                                             .output("y")
                                             .bytes());
    EXPECT_NE(msg.find("2 nodes use ops RematLab cannot import"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node 0 'topk' (TopK)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("node 2 'lstm' (LSTM)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Supported ONNX ops: Add, AveragePool"), std::string::npos) << msg;
}

TEST(OnnxRefusals, UnsupportedFormsOfSupportedOps) {
    REQUIRE_ONNX();
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .input("z", {3, 8})
                       .add(make_node("Mul", {"x", "z"}, {"y"}, "scale"))
                       .output("y")
                       .bytes(),
                   "'scale' (Mul)", "[4,8] and [3,8] do not broadcast");
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .add(make_node("Pow", {"x", "x"}, {"y"}, "p"))
                       .output("y")
                       .bytes(),
                   "'p' (Pow)", "LayerNorm pattern", "tanh-GELU pattern");
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 8})
                       .add(make_node("Softmax", {"x"}, {"y"}, "sm", {int_attr("axis", 0)}))
                       .output("y")
                       .bytes(),
                   "over the last axis");
}

// Swin V2's forms: exp(clip(p)) of a parameter p, a bias Concat(Slice(b), zeros, Slice(b)) of
// a parameter b, F.normalize, a Gather of a computed tensor by any constant indices.
TEST(OnnxImport, ValuesComputedFromParametersAndConstants) {
    REQUIRE_ONNX();
    ModelBuilder m;
    m.input("x", {4, 6})
        .init(float_tensor("scale", {1, 6}, 6))
        .init(float_tensor("bias", {6}, 6))
        .init(int64_tensor("s0", {1}, {0}))
        .init(int64_tensor("e2", {1}, {2}))
        .init(int64_tensor("s4", {1}, {4}))
        .init(int64_tensor("e6", {1}, {6}))
        .init(int64_tensor("rows", {5}, {3, 0, 0, 2, 1}))
        .add(make_node("Clip", {"scale", "", "eps"}, {"clipped"}))
        .add(make_node("Exp", {"clipped"}, {"e"}))
        .add(make_node("Slice", {"bias", "s0", "e2"}, {"b_q"}))
        .add(make_node("Slice", {"bias", "s4", "e6"}, {"b_v"}))
        .add(make_node("ConstantOfShape", {"two"}, {"z"}))
        .add(make_node("Constant", {}, {"two"}, "two",
                       {Pb().bytes(attr::kName, "value")
                            .msg(5, int64_tensor("", {1}, {2}))
                            .i(attr::kType, 4)}))
        .add(make_node("Concat", {"b_q", "z", "b_v"}, {"b"}, "", {int_attr("axis", 0)}))
        .add(make_node("Add", {"x", "b"}, {"xb"}))
        .add(make_node("Mul", {"xb", "e"}, {"xs"}))
        .add(make_node("ReduceL2", {"xs"}, {"n"}, "", {ints_attr("axes", {-1})}))
        .add(make_node("Clip", {"n", "eps", ""}, {"nc"}))
        .add(make_node("Shape", {"xs"}, {"xs_shape"}))
        .add(make_node("Expand", {"nc", "xs_shape"}, {"ne"}))
        .add(make_node("Div", {"xs", "ne"}, {"u"}))
        .add(make_node("Gather", {"u", "rows"}, {"y"}, "", {int_attr("axis", 0)}))
        .init(Pb().i(tensor::kDataType, tensor::kFloat)
                  .bytes(tensor::kName, "eps")
                  .bytes(tensor::kRawData, std::string("\x00\x00\x80\x3f", 4)))
        .output("y");
    const Graph g = network_from_onnx(m.bytes());
    std::map<OpKind, int> ops;
    for (const Node& n : g.nodes()) ++ops[n.op];
    EXPECT_EQ(ops[OpKind::Parameter], 2);  // scale and bias, read as tensors
    EXPECT_EQ(ops[OpKind::Constant], 1);   // the zeros
    EXPECT_EQ(ops[OpKind::Exp], 1);
    EXPECT_EQ(ops[OpKind::Slice], 2);
    EXPECT_EQ(ops[OpKind::L2Normalize], 1);
    EXPECT_EQ(ops[OpKind::Gather], 1);
    EXPECT_EQ(ops[OpKind::Div], 0);
    ASSERT_EQ(g.num_params(), 2);
    EXPECT_EQ(g.param(0).name, "scale");
    EXPECT_EQ(g.param(1).name, "bias");
    EXPECT_EQ(g.output_of(g.loss_node() - 1).shape, (Shape{5, 6}));
    // Both get a gradient; the bias's middle part, replaced by zeros, gets none.
    auto backend = make_cpu_backend(1);
    const Plan none = plan_with(g, CostModel{}, Spec{"none", {}});
    const Execution run = execute(g, none.schedule, *backend, RunData::seeded(g));
    const auto& db = run.param_grads[1];
    for (size_t k : {0, 1, 4, 5}) EXPECT_NE(db[k], 0.0f) << k;
    EXPECT_EQ(db[2], 0.0f);  // bias[2:4] is never read: zeros stand in its place
    EXPECT_EQ(db[3], 0.0f);
    for (float v : run.param_grads[0]) EXPECT_NE(v, 0.0f);
}

TEST(OnnxRefusals, ConstantsAndReduceL2OutsideTheirForms) {
    REQUIRE_ONNX();
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 6})
                       .add(make_node("ReduceL2", {"x"}, {"y"}, "l2", {ints_attr("axes", {0})}))
                       .output("y")
                       .bytes(),
                   "'l2' (ReduceL2)", "only as F.normalize over the last axis", "axes");
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 6})
                       .init(int64_tensor("k", {4, 6}, std::vector<int64_t>(24, 1)))
                       .add(make_node("Relu", {"k"}, {"r"}, "r"))
                       .add(make_node("Add", {"x", "r"}, {"y"}))
                       .output("y")
                       .bytes(),
                   "'r' (Relu)", "input 0 ('k')", "constant of integers");
    EXPECT_REFUSED(ModelBuilder()
                       .input("x", {4, 6})
                       .init(int64_tensor("cols", {3}, {5, 0, 2}))
                       .add(make_node("Gather", {"x", "cols"}, {"y"}, "g", {int_attr("axis", 1)}))
                       .output("y")
                       .bytes(),
                   "'g' (Gather)", "along axis 0", "transpose that axis to the front");
}

TEST(OnnxRefusals, MissingFile) {
    REQUIRE_ONNX();
    EXPECT_THROW(load_network("/nonexistent/model.onnx"), Error);
    EXPECT_THROW(load_network(kFixtures.string() + "/"), Error);
}

// --- external data ---------------------------------------------------------------------------

// Tensor fields for external data (onnx.proto): external_data = 13 (key 1, value 2),
// data_location = 14 (EXTERNAL = 1).
constexpr int kExternalData = 13, kDataLocation = 14;

// Distinct values per tensor (a salt), so reading one tensor's bytes for another shows.
std::string raw_floats(size_t count, float salt) {
    std::string raw(count * 4, '\0');
    for (size_t k = 0; k < count; ++k) {
        const float v = std::sin(salt + 0.37f * static_cast<float>(k)) * 0.5f;
        std::memcpy(raw.data() + 4 * k, &v, 4);
    }
    return raw;
}

Pb inline_tensor(const std::string& name, const std::vector<int64_t>& dims,
                 const std::string& raw) {
    Pb t;
    for (int64_t d : dims) t.i(tensor::kDims, d);
    return t.i(tensor::kDataType, tensor::kFloat)
        .bytes(tensor::kName, name)
        .bytes(tensor::kRawData, raw);
}

// A FLOAT tensor whose data lies in `location`; offset and length only when given ("" = left
// out, as exporters leave them out for a tensor alone in its file).
Pb external_tensor(const std::string& name, const std::vector<int64_t>& dims,
                   const std::string& location, const std::string& offset = "",
                   const std::string& length = "") {
    Pb t;
    for (int64_t d : dims) t.i(tensor::kDims, d);
    t.i(tensor::kDataType, tensor::kFloat).bytes(tensor::kName, name);
    t.msg(kExternalData, Pb().bytes(1, "location").bytes(2, location));
    if (!offset.empty()) t.msg(kExternalData, Pb().bytes(1, "offset").bytes(2, offset));
    if (!length.empty()) t.msg(kExternalData, Pb().bytes(1, "length").bytes(2, length));
    return t.i(kDataLocation, 1);
}

struct ExternalDir {
    fs::path path =
        fs::temp_directory_path() /
        ("rl-onnx-ext-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ExternalDir() {
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~ExternalDir() { fs::remove_all(path); }
    void write(const std::string& rel, const std::string& bytes) const {
        fs::create_directories((path / rel).parent_path());
        std::ofstream(path / rel, std::ios::binary) << bytes;
    }
};

// x [4, 8] → Gemm(fc.weight [3, 8], fc.bias [3]) → Relu → Gemm(fc2.weight [2, 3], fc2.bias [2]).
struct TwoLayer {
    std::string w1 = raw_floats(24, 1), b1 = raw_floats(3, 2), w2 = raw_floats(6, 3),
                b2 = raw_floats(2, 4);
    static ModelBuilder with(const Pb& tw1, const Pb& tb1, const Pb& tw2, const Pb& tb2) {
        ModelBuilder m;
        m.input("x", {4, 8}).init(tw1).init(tb1).init(tw2).init(tb2);
        m.add(make_node("Gemm", {"x", "fc.weight", "fc.bias"}, {"h"}, "/fc/Gemm",
                        {int_attr("transB", 1)}));
        m.add(make_node("Relu", {"h"}, {"r"}, "/act/Relu"));
        m.add(make_node("Gemm", {"r", "fc2.weight", "fc2.bias"}, {"y"}, "/fc2/Gemm",
                        {int_attr("transB", 1)}));
        return m.output("y");
    }
    std::string inline_bytes() const {
        return with(inline_tensor("fc.weight", {3, 8}, w1), inline_tensor("fc.bias", {3}, b1),
                    inline_tensor("fc2.weight", {2, 3}, w2), inline_tensor("fc2.bias", {2}, b2))
            .bytes();
    }
};

std::string model_load_error(const fs::path& model) {
    try {
        load_onnx_file(model.string());
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

// Weights saved as external data (how exporters save models above 2 GiB) read exactly as the
// same weights inline: the same parameter values, and a training step gives the same loss and
// gradients, bit for bit. fc.weight and fc2.weight share one file, fc2.weight at a non-zero
// offset after 4 bytes of padding; fc.bias is the whole of a file in a subfolder (no offset, no
// length); fc2.bias stays inline.
TEST(OnnxExternalData, ReadsExactlyWhatInlineDataHolds) {
    REQUIRE_ONNX();
    const TwoLayer t;
    const ExternalDir dir;
    dir.write("weights.bin", t.w1 + "pad!" + t.w2 + "tail");
    dir.write("data/fc.bias", t.b1);
    dir.write("model.onnx",
              TwoLayer::with(external_tensor("fc.weight", {3, 8}, "weights.bin", "0", "96"),
                             external_tensor("fc.bias", {3}, "data/fc.bias"),
                             external_tensor("fc2.weight", {2, 3}, "weights.bin", "100", "24"),
                             inline_tensor("fc2.bias", {2}, t.b2))
                  .bytes());
    const Graph ext = load_onnx_file((dir.path / "model.onnx").string());
    const Graph inl = network_from_onnx(t.inline_bytes());
    ASSERT_EQ(ext.num_params(), 4);
    ASSERT_EQ(inl.num_params(), 4);
    const RunData de = RunData::seeded(ext), di = RunData::seeded(inl);
    for (ParamId p = 0; p < ext.num_params(); ++p) {
        EXPECT_EQ(ext.param(p).name, inl.param(p).name);
        EXPECT_EQ(ext.param(p).init, ParamInit::Given) << ext.param(p).name;
        EXPECT_EQ(*de.params[static_cast<size_t>(p)], *di.params[static_cast<size_t>(p)])
            << ext.param(p).name;
    }
    // The file's bytes, not only equal between the two: fc2.weight's first value is the one at
    // byte 100 of weights.bin.
    float first = 0;
    std::memcpy(&first, t.w2.data(), 4);
    int found = 0;
    for (ParamId p = 0; p < ext.num_params(); ++p)
        if (ext.param(p).name == "fc2.weight") {
            EXPECT_EQ((*de.params[static_cast<size_t>(p)])[0], first);
            ++found;
        }
    EXPECT_EQ(found, 1);

    auto backend = make_cpu_backend(1);
    const Execution re =
        execute(ext, plan_with(ext, CostModel{}, Spec{"none", {}}).schedule, *backend, de);
    const Execution ri =
        execute(inl, plan_with(inl, CostModel{}, Spec{"none", {}}).schedule, *backend, di);
    EXPECT_EQ(0, std::memcmp(&re.loss, &ri.loss, sizeof re.loss)) << re.loss << " vs " << ri.loss;
    EXPECT_NE(re.loss, 0.0);
    ASSERT_EQ(re.param_grads.size(), ri.param_grads.size());
    for (size_t p = 0; p < re.param_grads.size(); ++p) {
        ASSERT_EQ(re.param_grads[p].size(), ri.param_grads[p].size());
        EXPECT_EQ(0, std::memcmp(re.param_grads[p].data(), ri.param_grads[p].data(),
                                 re.param_grads[p].size() * sizeof(float)))
            << ext.param(static_cast<ParamId>(p)).name;
    }
    // Moved away from its data, the same model is refused by name, not read as zeros.
    fs::remove(dir.path / "data" / "fc.bias");
    const std::string msg = model_load_error(dir.path / "model.onnx");
    EXPECT_NE(msg.find("'fc.bias'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

// A file is parsed as it is read (load_onnx_file streams it into protobuf): it loads as its
// bytes do, and a file cut short, empty or over the size limit is refused with its path and what
// the bytes' import says of it (where the parse stopped, of how many bytes).
TEST(OnnxImport, AFileLoadsAsItsBytesAndIsRefusedAsTheyAre) {
    REQUIRE_ONNX();
    const std::string full = read_bytes(kFixtures / "mlp.onnx");
    const Graph file = load_onnx_file((kFixtures / "mlp.onnx").string());
    const Graph bytes = network_from_onnx(full);
    ASSERT_EQ(file.num_params(), bytes.num_params());
    ASSERT_EQ(file.num_nodes(), bytes.num_nodes());
    const RunData df = RunData::seeded(file), db = RunData::seeded(bytes);
    ASSERT_EQ(df.params.size(), db.params.size());
    for (size_t p = 0; p < df.params.size(); ++p) EXPECT_EQ(*df.params[p], *db.params[p]);
    const ExternalDir dir;
    for (size_t cut : {full.size() / 2, full.size() - 1, size_t{3}, size_t{0}}) {
        dir.write("cut.onnx", full.substr(0, cut));
        const std::string from_file = model_load_error(dir.path / "cut.onnx");
        std::string from_bytes = import_error(full.substr(0, cut));
        ASSERT_EQ(from_bytes.rfind("m.onnx: ", 0), 0u) << from_bytes;
        from_bytes = (dir.path / "cut.onnx").string() + ": " + from_bytes.substr(8);
        EXPECT_EQ(from_file, from_bytes) << "cut at " << cut;
    }
    OnnxImportOptions small;
    small.max_file_bytes = 16;
    std::string over;
    try {
        load_onnx_file((kFixtures / "mlp.onnx").string(), small);
    } catch (const Error& e) {
        over = e.what();
    }
    EXPECT_NE(over.find("mlp.onnx' is " + std::to_string(full.size()) +
                        " bytes, more than the limit of 16 bytes"),
              std::string::npos)
        << over;
}

TEST(OnnxExternalData, BadLocationsRangesAndLengthsAreRefusedByName) {
    REQUIRE_ONNX();
    const TwoLayer t;
    const ExternalDir dir;
    dir.write("sub/weights.bin", t.w1);  // 96 bytes
    dir.write("outside.bin", t.w1);
    // A model in sub/ whose fc.weight is external as given; the rest inline.
    auto refused = [&](const Pb& w1, std::vector<std::string> parts) {
        const std::string bytes = TwoLayer::with(w1, inline_tensor("fc.bias", {3}, t.b1),
                                                 inline_tensor("fc2.weight", {2, 3}, t.w2),
                                                 inline_tensor("fc2.bias", {2}, t.b2))
                                      .bytes();
        dir.write("sub/model.onnx", bytes);
        const std::string msg = model_load_error(dir.path / "sub" / "model.onnx");
        parts.push_back("initializer 0 'fc.weight'");
        parts.push_back("model.onnx");
        for (const auto& part : parts)
            EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
    };
    // The model as given loads (the cases below differ from it in one thing each).
    dir.write("sub/model.onnx", TwoLayer::with(external_tensor("fc.weight", {3, 8}, "weights.bin"),
                                               inline_tensor("fc.bias", {3}, t.b1),
                                               inline_tensor("fc2.weight", {2, 3}, t.w2),
                                               inline_tensor("fc2.bias", {2}, t.b2))
                                    .bytes());
    EXPECT_EQ(model_load_error(dir.path / "sub" / "model.onnx"), "(no error)");

    refused(external_tensor("fc.weight", {3, 8}, "missing.bin"),
            {"'missing.bin'", "does not exist", "beside the .onnx file"});
    refused(external_tensor("fc.weight", {3, 8}, "weights.bin", "200"),
            {"'weights.bin'", "has 96 bytes", "offset 200", "past its end"});
    refused(external_tensor("fc.weight", {3, 8}, "weights.bin", "8", "96"),
            {"has 96 bytes", "bytes 8 to 104", "past its end"});
    refused(external_tensor("fc.weight", {3, 8}, "weights.bin", "0", "92"),
            {"shape [3,8]", "(96 bytes)", "has length 92 bytes", "export the model again"});
    refused(external_tensor("fc.weight", {3, 8}, "weights.bin", "4"),  // the rest: 92 bytes
            {"(96 bytes)", "rest of the file from offset 4", "92 bytes"});
    refused(external_tensor("fc.weight", {3, 8}, (dir.path / "outside.bin").string()),
            {"absolute path", "model's folder"});
    refused(external_tensor("fc.weight", {3, 8}, "../outside.bin"),
            {"'../outside.bin'", "outside the model's folder"});
    refused(external_tensor("fc.weight", {3, 8}, "a/../../outside.bin"),
            {"outside the model's folder"});
    refused(external_tensor("fc.weight", {3, 8}, "weights.bin", "-4"),
            {"offset '-4'", "not a non-negative integer"});
    refused(external_tensor("fc.weight", {3, 8}, "weights.bin", "0", "96 "),
            {"length '96 '", "not a non-negative integer"});
    refused(external_tensor("fc.weight", {3, 8}, ""), {"names no file"});
    refused(external_tensor("fc.weight", {3, 8}, "."), {"not a regular file"});

    // The same model given as bytes has no folder to find the file in.
    const std::string bytes = TwoLayer::with(external_tensor("fc.weight", {3, 8}, "weights.bin"),
                                             inline_tensor("fc.bias", {3}, t.b1),
                                             inline_tensor("fc2.weight", {2, 3}, t.w2),
                                             inline_tensor("fc2.bias", {2}, t.b2))
                                  .bytes();
    EXPECT_REFUSED(bytes, "initializer 0 'fc.weight'", "'weights.bin'", "given as bytes",
                   "open the .onnx file itself");
}

// --- the engine pieces the importer uses -----------------------------------------------------

TEST(GivenParams, NamesAndValuesOverrideTheDefaults) {
    Graph g("t", 1);
    g.add_input("x", DType::F32, Shape{2, 3});
    auto w = std::make_shared<const std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
    g.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", 2}}, {},
               {ParamSource{"my.weight", w}});
    EXPECT_THROW(g.add_node("fc2", OpKind::Linear, std::vector<std::string>{"fc"},
                            {{"out_features", 2}}, {}, {ParamSource{"my.weight", nullptr}}),
                 Error);
    EXPECT_THROW(g.add_node("fc3", OpKind::Linear, std::vector<std::string>{"fc"},
                            {{"out_features", 2}}, {}, {ParamSource{"", w}, ParamSource{"", w}}),
                 Error);                                     // the bias needs 2 values, not 6
    EXPECT_FALSE(g.find_node("fc2") || g.find_node("fc3"));  // refused nodes leave no trace
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"fc"});
    g.finalize();
    EXPECT_EQ(g.param(0).name, "my.weight");
    EXPECT_EQ(g.param(1).name, "fc.bias");
    const RunData d = RunData::seeded(g);
    EXPECT_EQ(*d.params[0], *w);
    // The run reads the graph's own values: a large model's weights are not held twice.
    EXPECT_EQ(d.params[0].get(), g.param(0).values.get());

    GivenInput bad{"x", Shape{3, 2}, std::vector<float>(6, 1.0f)};
    EXPECT_THROW(RunData::seeded(g, {bad}), Error);
    GivenInput missing{"nope", Shape{2, 3}, std::vector<float>(6, 1.0f)};
    EXPECT_THROW(RunData::seeded(g, {missing}), Error);
    GivenInput good{"x", Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6}};
    const RunData d2 = RunData::seeded(g, {good});
    float first = 0;
    std::memcpy(&first, d2.inputs[0].data(), 4);
    EXPECT_EQ(first, 1.0f);
}

}  // namespace
}  // namespace rl
