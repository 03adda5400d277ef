#include <gtest/gtest.h>

#include "analysis/sweep.h"
#include "engine/networks/presets.h"

namespace rl {
namespace {

TEST(Sweep, OwnRangeOfSqrtNStartsAtPlainBackprop) {
    const Graph g = load_network("mlp:depth=16,width=32,batch=128");
    EvaluateOptions eo;
    eo.execute = false;
    Evaluator ev(g, "mlp", eo);
    const auto points = sweep(g, ev, Spec{"sqrt-n", {}}, SweepOptions{});
    ASSERT_GE(points.size(), 5u);
    const Evaluation none = ev.evaluate(Spec{"none", {}});
    // One segment = no checkpoint: the same peak as none, no recompute.
    EXPECT_EQ(points.front().eval.strategy, "sqrt-n:segments=1");
    EXPECT_EQ(points.front().eval.predicted.peak_bytes, none.predicted.peak_bytes);
    EXPECT_EQ(points.front().eval.predicted.recomputes, 0);
    // Somewhere along the range the peak is lower than none's.
    uint64_t lowest = UINT64_MAX;
    for (const auto& p : points) lowest = std::min(lowest, p.eval.predicted.peak_bytes);
    EXPECT_LT(lowest, none.predicted.peak_bytes);
}

TEST(Sweep, BudgetSweepRunsFromTheSmallestFeasibleToNonesPeakAndIsMonotone) {
    const Graph g = load_network("mlp:depth=16,width=32,batch=128");
    EvaluateOptions eo;
    eo.execute = false;
    Evaluator ev(g, "mlp", eo);
    SweepOptions so;
    so.budgets = 6;
    // An argument (here the default segment count) asks for a budget sweep, not the own range.
    const auto points = sweep(g, ev, Spec{"sqrt-n", {{"segments", "0"}}}, so);
    ASSERT_EQ(points.size(), 6u);
    const Evaluation none = ev.evaluate(Spec{"none", {}});
    EXPECT_EQ(*points.back().budget, none.predicted.peak_bytes);
    double previous = 1e300;
    for (const auto& p : points) {
        ASSERT_TRUE(p.budget);
        ASSERT_NE(p.eval.plan.status, PlanStatus::Infeasible) << p.eval.plan.message;
        EXPECT_LE(p.eval.predicted.peak_bytes, *p.budget);
        // More memory never costs more recompute.
        EXPECT_LE(p.eval.predicted.recompute_ms, previous + 1e-12);
        previous = p.eval.predicted.recompute_ms;
    }
    // Below the first budget the strategy is infeasible: it was the smallest feasible one.
    const auto below =
        sweep(g, ev, Spec{"sqrt-n", {{"budget", std::to_string(*points.front().budget - 1)}}}, so);
    ASSERT_EQ(below.size(), 1u);
    EXPECT_EQ(below.front().eval.plan.status, PlanStatus::Infeasible);
}

TEST(Sweep, ExecutedPointsKeepBothInvariants) {
    const Graph g = load_network("mlp:depth=6,width=16,batch=32");
    EvaluateOptions eo;
    eo.execute = true;
    Evaluator ev(g, "mlp", eo);
    SweepOptions so;
    so.budget_list = {UINT64_MAX / 4};
    for (const auto& p : sweep(g, ev, Spec{"periodic", {}}, so)) {
        ASSERT_TRUE(p.eval.measured);
        EXPECT_EQ(p.eval.predicted.peak_bytes, p.eval.measured->peak_bytes);
        EXPECT_TRUE(p.eval.grads_bitwise_equal_to_none) << p.eval.strategy;
    }
}

}  // namespace
}  // namespace rl
