// The ceiling of every product on this build: the rate of the CPU's multiply-add units on the
// widest vectors the build's kernels use (16 floats with AVX-512, 8 with AVX2 and FMA, 4 with
// SSE as a multiply and an add), measured as the roofline literature measures a machine's peak
// (Williams, Waterman and Patterson, "Roofline: an insightful visual performance model for
// multicore architectures", CACM 52(4), 2009): independent chains of multiply-adds on registers,
// no loads or stores, so that nothing but the units' throughput bounds the loop. A product that
// reads its operands can approach this rate, never pass it. `rematlab-cli gemm --peak` prints it
// beside each library's rate, and bench/peers/compare beside the rate a row would need.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/gemm.h"

namespace rl {
namespace {

// Chains in flight: a multiply-add's latency (4 cycles on Zen 4/5 and Intel since Skylake) times
// the units that take one a cycle (2) needs 8; 12 leaves room for a 5- or 6-cycle latency and
// stays within the 16 registers of an AVX2 build.
constexpr int kChains = 12;

// The build's widest vectors. With -ffp-contract=fast (engine/CMakeLists.txt) x·m + a is one
// FMA instruction where the build has FMA; without, a multiply and an add, the same two FLOPs.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
using Reg = float __attribute__((vector_size(kLanes * sizeof(float))));

// `steps` rounds of kChains multiply-adds. x ← x·m + a with m just under 1 converges to a/(1−m)
// = 1, so the values stay normal (a subnormal would slow the units) whatever `steps`. No chain
// starts at 1 itself: fma(1, m, a) rounds to 1, and GCC 12 then folded that chain to a constant
// and dropped its multiply-adds (11 of 12 in the loop: the rate came out 9 % high). The sum
// returned keeps the loop.
float run_chains(int64_t steps) {
    Reg x[kChains];
    for (int c = 0; c < kChains; ++c) x[c] = Reg{} + (1.5f + 0.25f * static_cast<float>(c));
    const Reg m = Reg{} + 0.999999f, a = Reg{} + 1e-6f;
    for (int64_t s = 0; s < steps; ++s)
        for (int c = 0; c < kChains; ++c) x[c] = x[c] * m + a;
    float sum = 0;
    for (int c = 0; c < kChains; ++c) sum += x[c][0];
    return sum;
}

}  // namespace

FmaPeak measure_fma_peak(int threads) {
    threads = std::max(threads, 1);
    constexpr int64_t kSteps = int64_t{1} << 21;  // 25 M multiply-adds a thread: ~5-10 ms
    constexpr int kRounds = 5;
    run_chains(kSteps / 8);  // the clock up from idle, the code in cache
    double best = 0;
    std::vector<float> sink(static_cast<size_t>(threads));
    for (int r = 0; r < kRounds; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for num_threads(threads) schedule(static, 1)
        for (int t = 0; t < threads; ++t) sink[static_cast<size_t>(t)] = run_chains(kSteps);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double flops = 2.0 * kLanes * kChains * static_cast<double>(kSteps) * threads;
        best = std::max(best, flops / s / 1e9);
    }
    volatile float keep = 0;
    for (float v : sink) keep = keep + v;
    return {best, kLanes, kChains, threads};
}

}  // namespace rl
