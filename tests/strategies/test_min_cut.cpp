#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/ops/op.h"
#include "engine/simulator.h"
#include "strategies/execution_check.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

std::vector<std::string> presets_small() {
    return {"mlp:depth=6,width=16,batch=4", "mlp:depth=5,width=12,batch=3,act=gelu",
            "chain:l=9,width=16,batch=4", "resmlp:depth=3,width=16,batch=4",
            "transformer:layers=2,d_model=16,heads=2,seq=4,batch=2,vocab=8"};
}

std::vector<int> compute_counts(const Graph& g, const Schedule& s) {
    std::vector<int> out(static_cast<size_t>(g.num_nodes()), 0);
    for (const Instruction& ins : s.code)
        if (ins.kind == InstrKind::Compute) ++out[static_cast<size_t>(ins.target)];
    return out;
}

std::vector<std::string> names(const Graph& g, const std::vector<NodeId>& nodes) {
    std::vector<std::string> out;
    for (NodeId n : nodes) out.push_back(g.node(n).name);
    std::sort(out.begin(), out.end());
    return out;
}

TEST(MinCut, ValidatesAndNeverRecomputesADotOnEveryPreset) {
    for (const std::string& net : presets_small()) {
        const Graph g = load_network(net);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        for (const char* spec : {"min-cut", "min-cut:recompute_dots=1"}) {
            SCOPED_TRACE(net + " " + spec);
            const Plan p = plan_with(g, costs, parse_spec(spec));
            ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
            ASSERT_NO_THROW(validate(g, p.schedule));
            const auto counts = compute_counts(g, p.schedule);
            for (NodeId n = 0; n < g.num_nodes(); ++n) {
                EXPECT_GE(counts[static_cast<size_t>(n)], 1);
                if (std::string(spec) == "min-cut" && op_def(g.node(n).op).is_dot) {
                    EXPECT_EQ(counts[static_cast<size_t>(n)], 1) << g.node(n).name;
                }
            }
        }
    }
}

// x -> fc (linear, 4×8 f32 = 128 B) -> {g = gelu(fc), s = sigmoid(fc)} -> m = add(g, s) -> loss.
// The backwards read: the loss reads m, sigmoid reads its output s, gelu reads its input fc,
// fc reads x (a graph input: free), add reads nothing. Every value is 128 B.
// By hand, default (dots may not be recomputed): fc is read by a backward and cannot be
// recomputed, so it is saved (128 B). s and m can each be saved (128 B) or recomputed from fc
// (cost ≪ a byte's worth, since bytes come first): recomputing both costs 0 extra bytes. The
// minimum cut is {fc}; the backward recomputes g, s and m once each.
// With recompute_dots=1, fc too can be recomputed from x, which costs nothing to keep: the
// minimum cut saves nothing, and every node runs twice.
Graph fan_out_graph() {
    Graph g("fan-out");
    g.add_input("x", DType::F32, {4, 8});
    g.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", int64_t{8}}});
    g.add_node("g", OpKind::Gelu, std::vector<std::string>{"fc"});
    g.add_node("s", OpKind::Sigmoid, std::vector<std::string>{"fc"});
    g.add_node("m", OpKind::Add, std::vector<std::string>{"g", "s"});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"m"});
    g.finalize();
    return g;
}

TEST(MinCut, SavedSetOfAFanOutMatchesTheHandDerivedCut) {
    const Graph g = fan_out_graph();
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Plan p = plan_with(g, costs, parse_spec("min-cut"));
    EXPECT_EQ(names(g, p.checkpoints), (std::vector<std::string>{"fc"}));
    const auto counts = compute_counts(g, p.schedule);
    EXPECT_EQ(counts, (std::vector<int>{1, 2, 2, 2, 1}));  // fc, g, s, m, loss

    const Plan all = plan_with(g, costs, parse_spec("min-cut:recompute_dots=1"));
    EXPECT_TRUE(all.checkpoints.empty());
    EXPECT_EQ(compute_counts(g, all.schedule), (std::vector<int>{2, 2, 2, 2, 1}));
}

