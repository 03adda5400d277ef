// The ops and their CPU kernels, one small node at a time (as ggml's test-backend-ops): forward
// values against a float64 reference, backward against central finite differences, the kernel
// contract (accumulate flags, duplicate inputs, null residuals, garbage workspace), determinism,
// and the shape-inference errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/kernels.h"
#include "engine/errors.h"
#include "engine/op_harness.h"
#include "engine/ops/op.h"

namespace rl {
namespace {

using Ids = std::vector<ValueId>;

using testing::check_accumulate;
using testing::check_forward;
using testing::check_repeatable;
using testing::Floats;
using testing::Grads;
using testing::kNaN;

// The cases here draw their values from seed 7, which the tolerances below were set with.
struct OpCase : testing::OpHarness {
    explicit OpCase(uint32_t seed = 7) : OpHarness(seed, "ops") {}
};

void check_gradients(OpCase& c, double eps = 1e-2, double atol = 1e-3, double rtol = 1e-2) {
    testing::check_gradients(c, eps, atol, rtol);
}

// ---------------------------------------------------------------------------------------------
// Registry

TEST(OpRegistry, NamesRoundTrip) {
    for (int k = 0; k < kNumOpKinds; ++k) {
        const auto kind = static_cast<OpKind>(k);
        EXPECT_EQ(op_from_name(op_name(kind)), kind) << op_name(kind);
        EXPECT_NE(op_def(kind).infer, nullptr);
        EXPECT_NE(op_def(kind).residuals, nullptr);
        EXPECT_NE(op_def(kind).cost, nullptr);
    }
    EXPECT_EQ(op_name(OpKind::CrossEntropy), "cross_entropy");
    EXPECT_EQ(op_from_name("linear"), OpKind::Linear);
    EXPECT_FALSE(op_from_name("conv3d"));
    EXPECT_EQ(
        op_names_joined(),
        "linear, matmul, add, relu, gelu, tanh, sigmoid, layernorm, softmax, reshape, "
        "transpose, sum_squares, cross_entropy, sin, cos, conv2d, maxpool2d, avgpool2d, "
        "batchnorm, upsample_nearest2d, concat, flatten, dropout, sub, mul, div, clip, "
        "hard_sigmoid, hard_swish, gelu_tanh, reduce_mean, embedding, slice, causal_mask, pad, "
        "dropout_mask, "
        "collective, opaque, exp, l2_normalize, gather, parameter, constant");
}

TEST(OpRegistry, FlagsAndResiduals) {
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{4, 8});
    const ValueId l = g.add_input("l", DType::I32, Shape{4}, 8);
    const ValueId a = g.add_input("a", DType::F32, Shape{2, 4, 8});
    auto residuals = [&](OpKind k, std::vector<ValueId> ins, Attrs attrs = {}) {
        const NodeId n = g.add_node("n" + std::to_string(g.num_nodes()), k, ins, attrs);
        return op_def(k).residuals(g, g.node(n));
    };
    auto is = [](Residuals r, uint32_t inputs, bool output) {
        return r.inputs == inputs && r.output == output;
    };
    EXPECT_TRUE(is(residuals(OpKind::Linear, {x}, {{"out_features", int64_t{3}}}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::MatMul, {a, a}, {{"transpose_b", int64_t{1}}}), 0b11, false));
    EXPECT_TRUE(is(residuals(OpKind::Add, {x, x}), 0, false));
    EXPECT_TRUE(is(residuals(OpKind::Relu, {x}), 0, true));
    EXPECT_TRUE(is(residuals(OpKind::Gelu, {x}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::Tanh, {x}), 0, true));
    EXPECT_TRUE(is(residuals(OpKind::Sigmoid, {x}), 0, true));
    EXPECT_TRUE(is(residuals(OpKind::LayerNorm, {x}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::Softmax, {x}), 0, true));
    EXPECT_TRUE(
        is(residuals(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{-1}}}), 0, false));
    EXPECT_TRUE(
        is(residuals(OpKind::Transpose, {x}, {{"perm", std::vector<int64_t>{1, 0}}}), 0, false));
    EXPECT_TRUE(is(residuals(OpKind::SumSquares, {x}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::CrossEntropy, {x, l}), 0b11, false));
    EXPECT_TRUE(is(residuals(OpKind::Sin, {x}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::Cos, {x}), 0b1, false));

    for (int k = 0; k < kNumOpKinds; ++k) {
        const auto kind = static_cast<OpKind>(k);
        EXPECT_EQ(op_def(kind).is_loss, kind == OpKind::SumSquares || kind == OpKind::CrossEntropy);
        EXPECT_EQ(op_def(kind).is_dot,
                  kind == OpKind::Linear || kind == OpKind::MatMul || kind == OpKind::Conv2d);
    }
}

