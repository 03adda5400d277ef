// The broadcasting binary ops (add, sub, mul, div), reduce_mean and the hard / tanh activations
// on the CPU backend: forward against a float64 reference written here from numpy's rules (not
// from BroadcastPlan), every gradient against central finite differences, the accumulate
// contract, bitwise repeatability and independence from the thread count, the residual
// declarations, and the shape errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/op_harness.h"
#include "engine/ops/layout.h"
#include "engine/ops/op.h"

namespace rl {
namespace {

using Ids = std::vector<ValueId>;
using Ints = std::vector<int64_t>;
using testing::check_accumulate;
using testing::check_forward;
using testing::check_repeatable;
using testing::expect_error;
using testing::Floats;
using testing::Grads;
using testing::OpHarness;

// numpy's broadcast of a and b, and for each output element the row-major index of the element
// of a (and of b) it reads.
struct Reference {
    Shape out;
    std::vector<int64_t> ia, ib;
};

Reference numpy_broadcast(const Shape& a, const Shape& b) {
    Reference r;
    const int rank = std::max(a.rank(), b.rank());
    auto dim = [&](const Shape& s, int d) {
        const int k = d - (rank - s.rank());
        return k >= 0 ? s[k] : int64_t{1};
    };
    for (int d = 0; d < rank; ++d) r.out.dims.push_back(std::max(dim(a, d), dim(b, d)));
    const int64_t n = r.out.numel();
    for (int64_t j = 0; j < n; ++j) {
        // Coordinates of j, then the index into each operand (size-1 axes read coordinate 0).
        std::vector<int64_t> coord(static_cast<size_t>(rank));
        int64_t rest = j;
        for (int d = rank - 1; d >= 0; --d) {
            coord[static_cast<size_t>(d)] = rest % r.out[d];
            rest /= r.out[d];
        }
        for (const Shape* s : {&a, &b}) {
            int64_t idx = 0;
            for (int d = 0; d < rank; ++d) {
                const int64_t size = dim(*s, d);
                idx = idx * size + (size == 1 ? 0 : coord[static_cast<size_t>(d)]);
            }
            (s == &a ? r.ia : r.ib).push_back(idx);
        }
    }
    return r;
}

double apply(OpKind k, double a, double b) {
    switch (k) {
        case OpKind::Add:
            return a + b;
        case OpKind::Sub:
            return a - b;
        case OpKind::Mul:
            return a * b;
        default:
            return a / b;
    }
}

// Keeps every element of `v` at least `min_abs` from 0 (div's denominators).
void away_from_zero(Floats& v, float min_abs) {
    for (float& x : v)
        if (std::abs(x) < min_abs) x = x < 0 ? x - min_abs : x + min_abs;
}

// One case: an op over two tensors, or a tensor and a parameter / scalar.
struct BinaryCase {
    std::string name;
    Shape a, b;  // operand shapes (for a scalar: {})
    enum { Tensors, Param, Scalar, Constant } form = Tensors;
    bool reversed = false;  // the parameter or scalar is operand 0
};

std::vector<BinaryCase> binary_cases() {
    return {
        {"same_shape", Shape{3, 4}, Shape{3, 4}},
        {"squeeze_excitation", Shape{2, 3, 4, 4}, Shape{2, 3, 1, 1}},
        {"excitation_first", Shape{2, 3, 1, 1}, Shape{2, 3, 4, 4}},
        // 2×2 planes (a run of 4, four rows at a time and single rows after), odd runs, and runs
        // longer than the gradient's 256-float chunks
        {"squeeze_excitation_2x2", Shape{2, 5, 2, 2}, Shape{2, 5, 1, 1}},
        {"squeeze_excitation_odd_rows", Shape{2, 3, 37}, Shape{2, 3, 1}},
        {"squeeze_excitation_long_rows", Shape{1, 5, 300}, Shape{1, 5, 1}},
        // a per-channel parameter under NCHW: rows walked across two outer axes
        {"channel_scale_param", Shape{2, 3, 2, 5}, Shape{3, 1, 1}, BinaryCase::Param},
        {"trailing_vector", Shape{2, 3, 4}, Shape{4}},
        {"both_repeat", Shape{3, 1}, Shape{1, 4}},
        {"layer_scale_param", Shape{2, 3, 3, 5}, Shape{5}, BinaryCase::Param},
        {"wide_layer_scale_param", Shape{3, 70}, Shape{70}, BinaryCase::Param},  // 2 blocks
        {"position_embedding_param", Shape{2, 4, 3}, Shape{4, 3}, BinaryCase::Param},
        {"reversed_param", Shape{3, 1}, Shape{2, 3, 4}, BinaryCase::Param, true},
        {"scalar", Shape{3, 5}, Shape{}, BinaryCase::Scalar},
        // Swin's shifted-window mask [1, nW, 1, N, N] added to scores [B, nW, heads, N, N]
        {"window_mask_constant", Shape{2, 3, 2, 4, 4}, Shape{1, 3, 1, 4, 4}, BinaryCase::Constant},
        {"reversed_constant", Shape{3, 1}, Shape{2, 3, 4}, BinaryCase::Constant, true},
        {"reversed_scalar", Shape{}, Shape{3, 5}, BinaryCase::Scalar, true},
    };
}

constexpr float kScalar = -1.75f;

// A constant operand's values: away from 0 (div), a few distinct ones.
float constant_value(size_t k) {
    return (k % 3 == 0 ? -1.0f : 1.0f) * (0.5f + 0.25f * static_cast<float>(k % 5));
}

// Builds the case; returns the operands' values (a pointer to the harness's buffers).
void build(OpHarness& h, OpKind op, const BinaryCase& bc) {
    const bool div = op == OpKind::Div;
    if (bc.form == BinaryCase::Tensors) {
        const ValueId a = h.input("a", bc.a);
        const ValueId b = h.input("b", bc.b, div ? 0.3f : 0.0f);
        h.op(op, {a, b});
        return;
    }
    const Shape& tensor = bc.reversed ? bc.b : bc.a;
    const Shape& other = bc.reversed ? bc.a : bc.b;
    // The denominator stays away from 0: the tensor when reversed, else the parameter.
    const ValueId x = h.input("x", tensor, div && bc.reversed ? 0.3f : 0.0f);
    Attrs attrs;
    if (bc.form == BinaryCase::Param) {
        attrs.set("param_shape", other.dims);
    } else if (bc.form == BinaryCase::Constant) {
        std::vector<int64_t> bits;
        for (size_t k = 0; k < static_cast<size_t>(other.numel()); ++k) {
            const float v = constant_value(k);
            uint32_t u;
            std::memcpy(&u, &v, sizeof(u));
            bits.push_back(u);
        }
        attrs.set("constant_shape", other.dims);
        attrs.set("constant_bits", bits);
    } else {
        attrs.set("scalar", static_cast<double>(kScalar));
    }
    if (bc.reversed) attrs.set("reversed", int64_t{1});
    h.op(op, {x}, attrs);
    if (bc.form == BinaryCase::Param && div && !bc.reversed) away_from_zero(h.params[0], 0.3f);
}

// The operands' float values in order (operand 0, operand 1).
std::vector<double> operand_values(OpHarness& h, const BinaryCase& bc, int k) {
    std::vector<double> v;
    const bool is_tensor = bc.form == BinaryCase::Tensors || (k == 0) != bc.reversed;
    if (bc.form == BinaryCase::Tensors) {
        for (float x : h.data(h.n().inputs[static_cast<size_t>(k)])) v.push_back(x);
    } else if (is_tensor) {
        for (float x : h.data(h.n().inputs[0])) v.push_back(x);
    } else if (bc.form == BinaryCase::Param) {
        for (float x : h.params[0]) v.push_back(x);
    } else if (bc.form == BinaryCase::Constant) {
        const Shape& s = bc.reversed ? bc.a : bc.b;
        for (size_t j = 0; j < static_cast<size_t>(s.numel()); ++j) v.push_back(constant_value(j));
    } else {
        v.push_back(kScalar);
    }
    return v;
}

void check_binary(OpKind op) {
    for (const BinaryCase& bc : binary_cases()) {
        SCOPED_TRACE(std::string(op_name(op)) + " " + bc.name);
        OpHarness h(11, "binary");
        build(h, op, bc);
        const Reference r = numpy_broadcast(bc.a, bc.b);
        ASSERT_EQ(h.out_shape(), r.out);
        const std::vector<double> a = operand_values(h, bc, 0), b = operand_values(h, bc, 1);
        std::vector<double> want;
        for (size_t j = 0; j < r.ia.size(); ++j)
            want.push_back(
                apply(op, a[static_cast<size_t>(r.ia[j])], b[static_cast<size_t>(r.ib[j])]));
        check_forward(h, want);
        if (bc.form == BinaryCase::Constant) {
            // No parameter; the constant is decoded into a workspace, forward and backward.
            EXPECT_TRUE(h.params.empty());
            const uint64_t bytes = 4 * static_cast<uint64_t>((bc.reversed ? bc.a : bc.b).numel());
            EXPECT_EQ(h.def().fwd_workspace(h.g, h.n()), bytes);
            EXPECT_EQ(h.def().bwd_workspace(h.g, h.n()), bytes);
        }
        testing::check_gradients(h, 1e-2, 1e-3, 1e-2);
        check_accumulate(h);
        check_repeatable(h);
    }
}

TEST(BroadcastOps, Add) {
    check_binary(OpKind::Add);
}
TEST(BroadcastOps, Sub) {
    check_binary(OpKind::Sub);
}
TEST(BroadcastOps, Mul) {
    check_binary(OpKind::Mul);
}
TEST(BroadcastOps, Div) {
    check_binary(OpKind::Div);
}

// x - x and x · x pass one buffer in both gradient slots; the second slot accumulates.
TEST(BroadcastOps, SameInputTwice) {
    OpHarness sub(3, "g");
    const ValueId x = sub.input("x", Shape{2, 5});
    sub.op(OpKind::Sub, {x, x});
    const Grads diff = sub.backward(Floats(10, 1.25f));
    for (float v : diff.inputs.at(x)) EXPECT_EQ(v, 0.0f);

    OpHarness mul(3, "g");
    const ValueId y = mul.input("y", Shape{2, 5});
    mul.op(OpKind::Mul, {y, y});
    const Floats g = mul.backward(Floats(10, 1.0f)).inputs.at(y);
    for (size_t k = 0; k < g.size(); ++k) EXPECT_FLOAT_EQ(g[k], 2 * mul.data(y)[k]);
    testing::check_gradients(mul, 1e-2, 1e-3, 1e-2);
}

// The repeated operand's gradient is a fixed-order sum: the same bits with 1 and 4 threads, on a
// tensor large enough for the kernels to go parallel.
TEST(BroadcastOps, GradientsDoNotDependOnThreadCount) {
    OpHarness h(5, "g");
    const ValueId x = h.input("x", Shape{8, 32, 16, 16});
    const ValueId s = h.input("s", Shape{8, 32, 1, 1});
    h.op(OpKind::Mul, {x, s});
    const Floats dy = h.random(static_cast<size_t>(h.out_shape().numel()));
    const int before = cpu_threads();
    set_cpu_threads(1);
    const Floats y1 = h.forward();
    const Grads g1 = h.backward(dy);
    set_cpu_threads(4);
    const Floats y4 = h.forward();
    const Grads g4 = h.backward(dy);
    set_cpu_threads(before);
    EXPECT_EQ(std::memcmp(y1.data(), y4.data(), y1.size() * 4), 0);
    for (ValueId v : {x, s})
        EXPECT_EQ(
            std::memcmp(g1.inputs.at(v).data(), g4.inputs.at(v).data(), g1.inputs.at(v).size() * 4),
            0);
    // And the sum is right: dS[n, c] = Σ_hw dY · x.
    for (int64_t nc = 0; nc < 8 * 32; ++nc) {
        double want = 0;
        for (int64_t p = 0; p < 256; ++p)
            want += double(dy[static_cast<size_t>(nc * 256 + p)]) *
                    h.data(x)[static_cast<size_t>(nc * 256 + p)];
        ASSERT_NEAR(g1.inputs.at(s)[static_cast<size_t>(nc)], want, 1e-4 * (1 + std::abs(want)));
    }
}

// The plan merges axes that every slot walks contiguously and drops size-1 axes: the example of
// engine/ops/broadcast.h, and a layer scale whose repeats stay strided.
TEST(BroadcastOps, PlansCoalesceContiguousAxes) {
    const BroadcastPlan se =
        broadcast_plan(Shape{2, 3, 4, 4}, Shape{2, 3, 4, 4}, Shape{2, 3, 1, 1});
    ASSERT_EQ(se.rank, 2);
    EXPECT_EQ(se.dims[0], 6);
    EXPECT_EQ(se.dims[1], 16);
    EXPECT_EQ(se.stride[2][0], 1);
    EXPECT_EQ(se.stride[2][1], 0);
    EXPECT_EQ(se.operand_numel(2), 6);
    EXPECT_EQ(se.repeats(2), 16);
    const BroadcastPlan ls = broadcast_plan(Shape{2, 3, 3, 5}, Shape{2, 3, 3, 5}, Shape{5});
    ASSERT_EQ(ls.rank, 2);
    EXPECT_EQ(ls.dims[0], 18);
    EXPECT_EQ(ls.stride[0][0], 5);
    EXPECT_EQ(ls.stride[2][0], 0);
    // Element 2 of γ stands for full elements 2, 7, …, 87, in that order.
    std::vector<int64_t> seen;
    ls.for_each_repeat(2, 2, [&](int64_t j, int64_t ia, int64_t ib) {
        EXPECT_EQ(ia, j);
        EXPECT_EQ(ib, 2);
        seen.push_back(j);
    });
    ASSERT_EQ(seen.size(), 18u);
    for (size_t r = 0; r < seen.size(); ++r) EXPECT_EQ(seen[r], 2 + 5 * static_cast<int64_t>(r));
    const BroadcastPlan scalar = broadcast_plan(Shape{1, 1}, Shape{1, 1}, Shape{});
    EXPECT_EQ(scalar.rank, 0);
    EXPECT_EQ(scalar.numel(), 1);
}

// The same for a layer scale γ [C] over channels-last x, whose gradient sums blocks of
// neighbouring channels per task.
TEST(BroadcastOps, LayerScaleGradientDoesNotDependOnThreadCount) {
    OpHarness h(6, "g");
    const ValueId x = h.input("x", Shape{8, 16, 16, 96});
    h.op(OpKind::Mul, {x}, {{"param_shape", Ints{96}}});
    const Floats dy = h.random(static_cast<size_t>(h.out_shape().numel()));
    const int before = cpu_threads();
    set_cpu_threads(1);
    const Grads g1 = h.backward(dy);
    set_cpu_threads(4);
    const Grads g4 = h.backward(dy);
    set_cpu_threads(before);
    ASSERT_EQ(g1.params.size(), 1u);
    EXPECT_EQ(std::memcmp(g1.params[0].data(), g4.params[0].data(), 96 * 4), 0);
    for (int64_t ch = 0; ch < 96; ++ch) {
        double want = 0;
        for (int64_t r = 0; r < 8 * 16 * 16; ++r)
            want += double(dy[static_cast<size_t>(r * 96 + ch)]) *
                    h.data(x)[static_cast<size_t>(r * 96 + ch)];
        ASSERT_NEAR(g1.params[0][static_cast<size_t>(ch)], want, 1e-4 * (1 + std::abs(want)));
    }
}

TEST(BroadcastOps, ResidualsAndParameters) {
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{2, 3, 4});
    const ValueId s = g.add_input("s", DType::F32, Shape{2, 3, 1});
    auto residuals = [&](OpKind k, Ids ins, Attrs attrs = {}) {
        const NodeId n = g.add_node(std::to_string(g.num_nodes()) + "n", k, ins, attrs);
        return op_def(k).residuals(g, g.node(n)).inputs;
    };
    EXPECT_EQ(residuals(OpKind::Add, {x, s}), 0u);
    EXPECT_EQ(residuals(OpKind::Sub, {x, s}), 0u);
    EXPECT_EQ(residuals(OpKind::Mul, {x, s}), 0b11u);
    EXPECT_EQ(residuals(OpKind::Div, {x, s}), 0b11u);
    EXPECT_EQ(residuals(OpKind::Mul, {x}, {{"scalar", 2.0}}), 0u);
    EXPECT_EQ(residuals(OpKind::Div, {x}, {{"scalar", 2.0}}), 0u);
    EXPECT_EQ(residuals(OpKind::Div, {x}, {{"scalar", 2.0}, {"reversed", int64_t{1}}}), 0b1u);
    EXPECT_EQ(residuals(OpKind::Mul, {x}, {{"param_shape", Ints{4}}}), 0b1u);
    EXPECT_EQ(residuals(OpKind::Add, {x}, {{"param_shape", Ints{4}}}), 0u);

