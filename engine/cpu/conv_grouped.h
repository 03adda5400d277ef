#pragma once
// Direct kernels for grouped convolutions with whole vectors of channels a group, and ungrouped
// ones with few outputs (Conv2dGeometry::grouped_direct), in the workspace the op declares
// (Conv2dGeometry::grouped_workspace_floats). conv2d_forward/backward (conv.cpp) call them.
#include "engine/ops/window.h"

namespace rl::cpu {

void grouped_direct_forward(const float* x, const float* wt, const float* b,
                            const Conv2dGeometry& g, float* y, float* ws);
// dw (when not null) is written; dx (when not null) is written, or added to with `accumulate`.
void grouped_direct_backward(const float* x, const float* dy, const float* wt,
                             const Conv2dGeometry& g, float* dw, float* dx, bool accumulate,
                             float* ws);

}  // namespace rl::cpu
