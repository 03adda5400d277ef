#pragma once
// Rematerialization over a chain of blocks with a menu of schedules per distinct block, after
// Zhao, Le Hellard, Kohler, Beaumont, Eyraud-Dubois, "Rockmate: an Efficient, Fast, Automatic
// and Generic Tool for Re-materialization in PyTorch" (ICML 2023).
//
// THE IDEA. Rotor's DP (solvers/rotor.h) sees each block (stage) of the chain as a unit that is
// either run keeping its whole tape — every value its backwards read — or run keeping nothing
// and recomputed in full before its backwards. Inside a transformer layer that choice is coarse:
// keeping the matmul outputs and recomputing the softmax and dropouts, say, is in neither. Rockmate
// gives the chain DP a MENU per block: ways to run it that keep part of the tape and recompute the
// rest just before the block's backwards, each with its memory (what it holds while the rest of
// the chain runs, its forward and backward peaks) and its time. Blocks that are equal up to names
// (a GPT's layers) share one menu search; the chain DP then picks one option per block, together
// with Rotor's keep/drop of block inputs.
//
// THE MENU of a block. Candidates: the values the block's backwards read, minus its input and
// output (which Rotor's DP already decides on). A menu option keeps a subset T of them; its
// recompute set is every interior node whose output is a dropped candidate, or is read (in turn)
// by such a node and not kept — run in node order before the block's backwards. For `menu_points`
// hold budgets evenly spaced between the smallest and the largest hold, the option with the least
// recompute time within that budget (ties: smaller hold) is on the menu. Rockmate solves a MILP
// per block and budget for this; our blocks are small (a GPT half-layer has about 20 candidates at
// most), so the search is EXHAUSTIVE over all subsets when a block has at most
// `exhaustive_max` candidates — each menu point is then the exact optimum of its budget problem
// — and greedy beyond (candidates dropped in increasing order of recompute cost per byte saved;
// RockmateStats::exhaustive says which). Each option's peaks are then measured per block with
// the engine's memory rules (rotor.cpp's walk_peak), and its time from the block's own costs.
//
// NOT (YET) THE BLOCK'S MILP. Rockmate's menus come from a Checkmate MILP per block and hold
// budget; ours from the search above. An option the DP consumes (RotorTapeOption) has ONE form:
// the block's forward runs once, whole, keeping `tape`; later `recompute` runs (node order) and
// then every backward of the block (decreasing node order); walk_peak measures exactly that
// sequence. A block-MILP schedule (checkmate.h) can leave that form in two ways: (1) it may
// place recomputations BETWEEN the block's backwards (one Checkmate stage per Backward: the
// softmax output freed after Backward(dropout) and recomputed just before Backward(softmax)),
// which is an instruction sequence interleaved with backwards, not a prefix of them; (2) it may
// recompute during the block's forward (frontier-advancing stages), where the option runs each
// node once. Both can be made exact by widening the option to carry its whole forward and
// post-forward instruction sequences (rotor_schedule emitting them, walk_peak measuring them:
// it takes any sequence). What is missing is the block-level formulation itself: checkmate.cpp
// formulates a whole graph down to its loss, and a block needs x_k live on entry, δ_{k+1} and
// x_{k+1} as boundary values and only its own backwards. Neither is written; within the form
// above, each exhaustive option is the least recompute for its hold budget (its peaks are
// measured afterwards, not optimised).
//
// THE CLASS searched: Rotor's class (rotor.h), plus for each block the menu's options in place of
// (c). It contains Rotor's class, so on the same memory grid rockmate's cost is never above
// rotor-dp's. Like Rotor's, the DP is exact within its class on an exact grid and conservative on
// a coarse one (requirements rounded up); the plan is re-simulated and must fit.
//
// THE BOUND. Two bounds, and the message says which one Plan::lower_bound_ms is.
//  - Where the graph has at most `true_bound_max_nodes` nodes, the whole-network Checkmate MILP
//    (solvers/checkmate.h) runs for at most `true_bound_time_s`, warm-started from rockmate's
//    plan, and CBC's best bound (its optimum when proven) is the reported bound: it holds over
//    the MILP's class (checkmate.h: every schedule except those that compute a node twice, or
//    out of node order, between two consecutive first-forwards/backwards), which takes in
//    schedules that keep another block's values across, recompute a value several times over
//    the step, or interleave recomputation with a block's backwards. It is not proven over
//    every schedule: a rockmate schedule may itself lie outside the MILP's class (a forward
//    sweep through a block followed at once by that block's recompute computes its nodes twice
//    between two backwards). So the reported value is min(MILP bound, rockmate's own cost): a
//    bound over the MILP's class and rockmate's plan. tests/solvers/test_rockmate.cpp checks it
//    against the exhaustive optimum over ALL schedules on tiny graphs.
//  - Otherwise Plan::lower_bound_ms is the WITHIN-CLASS bound, labelled so in the message: the
//    same DP with every requirement rounded DOWN to whole units (the sum of rounded-down parts
//    never exceeds the rounded-down whole), on a grid of up to `bound_slots` units: no schedule
//    of the class (with these menus) that fits the budget costs less. Its gap is the loss from
//    the memory grid alone (0 on an exact grid, span/gcd ≤ slots). It is NOT a bound over all
//    schedules: on the 10-node graph of tests/solvers/test_rockmate.cpp (two residual blocks)
//    the optimum over all schedules, which the whole-network MILP proves, recomputes 1.117 µs
//    at the two upper budgets tested, where rockmate's class (and so its bound) needs 2.387 µs;
//    on GPT-2 small min-cut's schedule beats it (docs/benchmarks.md).
//
// Worked example: gpt:layers=4 is cut into 11 stages: the embedding together with layer 0's
// attention half (nothing cuts between them: the embedding's output feeds the LayerNorm and the
// residual add), then MLP and attention halves by turns (each from its LayerNorm to its residual
// add), the final LayerNorm and two head stages. The attention halves are equal up to names, and
// so are the MLP halves: 2 distinct layer blocks searched, their menus reused by the other six
// halves. An attention menu option may keep the Q, K, V projections and the attention-over-V
// output but drop the scores, softmax and dropout (the a·s² tensors), recomputing them before the
// block's backwards: Korthikanti et al.'s selective recomputation, if the search finds it best.
#include <cstdint>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "solvers/plan.h"
#include "solvers/rotor.h"