TEST(OpRegistry, ParamsWorkspaceAndCost) {
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{2, 5, 8});
    const NodeId fc = g.add_node("fc", OpKind::Linear, Ids{x}, {{"out_features", int64_t{3}}});
    EXPECT_EQ(g.output_of(fc).shape, (Shape{2, 5, 3}));
    ASSERT_EQ(g.node(fc).params.size(), 2u);
    EXPECT_EQ(g.param(g.node(fc).params[0]).name, "fc.weight");
    EXPECT_EQ(g.param(g.node(fc).params[0]).shape, (Shape{3, 8}));
    EXPECT_EQ(g.param(g.node(fc).params[0]).fan_in, 8);
    EXPECT_EQ(g.param(g.node(fc).params[1]).shape, (Shape{3}));
    const OpCost c = op_def(OpKind::Linear).cost(g, g.node(fc));
    EXPECT_DOUBLE_EQ(c.fwd_flops, 2.0 * 10 * 8 * 3 + 10 * 3);
    EXPECT_GT(c.bwd_flops, c.fwd_flops);
    EXPECT_GT(c.fwd_bytes, 0);

    const NodeId nb = g.add_node("nb", OpKind::Linear, Ids{x},
                                 {{"out_features", int64_t{3}}, {"bias", int64_t{0}}});
    EXPECT_EQ(g.node(nb).params.size(), 1u);

    const NodeId ln = g.add_node("ln", OpKind::LayerNorm, Ids{x});
    ASSERT_EQ(g.node(ln).params.size(), 2u);
    EXPECT_EQ(g.param(g.node(ln).params[0]).init, ParamInit::Ones);
    EXPECT_EQ(g.param(g.node(ln).params[1]).init, ParamInit::Zeros);
    EXPECT_EQ(op_def(OpKind::LayerNorm).bwd_workspace(g, g.node(ln)), 2u * 4u * 10u);
    EXPECT_EQ(op_def(OpKind::LayerNorm).fwd_workspace, nullptr);

    const ValueId logits = g.add_input("logits", DType::F32, Shape{6, 4});
    const ValueId labels = g.add_input("labels", DType::I32, Shape{6}, 4);
    const NodeId ce = g.add_node("ce", OpKind::CrossEntropy, Ids{logits, labels});
    EXPECT_EQ(g.output_of(ce).shape.rank(), 0);
    EXPECT_EQ(g.output_of(ce).bytes, 4u);
    EXPECT_EQ(op_def(OpKind::CrossEntropy).fwd_workspace(g, g.node(ce)), 6u * 4u);

    // (add declares a workspace only for a constant operand: test_broadcast_ops.cpp.)
    for (OpKind k : {OpKind::Linear, OpKind::MatMul, OpKind::Relu, OpKind::Softmax, OpKind::Reshape,
                     OpKind::Transpose, OpKind::SumSquares}) {
        EXPECT_EQ(op_def(k).fwd_workspace, nullptr) << op_name(k);
        EXPECT_EQ(op_def(k).bwd_workspace, nullptr) << op_name(k);
    }
}

// ---------------------------------------------------------------------------------------------
// Forward values and gradients, op by op

TEST(OpGradient, Linear) {
    OpCase c;
    const ValueId x = c.input("x", Shape{2, 3, 5});
    c.op(OpKind::Linear, {x}, {{"out_features", int64_t{4}}});
    std::vector<double> want;
    for (int r = 0; r < 6; ++r)
        for (int o = 0; o < 4; ++o) {
            double s = c.params[1][static_cast<size_t>(o)];
            for (int i = 0; i < 5; ++i)
                s += double(c.data(x)[static_cast<size_t>(r * 5 + i)]) *
                     c.params[0][static_cast<size_t>(o * 5 + i)];
            want.push_back(s);
        }
    check_forward(c, want);
    check_gradients(c);
}

// On a few rows (a classifier, a squeeze-and-excitation block at batch 2) the weight gradient
// dYᵀ·X comes from the short-depth kernel (cpu::short_depth_apply), written once: its forward
// against float64 and its gradients against central differences, 2 and 5 rows, with and without
// bias, and 56 inputs (a single vector of columns past the kernel's tiles on either width).
TEST(OpGradient, LinearOnFewRows) {
    for (const auto& [rows, in, bias] : {std::tuple{2, 40, 1}, std::tuple{5, 56, 0}}) {
        SCOPED_TRACE(std::to_string(rows) + " rows");
        OpCase c;
        const ValueId x = c.input("x", Shape{rows, in});
        c.op(OpKind::Linear, {x}, {{"out_features", int64_t{24}}, {"bias", int64_t{bias}}});
        ASSERT_TRUE(cpu::short_depth_apply(24, in, rows));
        std::vector<double> want;
        for (int r = 0; r < rows; ++r)
            for (int o = 0; o < 24; ++o) {
                double s = bias ? c.params[1][static_cast<size_t>(o)] : 0.0;
                for (int i = 0; i < in; ++i)
                    s += double(c.data(x)[static_cast<size_t>(r * in + i)]) *
                         c.params[0][static_cast<size_t>(o * in + i)];
                want.push_back(s);
            }
        check_forward(c, want);
        check_gradients(c);
    }
}

// A linear layer's bias gradient (and a layer norm's parameter gradients) sum per-row vectors
// over the rows, pairwise (engine/cpu/pairwise.h). One large row and then thousands of terms
// under half its unit in the last place: added one after another every small term rounds away
// (an error of 1.2e-4 at 4096 rows, 3e-5 at 1000), pairwise only those in the large row's run of
// 16 do (under 8e-7) and the rest first add up among themselves. Row
// counts around the runs of 16 and the binary tree's powers of two, columns across the 256 of a
// parallel block.
TEST(OpGradient, BiasGradientsSumTheRowsPairwise) {
    const int64_t cols = 300;
    for (const int64_t rows : {1, 15, 16, 17, 1000, 4096, 4097, 5000}) {
        SCOPED_TRACE(std::to_string(rows) + " rows");
        std::vector<float> src(static_cast<size_t>(rows * cols));
        std::vector<double> want(static_cast<size_t>(cols), 0.0);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < cols; ++j) {
                const float v = r == 0 ? 1.0f + static_cast<float>(j) / 512
                                       : 3e-8f * static_cast<float>(1 + j % 7) / 4;
                src[static_cast<size_t>(r * cols + j)] = v;
                want[static_cast<size_t>(j)] += v;
            }
        std::vector<float> got(static_cast<size_t>(cols), kNaN);
        cpu::column_sums(src.data(), rows, cols, got.data());
        for (int64_t j = 0; j < cols; ++j)
            EXPECT_NEAR(got[static_cast<size_t>(j)], want[static_cast<size_t>(j)], 2e-6)
                << "column " << j;
    }
}

