#pragma once
// One entry point for every method on the general problem: each returns its best schedule,
// re-simulated by simulate_general(), with the time it was found, a proven lower bound on the
// total duration and the gap.
//   dtr      DTR-style eviction (Kirisame et al., ICLR 2021)            heuristics.h
//   greedy   Belady farthest-next-use eviction                          heuristics.h
//   split    greedy interval splitting on Moccasin's retention intervals   heuristics.h
//   chen     Chen et al. 2016 sqrt(n) checkpointing on articulation points   heuristics.h
//   ondemand recompute on demand with pinned inputs and look-ahead (Belady) or DTR eviction
//                                                                       heuristics.h
//   milp     the Checkmate MILP on CBC (Jain et al., MLSys 2020), warm-started from the best
//            baseline                                                   checkmate_general.h
//   lns      the baselines, then large-neighbourhood search over windows of the MILP from the
//            best of them (or, when none fits, from the order without recomputation)
//                                                                       lns_general.h
//   auto     the baselines, then the MILP from the best of them with half of the time left
//            (skipped at once when its model is too large), then the search with the rest
//            unless the MILP proved the optimum
// The baselines and the search prove nothing beyond the trivial bound (every node once: TDI 0);
// the bound is CBC's where the whole MILP ran.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "solvers/general/general_problem.h"

namespace rl::general {

struct SolveResult;

struct SolveOptions {
    std::string method = "auto";
    double time_limit_s = 60;
    int log_level = 0;
    // Reproducible runs: node_limit > 0 stops each CBC solve (the whole MILP and every window of
    // the search) at that many branch-and-bound nodes, and the search's windows then grow on
    // proof rather than on speed; max_windows > 0 ends the search after that many windows; seed
    // places its windows. With both limits set, a run ends in the same place on any machine and
    // under any load, unless time_limit_s comes first (lns_general.h, LnsOptions).
    int node_limit = 0;
    int max_windows = 0;
    uint32_t seed = 1;
    // Set (e.g. by a SIGINT handler): stop before the next method (or the search's next window)
    // and return the best so far; rl::cancel_requested() (engine/cancel.h) is polled too.
    // Inside the MILP, CBC's own SIGINT handler stops its search.
    const std::atomic<bool>* cancel = nullptr;
    // Called whenever a baseline or the search improves the best schedule, e.g. to
    // keep a report ready for an interrupt.
    std::function<void(const SolveResult&)> on_improved;
};

struct SolveResult {
    std::string method;
    bool found = false;
    bool proven_optimal = false;  // within the MILP's class of schedules
    bool interrupted = false;
    std::string source;   // which method produced the best schedule
    std::string message;  // why nothing was found
    Schedule schedule;
    GeneralSimulation sim;   // the independent re-simulation of `schedule`
    double lower_bound = 0;  // total duration
    double time_to_best_s = 0;
    double solve_s = 0;
    int milp_columns = 0, milp_rows = 0;
    bool milp_attempted = false;
    int lns_windows = 0;  // windows the search re-solved
    double gap() const;   // (total - lower_bound) / total, 0 when total is 0
};

// The method names, for messages and --help.
const std::vector<std::string>& solve_methods();

// Throws rl::Error for an unknown method. Never returns a schedule that is invalid or above the
// budget under simulate_general (it asserts that as an internal check and reports a failure).
SolveResult solve_general(const GeneralProblem& p, const SolveOptions& opt);

}  // namespace rl::general
