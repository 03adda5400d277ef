// parameter and constant (ops/sources.cpp): nodes without inputs.
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/ops/layout.h"

namespace rl::cpu {

void parameter_forward(const ForwardCall& c) {
    const uint64_t bytes = c.graph.value(c.node.output).bytes;
    std::memcpy(c.output, c.params[0], bytes);
}

// dParam = dY (parameter gradients are always fresh; a tied parameter's executor adds it in).
void parameter_backward(const BackwardCall& c) {
    const uint64_t bytes = c.graph.value(c.node.output).bytes;
    std::memcpy(c.grad_params[0], c.grad_output, bytes);
}

void constant_forward(const ForwardCall& c) {
    binary_constant_values(c.node, as_f32(c.output));
}

// A constant needs no gradient; the schedule never runs this (its output requires none).
void constant_backward(const BackwardCall&) {}

}  // namespace rl::cpu
