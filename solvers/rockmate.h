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
// THE BLOCK MILP. Beside the exhaustive options, each distinct block gets options from a
// Checkmate MILP over the block alone (solvers/block_milp.h: x_k live on entry, x_{k+1} and
// δ_{k+1} as boundary values, only the block's own backwards, one Checkmate stage per Backward),
// solved with CBC at `menu_points` hold budgets between the block's smallest and full hold, and
// two activation budgets each; every solve is limited to `milp_time_s`, all of them to
// `milp_total_s`, and the cancel flag is polled around each (engine/cancel.h). A solution may
// recompute BETWEEN the block's backwards (the softmax output freed after Backward(dropout) and
// recomputed just before Backward(softmax)), which the plain option form cannot express, so an
// option may carry its instruction sequences (RotorTapeOption's widened form, rotor.h): the
// forward, whole, then after the rest of the chain the MILP's post-forward sequence — each
// stage's recomputations, then its Backward. Its tape is what that sequence reads of the block
// before computing it again; its peaks are walk_peak's over the actual instructions (never the
// MILP's memory model, which over-counts); it is checked to run (every input and residual live)
// and kept only when no other option of the stage (nor the full tape) is at least as good in
// hold, both peaks and time. Not formulated: recomputation DURING the block's forward
// (Checkmate's frontier-advancing stages) — the widened form can carry it (`forward`), the MILP
// does not produce it. Each option adds to the chain DP's work; the exhaustive options stay, so
// at equal grid rockmate with MILP options is never worse than without. The MILPs' results (menu
// schedules and bounds) are memoised per process by block signature, node costs and options, so
// a sweep solves them once and its plans agree. None are solved when the budget holds everything.
//
// THE CLASS searched: Rotor's class (rotor.h), plus for each block the menu's options (exhaustive
// and block-MILP) in place of (c). It contains Rotor's class, so on the same memory grid rockmate's
// cost is never above rotor-dp's. Like Rotor's, the DP is exact within its class on an exact grid
// and conservative on a coarse one (requirements rounded up); the plan is re-simulated and must
// fit.
//
// THE BOUND. Three bounds; Plan::bound_class names the one Plan::lower_bound_ms is, and the
// message says it in words.
//  - "milp": where the graph has at most `true_bound_max_nodes` nodes, the whole-network
//    Checkmate MILP (solvers/checkmate.h) runs for at most `true_bound_time_s`, warm-started
//    from rockmate's plan, and CBC's best bound (its optimum when proven) is the reported bound:
//    it holds over the MILP's class (checkmate.h: every schedule except those that compute a
//    node twice, or out of node order, between two consecutive first-forwards/backwards), which
//    takes in schedules that keep another block's values across, recompute a value several
//    times over the step, or interleave recomputation with a block's backwards. It is not
//    proven over every schedule: a rockmate schedule may itself lie outside the MILP's class (a
//    forward sweep through a block followed at once by that block's recompute computes its nodes
//    twice between two backwards). So the reported value is min(MILP bound, rockmate's own
//    cost): a bound over the MILP's class and rockmate's plan. tests/solvers/test_rockmate.cpp
//    checks it against the exhaustive optimum over ALL schedules on tiny graphs.
//  - "block_milp" (above that size, `block_bound`): the relaxed chain DP (every requirement
//    rounded DOWN to whole units of a grid of up to `bound_slots` units: the sum of rounded-down
//    parts never exceeds the rounded-down whole) over the menus plus, per block, bound options:
//    for `bound_points` hold budgets H_0 < … < H_{P-1} (the block's smallest to its full hold),
//    an option holding H_{i-1} + 1 bytes (0 for i = 0), with both peaks equal to its hold, whose
//    recompute time is CBC's lower bound (block_milp.h, THE BOUND MILP) on every schedule of the
//    block holding at most H_i. Any schedule of the block holding h bytes, with cost c and
//    peaks >= h (the held values are live at the forward's last kernel and at the first kernel
//    after it), meets an option with hold <= h, peaks <= its own and cost <= c, so the DP's
//    least cost is a lower bound over THIS CLASS: Rotor's recursion over the blocks (rotor.h,
//    (a) and (b) as there) where each (c) may run ANY schedule of its block — a forward with any
//    recomputation, any values of the block held while the rest of the chain runs, any
//    recomputation interleaved with the block's backwards — memory counted as the DP counts it
//    (walk_peak, the in-place rule off). It contains rockmate's class (menus, MILP options)
//    and so is never above the within-class bound; it does NOT contain schedules that hold a
//    block's values across other blocks' work otherwise than as such a (c), nor ones that drop
//    a stored checkpoint and recompute it later (on the 10-node graph of the tests it stays
//    below the optimum over all schedules at every budget tested: observed, not guaranteed),
//    and it counts memory as the DP does (an engine run in place may fit in less). Its peaks
//    are only bounded by the hold, so it is loose where the peaks bind (docs/benchmarks.md).
//    When `milp_total_s` runs out, later blocks' options cost 0: still a bound, weaker, and
//    the message says so.
//  - "within_class" (`block_bound` off, or the MILP above failed): the same relaxed DP over
//    the menus alone: no schedule of rockmate's class (with these menus) that fits the budget
//    costs less. Its gap is the loss from the memory grid alone (0 on an exact grid, span/gcd
//    ≤ slots). It is NOT a bound over all schedules: on the 10-node graph of
//    tests/solvers/test_rockmate.cpp (two residual blocks) the optimum over all schedules,
//    which the whole-network MILP proves, recomputes 1.117 µs at the two upper budgets tested,
//    where rockmate's class (and so its bound) needs 2.387 µs; on GPT-2 small min-cut's
//    schedule beats it (docs/benchmarks.md).
//  - "trivial": nothing recomputed; 0, which no schedule can beat.
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
    // The block MILP (THE BLOCK MILP): its options on the menus beside the exhaustive ones, and
    // its bound above true_bound_max_nodes. Each CBC solve is limited to `milp_time_s`; the
    // menus' solves together to `milp_total_s` (classes met after it has passed get none), the
    // bound's to the same again (blocks met after it get a bound of 0 for their hold ranges).
    bool milp_menus = true;
    bool block_bound = true;
    double milp_time_s = 0.25;
    // Also a branch-and-bound node limit per solve (0: none). The wall-clock limit makes the
    // MILP options depend on the machine's load (a solve cut short keeps a worse incumbent);
    // a node limit with a generous milp_time_s gives the same options on any machine, at a few
    // seconds of CPU per distinct block (docs/benchmarks.md).
    int milp_nodes = 0;
    double milp_total_s = 10;
    int bound_points = 12;  // hold budgets per block for the bound
};

struct RockmateStats {
    int stages = 0;
    int distinct_blocks = 0;    // classes of stages equal up to names
    int searched_blocks = 0;    // classes whose menu search ran (having at least one candidate)
    int menu_options = 0;       // options over all stages
    bool exhaustive = true;     // every search was exhaustive
    int milp_solves = 0;        // block-MILP solves for the menus (memoised ones not counted)
    int milp_options = 0;       // of menu_options: block-MILP schedules no other option dominates
    bool milp_complete = true;  // every class got its block-MILP menu within milp_total_s
    uint64_t unit = 0;          // the DP's memory unit, bytes
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
