#pragma once
// Walks a schedule with the shared liveness rules and the cost model: predicted memory timeline,
// peak (inside instructions, not only between them) and times. No kernels, no allocation.
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/cost_model.h"
#include "engine/liveness.h"
#include "engine/schedule.h"

namespace rl {

struct SimPoint {
    int32_t instruction;  // -1 before the first / after the last
    uint64_t bytes;       // live bytes after the event
};

struct Simulation : MemoryPeak, CopyCounts {
    long computes = 0, recomputes = 0, backwards = 0, frees = 0;
    double forward_ms = 0, recompute_ms = 0, backward_ms = 0;
    // Offload: copies issued and bytes moved each way (CopyCounts), the copy stream's busy time,
    // and how long the compute stream waited for copies (the only part of a transfer that costs
    // step time).
    double transfer_ms = 0, stall_ms = 0;
    std::vector<std::pair<int32_t, double>> stalls;  // (Wait instruction, ms) for each stall
    double total_ms() const { return forward_ms + recompute_ms + backward_ms + stall_ms; }
    // Per instruction (with record_timeline): the compute stream's predicted milliseconds, a
    // Wait's stall included.
    std::vector<double> instruction_ms;
    std::vector<SimPoint> timeline;  // one point per allocate/release event and in-place Compute
    std::vector<SimPoint> host_timeline;  // the host pool's events (offload), bytes on the host
};

struct SimulateOptions {
    bool record_timeline = true;
};

// Throws ScheduleError for an illegal schedule. `costs` may be empty (times are then 0, copies
// included). A recompute that reads a value kept since the forward (or a network input) costs
// CostModel::recompute_ms (its inputs from memory, where the profile timed that); one whose inputs
// were all just recomputed, forward_ms. Copies run on one copy stream beside the compute stream, in
// issue order: a copy starts when it is issued or when the copy before it ends, whichever is later,
// and takes costs.transfer().copy_ms(); a Wait stalls the compute stream until its copy's end.
Simulation simulate(const Graph& g, const Schedule& s, const CostModel& costs,
                    const SimulateOptions& opt = {});
// Shares tables across many simulations of the same graph (strategies searching budgets).
Simulation simulate(const Graph& g, const LivenessTables& t, const Schedule& s,
                    const CostModel& costs, const SimulateOptions& opt = {});

}  // namespace rl
