#pragma once
// Optimal checkpointing of a heterogeneous chain by dynamic programming, after Beaumont,
// Eyraud-Dubois, Herrmann, Joly, Shilova, "Optimal checkpointing for heterogeneous chains: how
// to train deep neural networks with limited memory" (Rotor; Inria RR-9302, 2019; ACM TOMS 2021).
//
// THE CHAIN. engine/graph_algorithms.h's segment_boundaries b_0 < b_1 < … cut the network into
// stages: stage k holds the nodes (b_{k-1}, b_k], the last stage ends with the loss. x_k is the
// output of b_{k-1} (the input of stage k; stage 0 reads only graph inputs), δ_k its gradient.
// Nothing before b_k is read after b_k, so stage k reads only x_k, its own values and graph
// inputs. Per stage we measure, with the engine's own memory rules, the peak of each way of
// running it (see RotorStage) — Rotor's ω_x, ω_x̄, ω_δ and overheads o_f, o_b, but computed by
// walking the stage's instructions with engine/liveness.h (Liveness::resume from the state the
// stage starts in, the in-place rule off: its upper bound), workspace and parameter gradients
// included.
//
// THE CLASS OF SCHEDULES the DP searches (Rotor's, adapted to our rules). Solve(s, t) — backprop
// stages s..t, given x_s live, stages > t done (δ_{t+1} live) — is one of:
//  (a) s = t:  recompute the interior nodes stage t's backwards read (and what they need), then
//              run the stage's Backwards. (The loss stage: compute it all, first time.)
//  (b) a checkpoint at s' in (s, t]: run stages s..s'-1 forward keeping nothing but x_{s'}
//      (Rotor's F_∅ … F_ck), then Solve(s', t), then Solve(s, s'-1).
//  (c) run stage s forward keeping the values its backwards read (Rotor's F_all), then
//      Solve(s+1, t), then stage s's Backwards.
// Consequences, i.e. what the class leaves out: a checkpoint x_{s'}, once stored, stays until
// the schedule no longer needs it (its consumers' backwards, or b_{s'-1}'s own backward when
// that reads its output); it is never dropped and recomputed later. A stage is run whole (every
// node of the stage) in (b) and (c); only (a) recomputes a subset. Values inside a stage are
// never kept across another stage's work except as the tape of (c). The first forward follows
// the same recursion, so the class contains `none` (all (c)), sqrt-n and periodic (segments).
// Frees are placed by ScheduleBuilder after each value's last read, which never costs memory.
// Within this class, on networks whose stages are single nodes (mlp, chain) and with an exact
// memory grid, the DP is exact: tests/strategies/test_optimal_dp.cpp enumerates every schedule
// of the class on chains of up to 9 stages and compares; it also runs a search over ALL valid
// schedules, which can be cheaper (a value can be freed and recomputed inside another stage's
// backward, or a stage can be recomputed in part) — so the DP's answer is never claimed optimal
// over all schedules unless it recomputes nothing.
//
// MEMORY DISCRETISATION. Bytes are counted in units u: every requirement is rounded UP to whole
// units and the memory available DOWN, so the DP is conservative: every plan it returns meets
// the budget (when its model is exact, which the dispatcher checks with simulate()), but a plan
// of the class that fits with less than a unit of slack per rounded term can be missed — the DP
// may then recompute more than the class optimum, and the smallest budget it can meet may be up
// to about depth·u above the class's true minimum. u is fixed per network, not per budget:
// u = max(g, ceil(span / slots)) rounded to a multiple of g, where span = none's peak minus
// parameters and inputs and g = the gcd of all byte sizes in the chain; so the cost is monotone
// in the budget, and when span/g ≤ slots the grid is exact (no rounding at all).
//
// COST. O(S³·M/6) for S stages and M memory units, in S(S+1)/2·(M+1) floats (Rotor's
// complexity): 250 MB at S = M = 500. A synthetic 500-stage chain with 500 units solves in about
// 1.9 s of CPU on one core of the development machine (bench/bench_strategies.cpp).
//
// Worked example: mlp:depth=2 is the chain fc0, act0, fc1, act1, loss — five single-node stages.
// With memory for all of it the DP chooses (c) four times and (a) on the loss: `none`. With
// less, e.g. (b) at s' = 2: forward fc0, act0 keeping x_2 = out(act0); Solve(2, 4) runs fc1, act1,
// loss with their tapes and backwards; then Solve(0, 1): (c) recompute fc0 keeping nothing extra
// (act0's backward reads its own output x_2, still live), (a) act0's backward, fc0's backward.
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/schedule.h"

