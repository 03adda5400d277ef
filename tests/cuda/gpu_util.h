#pragma once
// Shared by the CUDA tests: one CUDA backend for the whole test program (made on first use), or
// a skip that names why there is none, a tolerance check of GPU values against the CPU's, and
// the built rematlab-cli run as a child.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "engine/backend.h"

namespace rl::testing {

// The process-wide CUDA backend, or null with `why` set.
inline Backend* gpu_backend(std::string* why) {
    static std::string reason;
    static std::unique_ptr<Backend> backend = [] {
        std::unique_ptr<Backend> b;
        if (!cuda_available(&reason)) return b;
        try {
            b = make_cuda_backend();
        } catch (const std::exception& e) {
            reason = e.what();
        }
        return b;
    }();
    if (why) *why = reason;
    return backend.get();
}

// Skips the calling test (GTEST_SKIP returns from it) when there is no GPU.
#define RL_REQUIRE_GPU(backend_var)                                        \
    std::string rl_gpu_why_;                                               \
    ::rl::Backend* backend_var = ::rl::testing::gpu_backend(&rl_gpu_why_); \
    if (!backend_var) GTEST_SKIP() << rl_gpu_why_

// |gpu - cpu| <= rtol · max(1, max |cpu|) element by element: the two differ only in summation
// order and in the last bits of exp/erf/tanh.
template <class A, class B>
void expect_close(const A& gpu, const B& cpu, double rtol, const std::string& what) {
    ASSERT_EQ(gpu.size(), cpu.size()) << what;
    double scale = 1;
    for (float v : cpu) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    size_t bad = 0, first = 0;
    double worst = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
        const double d = std::fabs(static_cast<double>(gpu[i]) - cpu[i]);
        if (!(d <= rtol * scale)) {  // also catches NaN
            if (!bad) first = i;
            ++bad;
        }
        if (d > worst || std::isnan(d)) worst = d;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << cpu.size()
                       << " elements differ by more than " << rtol * scale << " (first at " << first
                       << ": gpu " << (bad ? gpu[first] : 0) << " vs cpu " << (bad ? cpu[first] : 0)
                       << "; worst " << worst << ")";
}

// Runs `env rematlab-cli args` through the shell (env: assignments such as "LD_DEBUG=libs", or
// empty); returns its stdout and stderr together and sets *status to pclose's status.
inline std::string run_cli(const std::string& args, int* status, const std::string& env = "") {
    const std::string cmd =
        (env.empty() ? "" : env + " ") + REMATLAB_CLI_PATH + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    *status = p ? pclose(p) : -1;
    return out;
}

}  // namespace rl::testing
