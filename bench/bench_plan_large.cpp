// Planning speed of `min-cut` and `dtr` on 5,000-node networks (target: under 1 s each; results
// in docs/benchmarks.md). Planning only — no kernels run, no tensors are allocated. Networks:
// resmlp:depth=1000 (5 nodes a block, 5,002 nodes) and mlp:depth=2500 (5,001 nodes), batch 256
// so that activations, not parameters, dominate the peak and the budgets force real work.
// Budgets are fractions of `none`'s simulated peak; each benchmark reports the plan's predicted
// peak and recompute count, so a faster plan that does less is visible.
#include <benchmark/benchmark.h>

#include <string>

#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

const char* network_spec(int64_t which) {
    return which == 0 ? "resmlp:depth=1000,width=16,batch=256"
                      : "mlp:depth=2500,width=16,batch=256";
}

// `strategy` with ",budget=<percent of none's peak>" appended when percent > 0.
void plan_large(benchmark::State& state, const std::string& strategy) {
    const Graph g = load_network(network_spec(state.range(0)));
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const uint64_t none_peak =
        simulate(g, plan_with(g, costs, parse_spec("none")).schedule, costs).peak_bytes;
    std::string spec = strategy;
    if (state.range(1) > 0)
        spec += std::string(spec.find(':') == std::string::npos ? ":" : ",") +
                "budget=" + std::to_string(none_peak * static_cast<uint64_t>(state.range(1)) / 100);
    Plan p;
    for (auto _ : state) {
        p = plan_with(g, costs, parse_spec(spec));
        benchmark::DoNotOptimize(p.schedule.code.data());
    }
    state.SetLabel(spec);
    state.counters["nodes"] = g.num_nodes();
    if (p.status == PlanStatus::Infeasible) {
        state.counters["infeasible"] = 1;
        return;
    }
    const Simulation sim = simulate(g, p.schedule, costs);
    state.counters["peak_vs_none"] =
        static_cast<double>(sim.peak_bytes) / static_cast<double>(none_peak);
    state.counters["recomputes"] = static_cast<double>(sim.recomputes);
}

// Args: network (0 resmlp, 1 mlp), budget in percent of none's peak (0: the default).
void BM_MinCut(benchmark::State& state) {
    plan_large(state, "min-cut");
}
BENCHMARK(BM_MinCut)->Args({0, 0})->Args({0, 45})->Args({1, 0})->Args({1, 80})->Unit(
    benchmark::kMillisecond);

void BM_Dtr(benchmark::State& state) {
    plan_large(state, "dtr");
}
BENCHMARK(BM_Dtr)
    ->Args({0, 75})
    ->Args({0, 50})
    ->Args({0, 0})  // the default: bisection for the smallest budget, then the midpoint
    ->Args({1, 75})
    ->Args({1, 50})
    ->Args({1, 0})
    ->Unit(benchmark::kMillisecond);

void BM_DtrLocal(benchmark::State& state) {
    plan_large(state, "dtr:heuristic=local");
}
BENCHMARK(BM_DtrLocal)->Args({0, 50})->Args({1, 50})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace rl

BENCHMARK_MAIN();
