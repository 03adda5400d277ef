#pragma once
// What a planner returns: the schedule plus what kind of answer it is. The solver cores
// (solvers/) return it and every registered strategy (strategies/strategy.h) passes it on.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/schedule.h"

namespace rl {

enum class PlanStatus { Optimal, Feasible, Heuristic, Infeasible };
const char* plan_status_name(PlanStatus s);

struct Plan {
    Schedule schedule;
    PlanStatus status = PlanStatus::Heuristic;
    double solve_ms = 0;
    std::optional<uint64_t> budget;               // the byte budget asked for, if any
    std::optional<uint64_t> min_feasible_budget;  // when the budget could not be met
    std::vector<NodeId> checkpoints;  // nodes whose outputs are kept across the backward
    std::string method;  // how it was found, when a strategy has several ("rotor-dp", "milp")
    std::optional<double> lower_bound_ms;  // solvers: a proven bound on the recompute cost
    std::optional<double> gap;             // solvers: (incumbent − bound) / incumbent
    // Over which schedules lower_bound_ms holds (docs/cli.md, "bound_class"): "trivial" (nothing
    // is recomputed: every schedule), "milp" (the whole-network Checkmate MILP's class),
    // "block_milp" (rockmate's chain class with any schedule per block, solvers/rockmate.h),
    // "within_class" (the solver's own class only); empty without a bound.
    std::string bound_class;
    std::string message;  // for Infeasible: what was wrong and what to do
};

}  // namespace rl
