#pragma once
// Plan, simulate and execute one strategy on one network, and compare its gradients with `none`:
// what `rematlab-cli run/compare` print and what the GUI's results table shows.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {

struct EvaluateOptions {
    int threads = 1;
    int repeat = 1;       // run the step N times, report medians
    uint64_t cap = 0;     // bytes, 0 = none
    bool execute = true;  // false: plan and simulate only
    ExecutionObserver* observer = nullptr;
    const std::atomic<bool>* cancel = nullptr;
    std::vector<GivenInput> inputs;  // replace the seeded data of these inputs (`--input`)
    std::string device = "cpu";      // the backend that executes: "cpu" or "cuda" (make_backend)
};

struct Evaluation {
    std::string network;  // the spec as given
    std::string strategy;
    Plan plan;
    Simulation predicted;
    std::optional<Execution> measured;  // when executed (median times over repeats)
    bool grads_bitwise_equal_to_none = false;
    double max_abs_grad_diff_vs_none = 0;
    std::optional<DeviceMemory> device_memory;  // the driver's view of the run (device backends)
};

// Runs `none` first (once per network) and then each strategy; Errors from one strategy (an
// infeasible budget, a cap exceeded) propagate to the caller.
class Evaluator {
  public:
    Evaluator(const Graph& g, std::string network_spec, EvaluateOptions opt);
    Evaluation evaluate(const Spec& strategy);
    const CostModel& costs() const { return costs_; }
    const RunData& data() const { return data_; }

  private:
    const Graph& g_;
    std::string network_spec_;
    EvaluateOptions opt_;
    CostModel costs_;
    RunData data_;
    std::optional<std::vector<std::vector<float>>> reference_grads_;
    std::shared_ptr<Backend> backend_;  // made once when executing (a GPU context is costly)
};

}  // namespace rl