TEST(OpGradient, LinearWithoutBias) {
    OpCase c;
    const ValueId x = c.input("x", Shape{4, 6});
    c.op(OpKind::Linear, {x}, {{"out_features", int64_t{3}}, {"bias", int64_t{0}}});
    ASSERT_EQ(c.params.size(), 1u);
    check_gradients(c);
}

std::vector<double> matmul_reference(const Floats& a, const Floats& b, int batch, int m, int k,
                                     int n, bool tb, double alpha) {
    std::vector<double> y;
    for (int q = 0; q < batch; ++q)
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                double s = 0;
                for (int t = 0; t < k; ++t) {
                    const size_t bi = tb ? static_cast<size_t>((q * n + j) * k + t)
                                         : static_cast<size_t>((q * k + t) * n + j);
                    s += double(a[static_cast<size_t>((q * m + i) * k + t)]) * b[bi];
                }
                y.push_back(alpha * s);
            }
    return y;
}

TEST(OpGradient, MatMul) {
    OpCase c;
    const ValueId a = c.input("a", Shape{2, 3, 4});
    const ValueId b = c.input("b", Shape{2, 4, 5});
    c.op(OpKind::MatMul, {a, b});
    EXPECT_EQ(c.g.output_of(c.node).shape, (Shape{2, 3, 5}));
    check_forward(c, matmul_reference(c.data(a), c.data(b), 2, 3, 4, 5, false, 1.0));
    check_gradients(c);
}

TEST(OpGradient, MatMulTransposeBAndAlpha) {
    OpCase c;
    const ValueId a = c.input("a", Shape{2, 3, 4});
    const ValueId b = c.input("b", Shape{2, 5, 4});
    c.op(OpKind::MatMul, {a, b}, {{"transpose_b", int64_t{1}}, {"alpha", 0.5}});
    EXPECT_EQ(c.g.output_of(c.node).shape, (Shape{2, 3, 5}));
    check_forward(c, matmul_reference(c.data(a), c.data(b), 2, 3, 4, 5, true, 0.5));
    check_gradients(c);
}

TEST(OpGradient, MatMulSameInputTwice) {
    // x·xᵀ, as in self-attention scores: one buffer in both gradient slots.
    OpCase c;
    const ValueId x = c.input("x", Shape{2, 3, 4});
    c.op(OpKind::MatMul, {x, x}, {{"transpose_b", int64_t{1}}, {"alpha", 0.25}});
    check_forward(c, matmul_reference(c.data(x), c.data(x), 2, 3, 4, 3, true, 0.25));
    check_gradients(c);
}

TEST(OpGradient, Add) {
    OpCase c;
    const ValueId a = c.input("a", Shape{3, 4});
    const ValueId b = c.input("b", Shape{3, 4});
    c.op(OpKind::Add, {a, b});
    std::vector<double> want;
    for (size_t k = 0; k < 12; ++k) want.push_back(double(c.data(a)[k]) + c.data(b)[k]);
    check_forward(c, want);
    check_gradients(c);
}

TEST(OpGradient, AddSameInputTwice) {
    OpCase c;
    const ValueId x = c.input("x", Shape{3, 4});
    c.op(OpKind::Add, {x, x});
    const Grads gr = c.backward(Floats(12, 1.5f));
    for (float v : gr.inputs.at(x)) EXPECT_EQ(v, 3.0f);
    check_gradients(c);
}

void check_pointwise(OpKind k, const std::function<double(double)>& f, float min_abs = 0.0f) {
    SCOPED_TRACE(std::string(op_name(k)));
    OpCase c;
    const ValueId x = c.input("x", Shape{3, 7}, min_abs);
    for (float& v : c.values.at(x).f) v *= 3.0f;  // cover the saturating tails too
    c.op(k, {x});
    std::vector<double> want;
    for (float v : c.data(x)) want.push_back(f(v));
    check_forward(c, want);
    check_gradients(c, 1e-3);
}

TEST(OpGradient, Relu) {
    check_pointwise(
        OpKind::Relu, [](double x) { return x > 0 ? x : 0.0; }, 0.05f);
}
TEST(OpGradient, Gelu) {
    check_pointwise(OpKind::Gelu,
                    [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
}
// GELU's derivative, Φ(x) + x·φ(x), against float64 on a dense grid over both tails (φ on the
// lean exp), at lengths around the vector widths so that the padded last packet is covered: the
// same value wherever an element lies, and within 5e-7 (Eigen's erf is good to ~1e-7 absolute).
TEST(OpGradient, GeluDerivativeAgainstFloat64) {
    const auto deriv = [](double x) {
        return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) +
               x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    };
    Floats grid;
    for (float v = -14.0f; v <= 14.0f; v += 0.0009765625f) grid.push_back(v);  // 2^-10 steps
    const auto all = static_cast<int64_t>(grid.size());
    Floats on_grid;  // the derivative over the whole grid, taken first
    for (int64_t n : {all, int64_t{1}, int64_t{7}, int64_t{17}, int64_t{33}}) {
        SCOPED_TRACE("length " + std::to_string(n));
        OpCase c;
        const ValueId x = c.input("x", Shape{n});
        const int64_t from = n == all ? 0 : 13000;  // the short ones: values near -1.3
        std::copy(grid.begin() + from, grid.begin() + from + n, c.values.at(x).f.begin());
        c.op(OpKind::Gelu, {x});
        const Floats& xs = c.values.at(x).f;
        const Grads gr = c.backward(Floats(static_cast<size_t>(n), 1.0f));
        for (size_t k = 0; k < xs.size(); ++k) {
            ASSERT_NEAR(gr.inputs.at(x)[k], deriv(xs[k]), 5e-7) << "x = " << xs[k];
            if (n != all) {
                EXPECT_EQ(gr.inputs.at(x)[k], on_grid[static_cast<size_t>(from) + k]) << k;
            }
        }
        if (n == all) on_grid = gr.inputs.at(x);
    }
}
TEST(OpGradient, Tanh) {
    check_pointwise(OpKind::Tanh, [](double x) { return std::tanh(x); });
}
TEST(OpGradient, Sigmoid) {
    check_pointwise(OpKind::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); });
}
TEST(OpGradient, Sin) {
    check_pointwise(OpKind::Sin, [](double x) { return std::sin(x); });
}
TEST(OpGradient, Cos) {
    check_pointwise(OpKind::Cos, [](double x) { return std::cos(x); });
}

