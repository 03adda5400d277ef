#pragma once
// The general problem (solvers/general/general_problem.h) as a mixed-integer linear program,
// after Jain, Jain, Nrusimha, Gholami, Abbeel, Keutzer, Stoica, Gonzalez, "Checkmate: Breaking
// the Memory Wall with Optimal Tensor Rematerialization" (MLSys 2020), Section 4, solved with
// COIN-OR CBC through its C interface.
//
// Stages t = 0..n-1 (frontier-advancing): stage t ends with node t's first computation and may
// recompute earlier nodes before it, in node order, each at most once.
//   R[t][i]  node i is computed in stage t (R[t][t] = 1, fixed; i < t: binary)
//   S[t][i]  node i's output is live entering stage t (binary, i < t)
//   FREE[t][i,k]  for an edge i -> k: i's output dies right after k is computed in stage t
//                 (continuous in [0,1], only bounded above: by R[t][k], by 1 - S[t+1][i] and by
//                 1 - R[t][j] for every later reader j of i in the stage; so it is 0/1 at any
//                 integral R, S, and the budget rows make it as large as they need)
//   U[t][k]  bytes live while k is computed in stage t (Checkmate's U, scaled by 1/budget):
//            U[t][first] = sum_i m_i S[t][i] + m_first R[t][first],
//            U[t][k] = U[t][prev] + m_k R[t][k] - sum_{i->prev} m_i FREE[t][i,prev]
//                      - [prev has no readers] m_prev R[t][prev],  U <= 1.
// Constraints: R[t][k] <= R[t][i] + S[t][i] for every edge i -> k (inputs live); S[t+1][i] <=
// S[t][i] + R[t][i]; S[t][i] + R[t][i] <= 1 (valid for an optimum: recomputing a live output
// only costs); optional sum_t R[t][i] <= max_computations. Objective: the recomputed duration,
// scaled by the sum of durations, so the objective is the TDI itself.
//
// Pruning (exact): only ancestors of t are computed in stage t (anything else feeds nothing
// there), and an output is kept into stage t only while it has a descendant at or after t (it
// may feed a recomputation even when its own readers are done); positions k where R[t][k] is
// fixed to 0 carry no U.
//
// The schedule is read off R (each stage's computations in node order) and its Frees re-derived
// at each output's last read (schedule_from_computations), whose memory is at most the MILP's;
// every returned schedule is re-simulated by simulate_general().
//
// Worked example: a -> b -> c, a -> c with outputs 1, 2, 4: stage 0 computes a (U = 1), stage 1
// computes b with S[1][a] = 1 (U = 3), stage 2 computes c with S[2][a] = S[2][b] = 1 (U = 7). At
// budget 7 that is the optimum, TDI 0; at budget 6 the rows have no solution.
//
// The optimum is over this class of schedules (at most one computation of a node per stage, in
// node order within a stage); the lower bound CBC proves is for the same class.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "solvers/general/general_problem.h"

namespace rl::general {

// An in-class schedule (canonical_stage_order) as the MILP's variables: r[t][i] = node i is
// computed in stage t, s[t][i] = its output is live entering stage t (i <= t).
struct StageMatrices {
    std::vector<std::vector<uint8_t>> r, s;
};
StageMatrices stage_matrices(const AbstractGraph& g, const std::vector<int32_t>& in_class_order);

// A window of the MILP for large-neighbourhood search (lns_general.h): only R[t][i] and S[t][i]
// with t in [stage_begin, stage_end) and i >= node_begin are variables; every other entry is
// fixed to the incumbent's value, and stages outside the window get no rows except the one that
// bounds S[stage_begin] by the incumbent's stage_begin - 1. With overflow_penalty > 0 the budget
// is elastic: stage t's memory may exceed it by o_t (a fraction of the budget) at a cost of
// overflow_penalty x o_t in the objective (Phase 1 of the search, from a schedule over budget).
struct MilpWindow {
    int32_t stage_begin = 0, stage_end = 0, node_begin = 0;
    const StageMatrices* incumbent = nullptr;
    double overflow_penalty = 0;
    // Nodes before node_begin that are free in the window's stages too (optional, size n).
    const std::vector<uint8_t>* extra_nodes = nullptr;
};

struct MilpOptions {
    double time_limit_s = 60;
    int log_level = 0;
    // A feasible order of computations (e.g. a heuristic's); put into the MILP's class and given
    // to CBC as its first incumbent when it fits there.
    const std::vector<int32_t>* warm_start = nullptr;
    // CBC's presolve and root LP cannot be interrupted by its time limit; above this many
    // columns (ResNet50's train graph) they alone take minutes on one core, so the MILP is not
    // attempted (MilpResult::too_large).
    int max_columns = 60000;
    // Solve only this window, warm-started from its incumbent (which then replaces warm_start).
    const MilpWindow* window = nullptr;
    // CBC's branch-and-bound node limit (0: none). A solve stopped by nodes ends in the same
    // place on any machine and under any load; one stopped by time_limit_s does not.
    int node_limit = 0;
    // Polled while CBC runs (with rl::cancel_requested()): CBC is sent SIGINT and stops with
    // its incumbent (MilpResult::interrupted).
    const std::atomic<bool>* cancel = nullptr;
};

struct MilpResult {
    bool found = false;           // an incumbent
    bool proven_optimal = false;  // CBC proved it (within the class above)
    bool proven_infeasible = false;
    bool interrupted = false;   // stopped by Ctrl-C (CBC's own SIGINT handler)
    bool warm_started = false;  // the warm start was in the class and fits the budget
    bool too_large = false;     // more columns than MilpOptions::max_columns: not solved
    std::vector<int32_t> computes;
    double objective_tdi = 0;    // the MILP's TDI of the incumbent
    double lower_bound_tdi = 0;  // CBC's proven bound on the TDI
    double time_to_best_s = 0;   // when the incumbent was found (the warm start: 0)
    double solve_s = 0;
    int variables = 0, integer_variables = 0, constraints = 0;
    double overflow = 0;  // window mode, elastic: the sum of o_t in the incumbent
    // Why CBC gave no answer at all ("CBC killed by signal 11 (Segmentation fault)"): its worker
    // process died (solvers/isolated.h).
    std::string failure;
};

MilpResult solve_checkmate_milp(const GeneralProblem& p, const MilpOptions& opt);

// Puts an order of computations into the MILP's class: stage by stage in node order, without
// repeats inside a stage, without recomputing an output that is live at the stage's start.
std::vector<int32_t> canonical_stage_order(const AbstractGraph& g,
                                           const std::vector<int32_t>& computes);

}  // namespace rl::general
