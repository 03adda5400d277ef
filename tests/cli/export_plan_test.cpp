// `rematlab-cli export-plan` end to end: the built binary run as a child process; its exit code,
// the file it writes (whole, or not at all) and its one-line notes and errors.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "engine/networks/onnx_import.h"

namespace fs = std::filesystem;

namespace {

using Result = rl::test::CliResult;

class ExportPlanCli : public rl::test::CliProcessTest {
  protected:
    // Files in dir_ other than the captured output: what a command left behind.
    std::vector<std::string> leftovers() const {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(dir_)) {
            const std::string n = e.path().filename().string();
            if (n != "stdout.txt" && n != "stderr.txt") names.push_back(n);
        }
        return names;
    }
};

constexpr const char* kMlp = "mlp:depth=8,width=16,batch=4";

TEST_F(ExportPlanCli, WritesATorchModuleAndSaysTheWrappingIsExact) {
    const fs::path out = dir_ / "plan.py";
    const Result r = run({"export-plan", "--network", kMlp, "--strategy", "sqrt-n", "--format",
                          "torch", "--out", out.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string text = rl::testing::read_bytes(out);
    EXPECT_NE(text.find("def apply(model):"), std::string::npos);
    EXPECT_NE(text.find("use_reentrant=False"), std::string::npos);
    EXPECT_NE(text.find("RUNS = ["), std::string::npos);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("exact"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("wrote " + out.string()), std::string::npos) << r.err;
}

// The JSON's predicted activation peak is `plan --json`'s: the same plan, simulated the same way.
TEST_F(ExportPlanCli, JsonOnStandardOutputIsThePlanAsData) {
    const Result r =
        run({"export-plan", "--network", kMlp, "--strategy", "periodic:k=2", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    const Result p = run({"plan", "--network", kMlp, "--strategy", "periodic:k=2", "--json"});
    ASSERT_EQ(p.code, 0) << p.err;
    const auto pj = nlohmann::json::parse(p.out);
    EXPECT_EQ(j["predicted_activation_peak_bytes"], pj["predicted_activation_peak_bytes"]);
    EXPECT_EQ(j["predicted_peak_bytes"], pj["predicted_peak_bytes"]);
    EXPECT_EQ(j["recomputed"].size(), pj["recomputes"].get<size_t>());
    EXPECT_EQ(j["strategy"], "periodic:k=2");
    uint64_t kept = 0;
    for (const auto& v : j["kept"]) kept += v["bytes"].get<uint64_t>();
    EXPECT_EQ(j["kept_bytes"].get<uint64_t>(), kept);
}

// An ONNX model is planned on its own graph for PyTorch and JAX, not on the one RematLab runs
// after narrowing its slices (engine/networks/slice_narrowing.h): tiny ViT reads its class token.
TEST_F(ExportPlanCli, OnnxModelsArePlannedOnTheGraphTheFrameworkRuns) {
    if (!rl::onnx_import_available()) GTEST_SKIP() << "built with -DREMATLAB_ONNX=OFF";
    const std::string vit =
        (fs::path(REMATLAB_SOURCE_DIR) / "tests" / "fixtures" / "onnx" / "tiny_vit.onnx").string();
    const fs::path whole = dir_ / "whole.json";
    ASSERT_EQ(run({"network", "--network", vit, "--keep-slices", "--out", whole.string()}).code, 0);
    const Result r =
        run({"export-plan", "--network", vit, "--strategy", "sqrt-n", "--format", "json"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("narrow"), std::string::npos);
    const auto j = nlohmann::json::parse(r.out);
    const auto on_whole = nlohmann::json::parse(
        run({"plan", "--network", whole.string(), "--strategy", "sqrt-n", "--json"}).out);
    const auto on_run = nlohmann::json::parse(
        run({"plan", "--network", vit, "--strategy", "sqrt-n", "--json"}).out);
    EXPECT_EQ(j["predicted_activation_peak_bytes"], on_whole["predicted_activation_peak_bytes"]);
    EXPECT_NE(j["predicted_activation_peak_bytes"], on_run["predicted_activation_peak_bytes"]);
}

TEST_F(ExportPlanCli, JaxPolicyNamesEachKeptValueWithItsBytes) {
    const Result r =
        run({"export-plan", "--network", kMlp, "--strategy", "sqrt-n", "--format", "jax"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("jax.checkpoint_policies.save_only_these_names(*SAVED_NAMES)"),
              std::string::npos);
    EXPECT_NE(r.out.find("\"block1.act\",  # 256 B  f32[4,16]  relu"), std::string::npos) << r.out;
}

// A narrow vgg's optimal plan at 1.83 MiB recomputes a pooling output whose module (and every
// module around it) the next layer's backward reads from outside: no checkpoint region expresses
// it. Width 9 keeps every convolution on plain im2col and the GEMM whatever the build (the direct
// kernel takes channels in eights, on AVX2 builds only; a vgg's channels never shrink, so no input
// gradient is a correlation of dY), so its workspaces are the same everywhere; --nominal-rates
// makes its costs so too (with this CPU's measured rates, the plan's choices follow the ops'
// relative costs on the machine).
constexpr const char* kVgg = "vgg:width=9";
constexpr const char* kVggRecomputesPool = "optimal:budget=1.83MiB";
TEST_F(ExportPlanCli, RefusedPlanExitsOneAndLeavesTheOldFile) {
    const fs::path out = dir_ / "plan.py";
    { std::ofstream(out) << "previous\n"; }
    const Result r = run({"export-plan", "--network", kVgg, "--strategy", kVggRecomputesPool,
                          "--nominal-rates", "--format", "torch", "--out", out.string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(
        r.err.find(
            "rematlab-cli: error: cannot export 'optimal:budget=1.83MiB' on 'vgg:width=9' for "
            "PyTorch"),
        std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("block0.pool"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Export it as json or jax"), std::string::npos) << r.err;
    EXPECT_EQ(rl::testing::read_bytes(out), "previous\n");
    EXPECT_EQ(leftovers(), std::vector<std::string>{"plan.py"});
    // The same plan as data says why.
    const Result j = run({"export-plan", "--network", kVgg, "--strategy", kVggRecomputesPool,
                          "--nominal-rates", "--format", "json"});
    ASSERT_EQ(j.code, 0) << j.err;
    EXPECT_FALSE(nlohmann::json::parse(j.out)["torch"]["exportable"].get<bool>());
}

// With --nominal-rates the plan and its predicted figures do not depend on the machine: the
// same at one thread and at two (the measured rates differ between the two).
TEST_F(ExportPlanCli, NominalRatesGiveTheSamePlanAtAnyThreadCount) {
    auto plan_json = [&](const char* threads) {
        const Result r = run({"plan", "--network", kVgg, "--strategy", kVggRecomputesPool,
                              "--nominal-rates", "--threads", threads, "--json"});
        EXPECT_EQ(r.code, 0) << r.err;
        return nlohmann::json::parse(r.out);
    };
    const nlohmann::json one = plan_json("1"), two = plan_json("2");
    EXPECT_EQ(one["predicted_total_ms"], two["predicted_total_ms"]);
    EXPECT_GT(one["predicted_total_ms"].get<double>(), 0.0);
    EXPECT_EQ(one["checkpoints"], two["checkpoints"]);
    EXPECT_EQ(one["recomputes"], two["recomputes"]);
    const Result a = run({"export-plan", "--network", kVgg, "--strategy", kVggRecomputesPool,
                          "--nominal-rates", "--threads", "1", "--format", "json"});
    const Result b = run({"export-plan", "--network", kVgg, "--strategy", kVggRecomputesPool,
                          "--nominal-rates", "--threads", "2", "--format", "json"});
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
}

TEST_F(ExportPlanCli, ExactRefusesAnApproximationAndWritesNothing) {
    const fs::path out = dir_ / "plan.py";
    const Result r = run({"export-plan", "--network", kMlp, "--strategy", "revolve", "--format",
                          "torch", "--exact", "--out", out.string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("only approximates the plan"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" B more"), std::string::npos) << r.err;
    EXPECT_TRUE(leftovers().empty());
    // Without --exact it is written, and the note gives the difference.
    const Result w = run({"export-plan", "--network", kMlp, "--strategy", "revolve", "--format",
                          "torch", "--out", out.string()});
    ASSERT_EQ(w.code, 0) << w.err;
    EXPECT_NE(w.err.find("approximated"), std::string::npos) << w.err;
    EXPECT_NE(rl::testing::read_bytes(out).find("EXACT = False"), std::string::npos);
}

TEST_F(ExportPlanCli, BadInputsAreClearErrors) {
    Result r = run({"export-plan", "--network", kMlp, "--strategy", "sqrt-n", "--format", "tf"});
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("--format"), std::string::npos) << r.err;
    r = run({"export-plan", "--network", kMlp, "--strategy", "nope"});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("sqrt-n"), std::string::npos) << r.err;  // lists the valid names
    r = run({"export-plan", "--network", kMlp, "--strategy", "sqrt-n", "--out",
             (dir_ / "missing" / "plan.py").string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
    // An unmeetable budget: exit 3, the smallest feasible budget named, nothing written.
    r = run({"export-plan", "--network", kMlp, "--strategy", "optimal:budget=16", "--out",
             (dir_ / "plan.py").string()});
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_NE(r.err.find("smallest feasible budget"), std::string::npos) << r.err;
    EXPECT_TRUE(leftovers().empty());
}

}  // namespace