TEST(OpGradient, LayerNorm) {
    OpCase c;
    const ValueId x = c.input("x", Shape{2, 3, 6});
    c.op(OpKind::LayerNorm, {x}, {{"eps", 1e-3}});
    std::vector<double> want;
    for (int r = 0; r < 6; ++r) {
        double mean = 0, var = 0;
        for (int j = 0; j < 6; ++j) mean += c.data(x)[static_cast<size_t>(r * 6 + j)] / 6.0;
        for (int j = 0; j < 6; ++j)
            var += std::pow(c.data(x)[static_cast<size_t>(r * 6 + j)] - mean, 2) / 6.0;
        for (int j = 0; j < 6; ++j)
            want.push_back((c.data(x)[static_cast<size_t>(r * 6 + j)] - mean) /
                               std::sqrt(var + 1e-3) * c.params[0][static_cast<size_t>(j)] +
                           c.params[1][static_cast<size_t>(j)]);
    }
    check_forward(c, want);
    check_gradients(c);
}

TEST(OpGradient, Softmax) {
    OpCase c;
    const ValueId x = c.input("x", Shape{4, 5});
    for (float& v : c.values.at(x).f) v *= 4.0f;
    c.op(OpKind::Softmax, {x});
    std::vector<double> want;
    for (int r = 0; r < 4; ++r) {
        double s = 0;
        for (int j = 0; j < 5; ++j)
            s += std::exp(double(c.data(x)[static_cast<size_t>(r * 5 + j)]));
        for (int j = 0; j < 5; ++j)
            want.push_back(std::exp(double(c.data(x)[static_cast<size_t>(r * 5 + j)])) / s);
    }
    check_forward(c, want);
    check_gradients(c);
}

TEST(OpGradient, Reshape) {
    OpCase c;
    const ValueId x = c.input("x", Shape{2, 3, 4});
    c.op(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{4, -1}}});
    EXPECT_EQ(c.g.output_of(c.node).shape, (Shape{4, 6}));
    check_forward(c, std::vector<double>(c.data(x).begin(), c.data(x).end()));
    check_gradients(c);
}

TEST(OpGradient, Transpose) {
    const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
        {Shape{3, 4}, {1, 0}},
        {Shape{2, 3, 4}, {0, 2, 1}},
        {Shape{2, 3, 4}, {2, 0, 1}},
        {Shape{2, 3, 4, 5}, {3, 1, 0, 2}},
        {Shape{2, 3, 4, 5}, {0, 1, 2, 3}},
        // The kernel reduces a permutation first (size-1 axes dropped, axes that stay
        // contiguous merged): NCHW to NHWC and back become transposes of 12 × 15 per image,
        // whole 8 × 8 blocks and edges; [9, 1, 1] under a permutation is a copy.
        {Shape{2, 12, 3, 5}, {0, 2, 3, 1}},
        {Shape{2, 3, 5, 12}, {0, 3, 1, 2}},
        {Shape{9, 17}, {1, 0}},
        {Shape{2, 9, 1, 1}, {0, 2, 3, 1}},
        {Shape{3, 1, 10}, {2, 1, 0}},
    };
    for (const auto& [shape, perm] : cases) {
        SCOPED_TRACE(format_dims(shape) + " perm " + format_dims(Shape(Dims(perm))));
        OpCase c;
        const ValueId x = c.input("x", shape);
        c.op(OpKind::Transpose, {x}, {{"perm", perm}});
        const Shape& out = c.g.output_of(c.node).shape;
        for (int i = 0; i < shape.rank(); ++i)
            EXPECT_EQ(out[i], shape[static_cast<int>(perm[static_cast<size_t>(i)])]);
        // Reference: walk the output in order, reading the input at the permuted index.
        std::vector<double> want;
        std::vector<int64_t> idx(static_cast<size_t>(out.rank()), 0), in_idx(idx.size());
        for (int64_t k = 0; k < out.numel(); ++k) {
            int64_t rem = k;
            for (int a = out.rank() - 1; a >= 0; --a) {
                idx[static_cast<size_t>(a)] = rem % out[a];
                rem /= out[a];
            }
            for (size_t a = 0; a < idx.size(); ++a) in_idx[static_cast<size_t>(perm[a])] = idx[a];
            int64_t off = 0;
            for (int a = 0; a < shape.rank(); ++a)
                off = off * shape[a] + in_idx[static_cast<size_t>(a)];
            want.push_back(c.data(x)[static_cast<size_t>(off)]);
        }
        check_forward(c, want, 0.0);
        check_gradients(c);
    }
}

