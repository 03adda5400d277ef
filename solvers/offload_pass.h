#pragma once
// Offload added to any schedule: the values a schedule keeps across a long gap between two of
// their reads (typically from the forward to the backward) leave the device for the gap.
//
// Placement, for a value v whose device instance has a gap between reads at a and b (or between
// its Compute at a and its first read b), with at least two kernels strictly inside:
//   Offload(v) right after a; Wait(v) right after the first kernel after a (the copy overlaps
//   it) — each past the Frees that directly follow, so in-place forwards stay in place; Prefetch(v)
//   right before the kernel two kernels before b; Wait(v) right before b.
// So the copies overlap one and two kernels; the simulator (engine/simulator.h) prices what is
// left as stall. This is a placement rule, not an optimisation: solvers/offload_chain.h is the
// exact program for chains, and this pass serves every other network (and the policy strategy's
// JAX offload policies).
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/schedule.h"
#include "engine/simulator.h"

namespace rl {

// A value's widest gap in `s` that can take an offload: instruction indices a < b as above.
struct OffloadGap {
    ValueId value = -1;
    long after = -1;   // a
    long before = -1;  // b
};
// Every value's widest such gap (values with none are left out), in value order.
std::vector<OffloadGap> offload_gaps(const Graph& g, const Schedule& s);

// `s` with the gaps' values offloaded as above. Throws rl::Error for a gap that is not one of
// offload_gaps(g, s).
Schedule insert_offloads(const Graph& g, const Schedule& s, const std::vector<OffloadGap>& gaps);

struct OffloadPassResult {
    Schedule schedule;
    std::vector<ValueId> offloaded;
};
// Greedy: while the simulated peak is over `budget`, offload the largest value whose gap spans
// the peak's instruction. nullopt when no further value can lower it and it is still over.
std::optional<OffloadPassResult> offload_to_budget(const Graph& g, const Schedule& s,
                                                   const CostModel& costs, uint64_t budget);

// Offload in a budgeted strategy (optimal, min-cut with offload=1): the cheapest of
// `candidates` — schedules that keep more than `budget` allows — once offload_to_budget has
// brought it within the budget, by recompute + the compute stream's waits for copies.
// Candidates that already fit, or that no offload brings within it, are skipped; nullopt when
// none is left.
struct OffloadedPick {
    Schedule schedule;
    size_t source = 0;               // its index in `candidates`
    std::vector<ValueId> offloaded;  // as OffloadPassResult
    Simulation sim;                  // its simulation (without a timeline)
    double added_ms = 0;             // sim's recompute + stall
};
std::optional<OffloadedPick> cheapest_offloaded(const Graph& g, const CostModel& costs,
                                                uint64_t budget,
                                                const std::vector<Schedule>& candidates);

}  // namespace rl
