// RematLab against PyTorch on the small networks: bench/peers/compare --quick builds each preset
// in PyTorch from the weights `rematlab-cli run --dump-weights` wrote and checks that the
// gradients agree within float32 tolerance under none, sqrt-n, periodic and per-block
// checkpointing, dropout included (exit 1 and a "GRADIENTS DISAGREE" line otherwise). Skips, with
// the reason, where Debian's python3-torch is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

bool python_has_torch() {
    if (!fs::exists(kPython)) return false;
    const std::string cmd =
        std::string(kPython) + " -c 'import torch, numpy' >/dev/null 2>&1 </dev/null";
    const int status = std::system(cmd.c_str());
    return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Runs `cmd` through the shell; returns its exit status and its stdout + stderr.
int run_capture(const std::string& cmd, std::string& output) {
    FILE* pipe = popen((cmd + " 2>&1 </dev/null").c_str(), "r");
    if (!pipe) return -1;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
    const int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

// What the peer reads: --dump-weights writes every parameter and input (labels as int32), and
// run --json names the plan's checkpoints. Needs no Python.
TEST(TorchPeer, RunDumpsWeightsAndInputsAndNamesItsCheckpoints) {
    const char* cli_env = std::getenv("REMATLAB_CLI");
    const std::string cli = cli_env ? cli_env : REMATLAB_CLI_PATH;
    std::string tmpl = (fs::temp_directory_path() / "rematlab-peer-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    const fs::path dir = tmpl;
    std::string output;
    const int code = run_capture(
        "'" + cli +
            "' run --network transformer:layers=2,d_model=16,heads=2,seq=4,batch=2,vocab=8" +
            " --strategy sqrt-n:segments=2 --json --dump-weights '" + (dir / "w").string() + "'",
        output);
    ASSERT_EQ(code, 0) << output;
    EXPECT_NE(output.find("\"checkpoints\":[\"block0.mlp.residual\"]"), std::string::npos)
        << output;
    for (const char* f : {"x.npy", "labels.npy", "block0.attn.q.weight.npy", "block1.ln2.bias.npy",
                          "final_ln.weight.npy", "head.bias.npy"})
        EXPECT_TRUE(fs::exists(dir / "w" / f)) << f;
    std::ifstream labels(dir / "w" / "labels.npy", std::ios::binary);
    std::string header(128, '\0');
    labels.read(header.data(), static_cast<std::streamsize>(header.size()));
    EXPECT_NE(header.find("'descr': '<i4'"), std::string::npos) << header;
    EXPECT_NE(header.find("'shape': (8,)"), std::string::npos) << header;
    EXPECT_EQ(fs::file_size(dir / "w" / "labels.npy"), 128u + 8 * 4);
    std::error_code ec;
    fs::remove_all(dir, ec);
}

TEST(TorchPeer, GradientsAgreeOnTheSmallNetworks) {
    if (!python_has_torch())
        GTEST_SKIP() << "python3-torch is not installed (" << kPython
                     << " cannot import torch and numpy); bench/peers/compare installs it";
    const char* cli_env = std::getenv("REMATLAB_CLI");
    const std::string cli = cli_env ? cli_env : REMATLAB_CLI_PATH;
    // compare.py directly: the wrapper script would try to install packages.
    const std::string cmd = std::string(kPython) +
                            " '" REMATLAB_SOURCE_DIR
                            "/bench/peers/compare.py' --root '" REMATLAB_SOURCE_DIR
                            "' --quick --cli '" +
                            cli + "'";
    std::string output;
    const int code = run_capture(cmd, output);
    EXPECT_EQ(code, 0) << output;
    EXPECT_EQ(output.find("GRADIENTS DISAGREE"), std::string::npos) << output;
    // PyTorch runs on tcmalloc by default (preloaded, as its CPU launcher does), and the header
    // names the allocator its process has mapped; where tcmalloc cannot be fetched, it says so and
    // names glibc's.
    const bool fetched = output.find("WARNING: cannot get tcmalloc") == std::string::npos;
    EXPECT_NE(
        output.find(fetched ? "allocator: libtcmalloc_minimal.so" : "allocator: glibc malloc"),
        std::string::npos)
        << output;
    // One row per (network, strategy): 4 networks x 4 strategies. The gpt row's gradients agree
    // only if PyTorch computed with the very masks our dropout drew (peer_net.dropout_noise).
    for (const char* net : {"`mlp:", "`resmlp:", "`transformer:", "`gpt:"})
        for (const char* strategy : {"| none |", "| sqrt-n |", "| periodic |", "| per-block |"}) {
            size_t pos = 0, found = 0;
            while ((pos = output.find(std::string("\n| ") + net, pos)) != std::string::npos) {
                const size_t end = output.find('\n', pos + 1);
                if (output.substr(pos, end - pos).find(strategy) != std::string::npos) ++found;
                pos = end;
            }
            EXPECT_EQ(found, 1u) << net << ' ' << strategy << '\n' << output;
        }
}