    const NodeId ls = g.add_node("ls", OpKind::Mul, Ids{x}, {{"param_shape", Ints{4}}});
    ASSERT_EQ(g.node(ls).params.size(), 1u);
    EXPECT_EQ(g.param(g.node(ls).params[0]).name, "ls.weight");
    EXPECT_EQ(g.param(g.node(ls).params[0]).init, ParamInit::Ones);
    const NodeId pe = g.add_node("pe", OpKind::Add, Ids{x}, {{"param_shape", Ints{3, 4}}});
    EXPECT_EQ(g.param(g.node(pe).params[0]).name, "pe.bias");
    EXPECT_EQ(g.param(g.node(pe).params[0]).init, ParamInit::Zeros);
    EXPECT_EQ(g.output_of(pe).shape, (Shape{2, 3, 4}));
    const OpCost c = op_def(OpKind::Mul).cost(g, g.node(ls));
    EXPECT_DOUBLE_EQ(c.fwd_flops, 24);
    EXPECT_GT(c.bwd_flops, c.fwd_flops);
    // Binary ops take a workspace only for a constant operand (decoded there).
    for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div}) {
        EXPECT_EQ(op_def(k).fwd_workspace(g, g.node(ls)), 0u) << op_name(k);
        EXPECT_EQ(op_def(k).bwd_workspace(g, g.node(ls)), 0u) << op_name(k);
    }
    for (OpKind k : {OpKind::Clip, OpKind::HardSigmoid, OpKind::HardSwish, OpKind::GeluTanh,
                     OpKind::ReduceMean}) {
        EXPECT_EQ(op_def(k).fwd_workspace, nullptr) << op_name(k);
        EXPECT_EQ(op_def(k).bwd_workspace, nullptr) << op_name(k);
        EXPECT_FALSE(op_def(k).is_dot) << op_name(k);
    }
}

