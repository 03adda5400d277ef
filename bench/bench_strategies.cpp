// Strategy benchmarks (results and machine in docs/benchmarks.md):
//  - the chain DP of `optimal` (solvers/rotor.h) on a synthetic heterogeneous chain of 500
//    stages with a grid of 500 memory units (target: < 2 s on one core).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>

#include "solvers/rotor.h"

namespace rl {
namespace {

// A chain shaped like a deep network with layers of varying widths: activations of 1–16 MiB,
// weights of 0.5–8 MiB, costs of 0.2–3 ms, every stage a linear + activation pair whose
// backward reads its input and its output.
RotorChain synthetic_chain(int stages, uint64_t seed) {
    std::mt19937_64 rng(seed);
    auto uniform = [&](double lo, double hi) {
        return std::uniform_real_distribution<double>(lo, hi)(rng);
    };
    constexpr uint64_t MiB = 1 << 20;
    RotorChain c;
    std::vector<uint64_t> x(static_cast<size_t>(stages) + 1);
    for (auto& v : x) v = static_cast<uint64_t>(uniform(1, 16) * MiB);
    uint64_t tape_sum = 0, grads = 0;
    for (int k = 0; k < stages; ++k) {
        const auto ks = static_cast<size_t>(k);
        RotorStage s;
        s.fwd_ms = static_cast<float>(uniform(0.2, 3.0));
        s.rec_ms = s.fwd_ms * 0.5f;
        s.x_in = k == 0 ? 0 : x[ks];
        const uint64_t inner = static_cast<uint64_t>(uniform(1, 16) * MiB);  // the hidden value
        const uint64_t out = x[ks + 1];
        s.param_grads = static_cast<uint64_t>(uniform(0.5, 8) * MiB);
        s.ext = k + 1 == stages ? 0 : 2 * out;
        s.peak_fwd_keep = s.x_in + inner + out;
        s.peak_fwd_free = s.peak_fwd_keep;
        s.peak_fwd_all = s.x_in + inner + out;
        s.hold_c = inner + s.x_in;
        s.peak_bwd = s.x_in + inner + 2 * out + inner + s.x_in + s.param_grads;
        s.peak_a = s.peak_bwd + inner;
        s.x_read_in_a = true;
        s.x_read_by_prev = k > 0;
        tape_sum += inner + x[ks];
        grads += s.param_grads;
        c.stages.push_back(s);
    }
    c.constant = 0;
    c.span = tape_sum + grads + 64 * MiB;
    c.gcd = 1;
    return c;
}

void BM_RotorDp(benchmark::State& state) {
    const int stages = static_cast<int>(state.range(0));
    const auto slots = static_cast<int32_t>(state.range(1));
    const RotorChain chain = synthetic_chain(stages, 1);
    const uint64_t unit = rotor_unit(chain, slots);
    for (auto _ : state) {
        const RotorSolver dp(chain, unit, rotor_max_units(chain, unit));
        const int32_t m = std::max(dp.min_units(), 0);
        // A budget a third of the way from the smallest feasible to storing everything.
        const auto budget_units = m + (dp.max_units() - m) / 3;
        benchmark::DoNotOptimize(dp.sequence(budget_units));
    }
    state.counters["stages"] = stages;
    state.counters["units"] = slots;
}
BENCHMARK(BM_RotorDp)
    ->Args({100, 500})
    ->Args({500, 500})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(1)
    ->Repetitions(3);

}  // namespace
}  // namespace rl

BENCHMARK_MAIN();
