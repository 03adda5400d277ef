#pragma once
// `optimal` on a plan-only network (an abstract benchmark graph, engine/networks/
// abstract_network.h): the general rematerialization problem's solvers (solvers/general/solve.h)
// under the byte budget, their schedule mapped onto the network's node and value ids and checked
// again by the engine's simulator, whose peak must equal the general simulator's.
#include <cstdint>
#include <optional>
#include <string>

#include "engine/graph.h"
#include "solvers/plan.h"

namespace rl {

// The general solvers' method names that only apply to abstract graphs (`auto` and `milp` are
// optimal's own names too): lns, greedy, split, chen, ondemand, dtr.
bool is_general_only_method(const std::string& method);

// Plans `g` (plan_only) with solve_general's `method` (auto, milp, lns, greedy, split, chen,
// ondemand, dtr) within `time_limit_s`. `budget` empty: floor(0.9 x the peak of the node order
// without recomputation), the benchmarks' usual budget. Infeasible with a message when nothing
// fits; throws rl::Error if a schedule the solvers return fails the engine's re-check.
Plan plan_abstract(const Graph& g, const std::optional<uint64_t>& budget, const std::string& method,
                   double time_limit_s);

}  // namespace rl
