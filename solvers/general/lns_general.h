#pragma once
// The scalable solver for the general problem (solvers/general/general_problem.h): a
// large-neighbourhood search over the Checkmate MILP (checkmate_general.h), after Shaw, "Using
// Constraint Programming and Local Search Methods to Solve Vehicle Routing Problems" (CP 1998)
// for the scheme (fix most of an incumbent, re-solve the rest exactly, accept improvements) and
// Jain et al., "Checkmate" (MLSys 2020), Section 4, for the model that is re-solved.
//
// Why this and not Moccasin's retention-interval CP model (Bartan et al., ICML 2023): Moccasin
// needs a CP solver with interval variables and cumulative constraints; Gecode (libgecode-dev) is
// not installed on the project machine and may not be added, and CBC is. The whole MILP has O(n^2)
// binaries; above ~75 nodes (ResNet50's train graph, RL250, RL1000) it has more than the 60,000
// columns CBC's presolve and root LP handle within a time limit. A window of w stages over the
// nodes from w stages back (plus the older outputs it holds) has a few thousand columns and
// mostly solves in 0.02 to 1 s on RL1000, so the search scales with the number of windows, not
// with n^2.
//
// The search. The incumbent is an in-class schedule (canonical_stage_order) held as the MILP's
// stage matrices R and S. A window [a, a + w) of stages is re-solved with every R[t][i] and
// S[t][i] outside it, or with i < a - w and (Phase 2) i not an output the incumbent holds or
// recomputes in the window, fixed to the incumbent (so the window hands the same outputs to stage a
// + w as before), CBC warm-started from the incumbent and limited to a few seconds. The result is
// re-simulated by simulate_general() and kept when it is better. Windows slide over the stages from
// a random offset by half their width; w grows by a quarter when CBC proves a window optimal
// quickly and shrinks when it does not finish.
//
// Phase 1, from a schedule over budget (when no baseline fits, e.g. Moccasin's wide random
// layered graphs at 0.8, the order without recomputation): the budget is elastic in the window
// (MilpWindow::overflow_penalty), each stage paying for the bytes it exceeds the budget by; the
// windows are centred on stages over budget, and a candidate is better when its total excess
// (the sum over stages of max(0, stage peak - budget), re-simulated) is lower. Phase 2 starts at
// the first schedule within budget and minimises the total duration.
//
// It proves no bound of its own: the caller reports the trivial one (each node once) or CBC's
// bound on the whole MILP where that was solved.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "solvers/general/general_problem.h"

namespace rl::general {

struct LnsOptions {
    double time_limit_s = 60;
    double window_time_limit_s = 3;  // CBC's limit per window
    int initial_window = 16;         // stages
    uint32_t seed = 1;
    // Phase 2: free, besides the nodes from a - w on, the older outputs the window holds or
    // recomputes.
    bool free_held_outputs = true;
    int log_level = 0;
    // Reproducible searches (tests, runs that must repeat): when window_node_limit > 0 each
    // window stops at that many CBC nodes (window_time_limit_s is then only a guard) and the
    // window grows whenever CBC proves it, not by how fast it did; max_windows > 0 ends the
    // search after that many windows. The path then depends on no clock, so the same inputs
    // give the same schedule on any machine, loaded or not (unless a guard is reached).
    int window_node_limit = 0;
    int max_windows = 0;
    // Polled between windows (with rl::cancel_requested()); the best schedule so far is returned.
    const std::atomic<bool>* cancel = nullptr;
    // Called with each new best schedule within budget and the seconds since the search began.
    std::function<void(const std::vector<int32_t>& computes, double at_s)> on_improved;
};

struct LnsResult {
    bool found = false;  // a schedule within budget
    bool interrupted = false;
    std::vector<int32_t> computes;  // the best within budget (else the least excess)
    double total_duration = 0;
    double time_to_best_s = 0;
    double excess = 0;  // bytes over budget summed over stages, when !found
    int windows = 0, improvements = 0;
    std::string message;
};

// Starts from `start` (any order of computations simulate_general accepts; within the budget or
// not) and searches until the time limit, a cancel, or nothing is left to improve (a window
// covering every stage proven optimal).
LnsResult lns_improve(const GeneralProblem& p, const std::vector<int32_t>& start,
                      const LnsOptions& opt);

// The sum over stages (a stage ends with a node's first computation) of max(0, the stage's
// peak - budget), for a valid schedule.
double stage_excess(const AbstractGraph& g, const Schedule& s, uint64_t budget);

}  // namespace rl::general