namespace rl {

// A further way to run a stage as in (c) (solvers/rockmate.h builds these): the forward keeps
// only `tape` (values of the stage, read after the rest of the chain has run), and just before
// the stage's backwards the nodes in `recompute` are run again to restore the rest. Peaks and
// `hold` count as RotorStage's do.
//
// The widened form (a block MILP's schedule, rockmate.h): `forward`, when not empty, is the
// stage's whole forward instruction sequence (Computes only, each node of the stage at least
// once, recomputations allowed), run in place of "every node once, in order"; `post`, when not
// empty, is everything the stage runs after the rest of the chain — Computes interleaved with
// ALL the stage's Backwards in decreasing node order — in place of "`recompute`, then the
// Backwards". rotor_schedule emits them as they are and the peaks are walk_peak's over them.
// Empty (the exhaustive search's options): the plain form above, which existing plans use.
struct RotorTapeOption {
    std::vector<ValueId> tape;
    std::vector<NodeId> recompute;     // in node order (plain form; informative with `post`)
    std::vector<Instruction> forward;  // widened form: the whole forward; empty: plain
    std::vector<Instruction> post;     // widened form: recomputes and Backwards; empty: plain
    float rec_ms = 0;                  // forward cost of `recompute`
    uint64_t hold = 0;                 // kept while Solve(k+1, t) runs: the tape (+ x_k if read)
    uint64_t peak_fwd = 0;             // the forward, keeping the tape, x_{k+1} (and x_k if held)
    uint64_t peak_bwd = 0;             // recompute + backwards, with x_{k+1}, δ_{k+1} live
};

// One stage of the chain: costs in ms, sizes and peaks in bytes. Peaks are the largest live
// bytes inside any instruction of that piece of work, counting the stage's own values, x_k,
// (where stated) x_{k+1} and δ_{k+1}, gradients created and parameter gradients of the stage —
// but not parameters, inputs, parameter gradients of later stages, or what other stages hold.
struct RotorStage {
    float fwd_ms = 0;                   // all nodes of the stage (b, c, and the first forward)
    float rec_ms = 0;                   // what (a) computes (the loss stage: all of it)
    uint64_t x_in = 0;                  // |x_k|; 0 for stage 0 (graph inputs are always live)
    uint64_t param_grads = 0;           // parameter-gradient bytes the stage's backwards create
    uint64_t ext = 0;                   // |δ_{k+1}| + |x_{k+1}| if b_k's backward reads its output
    uint64_t peak_a = 0;                // (a): recompute + backwards, with x_{k+1}, δ_{k+1} live
    uint64_t peak_fwd_keep = 0;         // forward whole, keeping only x_{k+1}, x_k kept after
    uint64_t peak_fwd_free = 0;         // same, x_k freed after its last read
    uint64_t peak_fwd_all = 0;          // (c)'s forward, keeping the stage's tape
    uint64_t peak_bwd = 0;              // (c)'s backwards, with the tape, x_{k+1}, δ_{k+1} live
    uint64_t hold_c = 0;                // what (c) keeps while Solve(k+1, t) runs: tape (+ x_k)
    bool x_read_in_a = false;           // (a) reads x_k (recompute or a backward residual)
    bool x_read_by_prev = false;        // stage k-1's backward reads x_k (b_{k-1}'s output)
    std::vector<RotorTapeOption> menu;  // (c) with partial tapes: Rockmate's menu; empty: Rotor
};

struct RotorChain {
    std::vector<RotorStage> stages;
    uint64_t constant = 0;  // parameters + graph inputs: live for the whole step
    uint64_t span = 0;      // none's peak - constant: the range the grid spans
    uint64_t gcd = 1;       // of every byte size above
};

// The chain of `g` (stages cut at segment_boundaries), measured with `costs`. `stage_first`
// receives the first node of each stage (its last node is the next stage's first minus one).
RotorChain rotor_chain(const Graph& g, const CostModel& costs, std::vector<NodeId>* stage_first);

// One step of a schedule of the class, in stage terms.
struct RotorOp {
    enum Kind : uint8_t { Forward, ForwardTape, Recompute, Backward } kind;
    int32_t first, last;  // stages first..last (Forward); first == last otherwise
    int32_t option = -1;  // ForwardTape / Backward: the stage's menu option; -1: the full tape
};

class RotorSolver {
  public:
    // Units: u bytes each; tables for 0..max_units available units. `relaxed`: round every
    // requirement DOWN to whole units instead of up, so that cost() is a lower bound on every
    // schedule of the class at that memory instead of the cost of a schedule that fits (sequence()
    // is then no plan: it may not fit).
    RotorSolver(const RotorChain& chain, uint64_t unit, int32_t max_units, bool relaxed = false);
    uint64_t unit() const { return unit_; }
    int32_t max_units() const { return max_units_; }
    // Minimal total compute (first forward + recompute, ms) with `units` available beyond the
    // constant; +inf when infeasible.
    float cost(int32_t units) const;
    // Smallest number of units with a finite cost (-1 if none up to max_units).
    int32_t min_units() const;
    // The smallest budget in bytes the class meets on this grid: the constant plus min_units()
    // units, never above none's peak (constant + span), which is also the answer when no number
    // of units is feasible.
    uint64_t min_budget() const;
    // The schedule of the class achieving cost(units) (empty when infeasible).
    std::vector<RotorOp> sequence(int32_t units) const;

