#pragma once
// Checkmate's MILP (Jain et al., "Checkmate: Breaking the Memory Wall with Optimal Tensor
// Rematerialization", MLSys 2020) over ONE block of a chain, as Rockmate solves it per block
// (Zhao et al., ICML 2023): what solvers/rockmate.cpp builds its MILP menu options and its
// bound from. Not part of the solvers' public interface.
//
// THE BLOCK. Stage k of rotor's chain (rotor.h, THE CHAIN): nodes first..last; its input x_k
// (the output of first-1; none for stage 0) is live on entry, its output x_{k+1} (the output of
// `last`) and the incoming gradient δ_{k+1} are boundary values: x_{k+1} is live during the
// block's backwards when `reads_out` (a backward of the block reads it), and is never
// recomputed. Graph inputs are always live. Only the block's own backwards run, in decreasing
// node order. The forward has run once, whole; what it left live for the backwards is the
// TAPE: a set of the block's interior values (any of them, not only those a backward reads),
// plus x_k when held.
//
// THE SCHEDULE MILP (block_milp_schedule). One Checkmate stage per Backward of the block, in
// their order: in stage t, R[t][i] = interior node i is recomputed (stage computations run in
// node order, before the stage's Backward), S[t][i] = i's output is live entering stage t;
// S[0] is the tape K. Rows: a computation's inputs are kept or computed earlier in its stage
// (or are x_k, held, or graph inputs); a Backward's residuals are live at it; a value is kept
// into stage t+1 only if live in stage t; S + R <= 1. Memory is modelled per stage as every
// value kept into it or computed in it (live together at its Backward, an over-count: the
// values are freed after their last reads) plus x_k when held, bounded by `act_budget`; the
// tape's bytes (x_k's included) are bounded by `hold_budget`. Objective: recompute time. The
// solution becomes a post-forward instruction sequence — each stage's recomputations, then its
// Backward — whose exact peaks the caller measures (rotor.cpp's walk_peak), never this model.
//
// THE BOUND MILP (block_hold_lower_bound). For ANY schedule of the block of the form "a forward
// (each node at least once, recomputation allowed), then, after the rest of the chain, any
// recomputation interleaved with the block's backwards", let K be the values live between the
// two and C the nodes computed at least once after: every value a Backward reads is in K or
// produced by C (or is x_{k+1}, a graph input), every input of a node of C likewise, and the
// recompute time is at least Σ_{i∈C} fwd(i). The MILP minimises that over K, C with Σ |K| <=
// `hold_budget`: a relaxation (ordering dropped), so CBC's best bound, lowered by a relative
// 1e-7 for solver tolerances, is a lower bound on the recompute time of every such schedule
// holding at most `hold_budget` bytes between forward and backwards.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/graph.h"
#include "engine/liveness.h"
#include "engine/schedule.h"

namespace rl::block_detail {

struct BlockSpec {
    NodeId first = 0, last = 0;  // inclusive; `last` produces x_{k+1}
    ValueId xin = kNoId;         // x_k; kNoId for stage 0
    bool xin_forced = false;     // x_k held whatever the schedule (a residual, or read by k-1)
    bool reads_out = false;      // a backward of the block reads x_{k+1}
};

struct BlockMilpSolve {
    double time_limit_s = 0.25;  // per CBC solve (wall clock)
    int max_nodes = 0;           // per CBC solve (0: none)
};

// The least-recompute post-forward sequence within the two budgets (bytes), or nothing when
// CBC finds none in time (or the budgets admit none). `proven` says whether CBC proved it.
struct BlockSchedule {
    std::vector<Instruction> post;  // Computes interleaved with the block's Backwards
    double rec_ms = 0;
    bool proven = false;
};
std::optional<BlockSchedule> block_milp_schedule(const Graph& g, const LivenessTables& t,
                                                 const BlockSpec& b,
                                                 const std::function<double(NodeId)>& fwd,
                                                 uint64_t hold_budget, uint64_t act_budget,
                                                 const BlockMilpSolve& opt);

// A lower bound (ms) on the recompute time of every schedule of the block (the form above)
// holding at most `hold_budget` bytes between its forward and its backwards; +inf when CBC
// proves none can; 0 when CBC reports no usable bound.
double block_hold_lower_bound(const Graph& g, const LivenessTables& t, const BlockSpec& b,
                              const std::function<double(NodeId)>& fwd, uint64_t hold_budget,
                              const BlockMilpSolve& opt);

// Whether `post` is runnable after a forward that left `live` (plus graph inputs): every
// Compute's inputs and every Backward's residuals live when it runs, every Backward of the
// block exactly once in decreasing node order, Computes only of interior nodes.
bool block_post_valid(const Graph& g, const LivenessTables& t, const BlockSpec& b,
                      const std::vector<ValueId>& live, const std::vector<Instruction>& post);

}  // namespace rl::block_detail
