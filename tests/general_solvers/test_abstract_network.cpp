// Abstract benchmark graphs as a plan-only network (engine/networks/abstract_network.h): the
// engine's liveness rules charge exactly the general problem's memory model, `optimal` reaches
// the general solvers, the strategies that need Backward instructions refuse, nothing executes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "analysis/evaluate.h"
#include "analysis/explain.h"
#include "engine/errors.h"
#include "engine/networks/abstract_network.h"
#include "engine/networks/network_json.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "graphs.h"
#include "solvers/general/general_problem.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

using general::AbstractGraph;

uint64_t engine_none_peak(const Graph& g) {
    return simulate(g, plan_with(g, CostModel{}, Spec{"none", {}}).schedule, CostModel{})
        .peak_bytes;
}

// Moccasin's family: graph.order differs from the file's node order; node 1 (the target) ends it.
const char* kMoccasin = R"({
  "directed": true, "multigraph": false,
  "graph": {"name": "tiny", "order": [0, 2, 3, 1]},
  "nodes": [
    {"name": 0, "out_cost": 5, "duration": 0, "param_cost": 0},
    {"name": 1, "out_cost": 7, "duration": 0, "param_cost": 0},
    {"name": 2, "out_cost": 3, "duration": 4, "param_cost": 0},
    {"name": 3, "out_cost": 2, "duration": 6, "param_cost": 0}],
  "links": [{"0": 0, "1": 2}, {"0": 0, "1": 3}, {"0": 2, "1": 3}, {"0": 3, "1": 1}]
})";

// Checkmate's family with explicit backward nodes: a(4) -> b(10) -> loss(1) -> gb(2, reads loss
// and b) -> ga(2, reads gb and a), and a leaf `probe`(20) that reads a and nothing reads.
const char* kCheckmate = R"({"directed": true, "graph": {"name": "tiny_train"},
  "nodes": [{"id": 0, "name": "a", "backward": false, "cost_cpu": 3, "cost_ram": 4},
            {"id": 1, "name": "probe", "backward": false, "cost_cpu": 1, "cost_ram": 20},
            {"id": 2, "name": "b", "backward": false, "cost_cpu": 1, "cost_ram": 10},
            {"id": 3, "name": "loss", "backward": false, "cost_cpu": 1, "cost_ram": 1},
            {"id": 4, "name": "gb", "backward": true, "cost_cpu": 2, "cost_ram": 2},
            {"id": 5, "name": "ga", "backward": true, "cost_cpu": 3, "cost_ram": 2}],
  "links": [{"source": 0, "target": 1}, {"source": 0, "target": 2}, {"source": 2, "target": 3},
            {"source": 3, "target": 4}, {"source": 2, "target": 4}, {"source": 4, "target": 5},
            {"source": 0, "target": 5}]})";

TEST(AbstractNetwork, LoadsBothFamiliesAsPlanOnlyNetworks) {
    const Graph m = network_from_json(kMoccasin, "tiny.json");
    EXPECT_TRUE(m.plan_only());
    ASSERT_EQ(m.num_nodes(), 4);
    EXPECT_EQ(m.node(1).name, "2");  // graph.order: node 2 is second
    EXPECT_EQ(m.num_params(), 0);
    EXPECT_EQ(m.inputs().size(), 0u);
    EXPECT_EQ(m.output_of(1).bytes, 3u);
    for (NodeId n = 0; n < m.num_nodes(); ++n) EXPECT_FALSE(m.needs_backward(n));
    // Order 0, 2, 3, 1 by hand: {0}=5, {0,2}=8, {0,2,3}=10, {3,1}=9.
    EXPECT_EQ(engine_none_peak(m), 10u);

    const Graph c = network_from_json(kCheckmate, "tiny_train.json");
    EXPECT_TRUE(c.plan_only());
    EXPECT_TRUE(c.node(4).has_tag("backward"));
    EXPECT_TRUE(c.node(0).has_tag("forward"));
    // By hand: a 4; probe 4+20 = 24, then freed at once (no successor); b 4+10 = 14;
    // loss 4+10+1 = 15; gb 4+10+1+2 = 17 (b and loss die after it); ga 4+2+2 = 8. Peak 24; were
    // probe kept to the end, gb would see 37.
    EXPECT_EQ(engine_none_peak(c), 24u);
    const Plan none = plan_with(c, CostModel{}, Spec{"none", {}});
    const Simulation sim = simulate(c, none.schedule, CostModel{});
    EXPECT_EQ(sim.peak_by_category[static_cast<size_t>(Category::Activations)], 24u);
    EXPECT_EQ(sim.peak_by_category[static_cast<size_t>(Category::Parameters)], 0u);
    EXPECT_EQ(sim.peak_by_category[static_cast<size_t>(Category::Inputs)], 0u);
    EXPECT_EQ(sim.peak_by_category[static_cast<size_t>(Category::ActivationGrads)], 0u);
    EXPECT_EQ(sim.backwards, 0);
    // Durations are the forward cost, in the file's units.
    const CostModel costs = CostModel::analytic(c, DeviceRates{});
    EXPECT_EQ(costs.kind(), "durations");
    EXPECT_DOUBLE_EQ(simulate(c, none.schedule, costs).forward_ms, 3 + 1 + 1 + 1 + 2 + 3);
}

