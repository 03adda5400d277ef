#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/execution_check.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

uint64_t none_peak(const Graph& g, const CostModel& costs) {
    return simulate(g, plan_with(g, costs, parse_spec("none")).schedule, costs).peak_bytes;
}

// The smallest budget DTR reports when asked for an impossible one.
uint64_t least_budget(const Graph& g, const CostModel& costs, const std::string& extra = "") {
    const Plan p = plan_with(g, costs, parse_spec("dtr:budget=1" + extra));
    EXPECT_EQ(p.status, PlanStatus::Infeasible);
    EXPECT_FALSE(p.message.empty());
    return p.min_feasible_budget.value_or(0);
}

Plan dtr(const Graph& g, const CostModel& costs, uint64_t budget, const std::string& extra = "") {
    return plan_with(g, costs, parse_spec("dtr:budget=" + std::to_string(budget) + extra));
}

TEST(Dtr, FitsEveryBudgetFromTheSmallestToNoneOnEveryPreset) {
    for (const char* net :
         {"mlp:depth=6,width=16,batch=64", "mlp:depth=5,width=12,batch=48,act=gelu",
          "chain:l=9,width=8,batch=64", "resmlp:depth=3,width=8,batch=64",
          "transformer:layers=2,d_model=16,heads=2,seq=16,batch=2,vocab=8"}) {
        const Graph g = load_network(net);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        const uint64_t top = none_peak(g, costs);
        for (const std::string h : {",heuristic=eq", ",heuristic=local"}) {
            SCOPED_TRACE(std::string(net) + h);
            const uint64_t least = least_budget(g, costs, h);
            ASSERT_GT(least, 0u);
            ASSERT_LT(least, top);  // activations dominate these networks: there is a trade
            for (int i = 0; i <= 4; ++i) {
                const uint64_t budget = least + (top - least) * static_cast<uint64_t>(i) / 4;
                const Plan p = dtr(g, costs, budget, h);
                ASSERT_NE(p.status, PlanStatus::Infeasible) << budget << ": " << p.message;
                ASSERT_NO_THROW(validate(g, p.schedule));
                EXPECT_LE(simulate(g, p.schedule, costs).peak_bytes, budget);
            }
        }
    }
}

TEST(Dtr, AtNonesPeakItNeverEvicts) {
    const Graph g = load_network("resmlp:depth=3,width=8,batch=64");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const uint64_t top = none_peak(g, costs);
    const Simulation sim = simulate(g, dtr(g, costs, top).schedule, costs);
    EXPECT_EQ(sim.recomputes, 0);
    EXPECT_EQ(sim.peak_bytes, top);
}

TEST(Dtr, ChainUnderATightBudgetRecomputesAndFits) {
    // 24 layers of 128×16 f32 (8 KiB each; weights of 1 KiB). `none` holds every layer's input for
    // its backward; at a third of the way between the smallest budget and that, activations must be
    // evicted during the forward and recomputed in the backward.
    const Graph g = load_network("chain:l=24,width=16,batch=128");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const uint64_t top = none_peak(g, costs), least = least_budget(g, costs);
    ASSERT_LT(least, top);
    const uint64_t budget = least + (top - least) / 3;
    const Plan p = dtr(g, costs, budget);
    ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
    const Simulation sim = simulate(g, p.schedule, costs);
    EXPECT_LE(sim.peak_bytes, budget);
    EXPECT_LT(sim.activation_peak_bytes(),
              simulate(g, plan_with(g, costs, parse_spec("none")).schedule, costs)
                  .activation_peak_bytes());
    EXPECT_GT(sim.recomputes, 0);
    // Planning exactly at the reported smallest budget succeeds, one byte below does not.
    EXPECT_NE(dtr(g, costs, least).status, PlanStatus::Infeasible);
    EXPECT_EQ(dtr(g, costs, least - 1).status, PlanStatus::Infeasible);
}

TEST(Dtr, SmallerBudgetsNeverRecomputeLessOnAChain) {
    const Graph g = load_network("chain:l=16,width=16,batch=128");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const uint64_t top = none_peak(g, costs), least = least_budget(g, costs);
    double previous = -1;
    for (int i = 0; i <= 6; ++i) {
        const uint64_t budget = top - (top - least) * static_cast<uint64_t>(i) / 6;
        const Plan p = dtr(g, costs, budget);
        ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
        const Simulation sim = simulate(g, p.schedule, costs);
        EXPECT_GE(sim.recompute_ms, previous) << "budget " << budget;
        previous = sim.recompute_ms;
    }
    EXPECT_GT(previous, 0);
}

TEST(Dtr, DefaultBudgetIsMidwayBetweenTheSmallestAndNone) {
    const Graph g = load_network("mlp:depth=8,width=16,batch=64");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const uint64_t top = none_peak(g, costs), least = least_budget(g, costs);
    const Plan p = plan_with(g, costs, parse_spec("dtr"));
    ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
    ASSERT_TRUE(p.budget.has_value());
    EXPECT_EQ(*p.budget, least + (top - least) / 2);
    EXPECT_LE(simulate(g, p.schedule, costs).peak_bytes, *p.budget);
}

TEST(Dtr, ExecutesWithPredictedPeakAndGradientsOfNone) {
    auto backend = make_cpu_backend(1);
    for (const char* net : {"chain:l=12,width=8,batch=64", "resmlp:depth=3,width=8,batch=64",
                            "transformer:layers=2,d_model=16,heads=2,seq=16,batch=2,vocab=8"}) {
        SCOPED_TRACE(net);
        const Graph g = load_network(net);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        const RunData data = RunData::seeded(g);
        const auto reference = testing::none_gradients(g, costs, *backend, data);
        const Plan p = dtr(g, costs, least_budget(g, costs));
        ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
        const Simulation sim = simulate(g, p.schedule, costs);
        EXPECT_GT(sim.recomputes, 0);
        ASSERT_NO_FATAL_FAILURE(
            testing::expect_runs_as_simulated(g, p.schedule, sim, *backend, data, reference));
    }
}

}  // namespace
}  // namespace rl
