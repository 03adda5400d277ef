#pragma once
// Optimal rematerialization on a general DAG as a mixed-integer linear program, after Jain, Jain,
// Nrusimha, Gholami, Abbeel, Keutzer, Stoica, Gonzalez, "Checkmate: Breaking the Memory Wall
// with Optimal Tensor Rematerialization" (MLSys 2020), solved with COIN-OR CBC.
//
// Our backward order is fixed (canonical: decreasing node index), so the stages are:
//   forward stages f = 0..N-1  (Checkmate's "frontier-advancing" stages): stage f computes node f
//                               for the first time, after recomputing any nodes < f it chooses;
//   backward stages, one per Backward in canonical order: recomputations, then that Backward.
// Variables per stage t and node i:
//   R[t][i]  node i is (re)computed in stage t (inside a stage, computations run in node order);
//   S[t][i]  node i's output is live entering stage t (kept from an earlier stage);
//   FREE[t][i][k]  i's output is freed after position k of stage t (continuous in [0,1]: it is
//                  bounded above by products of binaries, so it is 0/1 at any integral R, S).
// Constraints: a compute needs its inputs (R[t][j] <= S[t][i] + R[t][i]); a Backward needs its
// residuals (S[t][r] + R[t][r] >= 1); S[t+1][i] <= S[t][i] + R[t][i]; memory at every position
// of every stage (inside each instruction, with the engine's rules from engine/liveness.h:
// parameters and inputs, parameter and activation gradients as the fixed backward order makes
// them, workspace, and the in-place rule: a pointwise compute over an input freed right after it
// allocates no output) <= budget. Objective: total recomputation time (computations beyond the
// first forward), from the CostModel.
//
// Rows that only tighten the LP relaxation (valid for every integral point; without them CBC's
// bound barely moved on a transformer block, see docs/benchmarks.md):
//   - a value is freed at most once per stage, and only if live there: sum of FREEs <= S + R;
//   - S + R <= 1, and R / S at most the reads of the value in the stage plus keeping it;
//   - a knapsack over the next stage's S: what is kept into stage s+1 is live at stage s's last
//     instruction, together with that Backward's residuals, within the budget (CBC derives
//     cover cuts from it).
//
// The schedule is read off R (each stage: its computations in node order, then its Backward)
// and built with ScheduleBuilder, which frees every value right after its last read; the MILP's
// memory accounting (in-place forwards included) is exact for such schedules and an upper bound
// otherwise, and every plan is checked with simulate() before it is returned.
//
// Worked example: x -> l1 (linear) -> t (tanh) -> l2 (linear) -> loss (sum of squares), four
// forward stages and four backward stages [.. loss'], [.. l2'], [.. t'], [.. l1']. Backward(l2)
// reads t's output (its input), Backward(t) reads t's output too. Plain backprop keeps t from
// its forward stage to t' (S = 1 all along). If the budget cannot hold t's output while the
// loss and l2 run their backwards, the MILP sets S[loss'][t] = 0 (t dies in the forward) and
// R[l2'][l1] = R[l2'][t] = 1: l1 and t are recomputed just before Backward(l2), and t is then
// kept (S[t'][t] = 1) for its own backward. Objective: forward_ms(l1) + forward_ms(t).
//
// The optimum is over the class of schedules this formulation describes: first computations in
// node order, at most one computation of a node per stage, computations inside a stage in node
// order. Frees are not a restriction (the builder frees at the last read, which never costs
// memory).
//
// OFFLOAD (CheckmateOptions::offload), host memory as a third choice, in the spirit of XEngine's
// extension of Checkmate to several memories (Schuler, Membarth, Slusallek, "XEngine: Optimal
// Tensor Rematerialization for Neural Networks in Heterogeneous Environments", ACM TACO 2022) and
// of POFO's keep / offload / recompute (solvers/offload_chain.h), with a transfer model of our
// own that keeps every copy inside one stage. Three more binaries where S exists:
//   H[t][i]    i's output is on the host entering stage t;
//   OFF[t][i]  i's output, kept into stage t (S = 1), leaves for the host during it;
//   PF[t][i]   i's output comes back from the host during stage t, for stage t + 1.
// Rows: S + H <= 1, R + H <= 1 (a value on the host is not recomputed: it comes back only by a
// prefetch); OFF <= S[t], OFF + S[t+1] <= 1; PF <= H[t], PF <= S[t+1]; S[t+1] <= S + R + PF;
// H[t+1] = H[t] + OFF - PF; an offloaded value is never freed in its stage (its Wait releases
// it). The schedule of a stage is: its Offloads, then its Prefetches (node order), its
// computations and Backward, then a Wait for each copy. So a prefetch's device buffer counts from
// the stage's start and an offload's to its end, which the memory rows add; and the copies run
// back to back on a copy stream that is idle at every stage's start, so the compute stream waits
//   stall[t] = max(0, sum of the stage's copy times - its computations and Backward),
// a continuous column >= both terms, added to the objective. The engine's simulator times the
// schedule the same way, so the MILP's objective equals the simulated recompute + stall
// (CheckmateStats::model_ms; tests/solvers/test_checkmate_offload.cpp). The class is smaller
// than POFO's on chains: a copy overlaps only its own stage (one node's forward, or one
// Backward and its recomputations), and a value cannot be offloaded in the stage that computes
// it.
#include <cstdint>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "solvers/plan.h"

