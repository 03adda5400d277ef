#pragma once
// A backend is a small table of operations (as in ggml): raw memory, and one forward and one
// backward kernel per op. The CPU backend is always built; a CUDA one is optional.
//
// Kernel contract:
// - Pointers come from the tracking allocator; kernels never allocate (Eigen through Map and
//   noalias(); scratch space only from `workspace`, sized by the op's declaration).
// - Backward: grad_inputs[i] is null when input i needs no gradient. When accumulate[i] is true
//   the kernel adds into the buffer, otherwise it overwrites it. When one value feeds two inputs
//   of a node, both slots hold the same pointer and the second accumulates: kernels write the
//   gradients of inputs in index order. grad_params are always fresh (overwrite); for a tied
//   parameter the executor points them at scratch and adds the share in (Backend::add_into).
// - inputs[i] / output are null in backward where the op did not declare them as residuals.
// - Reductions are deterministic (no order that depends on thread timing), so a recomputed
//   value is bitwise equal to the first one, and gradients match across strategies.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine/graph.h"

namespace rl {

// The driver's view of device memory (cudaMemGetInfo), beside the tracking allocator's exact
// count: what the process really took from the device, pool and library overheads included.
struct DeviceMemory {
    std::string device;          // "NVIDIA H200 (sm_90, 139.8 GiB)"
    uint64_t total = 0;          // the device's memory
    uint64_t free_at_start = 0;  // free when the backend was made (after its own set-up)
    uint64_t min_free = 0;       // the lowest free seen since (after each cudaMalloc)
    uint64_t reserved = 0;       // bytes the backend holds from cudaMalloc now (pool included)
    uint64_t reserved_peak = 0;  // the most it held at once
    uint64_t overhead = 0;       // fixed bytes outside the tracking allocator (cuBLAS workspace)
    // How far free memory fell below its level at start: the driver's peak for the run.
    uint64_t driver_peak_delta() const { return free_at_start - min_free; }
};

struct ForwardCall {
    const Graph& graph;
    const Node& node;
    const void* const* inputs;  // one per node input
    float* const* params;       // one per node param
    void* output;
    void* workspace;  // null when the op declares none
};

struct BackwardCall {
    const Graph& graph;
    const Node& node;
    const void* const* inputs;  // residual inputs, null elsewhere
    const void* output;         // when the output is a residual, else null
    float* const* params;
    const float* grad_output;  // for the loss: a scalar 1
    float* const* grad_inputs;
    const bool* accumulate;
    float* const* grad_params;
    void* workspace;
};

class HostCopyEngine;

class Backend {
  public:
    Backend();
    virtual ~Backend();
    Backend(const Backend&) = delete;
    Backend& operator=(const Backend&) = delete;
    virtual std::string name() const = 0;  // "cpu"
    virtual void* allocate(uint64_t bytes) = 0;
    virtual void release(void* p) = 0;
    virtual void forward(const ForwardCall& call) = 0;
    virtual void backward(const BackwardCall& call) = 0;
    virtual void copy_to_host(void* dst, const void* src, uint64_t bytes) = 0;
    virtual void copy_from_host(void* dst, const void* src, uint64_t bytes) = 0;
    virtual void synchronize() {}
    // dst[i] += src[i] for i < n, element by element (a tied parameter's gradient share,
    // engine/liveness.h): the same bits on every run.
    virtual void add_into(float* dst, const float* src, int64_t n) = 0;

    // Optional hooks of an asynchronous (device) backend; the CPU backend keeps the defaults.
    // The executor calls begin_instruction() before each instruction and end_instruction()
    // after it: that waits for the instruction's work to finish and returns its device time in
    // milliseconds (CUDA events), or a negative number when the backend does not time on the
    // device (the executor then uses the host clock).
    virtual void begin_instruction() {}
    virtual double end_instruction() {
        synchronize();
        return -1;
    }
    // Writes back and drops [p, p + bytes) from the caches, so that the next op finds it where
    // a training step finds its parameters: in memory (the profiled cost model, engine/
    // cost_model.h). Backends without such control keep the default, which does nothing.
    virtual void evict_from_caches(const void* p, uint64_t bytes) {
        (void)p;
        (void)bytes;
    }
    // The driver's view of device memory; nullopt for host backends.
    virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }
    // Starts a new driver-peak window: min_free = current free, reserved_peak = reserved.
    virtual void reset_device_memory_peak() {}

    // Offload (engine/schedule.h). Host memory for offloaded values (pinned on a GPU), and
    // copies between it and device buffers on a copy stream beside the kernels, in issue
    // order. copy_async() starts a copy after the kernels issued so far and returns its ticket;
    // wait_copy() returns once that copy has completed, and kernels issued after it see the
    // copied bytes; take_copy_ms() is the copy's duration once waited for. The defaults serve
    // host backends: 64-byte aligned heap memory, and a worker thread that copies with memcpy
    // (engine/copy_engine.h).
    virtual void* allocate_host(uint64_t bytes);
    virtual void release_host(void* p);
    virtual uint64_t copy_async(void* dst, const void* src, uint64_t bytes, bool to_host);
    virtual void wait_copy(uint64_t ticket);
    virtual double take_copy_ms(uint64_t ticket);

  private:
    std::unique_ptr<HostCopyEngine> copies_;          // made at the first copy_async
    std::multimap<uint64_t, void*> host_cache_;       // released host buffers, by size
    std::unordered_map<void*, uint64_t> host_sizes_;  // handed out, with their size
};

// The CPU backend with `threads` OpenMP/Eigen threads (0: leave the current setting).
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

// The CUDA backend on device 0 (engine/cuda/), serving allocations from a caching pool unless
// `pool` is false. Throws rl::Error naming the cause when this build has no CUDA backend
// ("this build has no CUDA backend: …") or no GPU can be used ("no CUDA device: …").
std::unique_ptr<Backend> make_cuda_backend(bool pool = true);
// Whether make_cuda_backend() can succeed; when not, `why` (if given) gets the reason.
bool cuda_available(std::string* why = nullptr);
// The backend named `device` ("cpu" or "cuda"); throws rl::Error for another name, or with
// make_cuda_backend()'s message when CUDA cannot be used.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads = 0);

// Sets the thread count used by CPU kernels (Eigen and OpenMP) for this process.
void set_cpu_threads(int threads);
int cpu_threads();

}  // namespace rl
