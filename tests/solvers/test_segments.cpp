#include <gtest/gtest.h>

#include <algorithm>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/graph_algorithms.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

Simulation sim_of(const Graph& g, const std::string& spec, const CostModel& costs) {
    const Plan p = plan_with(g, costs, parse_spec(spec));
    EXPECT_NE(p.status, PlanStatus::Infeasible) << p.message;
    return simulate(g, p.schedule, costs);
}

TEST(SqrtN, DeepMlpActivationPeakIsAtMostAThirdOfNone) {
    const Graph g = load_network("mlp:depth=64,width=32,batch=8");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Simulation none = sim_of(g, "none", costs);
    const Simulation sqrt = sim_of(g, "sqrt-n", costs);
    EXPECT_LE(sqrt.activation_peak_bytes() * 3, none.activation_peak_bytes());

    // Measured, too: the executor agrees with the simulator.
    auto backend = make_cpu_backend(1);
    const Plan p = plan_with(g, costs, parse_spec("sqrt-n"));
    const Execution run = execute(g, p.schedule, *backend, RunData::seeded(g));
    EXPECT_EQ(run.activation_peak_bytes(), sqrt.activation_peak_bytes());
}

TEST(SqrtN, RecomputesAboutOneForward) {
    const Graph g = load_network("mlp:depth=64,width=32,batch=8");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Simulation s = sim_of(g, "sqrt-n", costs);
    const long forward = g.num_nodes();
    EXPECT_EQ(s.computes, forward + s.recomputes);
    // Every segment but the last is recomputed: between 3/4 of a forward and one forward.
    EXPECT_GE(s.recomputes * 4, forward * 3);
    EXPECT_LT(s.recomputes, forward);
    EXPECT_GT(s.recompute_ms, 0.7 * s.forward_ms);
    EXPECT_LT(s.recompute_ms, 1.0 * s.forward_ms);
}

TEST(None, FreesEachActivationAfterItsLastUseSoTheTimelineFallsDuringBackward) {
    // A wide batch, so that activations (32 KiB a layer) outweigh the parameter gradients the
    // backward adds (4.1 KiB a layer): the total must then fall as the backward frees.
    const Graph g = load_network("mlp:depth=8,width=32,batch=256");
    const Plan p = plan_with(g, CostModel{}, parse_spec("none"));
    auto backend = make_cpu_backend(1);
    const Execution run = execute(g, p.schedule, *backend, RunData::seeded(g));
    // Live bytes at the end of the first and of the last Backward instruction.
    long first_bwd = -1, last_bwd = -1;
    for (size_t i = 0; i < p.schedule.size(); ++i)
        if (p.schedule.code[i].kind == InstrKind::Backward) {
            if (first_bwd < 0) first_bwd = static_cast<long>(i);
            last_bwd = static_cast<long>(i);
        }
    ASSERT_GE(first_bwd, 0);
    auto live_after = [&](long instr) {
        uint64_t bytes = 0;
        for (const auto& pt : run.timeline)
            if (pt.instruction == instr) bytes = pt.bytes;
        return bytes;
    };
    EXPECT_LT(live_after(last_bwd), live_after(first_bwd));
    // And Frees are interleaved with the Backwards, not bunched at the end.
    long frees_between = 0;
    for (long i = first_bwd; i < last_bwd; ++i)
        frees_between += p.schedule.code[static_cast<size_t>(i)].kind == InstrKind::Free;
    EXPECT_GE(frees_between, 8);
    // A value that no backward reads (a linear output followed by relu) dies in the forward.
    const auto fc = g.find_node("block3.fc");
    ASSERT_TRUE(fc);
    long computed = -1, freed = -1;
    for (size_t i = 0; i < p.schedule.size(); ++i) {
        const auto& ins = p.schedule.code[i];
        if (ins.kind == InstrKind::Compute && ins.target == *fc) computed = static_cast<long>(i);
        if (ins.kind == InstrKind::Free && ins.target == g.node(*fc).output)
            freed = static_cast<long>(i);
    }
    EXPECT_GT(freed, computed);
    EXPECT_LT(freed, first_bwd);
}

