// The Checkmate MILP (solvers/checkmate.h) on transformer blocks — transformer:layers=1 (29
// nodes) and layers=2 (55 nodes) — at budgets between the least feasible peak and plain
// backprop's peak (target: proven optimal on a 40-node transformer-block DAG in under 60 s).
// Each run is one solve (Iterations(1)); the counters say whether CBC proved optimality, the
// recompute time found, CBC's bound and the gap. REMATLAB_CBC_LOG=1 prints CBC's log.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "solvers/checkmate.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

void BM_CheckmateTransformerBlock(benchmark::State& state) {
    const Graph g = load_network("transformer:layers=" + std::to_string(state.range(3)));
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    CheckmateOptions opt;
    opt.time_limit_s = 120;
    opt.forward_stages = state.range(1) != 0;
    if (const char* log = std::getenv("REMATLAB_CBC_LOG")) opt.log_level = std::atoi(log);
    const uint64_t lo = checkmate_min_budget(g, opt);
    ScheduleBuilder b(g);
    for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);
    for (NodeId n = g.num_nodes() - 1; n >= 0; --n)
        if (g.needs_backward(n)) b.backward(n);
    const uint64_t hi = simulate(g, b.finish(), costs).peak_bytes;
    const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(state.range(0)) / 100;
    // Warm start (third argument 1): CBC begins with `optimal`'s auto plan (the chain DP and the
    // portfolio of the other strategies) as its incumbent.
    Plan start;
    if (state.range(2) != 0) {
        start = plan_with(g, costs, parse_spec("optimal:budget=" + std::to_string(budget)));
        if (start.status != PlanStatus::Infeasible) opt.initial = &start.schedule;
    }
    CheckmateStats stats;
    for (auto _ : state) {
        const Plan p = checkmate_plan(g, costs, budget, opt, &stats);
        benchmark::DoNotOptimize(p.schedule.code.data());
    }
    state.counters["nodes"] = g.num_nodes();
    state.counters["budget_bytes"] = static_cast<double>(budget);
    state.counters["proven"] = stats.proven_optimal ? 1 : 0;
    state.counters["recompute_ms"] = stats.objective_ms;
    state.counters["bound_ms"] = stats.lower_bound_ms;
    state.counters["gap"] = stats.gap;
    state.counters["int_vars"] = stats.integer_variables;
    state.counters["warm"] = stats.warm_started ? 1 : 0;
}
// Args: budget as a percentage of the way from the least feasible peak to plain backprop's;
// forward stages on (1) or off (0); warm start off (0) or on (1); transformer layers.
BENCHMARK(BM_CheckmateTransformerBlock)
    ->Args({25, 1, 0, 1})
    ->Args({50, 1, 0, 1})
    ->Args({75, 1, 0, 1})
    ->Args({50, 0, 0, 1})
    ->Args({25, 1, 1, 1})
    ->Args({50, 1, 1, 1})
    ->Args({75, 1, 1, 1})
    ->Args({25, 1, 0, 2})
    ->Args({50, 1, 0, 2})
    ->Args({75, 1, 0, 2})
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace rl

BENCHMARK_MAIN();