  private:
    float option_a(int32_t s, int32_t m) const;
    float option_c(int32_t s, int32_t t, int32_t m) const;
    float option_b(int32_t s, int32_t sp, int32_t t, int32_t m) const;
    float option_menu(int32_t s, int32_t t, int32_t m, size_t j) const;
    uint64_t base(int32_t t) const;
    bool keeps_input(int32_t s, int32_t sp) const;
    uint64_t run_peak(int32_t s, int32_t sp) const;
    void fill();
    void unroll(int32_t s, int32_t t, int32_t m, std::vector<RotorOp>& out) const;
    size_t index(int32_t s, int32_t t, int32_t m) const;
    int32_t q(uint64_t bytes) const;

    const RotorChain& chain_;
    uint64_t unit_;
    int32_t max_units_, n_;
    bool relaxed_;
    std::vector<double> fwd_prefix_;     // Σ fwd_ms of stages < k
    std::vector<uint64_t> grads_after_;  // parameter gradients of stages > k
    std::vector<float> table_;
};

// The unit for `slots` (see MEMORY DISCRETISATION) and the table size: none's peak in units.
uint64_t rotor_unit(const RotorChain& chain, int32_t slots);
int32_t rotor_max_units(const RotorChain& chain, uint64_t unit);
// The schedule of the class that stores everything (all (c), then (a) on the loss): `none`.
std::vector<RotorOp> rotor_store_all(int32_t stages);

// Turns a sequence of stage operations into a schedule of `g`. `chain` holds the stages' menus
// (needed when an op names a menu option).
Schedule rotor_schedule(const Graph& g, const std::vector<NodeId>& stage_first,
                        const std::vector<RotorOp>& ops, const RotorChain* chain = nullptr);

}  // namespace rl
