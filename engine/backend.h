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
//   gradients of inputs in index order. grad_params are always fresh (overwrite).
// - inputs[i] / output are null in backward where the op did not declare them as residuals.
// - Reductions are deterministic (no order that depends on thread timing), so a recomputed
//   value is bitwise equal to the first one, and gradients match across strategies.
#include <cstdint>
#include <memory>
#include <string>

#include "engine/graph.h"

namespace rl {

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

class Backend {
  public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;  // "cpu"
    virtual void* allocate(uint64_t bytes) = 0;
    virtual void release(void* p) = 0;
    virtual void forward(const ForwardCall& call) = 0;
    virtual void backward(const BackwardCall& call) = 0;
    virtual void copy_to_host(void* dst, const void* src, uint64_t bytes) = 0;
    virtual void copy_from_host(void* dst, const void* src, uint64_t bytes) = 0;
    virtual void synchronize() {}
};

// The CPU backend with `threads` OpenMP/Eigen threads (0: leave the current setting).
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

// Sets the thread count used by CPU kernels (Eigen and OpenMP) for this process.
void set_cpu_threads(int threads);
int cpu_threads();

}  // namespace rl
