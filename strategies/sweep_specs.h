#pragma once
// The points of a sweep: which specs trace a strategy's memory/compute trade-off on a network.
// A budgeted strategy is swept over budgets from the smallest it can meet up to `none`'s peak (or
// over the budgets given); a strategy with its own range (sqrt-n's segment counts, periodic's k,
// the policies), given without arguments, over that range; any other strategy is one point.
// Planning only: analysis/sweep.h evaluates the points, and `optimal`'s portfolio plans them.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/params.h"

namespace rl {

struct SweepOptions {
    int budgets = 12;                   // points of a budget sweep
    std::vector<uint64_t> budget_list;  // explicit budgets (bytes) instead
};

// The specs a sweep of `base` evaluates on `g`. `base` keeps its own arguments; a budget sweep
// adds budget=… to them. Throws rl::Error when a budgeted strategy names no smallest feasible
// budget.
std::vector<Spec> sweep_specs(const Graph& g, const CostModel& costs, const Spec& base,
                              const SweepOptions& opt,
                              std::vector<std::optional<uint64_t>>* budgets);

}  // namespace rl
