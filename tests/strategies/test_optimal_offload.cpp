// optimal:offload=1 on the two presets: with a device budget below none's peak, a fast
// host link gives strictly less added time (recompute + stall) than recompute alone, the
// default link never more, and a near-dead link gives back the recompute-only plan; every plan
// executes with both pools as predicted and none's gradients.
#include <gtest/gtest.h>

#include "engine/backend.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"
#include "tests/strategies/execution_check.h"

namespace rl {
namespace {

CostModel costs_with_link(const Graph& g, double gbps) {
    CostModel m = CostModel::analytic(g, DeviceRates{});  // nominal rates: the same every run
    TransferRates link;
    link.to_host_gbps = link.to_device_gbps = gbps;
    m.set_transfer(link);
    return m;
}

double added_ms(const Simulation& s) {
    return s.recompute_ms + s.stall_ms;
}

class OptimalOffload : public ::testing::TestWithParam<const char*> {};

TEST_P(OptimalOffload, BeatsRecomputeWithBandwidthAndDegeneratesWithout) {
    const Graph g = build_preset(parse_spec(GetParam()));
    const uint64_t none_peak =
        simulate(g, plan_with(g, CostModel{}, parse_spec("none")).schedule, CostModel{}).peak_bytes;
    const std::string budget = std::to_string(none_peak * 3 / 4);
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    const auto reference = testing::none_gradients(g, CostModel{}, *backend, data);
    for (double gbps : {1e-6, 25.0, 1000.0}) {
        const CostModel costs = costs_with_link(g, gbps);
        const Plan without = plan_with(g, costs, parse_spec("optimal:budget=" + budget));
        const Plan with =
            plan_with(g, costs, parse_spec("optimal:budget=" + budget + ",offload=1"));
        ASSERT_NE(without.status, PlanStatus::Infeasible) << without.message;
        ASSERT_NE(with.status, PlanStatus::Infeasible) << with.message;
        const Simulation a = simulate(g, without.schedule, costs);
        const Simulation b = simulate(g, with.schedule, costs);
        EXPECT_LE(b.peak_bytes, none_peak * 3 / 4);
        EXPECT_LE(added_ms(b), added_ms(a) + 1e-12) << gbps << " GB/s: " << with.message;
        if (gbps < 1) {  // near-dead link: nothing is offloaded, the same plan
            EXPECT_EQ(b.offloads, 0) << with.message;
            EXPECT_EQ(with.schedule.code, without.schedule.code);
        }
        if (gbps > 100) {  // a fast link: strictly better, by offloading
            EXPECT_LT(added_ms(b), added_ms(a)) << with.message;
            EXPECT_GT(b.offloads, 0) << with.message;
        }
        testing::expect_runs_as_simulated(g, with.schedule, b, *backend, data, reference);
    }
}

INSTANTIATE_TEST_SUITE_P(Presets, OptimalOffload,
                         ::testing::Values("mlp:depth=6,width=64,batch=1024",
                                           "transformer:layers=3,seq=64,batch=4"));

}  // namespace
}  // namespace rl
