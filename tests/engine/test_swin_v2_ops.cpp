// The ops Swin V2 brought (exp, l2_normalize, gather, parameter, constant): forward values against
// a float64 reference, gradients against central finite differences, the accumulate contract,
// run-to-run determinism, the errors a user can cause; and a network whose values are computed
// from parameters and constants alone keeps both invariants under every strategy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/op_harness.h"
#include "engine/ops/op.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

using testing::check_accumulate;
using testing::check_forward;
using testing::check_repeatable;
using testing::Floats;
using testing::OpHarness;
using Ints = std::vector<int64_t>;

TEST(SwinV2Ops, Exp) {
    OpHarness h(21, "exp");
    const ValueId x = h.input("x", Shape{3, 7});
    for (float& v : h.values.at(x).f) v *= 3.0f;
    h.op(OpKind::Exp, {x});
    std::vector<double> want;
    for (float v : h.data(x)) want.push_back(std::exp(static_cast<double>(v)));
    check_forward(h, want);
    testing::check_gradients(h, 1e-3, 1e-3, 1e-3);
    check_accumulate(h);
    check_repeatable(h);
}

// y = x / max(‖x‖, eps) per row of the last axis; the second row lies below eps, where the
// denominator is eps itself (PyTorch's clamp_min passes no gradient to the norm there).
// Rows of 5 (the kernel's tail sums only) and 19 (two blocks of its eight partial sums and a
// tail), one of them below eps.
TEST(SwinV2Ops, L2NormalizeAboveAndBelowEps) {
    for (const int64_t d : {5, 19}) {
        SCOPED_TRACE("rows of " + std::to_string(d));
        const auto du = static_cast<size_t>(d);
        OpHarness h(22, "norm");
        const ValueId x = h.input("x", Shape{2, 3, d}, 0.05f);
        Floats& xs = h.values.at(x).f;
        for (size_t k = du; k < 2 * du; ++k) xs[k] *= d == 5 ? 0.05f : 0.02f;  // row 1: small
        const double eps = 0.25;
        h.op(OpKind::L2Normalize, {x}, {{"eps", eps}});
        ASSERT_EQ(h.out_shape(), (Shape{2, 3, d}));
        std::vector<double> want;
        for (size_t r = 0; r < 6; ++r) {
            double s = 0;
            for (size_t j = 0; j < du; ++j) s += double(xs[r * du + j]) * xs[r * du + j];
            ASSERT_EQ(std::sqrt(s) < eps, r == 1) << "row " << r;
            for (size_t j = 0; j < du; ++j)
                want.push_back(xs[r * du + j] / std::max(std::sqrt(s), eps));
        }
        check_forward(h, want, 1e-6);
        testing::check_gradients(h, 1e-3, 1e-3, 1e-2);
        check_accumulate(h);
        check_repeatable(h);
    }
}

TEST(SwinV2Ops, L2NormalizeRefusesANonPositiveEps) {
    testing::expect_error(
        [](Graph& g) {
            g.add_node("n", OpKind::L2Normalize,
                       std::vector<ValueId>{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"eps", 0.0}});
        },
        {"'n'", "eps", "must be > 0"});
}

// Repeated indices: their rows' gradients add up, in index order.
TEST(SwinV2Ops, GatherRowsByConstantIndices) {
    OpHarness h(23, "gather");
    const ValueId x = h.input("x", Shape{4, 3});
    const Ints idx{2, 0, 2, 3, 3, 3};
    h.op(OpKind::Gather, {x}, {{"indices", idx}, {"index_shape", Ints{2, 3}}});
    ASSERT_EQ(h.out_shape(), (Shape{2, 3, 3}));
    std::vector<double> want;
    for (int64_t r : idx)
        for (int64_t j = 0; j < 3; ++j) want.push_back(h.data(x)[static_cast<size_t>(r * 3 + j)]);
    check_forward(h, want, 0);
    const Floats dy = h.random(18);
    const Floats dx = h.backward(dy).inputs.at(x);
    for (int64_t j = 0; j < 3; ++j) {
        EXPECT_EQ(dx[static_cast<size_t>(3 + j)], 0.0f);  // row 1 is never read
        EXPECT_EQ(dx[static_cast<size_t>(j)], dy[static_cast<size_t>(3 + j)]);
        EXPECT_EQ(dx[static_cast<size_t>(6 + j)],
                  dy[static_cast<size_t>(j)] + dy[static_cast<size_t>(6 + j)]);
    }
    testing::check_gradients(h, 1e-2, 1e-3, 1e-2);
    check_accumulate(h);
    check_repeatable(h);
}

