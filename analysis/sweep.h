#pragma once
// Sweeps: the memory/compute trade-off curve of each strategy on one network — the data behind
// the Pareto chart. A budgeted strategy is swept over budgets from the smallest it can meet up
// to `none`'s peak (or over the budgets given); a strategy with its own range (sqrt-n's segment
// counts, periodic's k, the policies), given without arguments, over that range; any other
// strategy is one point.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/evaluate.h"
#include "strategies/sweep_specs.h"

namespace rl {

struct SweepPoint {
    Evaluation eval;                 // plan, prediction, and the run when executed
    std::optional<uint64_t> budget;  // the budget asked for, for budgeted sweeps
};

// Evaluates every point (executing each when the evaluator executes). Points whose plan is
// infeasible are kept, with their status, so the caller can show them.
std::vector<SweepPoint> sweep(const Graph& g, Evaluator& evaluator, const Spec& base,
                              const SweepOptions& opt);

}  // namespace rl
