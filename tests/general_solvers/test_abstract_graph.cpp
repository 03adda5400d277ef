// The abstract graphs of Checkmate's and Moccasin's benchmarks: both file formats, their errors,
// and the memory model of the general problem against closed forms and the published peaks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/errors.h"
#include "graphs.h"
#include "solvers/general/general_problem.h"

namespace rl::general {
namespace {

// Moccasin's family: ids in `name`, links "0"/"1", graph.order not the file's node order.
const char* kMoccasinSmall = R"({
  "directed": true, "multigraph": false,
  "graph": {"name": "tiny", "order": [0, 2, 3, 1]},
  "nodes": [
    {"name": 0, "out_cost": 5, "duration": 0, "param_cost": 0},
    {"name": 1, "out_cost": 7, "duration": 0, "param_cost": 0},
    {"name": 2, "out_cost": 3, "duration": 4, "param_cost": 0},
    {"name": 3, "out_cost": 2, "duration": 6, "param_cost": 0}],
  "links": [{"0": 0, "1": 2}, {"0": 0, "1": 3}, {"0": 2, "1": 3}, {"0": 3, "1": 1}]
})";

// Checkmate's family: ids give the order, explicit backward nodes.
const char* kCheckmateSmall = R"({
  "directed": true, "multigraph": false, "graph": {"name": "tiny_train"},
  "nodes": [
    {"id": 2, "name": "grad_a", "backward": true, "cost_cpu": 3, "cost_ram": 4},
    {"id": 0, "name": "a", "backward": false, "cost_cpu": 1, "cost_ram": 10},
    {"id": 1, "name": "loss", "backward": false, "cost_cpu": 2, "cost_ram": 1}],
  "links": [{"source": 0, "target": 1}, {"source": 0, "target": 2}, {"source": 1, "target": 2}]
})";

TEST(AbstractGraph, ReadsMoccasinFormatInGraphOrder) {
    const AbstractGraph g = abstract_graph_from_json(kMoccasinSmall, "tiny.json");
    ASSERT_EQ(g.size(), 4);
    EXPECT_EQ(g.name, "tiny");
    EXPECT_EQ(g.nodes[1].name, "2");  // graph.order puts node 2 second
    EXPECT_EQ(g.nodes[3].name, "1");
    EXPECT_EQ(g.nodes[2].out_bytes, 2u);
    EXPECT_EQ(g.nodes[2].duration, 6);
    EXPECT_EQ(g.preds[2], (std::vector<int32_t>{0, 1}));
    EXPECT_EQ(g.succs[0], (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(g.num_edges(), 4);
    EXPECT_EQ(g.total_duration(), 10);
    // Order 0, 2, 3, 1: {0}=5, {0,2}=8, {0,2,3}=10 (0 and 2 die after 3), {3,1}=9.
    EXPECT_EQ(peak_no_remat(g), 10u);
}

TEST(AbstractGraph, ReadsCheckmateFormatWithBackwardNodes) {
    const AbstractGraph g = abstract_graph_from_json(kCheckmateSmall, "tiny_train.json");
    ASSERT_EQ(g.size(), 3);
    EXPECT_EQ(g.nodes[0].name, "a");
    EXPECT_EQ(g.nodes[2].name, "grad_a");
    EXPECT_TRUE(g.nodes[2].backward);
    EXPECT_FALSE(g.nodes[0].backward);
    EXPECT_EQ(peak_no_remat(g), 15u);  // a, loss, grad_a all live while grad_a is computed
}

void expect_error(const std::string& text, const std::string& fragment) {
    try {
        (void)abstract_graph_from_json(text, "bad.json");
        FAIL() << "no error for: " << text;
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("bad.json"), std::string::npos) << msg;
        EXPECT_NE(msg.find(fragment), std::string::npos) << msg;
    }
}

TEST(AbstractGraph, MalformedFilesSayWhatAndWhere) {
    expect_error("{\"nodes\": [", "not valid JSON");
    expect_error("[1, 2]", "'nodes' and 'links'");
    expect_error(R"({"nodes": [], "links": []})", "no nodes");
    expect_error(R"({"nodes": [{"x": 1}], "links": []})", "cannot tell the format");
    expect_error(R"({"graph": {"order": [0]}, "nodes": [{"name": 0, "out_cost": -3,
                    "duration": 1}], "links": []})",
                 "node 0: field 'out_cost'");
    expect_error(R"({"graph": {"order": [0]}, "nodes": [{"name": 0, "out_cost": 3}], "links": []})",
                 "node 0: field 'duration'");
    expect_error(R"({"nodes": [{"name": 0, "out_cost": 3, "duration": 1}], "links": []})",
                 "graph.order is missing");
    expect_error(R"({"graph": {"order": [0, 0]}, "nodes": [{"name": 0, "out_cost": 3,
                    "duration": 1}, {"name": 1, "out_cost": 3, "duration": 1}], "links": []})",
                 "listed twice");
    expect_error(R"({"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 2}, {"id": 1, "cost_cpu": 1,
                    "cost_ram": 2}], "links": [{"source": 1, "target": 0}]})",
                 "link 0 (1 -> 0): goes against the node order");
    expect_error(R"({"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 2}],
                    "links": [{"source": 0, "target": 9}]})",
                 "link 0: target 9 is not a node");
    expect_error(R"({"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 2}, {"id": 0, "cost_cpu": 1,
                    "cost_ram": 2}], "links": []})",
                 "node 1: duplicate id 0");
    expect_error(R"({"nodes": [{"id": 0, "cost_cpu": 1, "cost_ram": 2}], "links": [{"s": 0}]})",
                 "link 0: expected fields 'source' and 'target'");
}

