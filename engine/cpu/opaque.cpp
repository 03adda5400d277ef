// opaque (engine/ops/opaque.cpp): a node of a plan-only network has no kernels. The executor is
// never given one (the Evaluator refuses first); if it were, these say so rather than compute.
#include "engine/cpu/kernels.h"
#include "engine/errors.h"

namespace rl::cpu {

void opaque_forward(const ForwardCall& c) {
    throw Error("node '" + c.node.name + "': " + kPlanOnlyNoKernels);
}

void opaque_backward(const BackwardCall& c) {
    throw Error("node '" + c.node.name + "': " + kPlanOnlyNoKernels);
}

}  // namespace rl::cpu