TEST(SwinV2Ops, GatherRefusesIndicesOutsideTheInputOrMiscounted) {
    testing::expect_error(
        [](Graph& g) {
            g.add_node("g", OpKind::Gather,
                       std::vector<ValueId>{g.add_input("x", DType::F32, Shape{4, 3})},
                       {{"indices", Ints{0, 4}}, {"index_shape", Ints{2}}});
        },
        {"'g'", "index 4", "out of range", "[4,3]"});
    testing::expect_error(
        [](Graph& g) {
            g.add_node("g", OpKind::Gather,
                       std::vector<ValueId>{g.add_input("x", DType::F32, Shape{4, 3})},
                       {{"indices", Ints{0, 1}}, {"index_shape", Ints{3}}});
        },
        {"'g'", "holds 2 values", "3 lookups"});
}

// The output is the parameter; its gradient is the output's.
TEST(SwinV2Ops, ParameterIsItsParameter) {
    OpHarness h(24, "param");
    h.op(OpKind::Parameter, {}, {{"shape", Ints{3, 1, 2}}});
    ASSERT_EQ(h.out_shape(), (Shape{3, 1, 2}));
    ASSERT_EQ(h.params.size(), 1u);
    std::vector<double> want(h.params[0].begin(), h.params[0].end());
    check_forward(h, want, 0);
    const Floats dy = h.random(6);
    EXPECT_EQ(h.backward(dy).params[0], dy);
    testing::check_gradients(h, 1e-2, 1e-4, 1e-4);
    check_accumulate(h);
    check_repeatable(h);
}

Attrs constant_attrs(const Shape& s, const std::vector<float>& v) {
    Ints bits;
    for (float f : v) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        bits.push_back(u);
    }
    return {{"constant_shape", s.dims}, {"constant_bits", bits}};
}

TEST(SwinV2Ops, ConstantHoldsItsValuesAndNeedsNoGradient) {
    OpHarness h(25, "const");
    const std::vector<float> v{0.5f, -0.0f, 3.25f, -7.0f};
    h.op(OpKind::Constant, {}, constant_attrs(Shape{2, 2}, v));
    const Floats y = h.forward();
    ASSERT_EQ(y.size(), 4u);
    EXPECT_EQ(std::memcmp(y.data(), v.data(), 16), 0);  // bit for bit, -0 included
    EXPECT_TRUE(h.params.empty());
    testing::expect_error(
        [&](Graph& g) {
            g.add_node("c", OpKind::Constant, std::vector<ValueId>{}, constant_attrs(Shape{3}, v));
        },
        {"'c'", "constant_bits", "3 float32 bit patterns"});
    testing::expect_error(
        [](Graph& g) {
            g.add_node("p", OpKind::Parameter, std::vector<ValueId>{}, {{"shape", Ints{2, 0}}});
        },
        {"'p'", "shape", "positive"});
}

