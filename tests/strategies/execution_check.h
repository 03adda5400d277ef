#pragma once
// A strategy's schedule run for real, for tests: the executor must reach the peak the simulator
// predicted and produce, bit for bit, the parameter gradients of the plain schedule ("none").
// Used by test_dtr.cpp and test_min_cut.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl::testing {

// The parameter gradients of one step of `g` under strategy "none".
inline std::vector<std::vector<float>> none_gradients(const Graph& g, const CostModel& costs,
                                                      Backend& backend, const RunData& data) {
    return execute(g, plan_with(g, costs, parse_spec("none")).schedule, backend, data).param_grads;
}

// Executes `s` and expects `sim`'s peak and, bit for bit, the `reference` gradients.
inline void expect_runs_as_simulated(const Graph& g, const Schedule& s, const Simulation& sim,
                                     Backend& backend, const RunData& data,
                                     const std::vector<std::vector<float>>& reference) {
    const Execution run = execute(g, s, backend, data);
    EXPECT_EQ(sim.peak_bytes, run.peak_bytes);
    EXPECT_EQ(sim.host_peak_bytes, run.host_peak_bytes);  // offloaded values (engine/liveness.h)
    ASSERT_EQ(reference.size(), run.param_grads.size());
    for (size_t i = 0; i < reference.size(); ++i)
        EXPECT_EQ(0, std::memcmp(reference[i].data(), run.param_grads[i].data(),
                                 reference[i].size() * sizeof(float)));
}

}  // namespace rl::testing