// x -> fc1 (linear 4×64 = 1 KiB) -> t = tanh(fc1) (1 KiB) -> fc2 (linear 4×2 = 32 B)
//   -> r = relu(fc2) (32 B) -> loss.
// Backwards read: t (tanh's output; fc2's input), r (relu's output; the loss's input), x.
// By hand: t costs 1 KiB either way — saved itself, or fc1 saved and tanh recomputed — so the
// recompute cost breaks the tie: save t. Likewise r (32 B) against fc2 (32 B) + a recompute:
// save r. fc1 and fc2, dots that no backward reads, are not saved. Nothing is recomputed.
TEST(MinCut, EqualBytesAreBrokenTowardsLessRecompute) {
    Graph g("tie");
    g.add_input("x", DType::F32, {4, 8});
    g.add_node("fc1", OpKind::Linear, std::vector<std::string>{"x"},
               {{"out_features", int64_t{64}}});
    g.add_node("t", OpKind::Tanh, std::vector<std::string>{"fc1"});
    g.add_node("fc2", OpKind::Linear, std::vector<std::string>{"t"},
               {{"out_features", int64_t{2}}});
    g.add_node("r", OpKind::Relu, std::vector<std::string>{"fc2"});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"r"});
    g.finalize();
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Plan p = plan_with(g, costs, parse_spec("min-cut"));
    EXPECT_EQ(names(g, p.checkpoints), (std::vector<std::string>{"r", "t"}));
    const Simulation sim = simulate(g, p.schedule, costs);
    EXPECT_EQ(sim.recomputes, 0);
}

TEST(MinCut, ResidualMlpSavesLessThanNoneAndRecomputesOnlyCheapOps) {
    // Per block the backwards read x (layernorm), ln (fc1), fc1 (gelu) and gelu (fc2). The cut
    // saves x and fc1 and recomputes ln and gelu, which are cheap: the activation peak drops.
    const Graph g = load_network("resmlp:depth=6,width=16,batch=256");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Plan p = plan_with(g, costs, parse_spec("min-cut"));
    const Simulation mc = simulate(g, p.schedule, costs);
    const Simulation none = simulate(g, plan_with(g, costs, parse_spec("none")).schedule, costs);
    EXPECT_LT(mc.peak_bytes, none.peak_bytes);
    EXPECT_GT(mc.recomputes, 0);
    for (NodeId n : p.checkpoints) {
        const OpKind op = g.node(n).op;
        EXPECT_TRUE(op == OpKind::Linear || op == OpKind::Add) << g.node(n).name;
    }
    const auto counts = compute_counts(g, p.schedule);
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        if (counts[static_cast<size_t>(n)] > 1) {
            const OpKind op = g.node(n).op;
            EXPECT_TRUE(op == OpKind::LayerNorm || op == OpKind::Gelu) << g.node(n).name;
        }
}

TEST(MinCut, BudgetSweepFitsAndCostsMoreRecomputeAsTheBudgetShrinks) {
    for (const char* net : {"mlp:depth=12,width=16,batch=128", "resmlp:depth=5,width=16,batch=128",
                            "transformer:layers=2,d_model=16,heads=2,seq=16,batch=2,vocab=8"}) {
        SCOPED_TRACE(net);
        const Graph g = load_network(net);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        const uint64_t none_peak =
            simulate(g, plan_with(g, costs, parse_spec("none")).schedule, costs).peak_bytes;
        const Plan probe = plan_with(g, costs, parse_spec("min-cut:budget=1"));
        ASSERT_EQ(probe.status, PlanStatus::Infeasible);
        ASSERT_TRUE(probe.min_feasible_budget.has_value());
        const uint64_t least = *probe.min_feasible_budget;
        EXPECT_FALSE(probe.message.empty());
        ASSERT_LT(least, none_peak);  // activations dominate these networks: there is a trade

        double previous = -1;
        for (int i = 0; i <= 8; ++i) {
            const uint64_t budget = none_peak - (none_peak - least) * static_cast<uint64_t>(i) / 8;
            const Plan p =
                plan_with(g, costs, parse_spec("min-cut:budget=" + std::to_string(budget)));
            ASSERT_NE(p.status, PlanStatus::Infeasible) << "budget " << budget << ": " << p.message;
            ASSERT_NO_THROW(validate(g, p.schedule));
            const Simulation sim = simulate(g, p.schedule, costs);
            EXPECT_LE(sim.peak_bytes, budget);
            EXPECT_GE(sim.recompute_ms, previous) << "budget " << budget;
            previous = sim.recompute_ms;
        }
        const Plan below =
            plan_with(g, costs, parse_spec("min-cut:budget=" + std::to_string(least - 1)));
        EXPECT_EQ(below.status, PlanStatus::Infeasible);
        EXPECT_EQ(below.min_feasible_budget, least);
    }
}