TEST(AbstractGraph, MissingFileIsAnError) {
    EXPECT_THROW((void)load_abstract_graph("/nonexistent/graph.json"), Error);
}

// Closed form: a chain of k nodes with outputs s_i holds two neighbours at a time, so its peak
// without recomputation is max(s_i + s_(i+1)) (and s_0 alone).
TEST(GeneralSimulator, ChainPeakIsLargestNeighbourPair) {
    std::vector<AbstractNode> nodes;
    std::vector<std::pair<int32_t, int32_t>> edges;
    const std::vector<uint64_t> sizes{5, 9, 2, 30, 1, 4};
    for (size_t i = 0; i < sizes.size(); ++i) {
        nodes.push_back({testing::numbered("c", static_cast<int>(i)), 1, sizes[i], false});
        if (i > 0) edges.emplace_back(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
    }
    const AbstractGraph g = make_abstract_graph("chain", nodes, edges);
    EXPECT_EQ(peak_no_remat(g), 32u);
    EXPECT_EQ(budget_from_fraction(g, 0.9), 28u);
}

// The Checkmate-shaped training chain keeps every forward output until its backward node:
// the peak is at b_0: all k activations + the gradient from b_1 + b_0's own.
TEST(GeneralSimulator, TrainChainPeakKeepsAllActivations) {
    for (int k : {1, 2, 5, 9}) {
        const AbstractGraph g = testing::train_chain(k, 10, 3);
        uint64_t expect = 10ull * k + 1;  // at the loss: all activations + the loss
        // At b_i: activations f_0..f_i + incoming gradient + b_i's output.
        for (int i = k - 1; i >= 0; --i)
            expect = std::max<uint64_t>(expect, 10ull * (i + 1) + (i == k - 1 ? 1 : 3) + 3);
        EXPECT_EQ(peak_no_remat(g), expect) << "k=" << k;
    }
}

TEST(GeneralSimulator, RejectsIllegalSchedulesWithTheInstruction) {
    const AbstractGraph g = testing::train_chain(3);
    auto expect_reject = [&](const Schedule& s, long index, const std::string& fragment,
                             int limit = 0) {
        try {
            (void)simulate_general(g, s, limit);
            FAIL() << "accepted";
        } catch (const ScheduleError& e) {
            EXPECT_EQ(e.index(), index) << e.what();
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
        }
    };
    using K = InstrKind;
    expect_reject(Schedule{{{K::Compute, 1}}}, 0, "out of the node order");
    expect_reject(Schedule{{{K::Compute, 0}, {K::Free, 0}, {K::Compute, 1}}}, 2,
                  "input 'f0' is not live");
    expect_reject(Schedule{{{K::Compute, 0}, {K::Compute, 0}}}, 1, "still live");
    expect_reject(Schedule{{{K::Compute, 0}, {K::Free, 0}, {K::Free, 0}}}, 2, "not live");
    expect_reject(Schedule{{{K::Compute, 0}}}, 1, "never computed");
    expect_reject(
        Schedule{{{K::Compute, 0}, {K::Free, 0}, {K::Compute, 0}, {K::Free, 0}, {K::Compute, 0}}},
        4, "more than 2 computations", 2);
    expect_reject(Schedule{{{K::Compute, 42}}}, 0, "does not exist");
}

TEST(GeneralSimulator, RecomputationCostsDurationAndSavesMemory) {
    const AbstractGraph g = testing::train_chain(3, 10, 1);
    const uint64_t base = peak_no_remat(g);
    // Drop f0 after f1 and recompute it for b0: order f0 f1 f2 loss b2 b1 (f0) b0.
    std::vector<int32_t> computes{0, 1, 2, 3, 4, 5, 0, 6};
    const Schedule s = schedule_from_computations(g, computes);
    const GeneralSimulation sim = simulate_general(g, s);
    EXPECT_EQ(sim.total_duration, g.total_duration() + 1);  // f0 costs 1
    EXPECT_EQ(sim.computations, 8);
    EXPECT_EQ(sim.computations_per_node[0], 2);
    EXPECT_EQ(sim.peak_bytes, base - 10);  // f0 is gone while loss and b2 run
    EXPECT_NEAR(tdi(g, sim.total_duration), 1.0 / g.total_duration(), 1e-12);
}

// The peaks listed in the benchmark folder's README (they reproduce Moccasin's published
// budgets). The folder is GPL-3.0 input kept outside the repository.
TEST(PublishedGraphs, NoRecomputePeaksMatchTheListedOnes) {
    const std::string dir = testing::published_graphs_dir();
    if (dir.empty()) GTEST_SKIP() << testing::kNoPublishedGraphs;
    const auto& listed = testing::listed_no_remat_peaks();
    for (const auto& [file, peak] : listed) {
        const AbstractGraph g = load_abstract_graph((std::filesystem::path(dir) / file).string());
        EXPECT_EQ(peak_no_remat(g), peak) << file;
    }
    // The published budgets: RL250 at 0.9 and 0.8, RL1000 at 0.9 and 0.8.
    const AbstractGraph rl250 =
        load_abstract_graph((std::filesystem::path(dir) / listed[1].first).string());
    EXPECT_EQ(budget_from_fraction(rl250, 0.9), 132156u);
    EXPECT_EQ(budget_from_fraction(rl250, 0.8), 117472u);
    const AbstractGraph rl1000 =
        load_abstract_graph((std::filesystem::path(dir) / listed[3].first).string());
    EXPECT_EQ(budget_from_fraction(rl1000, 0.9), 547757u);
    EXPECT_EQ(budget_from_fraction(rl1000, 0.8), 486895u);
}

}  // namespace
}  // namespace rl::general