namespace rl {

struct CheckmateOptions {
    double time_limit_s = 30;  // CBC wall-clock limit per solve
    // Checkmate's frontier-advancing forward stages. Off: the whole forward is one stage (each
    // node once, no recomputation during the forward) — a smaller, faster, more restricted MILP.
    bool forward_stages = true;
    // When the budget is infeasible: solve the MILP that minimises the peak to report the
    // smallest feasible budget (with the same time limit).
    bool find_min_budget = true;
    int log_level = 0;  // CBC's log level (0: silent)
    // A schedule that fits the budget, given to CBC as its first incumbent (Cbc_setMIPStart)
    // when it lies in the MILP's class; ignored otherwise. An incumbent lets CBC prune from the
    // start instead of searching for a first feasible point.
    const Schedule* initial = nullptr;
    // Host memory as a third choice beside keep and recompute (below): the MILP also chooses
    // offloads and prefetches, priced with the cost model's host link (CostModel::transfer), and
    // minimises recompute + the compute stream's waits for copies.
    bool offload = false;
};

// What the solver reported, beyond the Plan.
struct CheckmateStats {
    bool solved = false;          // an incumbent was found
    bool proven_optimal = false;  // CBC proved it optimal
    double objective_ms = 0;      // the incumbent's simulated recompute (+ stall with offload)
    double model_ms = 0;          // the same as the MILP prices it (equal: the model is exact)
    double lower_bound_ms = 0;    // CBC's best bound on the recompute cost
    double gap = 0;               // (objective - bound) / objective; 0 when the objective is 0
    double solve_s = 0;           // wall time of the MILP solves
    int variables = 0, integer_variables = 0, constraints = 0;
    bool warm_started = false;  // `initial` was in the class and was passed to CBC
};

// Plans under `budget` bytes (a bound on simulate()'s peak_bytes). Status: Optimal when CBC
// proves optimality, Feasible for an incumbent found within the time limit, Infeasible (with
// min_feasible_budget and a message) otherwise.
Plan checkmate_plan(const Graph& g, const CostModel& costs, uint64_t budget, double time_limit_s);
Plan checkmate_plan(const Graph& g, const CostModel& costs, uint64_t budget,
                    const CheckmateOptions& opt, CheckmateStats* stats = nullptr);

// The smallest peak (bytes) over the MILP's class of schedules, by solving the MILP that
// minimises the peak; `proven` says whether CBC proved it (otherwise it is an upper bound: the
// simulated peak of the best schedule found). `schedule`, when given, receives that schedule.
uint64_t checkmate_min_budget(const Graph& g, const CheckmateOptions& opt, bool* proven = nullptr,
                              Schedule* schedule = nullptr);

}  // namespace rl