TEST(AbstractNetwork, EngineAndGeneralSimulatorsAgreeOnTheOrderWithoutRecomputation) {
    std::vector<AbstractGraph> graphs;
    for (uint32_t seed = 1; seed <= 12; ++seed)
        graphs.push_back(general::testing::random_dag(20 + 7 * static_cast<int>(seed), seed));
    graphs.push_back(general::testing::train_chain(9, 12, 5));
    for (const AbstractGraph& a : graphs) {
        const Graph g = network_from_abstract(a);
        EXPECT_EQ(engine_none_peak(g), general::peak_no_remat(a)) << a.name;
        // And the round trip the solvers plan on gives back the same graph.
        const AbstractGraph back = abstract_graph_of(g);
        EXPECT_EQ(back.preds, a.preds) << a.name;
        EXPECT_EQ(general::peak_no_remat(back), general::peak_no_remat(a)) << a.name;
    }
}

TEST(AbstractNetwork, RefusesMalformedFilesNamingTheFile) {
    try {
        network_from_json(R"({"nodes": [], "edges": []})", "weird.json");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("weird.json"), std::string::npos) << m;
        EXPECT_NE(m.find("node-link"), std::string::npos) << m;
    }
    try {
        network_from_json(R"({"nodes": [{"id": 0, "cost_cpu": 1}], "links": []})", "half.json");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("half.json"), std::string::npos) << e.what();
    }
}

TEST(AbstractNetwork, OptimalRunsTheGeneralSolversAndTheEngineAgrees) {
    // Training chains in Checkmate's shape (recomputing forward nodes for the backward ones
    // meets these budgets) and a random DAG at its peak without recomputation (tighter budgets have
    // no schedule on it: a node with its inputs needs nearly that much).
    const std::vector<std::pair<AbstractGraph, double>> cases{
        {general::testing::train_chain(12), 0.8},
        {general::testing::train_chain(20, 16, 4), 0.7},
        {general::testing::random_dag(40, 3), 1.0}};
    for (const auto& [a, fraction] : cases) {
        const Graph g = network_from_abstract(a);
        const uint64_t budget = general::budget_from_fraction(a, fraction);
        int planned = 0;
        for (const char* method : {"auto", "greedy", "dtr"}) {
            SCOPED_TRACE(std::string(method) + " on " + a.name);
            Spec spec{
                "optimal",
                {{"budget", std::to_string(budget)}, {"method", method}, {"time_limit", "5"}}};
            const Plan p = plan_with(g, CostModel::analytic(g, DeviceRates{}), spec);
            if (p.status == PlanStatus::Infeasible) {
                EXPECT_FALSE(p.message.empty());
                continue;
            }
            ++planned;
            EXPECT_NO_THROW(validate(g, p.schedule));
            const Simulation sim = simulate(g, p.schedule, CostModel{});
            // The same schedule under the general problem's own simulator, in its node ids.
            Schedule abstract_schedule = p.schedule;
            for (Instruction& ins : abstract_schedule.code)
                if (ins.kind == InstrKind::Free) ins.target = g.value(ins.target).producer;
            const general::GeneralSimulation gs = general::simulate_general(a, abstract_schedule);
            EXPECT_EQ(sim.peak_bytes, gs.peak_bytes);
            EXPECT_LE(sim.peak_bytes, budget);
            const CostModel costs = CostModel::analytic(g, DeviceRates{});
            EXPECT_NEAR(simulate(g, p.schedule, costs).total_ms(), gs.total_duration, 1e-6);
        }
        EXPECT_GE(planned, 1) << a.name;  // auto at least
    }
}

