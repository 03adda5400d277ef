#pragma once
// Walks a schedule with the shared liveness rules and the cost model: predicted memory timeline,
// peak (inside instructions, not only between them) and times. No kernels, no allocation.
#include <array>
#include <cstdint>
#include <vector>

#include "engine/cost_model.h"
#include "engine/liveness.h"
#include "engine/schedule.h"

namespace rl {

struct SimPoint {
    int32_t instruction;  // -1 before the first / after the last
    uint64_t bytes;       // live bytes after the event
};

struct Simulation : MemoryPeak {
    long computes = 0, recomputes = 0, backwards = 0, frees = 0;
    double forward_ms = 0, recompute_ms = 0, backward_ms = 0;
    double total_ms() const { return forward_ms + recompute_ms + backward_ms; }
    std::vector<SimPoint> timeline;  // one point per allocate/release event and in-place Compute
};

struct SimulateOptions {
    bool record_timeline = true;
};

// Throws ScheduleError for an illegal schedule. `costs` may be empty (times are then 0).
Simulation simulate(const Graph& g, const Schedule& s, const CostModel& costs,
                    const SimulateOptions& opt = {});
// Shares tables across many simulations of the same graph (strategies searching budgets).
Simulation simulate(const Graph& g, const LivenessTables& t, const Schedule& s,
                    const CostModel& costs, const SimulateOptions& opt = {});

}  // namespace rl
