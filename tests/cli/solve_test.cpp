// `rematlab-cli solve` end to end on small abstract graphs written here (Checkmate's format).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_process.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// a(4) -> b(10) -> loss(1) -> gb(2, reads loss and b) -> ga(2, reads gb and a); durations 3, 1,
// 1, 2, 3. Without recomputation the peak is at gb: a + b + loss + gb = 17. At 15 bytes (0.9)
// the only way is to drop a after b and recompute it for ga: total 13, TDI 0.3 exactly, peak 14
// (a + b while b is computed). Below 14 no schedule exists.
const char* kTinyTrain = R"({"directed": true, "graph": {"name": "tiny_train"},
  "nodes": [{"id": 0, "name": "a", "backward": false, "cost_cpu": 3, "cost_ram": 4},
            {"id": 1, "name": "b", "backward": false, "cost_cpu": 1, "cost_ram": 10},
            {"id": 2, "name": "loss", "backward": false, "cost_cpu": 1, "cost_ram": 1},
            {"id": 3, "name": "gb", "backward": true, "cost_cpu": 2, "cost_ram": 2},
            {"id": 4, "name": "ga", "backward": true, "cost_cpu": 3, "cost_ram": 2}],
  "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}, {"source": 2, "target": 3},
            {"source": 1, "target": 3}, {"source": 3, "target": 4}, {"source": 0, "target": 4}]})";

using Result = rl::test::CliResult;

class SolveCliTest : public rl::test::CliProcessTest {
  protected:
    void SetUp() override {
        CliProcessTest::SetUp();
        graph_ = (dir_ / "tiny_train.json").string();
        rl::test::write_file(graph_, kTinyTrain);
    }
    std::string graph_;
};

TEST_F(SolveCliTest, MilpJsonReportsTheOptimumAndItsResimulatedPeak) {
    const Result r = run({"solve", "--graph", graph_, "--budget", "0.9", "--method", "milp",
                          "--time-limit", "20", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    for (const char* key : {"peak_no_remat", "budget", "total_duration", "tdi", "lower_bound",
                            "gap", "time_to_best_s", "solve_s", "computations", "peak"})
        EXPECT_TRUE(j.contains(key)) << key;
    EXPECT_EQ(j["peak_no_remat"], 17);
    EXPECT_EQ(j["budget"], 15);  // floor(0.9 x 17)
    EXPECT_EQ(j["total_duration"], 13);
    EXPECT_NEAR(j["tdi"].get<double>(), 0.3, 1e-12);
    EXPECT_EQ(j["computations"], 6);
    EXPECT_EQ(j["peak"], 14);
    EXPECT_TRUE(j["proven_optimal"].get<bool>());
    EXPECT_NEAR(j["gap"].get<double>(), 0.0, 1e-9);
}

TEST_F(SolveCliTest, BudgetInBytesAndEveryBaselineStayWithinIt) {
    for (const char* method : {"dtr", "greedy", "split", "chen", "ondemand", "lns", "auto"}) {
        const Result r =
            run({"solve", "--graph", graph_, "--budget", "15", "--method", method, "--json"});
        ASSERT_EQ(r.code, 0) << method << ": " << r.err;
        const json j = json::parse(r.out);
        EXPECT_EQ(j["budget"], 15);
        EXPECT_LE(j["peak"].get<uint64_t>(), 15u) << method;
        EXPECT_GE(j["total_duration"].get<double>(), 13) << method;  // the optimum
    }
}

TEST_F(SolveCliTest, TextReportNamesEveryFigure) {
    const Result r = run({"solve", "--graph", graph_, "--budget", "0.95"});
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* key : {"peak_no_remat", "budget", "total_duration", "tdi", "lower_bound",
                            "gap", "time_to_best_s", "solve_s", "computations", "peak"})
        EXPECT_NE(r.out.find(key), std::string::npos) << key;
}

TEST_F(SolveCliTest, BadInputFailsCleanly) {
    // Below what b needs with its input (a + b = 14): no schedule exists (exit 3).
    Result r = run({"solve", "--graph", graph_, "--budget", "13"});
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("no schedule exists"), std::string::npos) << r.err;
    r = run({"solve", "--graph", graph_, "--budget", "1.5"});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("(0, 1]"), std::string::npos) << r.err;
    const std::string bad = (dir_ / "bad.json").string();
    std::ofstream(bad) << R"({"nodes": [{"id": 0, "cost_cpu": 1}], "links": []})";
    r = run({"solve", "--graph", bad});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    r = run({"solve", "--graph", graph_, "--method", "magic"});
    EXPECT_EQ(r.code, 2);
}