namespace rl {

struct RockmateOptions {
    int32_t slots = 500;      // memory units of the DP's grid (rotor.h, MEMORY DISCRETISATION)
    int menu_points = 6;      // hold budgets per block between its smallest and largest hold
    int exhaustive_max = 16;  // candidates up to which a block's menu search is exhaustive
    // Subsets the exhaustive searches may evaluate over the whole network: classes met after it
    // is spent are searched greedily, so many large distinct blocks cannot make planning slow.
    uint64_t search_subsets = uint64_t{1} << 20;
    bool lower_bound = true;  // also run the relaxed DP for Plan::lower_bound_ms
    // The relaxed DP's grid: finer than the plan's, as the bound's distance from the cost is
    // mostly the grid's rounding, but coarser where needed to keep its table within 16 M
    // entries (64 MB): any grid gives a valid bound.
    int32_t bound_slots = 4000;
    // The bound over the whole-network MILP's class (THE BOUND): solved where the graph has at
    // most this many nodes (0: never), within this wall-clock limit. Kept small on purpose: CBC
    // (Debian's libCbc) crashed with SIGSEGV in CglPreProcess::postProcess, in one of two runs,
    // with a 40-node cap and a 2 s limit (CrossStrategy.OptimalIsNeverBeatenOnBlocksAndDags, on
    // its unet:depth=2 graph); graphs this small are solved to optimality far within the limit.
    int true_bound_max_nodes = 16;
    double true_bound_time_s = 10;
};

struct RockmateStats {
    int stages = 0;
    int distinct_blocks = 0;  // classes of stages equal up to names
    int searched_blocks = 0;  // classes whose menu search ran (having at least one candidate)
    int menu_options = 0;     // options over all stages
    bool exhaustive = true;   // every search was exhaustive
    uint64_t unit = 0;        // the DP's memory unit, bytes
};

// A class id per stage (stage_first as rotor_chain returns it): equal ids for stages equal up
// to names — same ops, attributes, shapes, dtypes, parameters, workspaces, edges (inside the
// stage, to its input, to graph inputs) and position kind in the chain.
std::vector<int32_t> rockmate_block_classes(const Graph& g, const std::vector<NodeId>& stage_first);

// Fills each stage's menu (RotorStage::menu) of `chain`, built by rotor_chain(g, costs, &first).
void rockmate_menus(const Graph& g, const CostModel& costs, const std::vector<NodeId>& stage_first,
                    RotorChain& chain, const RockmateOptions& opt, RockmateStats* stats = nullptr);

// Plans under `budget` bytes (a bound on simulate()'s peak_bytes): the chain DP over the menus.
// Feasible (Optimal when it recomputes nothing) with the bound and gap above, or Infeasible with
// the smallest budget the DP can meet.
Plan rockmate_plan(const Graph& g, const CostModel& costs, uint64_t budget,
                   const RockmateOptions& opt = {}, RockmateStats* stats = nullptr);

}  // namespace rl
