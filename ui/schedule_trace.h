#pragma once
// What the schedule views (graph view, schedule matrix, teach mode, saved residuals) read for one
// planned strategy: the network, the plan, the cost model it was planned with and the simulation
// of its schedule. Immutable once built, shared between the worker and the GUI thread through
// StrategyResult::trace, so the views show exactly the plan the results table shows.
#include <memory>
#include <string>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl::ui {

struct ScheduleTrace {
    std::shared_ptr<const Graph> graph;
    std::string spec;  // the strategy as planned, "sqrt-n:budget=12MiB"
    Plan plan;
    CostModel costs;
    Simulation sim;
};

// Simulates `plan` on `graph` with `costs` (timeline recorded) and bundles the four.
std::shared_ptr<const ScheduleTrace> make_trace(std::shared_ptr<const Graph> graph,
                                                std::string spec, Plan plan, CostModel costs);

}  // namespace rl::ui
