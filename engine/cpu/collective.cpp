// The collectives of one tensor-parallel rank, executed with this process standing in for every
// rank (engine/ops/collective.cpp says which function each computes and why).
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/ops/op.h"

namespace rl::cpu {

namespace {

// dst (+)= src over n elements.
void add_or_copy(float* dst, const float* src, int64_t n, bool acc) {
    for_chunks(n, [&](int64_t s, int64_t len) {
        if (acc)
            for (int64_t i = s; i < s + len; ++i) dst[i] += src[i];
        else
            std::memcpy(dst + s, src + s, static_cast<size_t>(len) * sizeof(float));
    });
}

}  // namespace

void collective_forward(const ForwardCall& c) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const int64_t n_in = c.graph.value(c.node.inputs[0]).shape.numel();
    const int64_t n_out = output_shape(c.graph, c.node).numel();
    switch (collective_kind(c.node)) {
        case CollectiveKind::AllReduceGrad:
        case CollectiveKind::AllReduce:
        case CollectiveKind::ReduceScatter:  // this rank's rows: the first n_out elements
            add_or_copy(y, x, n_out, false);
            break;
        case CollectiveKind::AllGather:  // every rank's rows: this rank's, t times
            for (int64_t k = 0; k < n_out / n_in; ++k) add_or_copy(y + k * n_in, x, n_in, false);
            break;
    }
}

void collective_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    const int64_t n_in = c.graph.value(c.node.inputs[0]).shape.numel();
    const int64_t n_out = output_shape(c.graph, c.node).numel();
    switch (collective_kind(c.node)) {
        case CollectiveKind::AllReduceGrad:
        case CollectiveKind::AllReduce:
            add_or_copy(dx, dy, n_in, acc);
            break;
        case CollectiveKind::AllGather:  // the adjoint of tiling: the sum of the t row blocks
            add_or_copy(dx, dy, n_in, acc);
            for (int64_t k = 1; k < n_out / n_in; ++k) add_or_copy(dx, dy + k * n_in, n_in, true);
            break;
        case CollectiveKind::ReduceScatter:  // the adjoint of keeping the first rows
            add_or_copy(dx, dy, n_out, acc);
            if (!acc) std::memset(dx + n_out, 0, static_cast<size_t>(n_in - n_out) * sizeof(float));
            break;
    }
}

}  // namespace rl::cpu