TEST(OpGradient, SumSquares) {
    OpCase c;
    const ValueId x = c.input("x", Shape{3, 5});
    c.op(OpKind::SumSquares, {x});
    EXPECT_EQ(c.g.output_of(c.node).shape.rank(), 0);
    double want = 0;
    for (float v : c.data(x)) want += 0.5 * double(v) * v;
    check_forward(c, {want});
    // dL/dy = y scaled by the incoming scalar.
    const Grads gr = c.backward({2.0f});
    for (size_t k = 0; k < 15; ++k) EXPECT_FLOAT_EQ(gr.inputs.at(x)[k], 2.0f * c.data(x)[k]);
    check_gradients(c);
}

TEST(OpGradient, CrossEntropy) {
    OpCase c;
    const ValueId logits = c.input("logits", Shape{5, 4});
    for (float& v : c.values.at(logits).f) v *= 3.0f;
    const ValueId labels = c.labels("labels", Shape{5}, 4);
    c.op(OpKind::CrossEntropy, {logits, labels});
    double want = 0;
    for (int r = 0; r < 5; ++r) {
        double s = 0;
        for (int j = 0; j < 4; ++j)
            s += std::exp(double(c.data(logits)[static_cast<size_t>(r * 4 + j)]));
        const int32_t label = c.values.at(labels).i[static_cast<size_t>(r)];
        want += (std::log(s) - c.data(logits)[static_cast<size_t>(r * 4 + label)]) / 5.0;
    }
    check_forward(c, {want});
    check_gradients(c);
}

TEST(OpForward, CrossEntropyRejectsLabelOutOfRange) {
    OpCase c;
    const ValueId logits = c.input("logits", Shape{3, 4});
    const ValueId labels = c.labels("labels", Shape{3}, 4);
    c.op(OpKind::CrossEntropy, {logits, labels});
    c.values.at(labels).i[2] = 7;
    try {
        c.forward();
        FAIL() << "expected rl::Error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("row 2"), std::string::npos) << msg;
        EXPECT_NE(msg.find("label 7"), std::string::npos) << msg;
    }
    c.values.at(labels).i[2] = -1;
    EXPECT_THROW(c.forward(), Error);
}

// Rows shorter than, equal to and between multiples of a vector (8 or 16 floats), each with a
// masked (-inf) key in the vector body or the tail, against float64: the kernel's masked tail
// must neither count padding in the sum nor write past the row.
TEST(OpForward, SoftmaxRowsOfEveryLengthAgainstFloat64) {
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t d : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 49, 64, 100, 129}) {
        SCOPED_TRACE("row length " + std::to_string(d));
        OpCase c(static_cast<uint32_t>(d));
        const ValueId x = c.input("x", Shape{3, d});
        Floats& v = c.values.at(x).f;
        for (float& e : v) e *= 6.0f;
        if (d > 1) v[static_cast<size_t>(d + d / 2)] = ninf;  // row 1, mid-row
        if (d > 2) v[static_cast<size_t>(3 * d - 1)] = ninf;  // row 2, last key
        c.op(OpKind::Softmax, {x});
        std::vector<double> want;
        for (int64_t r = 0; r < 3; ++r) {
            double m = -HUGE_VAL, s = 0;
            for (int64_t j = 0; j < d; ++j)
                m = std::max(m, double(v[static_cast<size_t>(r * d + j)]));
            for (int64_t j = 0; j < d; ++j) s += std::exp(v[static_cast<size_t>(r * d + j)] - m);
            for (int64_t j = 0; j < d; ++j)
                want.push_back(std::exp(v[static_cast<size_t>(r * d + j)] - m) / s);
        }
        check_forward(c, want);
        const Floats y = c.forward();
        for (size_t k = 0; k < y.size(); ++k)
            EXPECT_TRUE(!std::isinf(v[k]) || y[k] == 0.0f) << "masked key " << k << ": " << y[k];
    }
}

// The softmax rows' exp (cpu::exp_shifted_sum, shared with cross_entropy) against float64 over
// every argument a softmax row gives it, x - max ≤ 0: within 4·2^-24 relative down to
// log(FLT_MIN), 0 below it and at -inf, NaN at NaN. The sum it returns is the sum of what it
// wrote, padding lanes left out, at every length around the vector widths.
TEST(OpForward, SoftmaxExpAgainstFloat64OverItsWholeRange) {
    std::vector<float> x;
    for (float a = -90.0f; a <= 0.0f; a += 0.00390625f) x.push_back(a);  // steps of 2^-8
    for (float a = -1.0f; a < 0.0f; a += 1e-5f) x.push_back(a);
    for (float a :
         {-0.0f, -std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()})
        x.push_back(a);
    std::vector<float> y(x.size(), -1.0f);
    const float sum = cpu::exp_shifted_sum(x.data(), y.data(), static_cast<int64_t>(x.size()), 0);
    EXPECT_TRUE(std::isnan(sum));  // the NaN lane is summed too
    const float lo = std::log(std::numeric_limits<float>::min());
    for (size_t k = 0; k < x.size(); ++k) {
        if (std::isnan(x[k])) {
            EXPECT_TRUE(std::isnan(y[k]));
        } else if (x[k] < lo) {
            EXPECT_EQ(y[k], 0.0f) << "exp(" << x[k] << ")";
        } else {
            const double want = std::exp(static_cast<double>(x[k]));
            ASSERT_LE(std::abs(y[k] - want), 4.0 * 0x1p-24 * want) << "exp(" << x[k] << ")";
        }
    }
    for (int64_t d = 1; d <= 40; ++d) {
        std::vector<float> row(x.begin() + 20000, x.begin() + 20000 + d), out(d);
        const float s = cpu::exp_shifted_sum(row.data(), out.data(), d, 0);
        double want = 0;
        for (float v : out) want += v;
        EXPECT_NEAR(s, want, 4e-7 * want) << "row of " << d;
        EXPECT_EQ(cpu::exp_shifted_sum(row.data(), nullptr, d, 0), s) << "row of " << d;
    }
}