TEST(BroadcastOps, ShapeErrorsNameTheProblem) {
    expect_error(
        [](Graph& g) {
            g.add_node("m", OpKind::Mul,
                       Ids{g.add_input("a", DType::F32, Shape{2, 3, 4}),
                           g.add_input("b", DType::F32, Shape{3, 5})});
        },
        {"node 'm' (mul)", "[2,3,4] and [3,5] do not broadcast", "4 vs 5"});
    expect_error(
        [](Graph& g) {
            g.add_node("m", OpKind::Mul, Ids{g.add_input("a", DType::F32, Shape{2, 3})});
        },
        {"needs its other operand", "neither"});
    expect_error(
        [](Graph& g) {
            g.add_node("m", OpKind::Div, Ids{g.add_input("a", DType::F32, Shape{2, 3})},
                       {{"scalar", 2.0}, {"param_shape", Ints{3}}});
        },
        {"not both"});
    expect_error(
        [](Graph& g) {
            const ValueId a = g.add_input("a", DType::F32, Shape{2, 3});
            g.add_node("m", OpKind::Sub, Ids{a, a}, {{"scalar", 2.0}});
        },
        {"two inputs takes no scalar"});
    expect_error(
        [](Graph& g) {
            g.add_node("m", OpKind::Add, Ids{g.add_input("a", DType::F32, Shape{2, 3})},
                       {{"param_shape", Ints{4}}});
        },
        {"[2,3] and [4] do not broadcast"});
    expect_error(
        [](Graph& g) {
            g.add_node("r", OpKind::ReduceMean, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"axes", Ints{2}}});
        },
        {"axis 2 is out of range", "[-2, 1]"});
    expect_error(
        [](Graph& g) {
            g.add_node("r", OpKind::ReduceMean, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"axes", Ints{1, -1}}});
        },
        {"listed twice"});
    expect_error(
        [](Graph& g) {
            g.add_node("c", OpKind::Clip, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"min", 6.0}, {"max", 0.0}});
        },
        {"min <= max"});
    expect_error(
        [](Graph& g) {
            g.add_node("c", OpKind::HardSwish, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"alpha", 6.0}});
        },
        {"unknown attribute 'alpha'"});
}