TEST(MinCut, GenerousBudgetRecomputesNoMoreThanThePlainCut) {
    const Graph g = load_network("resmlp:depth=4,width=16,batch=128");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Simulation plain =
        simulate(g, plan_with(g, costs, parse_spec("min-cut")).schedule, costs);
    const Plan p =
        plan_with(g, costs, parse_spec("min-cut:budget=" + std::to_string(plain.peak_bytes)));
    const Simulation sim = simulate(g, p.schedule, costs);
    EXPECT_LE(sim.recompute_ms, plain.recompute_ms);
    EXPECT_LE(sim.peak_bytes, plain.peak_bytes);
}

TEST(MinCut, ExecutesWithPredictedPeakAndGradientsOfNone) {
    auto backend = make_cpu_backend(1);
    for (const char* net : {"mlp:depth=6,width=16,batch=64", "resmlp:depth=3,width=8,batch=64",
                            "transformer:layers=2,d_model=16,heads=2,seq=16,batch=2,vocab=8"}) {
        const Graph g = load_network(net);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        const RunData data = RunData::seeded(g);
        const auto reference = testing::none_gradients(g, costs, *backend, data);
        const uint64_t least =
            *plan_with(g, costs, parse_spec("min-cut:budget=1")).min_feasible_budget;
        const std::vector<std::string> specs = {"min-cut:recompute_dots=1",
                                                "min-cut:budget=" + std::to_string(least)};
        for (const std::string& spec : specs) {
            SCOPED_TRACE(std::string(net) + " " + spec);
            const Plan p = plan_with(g, costs, parse_spec(spec));
            ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
            const Simulation sim = simulate(g, p.schedule, costs);
            ASSERT_NO_FATAL_FAILURE(
                testing::expect_runs_as_simulated(g, p.schedule, sim, *backend, data, reference));
        }
    }
}

// offload=1: the cuts that keep more, with what they keep offloaded down to the budget, compete
// with the budgeted cut. Never worse by recompute + stall; a dead link changes nothing; free
// copies beat recomputing; and the plans execute with both pools as predicted.
TEST(MinCut, OffloadBesideRecompute) {
    auto backend = make_cpu_backend(1);
    for (const char* net : {"resmlp:depth=5,width=16,batch=128",
                            "transformer:layers=2,d_model=16,heads=2,seq=16,batch=2,vocab=8"}) {
        SCOPED_TRACE(net);
        const Graph g = load_network(net);
        const RunData data = RunData::seeded(g);
        const auto reference = testing::none_gradients(g, CostModel{}, *backend, data);
        for (const double gbps : {1e-9, 25.0, 1e9}) {
            CostModel costs = CostModel::analytic(g, DeviceRates{});
            TransferRates link;
            link.to_host_gbps = link.to_device_gbps = gbps;
            link.latency_us = gbps > 1e6 ? 0 : 10;
            costs.set_transfer(link);
            const uint64_t none_peak =
                simulate(g, plan_with(g, costs, parse_spec("none")).schedule, costs).peak_bytes;
            const uint64_t least =
                *plan_with(g, costs, parse_spec("min-cut:budget=1")).min_feasible_budget;
            const std::string budget = std::to_string(least + (none_peak - least) / 3);
            SCOPED_TRACE(std::to_string(gbps) + " GB/s, budget " + budget);
            const Plan without = plan_with(g, costs, parse_spec("min-cut:budget=" + budget));
            const Plan with =
                plan_with(g, costs, parse_spec("min-cut:budget=" + budget + ",offload=1"));
            ASSERT_NE(with.status, PlanStatus::Infeasible) << with.message;
            const Simulation a = simulate(g, without.schedule, costs);
            const Simulation b = simulate(g, with.schedule, costs);
            EXPECT_LE(b.peak_bytes, std::stoull(budget));
            EXPECT_LE(b.recompute_ms + b.stall_ms, a.recompute_ms + 1e-12) << with.message;
            if (gbps < 1) {
                EXPECT_EQ(with.schedule.code, without.schedule.code) << with.message;
            }
            if (gbps > 1e6) {
                ASSERT_GT(a.recompute_ms, 0);
                EXPECT_LT(b.recompute_ms + b.stall_ms, a.recompute_ms) << with.message;
                EXPECT_GT(b.offloads, 0) << with.message;
            }
            ASSERT_NO_FATAL_FAILURE(
                testing::expect_runs_as_simulated(g, with.schedule, b, *backend, data, reference));
        }
    }
    const Graph g = load_network("resmlp:depth=3,width=8,batch=4");
    try {
        plan_with(g, CostModel{}, parse_spec("min-cut:offload=1"));
        ADD_FAILURE() << "offload=1 without a budget was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("needs a budget"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace rl