TEST(OpForward, SoftmaxIsStableForLargeLogits) {
    OpCase c;
    const ValueId x = c.input("x", Shape{1, 3});
    c.values.at(x).f = {1000.0f, 1000.0f, -1000.0f};
    c.op(OpKind::Softmax, {x});
    const Floats y = c.forward();
    EXPECT_FLOAT_EQ(y[0], 0.5f);
    EXPECT_FLOAT_EQ(y[1], 0.5f);
    EXPECT_EQ(y[2], 0.0f);
}

// ---------------------------------------------------------------------------------------------
// The kernel contract

// accumulate=true adds the gradient to what the buffer held; false overwrites (the buffers
// start as NaN in backward(), so any read of an overwritten buffer would show).
TEST(OpContract, AccumulateAddsToExistingGradient) {
    struct Make {
        const char* name;
        std::function<void(OpCase&)> build;
    };
    const std::vector<Make> makes = {
        {"linear",
         [](OpCase& c) {
             c.op(OpKind::Linear, {c.input("x", Shape{4, 6})}, {{"out_features", int64_t{5}}});
         }},
        {"matmul",
         [](OpCase& c) {
             c.op(OpKind::MatMul, {c.input("a", Shape{2, 3, 4}), c.input("b", Shape{2, 5, 4})},
                  {{"transpose_b", int64_t{1}}});
         }},
        {"add",
         [](OpCase& c) {
             c.op(OpKind::Add, {c.input("a", Shape{3, 4}), c.input("b", Shape{3, 4})});
         }},
        {"relu",
         [](OpCase& c) {
             c.op(OpKind::Relu, {c.input("x", Shape{3, 4})});
         }},
        {"gelu",
         [](OpCase& c) {
             c.op(OpKind::Gelu, {c.input("x", Shape{3, 4})});
         }},
        {"tanh",
         [](OpCase& c) {
             c.op(OpKind::Tanh, {c.input("x", Shape{3, 4})});
         }},
        {"sigmoid",
         [](OpCase& c) {
             c.op(OpKind::Sigmoid, {c.input("x", Shape{3, 4})});
         }},
        {"sin",
         [](OpCase& c) {
             c.op(OpKind::Sin, {c.input("x", Shape{3, 4})});
         }},
        {"cos",
         [](OpCase& c) {
             c.op(OpKind::Cos, {c.input("x", Shape{3, 4})});
         }},
        {"layernorm",
         [](OpCase& c) {
             c.op(OpKind::LayerNorm, {c.input("x", Shape{3, 8})});
         }},
        {"softmax",
         [](OpCase& c) {
             c.op(OpKind::Softmax, {c.input("x", Shape{3, 4})});
         }},
        {"reshape",
         [](OpCase& c) {
             c.op(OpKind::Reshape, {c.input("x", Shape{3, 4})},
                  {{"shape", std::vector<int64_t>{12}}});
         }},
        {"transpose",
         [](OpCase& c) {
             c.op(OpKind::Transpose, {c.input("x", Shape{3, 4})},
                  {{"perm", std::vector<int64_t>{1, 0}}});
         }},
        {"sum_squares",
         [](OpCase& c) {
             c.op(OpKind::SumSquares, {c.input("x", Shape{3, 4})});
         }},
        {"cross_entropy",
         [](OpCase& c) {
             const ValueId x = c.input("x", Shape{3, 4});
             c.op(OpKind::CrossEntropy, {x, c.labels("l", Shape{3}, 4)});
         }},
        {"cross_entropy over blocks",  // a row longer than the accumulating path's 256-float block
         [](OpCase& c) {
             const ValueId x = c.input("x", Shape{2, 601});
             c.op(OpKind::CrossEntropy, {x, c.labels("l", Shape{2}, 601)});
         }},
    };
    for (const Make& m : makes) {
        SCOPED_TRACE(m.name);
        OpCase c;
        m.build(c);
        ASSERT_NO_FATAL_FAILURE(check_accumulate(c));
    }
}

TEST(OpContract, NullGradientSlotsAreSkipped) {
    // Gradients of the weights only (the input is data): grad_inputs[0] stays null.
    OpCase c;
    const ValueId x = c.input("x", Shape{4, 6});
    c.op(OpKind::Linear, {x}, {{"out_features", int64_t{3}}});
    Floats dy = c.random(12), dw(18, kNaN), db(3, kNaN);
    const void* ins[] = {c.data(x).data()};
    float* ps[] = {c.params[0].data(), c.params[1].data()};
    float* gi[] = {nullptr};
    float* gp[] = {dw.data(), db.data()};
    const bool acc[] = {false};
    auto backend = make_cpu_backend();
    backend->backward({c.g, c.n(), ins, nullptr, ps, dy.data(), gi, acc, gp, nullptr});
    const Grads full = c.backward(dy);
    EXPECT_EQ(dw, full.params[0]);
    EXPECT_EQ(db, full.params[1]);
}