// A Swin V2 attention in miniature: the logit scale exp(clip(p)) of a parameter, a bias
// Concat(parameter, constant zeros) added to the input, a position bias gathered from an MLP over
// a constant table, cosine scores. Every strategy keeps predicted == measured peak and gradients
// bitwise equal to `none`'s.
Graph parameter_valued_network() {
    Graph g("swin-v2-mini", 3);
    const ValueId x = g.add_input("x", DType::F32, Shape{2, 3, 4});
    const NodeId scale = g.add_node("logit_scale", OpKind::Parameter, std::vector<ValueId>{},
                                    {{"shape", Ints{3, 1}}});
    const NodeId clipped =
        g.add_node("clip", OpKind::Clip, std::vector<ValueId>{g.node(scale).output},
                   {{"max", std::log(100.0)}});
    const NodeId e = g.add_node("exp", OpKind::Exp, std::vector<ValueId>{g.node(clipped).output});
    const NodeId qb =
        g.add_node("q_bias", OpKind::Parameter, std::vector<ValueId>{}, {{"shape", Ints{2}}});
    const NodeId zeros = g.add_node("k_zeros", OpKind::Constant, std::vector<ValueId>{},
                                    constant_attrs(Shape{2}, {0.0f, 0.0f}));
    const NodeId bias = g.add_node("bias", OpKind::Concat,
                                   std::vector<ValueId>{g.node(qb).output, g.node(zeros).output},
                                   {{"axis", int64_t{0}}});
    const NodeId biased =
        g.add_node("biased", OpKind::Add, std::vector<ValueId>{x, g.node(bias).output});
    const NodeId n = g.add_node("norm", OpKind::L2Normalize,
                                std::vector<ValueId>{g.node(biased).output}, {{"eps", 1e-12}});
    const NodeId scores = g.add_node("scores", OpKind::MatMul,
                                     std::vector<ValueId>{g.node(n).output, g.node(n).output},
                                     {{"transpose_b", int64_t{1}}});
    const NodeId table =
        g.add_node("coords", OpKind::Constant, std::vector<ValueId>{},
                   constant_attrs(Shape{5, 2}, {-1, -1, -0.5f, 0, 0, 0.5f, 0.5f, 1, 1, 0.25f}));
    const NodeId mlp = g.add_node("cpb", OpKind::Linear, std::vector<ValueId>{g.node(table).output},
                                  {{"out_features", int64_t{3}}});
    const NodeId picked =
        g.add_node("picked", OpKind::Gather, std::vector<ValueId>{g.node(mlp).output},
                   {{"indices", Ints{4, 2, 4}}, {"index_shape", Ints{3}}});
    const NodeId sig =
        g.add_node("sig", OpKind::Sigmoid, std::vector<ValueId>{g.node(picked).output});
    const NodeId scaled = g.add_node("scaled", OpKind::Mul,
                                     std::vector<ValueId>{g.node(scores).output, g.node(e).output});
    const NodeId s = g.add_node("s", OpKind::Add,
                                std::vector<ValueId>{g.node(scaled).output, g.node(sig).output});
    const NodeId soft = g.add_node("soft", OpKind::Softmax, std::vector<ValueId>{g.node(s).output});
    g.add_node("loss", OpKind::SumSquares, std::vector<ValueId>{g.node(soft).output});
    g.finalize();
    return g;
}

TEST(SwinV2Ops, ParameterValuedNodesKeepBothInvariantsUnderEveryStrategy) {
    const Graph g = parameter_valued_network();
    ASSERT_EQ(g.num_params(), 4);  // logit_scale, q_bias, cpb's weight and bias
    EXPECT_FALSE(g.needs_backward(*g.find_node("k_zeros")));
    EXPECT_FALSE(g.needs_backward(*g.find_node("coords")));
    EXPECT_TRUE(g.needs_backward(*g.find_node("logit_scale")));
    const RunData data = RunData::seeded(g);
    auto backend = make_cpu_backend(1);
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Plan none = plan_with(g, costs, Spec{"none", {}});
    const Execution ref = execute(g, none.schedule, *backend, data);
    for (const auto& grad : ref.param_grads) {
        bool nonzero = false;
        for (float v : grad) nonzero = nonzero || v != 0.0f;
        EXPECT_TRUE(nonzero) << "a parameter got no gradient";
    }
    for (const Strategy* st : strategies()) {
        SCOPED_TRACE(std::string(st->name()));
        const Plan plan = plan_with(g, costs, Spec{std::string(st->name()), {}});
        ASSERT_NE(plan.status, PlanStatus::Infeasible) << plan.message;
        const Simulation sim = simulate(g, plan.schedule, costs);
        const Execution run = execute(g, plan.schedule, *backend, data);
        EXPECT_EQ(sim.peak_bytes, run.peak_bytes);
        EXPECT_EQ(run.loss, ref.loss);
        for (size_t p = 0; p < ref.param_grads.size(); ++p)
            EXPECT_EQ(0, std::memcmp(ref.param_grads[p].data(), run.param_grads[p].data(),
                                     ref.param_grads[p].size() * sizeof(float)))
                << g.param(static_cast<ParamId>(p)).name;
    }
}

}  // namespace
}  // namespace rl