// ---------------------------------------------------------------------------------------------
// Activations

double clip6(double x) {
    return std::min(std::max(x, 0.0), 6.0);
}

// x spread over [-8, 8], kept 0.05 away from the kinks (finite differences step 1e-3).
void check_activation(OpKind k, Attrs attrs, const std::function<double(double)>& f,
                      std::vector<double> kinks) {
    SCOPED_TRACE(std::string(op_name(k)));
    OpHarness h(13, "act");
    const ValueId x = h.input("x", Shape{4, 25});
    for (float& v : h.values.at(x).f) {
        v *= 8.0f;
        for (double kink : kinks)
            if (std::abs(v - kink) < 0.05) v = static_cast<float>(kink + 0.1);
    }
    h.op(k, {x}, attrs);
    std::vector<double> want;
    for (float v : h.data(x)) want.push_back(f(v));
    check_forward(h, want);
    testing::check_gradients(h, 1e-3, 1e-3, 1e-2);
    check_accumulate(h);
    check_repeatable(h);
}

TEST(Activations, ClipAsRelu6) {
    check_activation(OpKind::Clip, {{"min", 0.0}, {"max", 6.0}}, clip6, {0, 6});
}
TEST(Activations, ClipGeneral) {
    check_activation(OpKind::Clip, {{"min", -1.5}, {"max", 2.0}},
                     [](double x) { return std::min(std::max(x, -1.5), 2.0); }, {-1.5, 2});
}
TEST(Activations, HardSigmoid) {
    check_activation(OpKind::HardSigmoid, {}, [](double x) { return clip6(x + 3) / 6; }, {-3, 3});
}
TEST(Activations, HardSigmoidOnnxDefaults) {
    check_activation(OpKind::HardSigmoid, {{"alpha", 0.2}, {"beta", 0.5}},
                     [](double x) { return std::min(std::max(0.2 * x + 0.5, 0.0), 1.0); },
                     {-2.5, 2.5});
}
TEST(Activations, HardSwish) {
    check_activation(OpKind::HardSwish, {}, [](double x) { return x * clip6(x + 3) / 6; }, {-3, 3});
}
TEST(Activations, GeluTanh) {
    check_activation(OpKind::GeluTanh, {},
                     [](double x) {
                         return 0.5 * x *
                                (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
                     },
                     {});
}

// At the kinks the backward takes PyTorch's side: hardtanh (ReLU6) passes nothing at its
// bounds; hardswish is dY·(x/3 + ½) on [-3, 3], closed.
TEST(Activations, KinksFollowPyTorch) {
    OpHarness clip(1, "k");
    const ValueId x = clip.input("x", Shape{4});
    clip.values.at(x).f = {0.0f, 6.0f, 3.0f, -1.0f};
    clip.op(OpKind::Clip, {x}, {{"min", 0.0}, {"max", 6.0}});
    EXPECT_EQ(clip.backward(Floats(4, 1.0f)).inputs.at(x), (Floats{0.0f, 0.0f, 1.0f, 0.0f}));

    OpHarness hs(1, "k");
    const ValueId y = hs.input("y", Shape{4});
    hs.values.at(y).f = {-3.0f, 3.0f, -3.5f, 3.5f};
    hs.op(OpKind::HardSwish, {y});
    EXPECT_EQ(hs.backward(Floats(4, 1.0f)).inputs.at(y), (Floats{-0.5f, 1.5f, 0.0f, 1.0f}));
}

// A NaN comes out NaN, as from torch.clamp, hardtanh, hardsigmoid and hardswish, not clamped to
// a bound; ±inf are clamped. Long enough (37) for the vector loop and its tail.
TEST(Activations, NaNPropagatesAndInfinitiesClampAsPyTorch) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (OpKind k : {OpKind::Clip, OpKind::HardSigmoid, OpKind::HardSwish}) {
        SCOPED_TRACE(std::string(op_name(k)));
        OpHarness h(3, "nan");
        const ValueId x = h.input("x", Shape{37});
        Floats& v = h.values.at(x).f;
        for (size_t i = 0; i < v.size(); ++i) v[i] = i % 3 == 0 ? nan : static_cast<float>(i) - 18;
        v[1] = -inf;
        v[35] = inf;
        h.op(k, {x}, k == OpKind::Clip ? Attrs{{"min", 0.0}, {"max", 6.0}} : Attrs{});
        const Floats y = h.forward();
        const bool swish = k == OpKind::HardSwish;
        for (size_t i = 2; i < v.size(); ++i)
            EXPECT_EQ(std::isnan(y[i]), i % 3 == 0) << "element " << i << " (" << v[i] << ")";
        // hardswish(-inf) = -inf · clamp(-inf + 3, 0, 6) / 6 = -inf · 0: NaN, as PyTorch's.
        if (swish)
            EXPECT_TRUE(std::isnan(y[1]));
        else
            EXPECT_EQ(y[1], 0.0f);
        EXPECT_EQ(y[35], swish ? inf : k == OpKind::Clip ? 6.0f : 1.0f);
    }
}