// A fixed thread count gives bitwise the same results run after run, at sizes where the
// kernels' parallel paths are taken.
TEST(OpContract, RepeatedRunsAreBitwiseIdentical) {
    set_cpu_threads(2);
    const std::vector<std::function<void(OpCase&)>> builds = {
        [](OpCase& c) {
            c.op(OpKind::Linear, {c.input("x", Shape{96, 200})}, {{"out_features", int64_t{300}}});
        },
        [](OpCase& c) {
            c.op(OpKind::MatMul, {c.input("a", Shape{8, 64, 48}), c.input("b", Shape{8, 64, 48})},
                 {{"transpose_b", int64_t{1}}});
        },
        [](OpCase& c) {
            c.op(OpKind::LayerNorm, {c.input("x", Shape{128, 600})});
        },
        [](OpCase& c) {
            c.op(OpKind::Softmax, {c.input("x", Shape{128, 600})});
        },
        [](OpCase& c) { c.op(OpKind::Gelu, {c.input("x", Shape{100000})}); },
        [](OpCase& c) {
            c.op(OpKind::Transpose, {c.input("x", Shape{16, 32, 8, 24})},
                 {{"perm", std::vector<int64_t>{2, 0, 3, 1}}});
        },
        [](OpCase& c) {
            c.op(OpKind::SumSquares, {c.input("x", Shape{300, 500})});
        },
        [](OpCase& c) {
            const ValueId x = c.input("x", Shape{256, 1000});
            c.op(OpKind::CrossEntropy, {x, c.labels("l", Shape{256}, 1000)});
        },
    };
    for (const auto& build : builds) {
        OpCase c;
        build(c);
        SCOPED_TRACE(std::string(op_name(c.n().op)));
        ASSERT_NO_FATAL_FAILURE(check_repeatable(c));
    }
}

TEST(CpuBackend, AllocatesAlignedMemory) {
    auto backend = make_cpu_backend();
    EXPECT_EQ(backend->name(), "cpu");
    for (uint64_t bytes : {0ull, 1ull, 63ull, 64ull, 1000ull}) {
        void* p = backend->allocate(bytes);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
        std::vector<uint8_t> src(bytes, 7), back(bytes, 0);
        backend->copy_from_host(p, src.data(), bytes);
        backend->copy_to_host(back.data(), p, bytes);
        EXPECT_EQ(src, back);
        backend->release(p);
    }
}

TEST(CpuBackend, ThreadCount) {
    set_cpu_threads(1);
    EXPECT_EQ(cpu_threads(), 1);
    auto backend = make_cpu_backend(2);
    EXPECT_EQ(cpu_threads(), 2);
    make_cpu_backend(0);  // 0 leaves the setting alone
    EXPECT_EQ(cpu_threads(), 2);
}

// ---------------------------------------------------------------------------------------------
// Shape inference errors name the node, the input and the problem.

using testing::expect_error;

// sin(x, d) / cos(x, d): d, the derivative computed in the forward, is what the backward reads;
// no gradient flows into it.
TEST(OpGradient, SinCosWithDerivativeInput) {
    for (const OpKind k : {OpKind::Sin, OpKind::Cos}) {
        SCOPED_TRACE(std::string(op_name(k)));
        const OpKind other = k == OpKind::Sin ? OpKind::Cos : OpKind::Sin;
        Graph g;
        const ValueId x = g.add_input("x", DType::F32, Shape{3, 4});
        const NodeId fc = g.add_node("fc", OpKind::Linear, Ids{x}, {{"out_features", int64_t{4}}});
        const ValueId y = g.node(fc).output;
        const NodeId d = g.add_node("d", other, Ids{y});
        const NodeId f = g.add_node("f", k, Ids{y, g.node(d).output});
        g.add_node("loss", OpKind::SumSquares, Ids{g.node(f).output});
        g.finalize();
        const Residuals r = op_def(k).residuals(g, g.node(f));
        EXPECT_EQ(r.inputs, 0b10u);  // the derivative, not x
        EXPECT_FALSE(g.output_of(d).requires_grad);
        EXPECT_FALSE(g.needs_backward(d));
        EXPECT_TRUE(g.value(y).requires_grad);
    }
}

TEST(OpShapeErrors, DerivativeInputs) {
    expect_error(
        [](Graph& g) {
            g.add_node("s", OpKind::Sin,
                       Ids{g.add_input("a", DType::F32, Shape{2, 3}),
                           g.add_input("b", DType::F32, Shape{3, 2})});
        },
        {"node 's' (sin)", "input 1 (the derivative) has shape [3,2]", "[2,3]"});
    expect_error(
        [](Graph& g) {
            const ValueId a = g.add_input("a", DType::F32, Shape{2, 3});
            g.add_node("s", OpKind::Sin, Ids{a, a});
        },
        {"is input 0 itself"});
    // The derivative also reaching the loss as an ordinary input would need a gradient it never
    // gets.
    expect_error(
        [](Graph& g) {
            const ValueId x = g.add_input("x", DType::F32, Shape{2, 3});
            const ValueId y =
                g.node(g.add_node("fc", OpKind::Linear, Ids{x}, {{"out_features", int64_t{3}}}))
                    .output;
            const ValueId c = g.node(g.add_node("c", OpKind::Cos, Ids{y})).output;
            const ValueId s = g.node(g.add_node("s", OpKind::Sin, Ids{y, c})).output;
            const ValueId sum = g.node(g.add_node("sum", OpKind::Add, Ids{s, c})).output;
            g.add_node("loss", OpKind::SumSquares, Ids{sum});
            g.finalize();
        },
        {"node 's'", "input 1 ('c') is a derivative input", "also reaches the loss"});
    // Parameters whose node reaches the loss only as a derivative would get no gradient.
    expect_error(
        [](Graph& g) {
            const ValueId x = g.add_input("x", DType::F32, Shape{2, 3});
            const ValueId y =
                g.node(g.add_node("fc", OpKind::Linear, Ids{x}, {{"out_features", int64_t{3}}}))
                    .output;
            const ValueId d =
                g.node(g.add_node("d", OpKind::Linear, Ids{x}, {{"out_features", int64_t{3}}}))
                    .output;
            const ValueId s = g.node(g.add_node("s", OpKind::Sin, Ids{y, d})).output;
            g.add_node("loss", OpKind::SumSquares, Ids{s});
            g.finalize();
        },
        {"node 'd' (linear) owns parameters", "only as a derivative input"});
}