TEST(AbstractNetwork, StrategiesThatNeedBackwardsRefuseAndNothingExecutes) {
    const Graph g = network_from_json(kCheckmate, "tiny_train.json");
    for (const char* s : {"sqrt-n", "periodic", "revolve", "policy", "min-cut", "dtr"}) {
        EXPECT_THROW(plan_with(g, CostModel{}, parse_spec(s)), NotApplicable) << s;
    }
    EXPECT_THROW(plan_with(g, CostModel{}, parse_spec("optimal:method=dp")), NotApplicable);
    // The general-only methods refuse an ordinary network.
    const Graph mlp = load_network("mlp:depth=2,width=8,batch=4");
    EXPECT_THROW(plan_with(mlp, CostModel{}, parse_spec("optimal:method=lns")), Error);
    EvaluateOptions eo;
    eo.execute = true;
    try {
        Evaluator ev(g, "tiny_train.json", eo);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("no kernels"), std::string::npos) << e.what();
    }
    eo.execute = false;
    Evaluator ev(g, "tiny_train.json", eo);
    EXPECT_EQ(ev.evaluate(Spec{"none", {}}).predicted.peak_bytes, 24u);
}

TEST(AbstractNetwork, ExplanationsAndMatrixSpeakOfTheGraphsOwnNodes) {
    const Graph g = network_from_json(kCheckmate, "tiny_train.json");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Plan p = plan_with(g, costs, Spec{"none", {}});
    const Simulation sim = simulate(g, p.schedule, costs);
    const ScheduleExplainer ex(g, p, sim, costs);
    bool saw_backward_node = false;
    for (long i = 0; i < ex.size(); ++i) {
        const Explanation e = ex.explain(i);
        EXPECT_EQ(e.why.find("Forward of"), std::string::npos) << e.why;
        EXPECT_EQ(e.why.find("the backward of"), std::string::npos) << e.why;
        EXPECT_EQ(e.why.find("loss's backward"), std::string::npos) << e.why;
        EXPECT_EQ(e.why.find(" ms"), std::string::npos) << e.why;
        // a is read last by ga (a backward node), so it stays live until then; probe has no
        // reader and goes at once.
        if (e.instruction.kind == InstrKind::Compute && e.node == 0) {
            EXPECT_NE(e.why.find("last reader, compute ga"), std::string::npos) << e.why;
        }
        if (e.instruction.kind == InstrKind::Compute && e.node == 1) {
            EXPECT_NE(e.why.find("Nothing reads it, so it is freed at once"), std::string::npos)
                << e.why;
        }
        if (e.instruction.kind == InstrKind::Compute && e.node == 4) {
            saw_backward_node = true;
            EXPECT_NE(e.why.find("a backward node of the graph"), std::string::npos) << e.why;
        }
    }
    EXPECT_TRUE(saw_backward_node);
    // Stages are the general problem's: one per node, first computations on the diagonal.
    const ScheduleMatrix m = schedule_matrix(g, p.schedule);
    ASSERT_EQ(m.stages, g.num_nodes());
    for (int t = 0; t < m.stages; ++t) {
        EXPECT_TRUE(m.at(t, t) & ScheduleMatrix::Computed) << t;
        for (NodeId n = t + 1; n < g.num_nodes(); ++n) EXPECT_EQ(m.at(t, n), 0) << t << "," << n;
    }
}

TEST(PublishedGraphs, EngineNoRecomputePeaksMatchTheListedOnes) {
    const std::string dir = general::testing::published_graphs_dir();
    if (dir.empty()) GTEST_SKIP() << general::testing::kNoPublishedGraphs;
    const auto& listed = general::testing::listed_no_remat_peaks();
    for (const auto& [file, peak] : listed) {
        const std::string path = (std::filesystem::path(dir) / file).string();
        const Graph g = load_network(path);  // the network SPEC path, as the CLI and GUI load it
        EXPECT_TRUE(g.plan_only()) << file;
        EXPECT_EQ(engine_none_peak(g), peak) << file;
        EXPECT_EQ(engine_none_peak(g), general::peak_no_remat(general::load_abstract_graph(path)))
            << file;
    }
}

}  // namespace
}  // namespace rl
