#pragma once
// Plan, simulate and execute one strategy on one network, and compare its gradients with `none`:
// what `rematlab-cli run/compare` print and what the GUI's results table shows.
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/measure.h"
#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/huge_pages.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {

struct EvaluateOptions {
    int threads = 1;
    int repeat = 1;       // timed repeats after one untimed warm-up step (analysis/measure.h)
    uint64_t cap = 0;     // bytes, 0 = none
    bool execute = true;  // false: plan and simulate only
    ExecutionObserver* observer = nullptr;
    const std::atomic<bool>* cancel = nullptr;
    std::vector<GivenInput> inputs;  // replace the seeded data of these inputs (`--input`)
    std::string device = "cpu";      // the backend that executes: "cpu" or "cuda" (make_backend)
    // Plan-only: predict with DeviceRates{} (fixed nominal rates) rather than this CPU's, so that
    // the parts of a sweep run on different machines price alike.
    bool nominal_rates = false;
    // The host link offloads and prefetches cross (engine/cost_model.h), when not the default.
    std::optional<TransferRates> link;
    // compare() stopped by a cancellation: each strategy keeps every timed step it completed,
    // the round cut short included, rather than only the rounds all of them completed (the
    // GUI's Cancel keeps what was measured, each row with its own repeat count). A strategy with
    // no timed step has no measurement either way.
    bool keep_partial_rounds = false;
    // Each strategy's `measured` keeps its parameter gradients (`run --dump-grads`,
    // `--dump-activations`). Off, they are dropped once compared with none's after the step: a
    // comparison of S strategies held S copies of every gradient (`compare` on ViT-L/32's 1.2 GB
    // of parameters reached 13 GB resident and was killed for memory).
    bool keep_measured_gradients = false;
};

struct Evaluation {
    std::string network;  // the spec as given
    std::string strategy;
    Plan plan;
    Simulation predicted;  // in the network's dtype (bf16 bytes for a bf16 network)
    // The kernels compute in float32: a bf16/f16 network executes as its f32 copy
    // (Graph::with_float_dtype) with the same schedule. This is that copy's prediction, set when
    // executed and the dtypes differ; the measured figures are to be compared with it.
    std::optional<Simulation> predicted_executed;
    std::optional<Execution> measured;   // when executed (median times over repeats)
    std::optional<MeasuredTimes> times;  // the same times with their spread over the repeats
    bool grads_bitwise_equal_to_none = false;
    double max_abs_grad_diff_vs_none = 0;
    std::optional<DeviceMemory> device_memory;  // the driver's view of the run (device backends)
    // What `measured` is to be compared with: predicted_executed when set, else predicted.
    const Simulation& prediction_of_run() const {
        return predicted_executed ? *predicted_executed : predicted;
    }
};

// One strategy of a comparison: its evaluation, or the error that stopped it (a cap exceeded, not
// enough memory); a failed strategy leaves the later rounds, the others go on.
struct ComparedStrategy {
    Evaluation eval;
    std::exception_ptr error;
};

struct Comparison {
    std::vector<ComparedStrategy> strategies;  // in the order asked
    int rounds_done = 0;                       // timed rounds every running strategy completed
    // Stopped by EvaluateOptions::cancel; times cover rounds_done (or, with
    // keep_partial_rounds, each strategy's own completed steps: its times' sample count).
    bool cancelled = false;
    // The (round, strategy index) of every step in the order run; round 0 is the warm-up.
    std::vector<std::pair<int, size_t>> order;
};

// Called before each step of a comparison: round 0 is the warm-up, 1..repeat the timed ones; and
// before each strategy is planned, with round kPlanningRound.
inline constexpr int kPlanningRound = -1;
using StepListener = std::function<void(int round, size_t index)>;

// Runs `none` first (once per network, the gradient reference) and then the strategies. Every
// executed step, warm-up included, has its peak compared with the prediction and its gradients
// with none's (the invariants hold on every repeat, not just the first).
class Evaluator {
  public:
    Evaluator(const Graph& g, std::string network_spec, EvaluateOptions opt);
    // One strategy: a warm-up step and `repeat` timed ones. Errors (a cap exceeded, ...) and
    // rl::Cancelled propagate; an infeasible plan comes back with no measurement.
    Evaluation evaluate(const Spec& strategy);
    // Several strategies measured together, interleaved round by round so that a drift in the
    // machine's load hits all alike: plan them all, then one warm-up round (each strategy once,
    // untimed), then `repeat` timed rounds, each running every strategy once in the order given.
    // A cancellation stops between steps and keeps the rounds completed by every strategy.
    Comparison compare(const std::vector<Spec>& strategies, const StepListener& on_step = {});
    const CostModel& costs() const { return costs_; }
    const RunData& data() const { return data_; }
    // One more step of `ev`'s plan (an executed evaluation of this evaluator), untimed and apart
    // from the measured ones, that also copies the forward outputs of the nodes marked in
    // `keep` (per NodeId) to the host (Execution::outputs). The measured figures are untouched;
    // the kernels are deterministic, so these are the values the measured steps computed, and
    // the step's gradients let a caller check that (they equal the measured step's bitwise).
    Execution forward_outputs(const Evaluation& ev, const std::vector<unsigned char>& keep);

  private:
    // Runs one step of `ev`'s plan and folds its invariants into `ev`; returns its times.
    Execution run_step(Evaluation& ev, bool timed_first, bool warm_up);
    void ensure_reference();

    const Graph& g_;
    std::optional<Graph> f32_copy_;  // what executes when g_ is bf16/f16
    const Graph& executed() const { return f32_copy_ ? *f32_copy_ : g_; }
    std::string network_spec_;
    EvaluateOptions opt_;
    CostModel costs_;
    RunData data_;
    // The reference (`none`) step's parameter gradients, every one in a single block on huge
    // pages (engine/huge_pages.h: a model's worth of gradients faulted in 4 KiB at a time cost
    // ResNeXt-101's `run` a second): parameter p's at `at[p]`, `count[p]` floats; `seen[p]`
    // whether the step gave it.
    struct Reference {
        HugeFloats values;
        std::vector<size_t> at, count;
        std::vector<char> seen;
    };
    std::optional<Reference> reference_;
    std::shared_ptr<Backend> backend_;  // made once when executing (a GPU context is costly)
};

}  // namespace rl