TEST(OpShapeErrors, MessagesNameTheProblem) {
    expect_error(
        [](Graph& g) {
            g.add_node("fc", OpKind::Linear, Ids{g.add_input("x", DType::F32, Shape{32, 64})},
                       {{"out_features", int64_t{10}}, {"in_features", int64_t{128}}});
        },
        {"node 'fc' (linear)", "input 0 has shape [32,64] but linear expects last axis 128"});
    expect_error(
        [](Graph& g) {
            g.add_node("fc", OpKind::Linear, Ids{g.add_input("x", DType::F32, Shape{4, 8})});
        },
        {"out_features"});
    expect_error(
        [](Graph& g) {
            g.add_node("mm", OpKind::MatMul,
                       Ids{g.add_input("a", DType::F32, Shape{2, 3, 4}),
                           g.add_input("b", DType::F32, Shape{2, 5, 6})});
        },
        {"input 1 has shape [2,5,6]", "expects [2,4,N]"});
    expect_error(
        [](Graph& g) {
            g.add_node("mm", OpKind::MatMul,
                       Ids{g.add_input("a", DType::F32, Shape{2, 3, 4}),
                           g.add_input("b", DType::F32, Shape{2, 5, 6})},
                       {{"transpose_b", int64_t{1}}});
        },
        {"transpose_b=1", "expects [2,N,4]"});
    expect_error(
        [](Graph& g) {
            g.add_node("mm", OpKind::MatMul,
                       Ids{g.add_input("a", DType::F32, Shape{3, 4}),
                           g.add_input("b", DType::F32, Shape{4, 5})});
        },
        {"input 0 has shape [3,4]", "rank 3"});
    expect_error(
        [](Graph& g) {
            g.add_node("s", OpKind::Add,
                       Ids{g.add_input("a", DType::F32, Shape{2, 3}),
                           g.add_input("b", DType::F32, Shape{3, 2})});
        },
        {"shapes [2,3] and [3,2] do not broadcast"});
    expect_error(
        [](Graph& g) {
            g.add_node("r", OpKind::Reshape, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"shape", std::vector<int64_t>{4, 2}}});
        },
        {"6 elements", "[4,2]"});
    expect_error(
        [](Graph& g) {
            g.add_node("r", OpKind::Reshape, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"shape", std::vector<int64_t>{-1, -1}}});
        },
        {"more than one -1"});
    expect_error(
        [](Graph& g) {
            g.add_node("r", OpKind::Reshape, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"shape", std::vector<int64_t>{4, -1}}});
        },
        {"cannot be reshaped to [4,-1]"});
    expect_error(
        [](Graph& g) {
            g.add_node("t", OpKind::Transpose, Ids{g.add_input("x", DType::F32, Shape{2, 3, 4})},
                       {{"perm", std::vector<int64_t>{0, 0, 1}}});
        },
        {"not a permutation"});
    expect_error(
        [](Graph& g) {
            g.add_node("t", OpKind::Transpose, Ids{g.add_input("x", DType::F32, Shape{2, 3, 4})},
                       {{"perm", std::vector<int64_t>{1, 0}}});
        },
        {"has 2 entries", "rank 3"});
    expect_error(
        [](Graph& g) {
            g.add_node("t", OpKind::Transpose,
                       Ids{g.add_input("x", DType::F32, Shape{1, 2, 3, 4, 5})},
                       {{"perm", std::vector<int64_t>{0, 1, 2, 3, 4}}});
        },
        {"rank up to 4"});
    expect_error(
        [](Graph& g) {
            g.add_node("ce", OpKind::CrossEntropy,
                       Ids{g.add_input("x", DType::F32, Shape{4, 10}),
                           g.add_input("y", DType::F32, Shape{4})});
        },
        {"input 1 ('y') is f32 but cross_entropy expects i32"});
    expect_error(
        [](Graph& g) {
            g.add_node("ce", OpKind::CrossEntropy,
                       Ids{g.add_input("x", DType::F32, Shape{4, 10}),
                           g.add_input("y", DType::I32, Shape{5}, 10)});
        },
        {"input 1 (labels) has shape [5]", "expects [4]"});
    expect_error(
        [](Graph& g) {
            g.add_node("ce", OpKind::CrossEntropy,
                       Ids{g.add_input("x", DType::F32, Shape{4, 10}),
                           g.add_input("y", DType::I32, Shape{4}, 12)});
        },
        {"[0, 12)", "only 10 classes"});
    expect_error(
        [](Graph& g) {
            g.add_node("act", OpKind::Relu, Ids{g.add_input("y", DType::I32, Shape{4}, 3)});
        },
        {"input 0 ('y') is i32 but relu expects a floating tensor"});
    expect_error(
        [](Graph& g) {
            g.add_node("ln", OpKind::LayerNorm, Ids{g.add_input("x", DType::F32, Shape{4, 3})},
                       {{"eps", 0.0}});
        },
        {"'eps'"});
}

}  // namespace
}  // namespace rl