// A training chain of n forward nodes (each reading the one before, every third also the one
// three back), the loss, and one backward node per forward node reading the gradient after it,
// its own forward output and its input: enough structure for the search to have windows.
std::string train_chain_json(int n) {
    json nodes = json::array(), links = json::array();
    auto node = [&](int id, bool backward, int cpu, int ram) {
        nodes.push_back({{"id", id},
                         {"name", (backward ? "g" : "f") + std::to_string(id)},
                         {"backward", backward},
                         {"cost_cpu", cpu},
                         {"cost_ram", ram}});
    };
    auto link = [&](int a, int b) { links.push_back({{"source", a}, {"target", b}}); };
    for (int i = 0; i < n; ++i) {
        node(i, false, 1 + i % 4, 4 + (i * 7) % 9);
        if (i > 0) link(i - 1, i);
        if (i >= 3 && i % 3 == 0) link(i - 3, i);
    }
    node(n, false, 1, 1);  // the loss
    link(n - 1, n);
    for (int k = 0; k < n; ++k) {  // backward of forward node i = n - 1 - k
        const int id = n + 1 + k, i = n - 1 - k;
        node(id, true, 2, 2);
        link(id - 1, id);
        link(i, id);
        if (i > 0) link(i - 1, id);
    }
    return json{
        {"directed", true}, {"graph", {{"name", "chain"}}}, {"nodes", nodes}, {"links", links}}
        .dump();
}

TEST_F(SolveCliTest, NodeLimitAndWindowCapMakeTheSearchRepeatItself) {
    const std::string chain = (dir_ / "chain.json").string();
    rl::test::write_file(chain, train_chain_json(30));
    const std::vector<std::string> args = {
        "solve", "--graph",       chain, "--budget", "0.6", "--method",     "lns", "--node-limit",
        "500",   "--max-windows", "3",   "--seed",   "3",   "--time-limit", "300", "--json"};
    const Result a = run(args), b = run(args);
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    const json ja = json::parse(a.out), jb = json::parse(b.out);
    EXPECT_EQ(ja["node_limit"], 500);
    EXPECT_EQ(ja["max_windows"], 3);
    EXPECT_EQ(ja["seed"], 3);
    ASSERT_TRUE(ja["feasible"].get<bool>());
    EXPECT_GT(ja["lns_windows"].get<int>(), 0);
    EXPECT_LE(ja["lns_windows"].get<int>(), 3);
    for (const char* key : {"total_duration", "computations", "peak", "lns_windows", "source"})
        EXPECT_EQ(ja[key], jb[key]) << key;
    EXPECT_LE(ja["peak"].get<uint64_t>(), ja["budget"].get<uint64_t>());
    const Result bad = run({"solve", "--graph", chain, "--node-limit", "-1"});
    EXPECT_EQ(bad.code, 2) << bad.err;
    EXPECT_NE(bad.err.find("--node-limit"), std::string::npos) << bad.err;
}

// The same graph as a network (`--network FILE`): plan-only, so plan and compare predict and run
// refuses.
TEST_F(SolveCliTest, PlanOnAnAbstractNetworkPredictsTheGeneralProblemsFigures) {
    Result r = run({"plan", "--network", graph_, "--strategy", "none", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["predicted_peak_bytes"], 17);  // the order without recomputation (above)
    EXPECT_EQ(j["backwards"], 0);
    EXPECT_EQ(j["computes"], 5);
    EXPECT_EQ(j["cost_model"], "durations");
    EXPECT_NEAR(j["predicted_total_ms"].get<double>(), 10, 1e-9);  // the durations, once each

    r = run({"plan", "--network", graph_, "--strategy",
             "optimal:budget=15,method=milp,time_limit=600", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    j = json::parse(r.out);
    EXPECT_EQ(j["predicted_peak_bytes"], 14);  // the optimum above: recompute a for ga
    EXPECT_NEAR(j["predicted_total_ms"].get<double>(), 13, 1e-9);
    EXPECT_EQ(j["recomputes"], 1);
    EXPECT_EQ(j["status"], "optimal");

    r = run({"plan", "--network", graph_, "--strategy", "sqrt-n"});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("does not apply"), std::string::npos) << r.err;

    r = run({"plan", "--network", graph_, "--strategy", "none"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("compute gb"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("backward "), std::string::npos) << r.out;
}

TEST_F(SolveCliTest, RunRefusesAnAbstractNetworkAndCompareShowsPredictionsOnly) {
    Result r = run({"run", "--network", graph_, "--strategy", "none"});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("no kernels"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(graph_), std::string::npos) << r.err;

    r = run({"compare", "--network", graph_, "--strategies", "none;sqrt-n;optimal:budget=15"});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("predicted figures only"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("not applicable"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("meas. peak"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("grads=none"), std::string::npos) << r.out;

    r = run({"compare", "--network", graph_, "--strategies", "none;sqrt-n;optimal:budget=15",
             "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto lines = rl::test::lines_of(r.out);
    ASSERT_EQ(lines.size(), 3u) << r.out;
    const json none = json::parse(lines[0]), sqrt_n = json::parse(lines[1]),
               optimal = json::parse(lines[2]);
    EXPECT_EQ(none["predicted_peak_bytes"], 17);
    EXPECT_FALSE(none.contains("measured_peak_bytes"));
    EXPECT_EQ(sqrt_n["status"], "not applicable");
    EXPECT_LE(optimal["predicted_peak_bytes"].get<uint64_t>(), 15u);
}

}  // namespace