TEST(SqrtN, BudgetVariantMeetsTheBudgetOrNamesTheSmallestFeasible) {
    // Activations dominate the peak here (batch 256 against width 32).
    const Graph g = load_network("mlp:depth=32,width=32,batch=256");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Simulation none = sim_of(g, "none", costs);
    const Simulation plain = sim_of(g, "sqrt-n", costs);

    // The budget of plain backprop is met without recomputation.
    const Plan roomy =
        plan_with(g, costs, parse_spec("sqrt-n:budget=" + std::to_string(none.peak_bytes)));
    ASSERT_NE(roomy.status, PlanStatus::Infeasible);
    EXPECT_EQ(simulate(g, roomy.schedule, costs).recomputes, 0);

    // A budget between the two is met, with a peak under it.
    const uint64_t mid = (none.peak_bytes + plain.peak_bytes) / 2;
    const Plan p = plan_with(g, costs, parse_spec("sqrt-n:budget=" + std::to_string(mid)));
    ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
    const Simulation s = simulate(g, p.schedule, costs);
    EXPECT_LE(s.peak_bytes, mid);
    EXPECT_GT(s.recomputes, 0);

    // An impossible budget names the smallest feasible one, which then works.
    const Plan tiny = plan_with(g, costs, parse_spec("sqrt-n:budget=1KiB"));
    ASSERT_EQ(tiny.status, PlanStatus::Infeasible);
    ASSERT_TRUE(tiny.min_feasible_budget);
    EXPECT_NE(tiny.message.find(std::to_string(*tiny.min_feasible_budget)), std::string::npos);
    const Plan enough = plan_with(
        g, costs, parse_spec("sqrt-n:budget=" + std::to_string(*tiny.min_feasible_budget)));
    EXPECT_NE(enough.status, PlanStatus::Infeasible);
}

TEST(Periodic, KeepsEveryKthBoundary) {
    const Graph g = load_network("chain:l=12,width=8,batch=2");
    const auto boundaries = segment_boundaries(g);
    ASSERT_EQ(boundaries.size(), 12u);  // every layer but the loss
    const Plan p = plan_with(g, CostModel{}, parse_spec("periodic:k=3"));
    ASSERT_EQ(p.checkpoints.size(), 4u);
    for (size_t i = 0; i < p.checkpoints.size(); ++i)
        EXPECT_EQ(p.checkpoints[i], boundaries[3 * i + 2]);
}

TEST(Boundaries, TransformerCutsAtResidualStreamOnly) {
    const Graph g = load_network("transformer:layers=2,d_model=16,heads=2,seq=4,batch=2,vocab=8");
    const auto b = segment_boundaries(g);
    ASSERT_FALSE(b.empty());
    for (NodeId n : b) {
        const std::string& name = g.node(n).name;
        // Inside attention, q/k/v branch: nothing there cuts the network.
        EXPECT_EQ(name.find(".attn.q"), std::string::npos) << name;
        EXPECT_EQ(name.find(".attn.scores"), std::string::npos) << name;
    }
    const auto res = g.find_node("block0.mlp.residual");
    ASSERT_TRUE(res);
    EXPECT_NE(std::find(b.begin(), b.end(), *res), b.end());
    // Topological order from Boost agrees with the stored one being a valid order.
    const auto topo = topological_order(g);
    std::vector<int> pos(static_cast<size_t>(g.num_nodes()));
    for (size_t i = 0; i < topo.size(); ++i)
        pos[static_cast<size_t>(topo[i])] = static_cast<int>(i);
    for (const Node& n : g.nodes()) {
        for (ValueId in : n.inputs) {
            if (g.value(in).is_input()) continue;
            EXPECT_LT(pos[static_cast<size_t>(g.value(in).producer)],
                      pos[static_cast<size_t>(*g.find_node(n.name))]);
        }
    }
}

}  // namespace
}  // namespace rl