// ---------------------------------------------------------------------------------------------
// reduce_mean

void check_reduce_mean(const Shape& in, Ints axes, bool keepdims, const Shape& want_shape) {
    SCOPED_TRACE(format_dims(in) + " over " + std::to_string(axes.size()) + " axes");
    OpHarness h(17, "rm");
    const ValueId x = h.input("x", in);
    Attrs attrs{{"keepdims", int64_t{keepdims ? 1 : 0}}};
    if (!axes.empty()) attrs.set("axes", axes);
    h.op(OpKind::ReduceMean, {x}, attrs);
    ASSERT_EQ(h.out_shape(), want_shape);
    // Reference: every input element adds x / count to the output element whose coordinates
    // are its own with the reduced axes dropped.
    std::vector<bool> reduced(static_cast<size_t>(in.rank()), axes.empty());
    for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + in.rank() : a)] = true;
    int64_t count = 1;
    for (int d = 0; d < in.rank(); ++d)
        if (reduced[static_cast<size_t>(d)]) count *= in[d];
    std::vector<double> want(static_cast<size_t>(want_shape.numel()), 0.0);
    for (int64_t j = 0; j < in.numel(); ++j) {
        int64_t rest = j, out = 0, scale = 1;
        for (int d = in.rank() - 1; d >= 0; --d) {
            const int64_t c = rest % in[d];
            rest /= in[d];
            if (reduced[static_cast<size_t>(d)]) continue;
            out += c * scale;
            scale *= in[d];
        }
        want[static_cast<size_t>(out)] += double(h.data(x)[static_cast<size_t>(j)]) / count;
    }
    check_forward(h, want);
    testing::check_gradients(h, 1e-2, 1e-3, 1e-2);
    check_accumulate(h);
    check_repeatable(h);
}

TEST(ReduceMean, Spatial) {
    check_reduce_mean(Shape{2, 3, 4, 5}, {2, 3}, true, Shape{2, 3, 1, 1});
}
TEST(ReduceMean, LastAxisWithoutKeepdims) {
    check_reduce_mean(Shape{3, 4, 6}, {-1}, false, Shape{3, 4});
}
TEST(ReduceMean, OuterAndMiddleAxes) {
    check_reduce_mean(Shape{3, 4, 5}, {0, 2}, true, Shape{1, 4, 1});
}
TEST(ReduceMean, MiddleAxisOfWideRows) {  // the innermost axis is kept: blocks of 64 and 6
    check_reduce_mean(Shape{3, 5, 70}, {1}, true, Shape{3, 1, 70});
}
TEST(ReduceMean, AllAxes) {
    check_reduce_mean(Shape{3, 4}, {}, false, Shape{});
}

}  // namespace
}  // namespace rl
