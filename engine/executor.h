#pragma once
// Runs a schedule for real on a backend: every buffer from the tracking allocator, each
// instruction timed, an observer told after each one, cancellable between instructions.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/schedule.h"

namespace rl {

class Backend;

class ExecutionObserver {
  public:
    virtual ~ExecutionObserver() = default;
    // After instruction `index` finished: live bytes now, milliseconds since the step began.
    virtual void on_instruction(long index, uint64_t live_bytes, double elapsed_ms) = 0;
};

struct ExecuteOptions {
    uint64_t cap = 0;  // bytes; 0 = no cap
    ExecutionObserver* observer = nullptr;
    const std::atomic<bool>* cancel = nullptr;
    bool record_timeline = true;
    bool keep_gradients = true;  // copy parameter gradients out at the end
    // Called with each parameter's gradient (its values on the host) as the step ends, instead
    // of or besides keeping them: a caller that only compares them holds no copy of them all.
    std::function<void(ParamId, const float*, size_t count)> on_gradient = {};
    bool run_kernels = true;  // false: walk and allocate only (measures executor overhead)
    // Per NodeId, nonzero: copy that node's output to the host (Execution::outputs) right after
    // its first Compute, before anything can overwrite it. The copies are host vectors outside
    // the tracking allocator, so the measured peak is unchanged; they do take time, so a timed
    // step leaves this empty (rematlab-cli's --dump-activations runs a separate step).
    std::vector<unsigned char> keep_outputs = {};
};

struct Execution : MemoryPeak, CopyCounts {
    double forward_ms = 0, recompute_ms = 0, backward_ms = 0, total_ms = 0;
    // Offload (measured): copies issued and bytes moved each way (CopyCounts), the copy worker's
    // busy time, and how long the step's thread waited for copies at Wait instructions.
    double transfer_ms = 0, stall_ms = 0;
    // CPU time of the process over the step (all threads): unlike total_ms, it does not grow
    // when other jobs take the CPU away, so it compares runs on a shared machine.
    double cpu_ms = 0;
    double loss = 0;
    std::vector<TimelinePoint> timeline;
    std::vector<double> instruction_ms;           // per instruction
    std::vector<std::vector<float>> param_grads;  // per ParamId
    // Per NodeId: the forward output as first computed, for the nodes in keep_outputs (raw f32 or
    // i32 bytes, the value's shape); empty for the others.
    std::vector<std::vector<uint8_t>> outputs;
};

// Values for one graph input, given by the user (`--input x.npy`) instead of seeded: `values`
// for an f32 input, `indices` for an i32 one (labels, token ids; each must lie in the input's
// [0, label_classes)).
struct GivenInput {
    std::string name;  // the graph input's name
    Shape shape;       // must equal the input's shape
    std::vector<float> values;
    std::vector<int64_t> indices = {};
    bool is_indices = false;
};

// Parameter and input data for a run: drawn deterministically from the graph's seed, or given
// (parameters with ParamInit::Given, inputs in `given`). Throws rl::Error naming the input when a
// given input does not exist, has another dtype or shape, or holds an index out of range.
// A given parameter's values are the graph's own, shared and not copied: a large model's
// weights would otherwise be held twice.
struct RunData {
    std::vector<std::shared_ptr<const std::vector<float>>> params;  // per ParamId
    std::vector<std::vector<uint8_t>> inputs;  // per graph input (raw f32/i32 bytes)
    static RunData seeded(const Graph& g, const std::vector<GivenInput>& given = {});
};

Execution execute(const Graph& g, const Schedule& s, Backend& backend, const RunData& data,
                  const ExecuteOptions& opt = {});

}  // namespace rl
