#pragma once
// The general rematerialization problem of Checkmate (Jain et al., MLSys 2020) and Moccasin
// (Bartan et al., ICML 2023), on an AbstractGraph:
//   - every node is computed at least once, and first computations follow the node order
//     (frontier-advancing stages: stage t ends with node t's first computation and may
//     recompute any earlier nodes before it);
//   - any node may be recomputed, optionally at most `max_computations` times in all;
//   - memory while node v is computed = v's output + the outputs computed earlier and still live;
//     an output dies after its last read; no parameter or input term;
//   - budget = floor(fraction x the peak of the node order without recomputation);
//   - objective: total duration; TDI = (total duration - sum of durations) / sum of durations.
//
// Schedules are the engine's format (engine/schedule.h): Compute(node) and Free(node's output),
// with node ids of the AbstractGraph; there is no Backward instruction because the backward
// nodes are ordinary nodes here. The simulator below is this problem's own: the engine's one
// charges gradients, parameters and workspace by op kind, which these graphs do not have.
//
// Worked example: a -> b -> c, a -> c, outputs 1, 2, 4 bytes, durations 1 each. The order a, b, c
// without recomputation holds a while b is computed (1 + 2 = 3) and a, b while c is (1 + 2 + 4 =
// 7): peak 7. Budget 6 has no schedule (c needs a and b live: 7); budget 7: TDI 0.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/networks/abstract_graph.h"
#include "engine/schedule.h"

namespace rl::general {

struct GeneralProblem {
    const AbstractGraph* graph = nullptr;
    uint64_t budget = 0;       // bytes: a bound on the simulated peak
    int max_computations = 0;  // per node, 0 = no limit (Moccasin uses 2)
};

// What the independent simulator measures on a schedule.
struct GeneralSimulation {
    uint64_t peak_bytes = 0;
    long peak_instruction = -1;
    double total_duration = 0;
    long computations = 0;  // Compute instructions
    std::vector<int32_t> computations_per_node;
};

// Walks the schedule; throws rl::ScheduleError (instruction index and reason) when it computes a
// node whose input is not live, computes a node whose output is still live, frees a dead output,
// computes a node for the first time out of the node order, names a node that does not exist,
// leaves a node never computed, or exceeds `max_computations` (0 = no limit).
GeneralSimulation simulate_general(const AbstractGraph& g, const Schedule& s,
                                   int max_computations = 0);

// Inserts the Frees into a sequence of computations: each output instance dies right after its
// last read (or its computation, when nothing reads it before the node is computed again or the
// run ends). The computations are kept in the given order, unchecked (simulate_general checks).
Schedule schedule_from_computations(const AbstractGraph& g, const std::vector<int32_t>& computes);

// The node order, each node once.
Schedule no_remat_schedule(const AbstractGraph& g);
uint64_t peak_no_remat(const AbstractGraph& g);

// floor(fraction x peak_no_remat).
uint64_t budget_from_fraction(const AbstractGraph& g, double fraction);

// (total - sum of durations) / sum of durations; 0 when the durations sum to 0.
double tdi(const AbstractGraph& g, double total_duration);

// A lower bound on the peak of any schedule: the largest output plus its inputs.
uint64_t min_feasible_peak_bound(const AbstractGraph& g);

}  // namespace rl::general
