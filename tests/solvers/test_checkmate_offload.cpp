// The Checkmate MILP with offload (solvers/checkmate.h, CheckmateOptions::offload) on the small
// DAGs of small_dags.h, under host links from dead to free:
//   - its objective is what the engine's simulator times (recompute + the compute stream's waits
//     for copies): the model is exact for the schedules it describes;
//   - its class contains the recompute-only MILP's, so its proven optimum never costs more, and
//     is the recompute-only optimum when the link is dead; with free copies and some room above
//     the least peak it is strictly cheaper, by offloading. (At the least budgets it may not be:
//     an offloaded value stays on the device through the stage after its forward, and a
//     prefetched one through the stage before its read, which recomputation does not need.)
//   - its plans execute with the predicted device and host peaks and none's gradients, bit for
//     bit.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/simulator.h"
#include "solvers/checkmate.h"
#include "strategies/exhaustive.h"
#include "tests/solvers/small_dags.h"

namespace rl {
namespace {

using namespace rl::testing;  // the small DAGs

CostModel with_link(const Graph& g, double gbps, double latency_us) {
    CostModel m = CostModel::analytic(g, DeviceRates{});  // nominal rates: the same every run
    TransferRates link;
    link.to_host_gbps = link.to_device_gbps = gbps;
    link.latency_us = latency_us;
    m.set_transfer(link);
    return m;
}

CheckmateOptions options(bool offload) {
    CheckmateOptions o;
    o.time_limit_s = 600;  // a guard: far above what these graphs need on any machine
    o.offload = offload;
    return o;
}

double added_ms(const Simulation& s) {
    return s.recompute_ms + s.stall_ms;
}

struct Link {
    const char* name;
    double gbps, latency_us;
};
// Dead (nothing moves), one where a copy costs about what a few of these tiny kernels do, and
// free copies.
constexpr Link kLinks[] = {{"dead", 1e-9, 10}, {"slow", 0.05, 0.5}, {"free", 1e9, 0}};

class CheckmateOffload : public ::testing::TestWithParam<NamedDag> {};

TEST_P(CheckmateOffload, PricesWhatTheSimulatorTimesAndNeverCostsMore) {
    const Graph g = GetParam().build();
    const CostModel nominal = CostModel::analytic(g, DeviceRates{});
    const auto lo = static_cast<uint64_t>(Exhaustive(g, nominal).min_peak().value);
    const uint64_t hi = simulate(g, backprop_schedule(g), nominal).peak_bytes;
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    const Execution reference = execute(g, backprop_schedule(g), *backend, data);
    bool offloaded_somewhere = false;
    for (const Link& link : kLinks) {
        const CostModel costs = with_link(g, link.gbps, link.latency_us);
        for (const double f : {0.0, 0.3, 0.6}) {
            const auto budget = lo + static_cast<uint64_t>(f * static_cast<double>(hi - lo));
            SCOPED_TRACE(std::string(link.name) + " link, budget " + std::to_string(budget));
            CheckmateStats without_st, with_st;
            const Plan without = checkmate_plan(g, costs, budget, options(false), &without_st);
            const Plan with = checkmate_plan(g, costs, budget, options(true), &with_st);
            ASSERT_EQ(without.status, PlanStatus::Optimal) << without.message;
            ASSERT_EQ(with.status, PlanStatus::Optimal) << with.message;
            EXPECT_EQ(with.method, "milp-offload");
            ASSERT_NO_THROW(validate(g, with.schedule));
            const Simulation a = simulate(g, without.schedule, costs);
            const Simulation b = simulate(g, with.schedule, costs);
            EXPECT_LE(b.peak_bytes, budget);
            // The MILP's objective is the simulated recompute + stall, to rounding.
            EXPECT_NEAR(with_st.model_ms, added_ms(b), 1e-9 * std::max(1.0, added_ms(b)));
            EXPECT_NEAR(with_st.objective_ms, added_ms(b), 1e-12);
            // Its class contains the recompute-only one.
            EXPECT_LE(added_ms(b), added_ms(a) + 1e-9 * std::max(1.0, added_ms(a)));
            if (std::string(link.name) == "dead") {
                EXPECT_EQ(b.offloads, 0);
                EXPECT_NEAR(added_ms(b), added_ms(a), 1e-9 * std::max(1.0, added_ms(a)));
            }
            if (std::string(link.name) == "free" && f > 0.5) {
                ASSERT_GT(a.recompute_ms, 0);
                EXPECT_LT(added_ms(b), added_ms(a));
                EXPECT_GT(b.offloads, 0);
            }
            offloaded_somewhere = offloaded_somewhere || b.offloads > 0;

            // Executed: both pools as predicted, none's gradients bit for bit.
            const Execution run = execute(g, with.schedule, *backend, data);
            EXPECT_EQ(run.peak_bytes, b.peak_bytes);
            EXPECT_EQ(run.host_peak_bytes, b.host_peak_bytes);
            ASSERT_EQ(run.param_grads.size(), reference.param_grads.size());
            for (size_t i = 0; i < reference.param_grads.size(); ++i)
                EXPECT_EQ(0, std::memcmp(reference.param_grads[i].data(), run.param_grads[i].data(),
                                         reference.param_grads[i].size() * sizeof(float)));
        }
    }
    EXPECT_TRUE(offloaded_somewhere);
}

INSTANTIATE_TEST_SUITE_P(Dags, CheckmateOffload, ::testing::ValuesIn(small_dags()), dag_name);

// The least device peak with offload: proven by the peak-minimising MILP, never above the
// exhaustive search's recompute-only least peak (its class is larger), met by a plan at that
// budget, and named when a budget one byte under it is refused.
TEST(CheckmateOffloadPeak, TheLeastPeakIsProvenAndNamed) {
    for (Graph (*build)() : {chain_graph, diamond_graph, attention_graph}) {
        const Graph g = build();
        SCOPED_TRACE(g.name());
        const CostModel costs = with_link(g, 25, 10);
        const auto lo = static_cast<uint64_t>(Exhaustive(g, costs).min_peak().value);
        bool proven = false;
        Schedule lean;
        const uint64_t least = checkmate_min_budget(g, options(true), &proven, &lean);
        EXPECT_TRUE(proven);
        EXPECT_LE(least, lo);
        EXPECT_EQ(simulate(g, lean, costs).peak_bytes, least);
        const Plan p = checkmate_plan(g, costs, least, options(true));
        ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
        EXPECT_LE(simulate(g, p.schedule, costs).peak_bytes, least);
        // And one byte less is refused with that least peak named.
        const Plan under = checkmate_plan(g, costs, least - 1, options(true));
        ASSERT_EQ(under.status, PlanStatus::Infeasible);
        ASSERT_TRUE(under.min_feasible_budget);
        EXPECT_EQ(*under.min_feasible_budget, least);
    }
}

}  // namespace
}  // namespace rl
