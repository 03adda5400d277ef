#pragma once
// Baselines for the general problem (solvers/general/general_problem.h): each gives a feasible
// schedule at once, or says why it cannot, and serves the exact solvers as a warm start.
//
// Eviction under a budget, walking the node order (frontier-advancing: first computations in
// order). Before node v is computed, its inputs are made live, recomputing any that were evicted
// (recursively, as their own inputs may be gone too); the inputs are pinned while v runs. When v's
// output would not fit, live unpinned outputs are evicted one at a time by a rule:
//   - Dtr: Dynamic Tensor Rematerialization (Kirisame, Lyubomirsky, Haan, Brennan, He, Roesch,
//     Chen, Tatlock, ICLR 2021): evict the smallest h = cost / (bytes x staleness), with cost the
//     output's own duration plus the durations of its inputs that are evicted too (a one-level
//     stand-in for DTR's evicted neighbourhood) and staleness the time since its last use;
//   - FarthestNextUse: Belady's rule (the greedy baseline): evict the output whose next use by a
//     first computation is farthest away, larger outputs first on ties.
// An output whose readers have all been computed for the first time is freed at once. The
// schedule's Frees are then re-derived (schedule_from_computations), which frees each output at
// its last read, never later than the eviction did, so the peak stays within the budget.
//
// Worked example: a -> b -> c -> d with a also read by d, outputs 4 bytes each, budget 12. At c,
// a, b and c are live (12); d needs a and c (and its own 4): b is dead (its reader c is done) and
// freed, so d runs with a + c + d = 12 and nothing is recomputed. At budget 8, a must go while c
// is computed (b + c = 8) and be recomputed for d: a, b, c, a, d.
#include <cstdint>
#include <string>
#include <vector>

#include "solvers/general/general_problem.h"

namespace rl::general {

enum class EvictionRule { Dtr, FarthestNextUse };

struct HeuristicResult {
    bool found = false;
    std::vector<int32_t> computes;  // the order of (re)computations
    std::string message;            // why not, when !found
};

// With `pin_inputs` (the constructive `ondemand` method of solve.h: recompute on demand with
// look-ahead eviction), each input of the node being prepared is pinned as soon as it is live,
// the inputs that need the deepest recomputation first (Sethi and Ullman's order for register
// allocation, "The Generation of Optimal Code for Arithmetic Expressions", JACM 1970, applied to
// a DAG greedily). A sibling's recomputation then never evicts an input already made live, so
// the walk does not thrash on wide nodes (Moccasin's random layered graphs have nodes with up to
// 44 inputs); it fails only when the pinned inputs plus a recomputation's own needs exceed the
// budget. Without it, inputs are only soft-pinned (evicted last) and made live in rounds.
HeuristicResult eviction_heuristic(const GeneralProblem& p, EvictionRule rule,
                                   bool pin_inputs = false);

// Chen, Xu, Zhang, Guestrin, "Training Deep Nets with Sublinear Memory Cost" (2016), on the
// general problem: checkpoints are articulation points of the graph's forward part (nodes every
// path from the first node to the loss passes through); every other forward output is dropped
// once its forward readers are done and recomputed from the nearest checkpoint when a backward
// node needs it. The checkpoints are chosen greedily along the order: a segment is closed when
// its outputs would exceed the segment budget (Chen's budget variant, swept over sqrt-spaced
// values; the best feasible schedule is kept). Graphs with no backward nodes (Moccasin's) have
// no forward/backward split: every node is treated as forward.
HeuristicResult chen_sqrt_n(const GeneralProblem& p);

}  // namespace rl::general

namespace rl::general {

// Greedy interval splitting on the frontier-advancing stages: each output lives over an interval
// of stages (from its computation to its last reader), as in Moccasin's retention intervals
// (Bartan, Li, Teague, Lott, Dilkina, "Moccasin: Efficient Tensor Rematerialization for Neural
// Networks", ICML 2023). While some stage's live bytes exceed the budget, the worst stage is
// relieved by splitting one interval that spans it: the output is freed after its use before the
// stage and recomputed in the latest stage after it, up to its next use, where every input is
// live, or can be kept live longer without pushing another stage over the budget (so a
// recomputation does not cascade). With `recompute_inputs`, an input that is not live there may
// also be recomputed in that stage from live inputs of its own (one level). Among the candidates,
// the smallest duration per byte wins. At most max_computations - 1 splits per node (no limit
// when 0). Neither variant dominates on the benchmark graphs; solve_general runs both.
// With `best_effort`, a stage that no split can relieve is left over the budget and the others
// are still relieved: `computes` is then a valid schedule over budget (found = false), the start
// of the large-neighbourhood search's Phase 1 (lns_general.h).
HeuristicResult greedy_interval_split(const GeneralProblem& p, bool recompute_inputs,
                                      bool best_effort = false);

}  // namespace rl::general
