// conv2d: NCHW convolution with groups (depthwise when groups == channels), stride, padding and
// dilation. A "dot" op: its backward is two GEMMs, like linear's.
#include <algorithm>

#include "engine/ops/op_defs.h"
#include "engine/ops/window.h"

namespace rl::ops {
namespace {

Inferred conv2d_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(
        n, {"out_channels", "kernel", "stride", "padding", "dilation", "groups", "bias"});
    const Conv2dGeometry c = conv2d_geometry(g, n);
    Inferred r;
    r.shape = Shape{c.n, c.out_c, c.oh, c.ow};
    const int64_t fan_in = c.patch();
    r.params.push_back({"weight", Shape{c.out_c, c.c_per_group(), c.win.kh, c.win.kw},
                        ParamInit::FanInUniform, fan_in});
    if (c.bias) r.params.push_back({"bias", Shape{c.out_c}, ParamInit::FanInUniform, fan_in});
    return r;
}

// dW needs the input; dX needs only the weights.
Residuals conv2d_residuals(const Graph&, const Node&) {
    return {0b1u, false};
}

// One im2col matrix, (c/groups)·kh·kw × oh·ow floats, for one group of one image at a time; the
// backward reuses it for the column gradient before col2im. None for 1×1 stride-1 unpadded
// convolutions (the input is its own column matrix). Small planes batch several images per GEMM:
// their columns side by side, and the group's outputs (or output gradients) gathered beside them
// (window.h). Depthwise ones run a direct kernel, with channels-last blocks as scratch where rows
// are short or strided; on the CPU, grouped ones with whole vectors of channels a group run a
// direct kernel on channels-last padded planes (window.h), while the CUDA backend still runs
// im2col there: the larger of the two is declared.
uint64_t conv2d_fwd_workspace(const Graph& g, const Node& n) {
    const Conv2dGeometry c = conv2d_geometry(g, n);
    return sizeof(float) * static_cast<uint64_t>(std::max({c.gemm_workspace_floats(),
                                                           c.depthwise_workspace_floats(false),
                                                           c.grouped_workspace_floats(false)}));
}
uint64_t conv2d_bwd_workspace(const Graph& g, const Node& n) {
    const Conv2dGeometry c = conv2d_geometry(g, n);
    return sizeof(float) * static_cast<uint64_t>(std::max({c.backward_gemm_workspace_floats(),
                                                           c.depthwise_workspace_floats(true),
                                                           c.grouped_workspace_floats(true)}));
}

OpCost conv2d_cost(const Graph& g, const Node& n) {
    const Conv2dGeometry c = conv2d_geometry(g, n);
    const double out = static_cast<double>(c.n * c.out_c * c.oh * c.ow);
    const double macs = out * static_cast<double>(c.patch());
    const double in = static_cast<double>(c.n * c.c * c.h * c.w);
    const double weights = static_cast<double>(c.out_c * c.patch());
    const double bias = c.bias ? 1.0 : 0.0;
    const double cols = static_cast<double>(c.n * c.groups * c.im2col_floats());
    OpCost k;
    k.fwd_flops = 2 * macs + bias * out;
    k.bwd_flops = 4 * macs + bias * out;
    if (c.grouped_direct()) {
        // No columns. Forward: X read, its padded channels-last copy written and read; Y's
        // channels-last tile written, read and written out. Backward: the same for X, and for
        // dX; dY read, written and read channels-last and again as its padded plane.
        k.fwd_bytes = 4 * (3 * in + weights + 3 * out);
        k.bwd_bytes = 4 * (5 * out + 6 * in + 2 * weights + bias * c.out_c);
        return k;
    }
    // Reads X, W; writes Y; im2col writes and reads its columns once.
    k.fwd_bytes = 4 * (in + weights + out + 2 * cols);
    // Reads dY, X, W; writes dX, dW, db; im2col and col2im pass twice over the columns, or,
    // where dX is a correlation of dY, im2col twice over X's columns and twice over dY's.
    if (c.input_grad_by_correlation()) {
        const double dy_cols =
            static_cast<double>(c.n * c.groups * c.out_per_group() * c.win.kh * c.win.kw) *
            static_cast<double>(c.h * c.w);
        k.bwd_bytes = 4 * (out + 2 * in + 3 * weights + bias * c.out_c + 2 * cols + 2 * dy_cols);
        return k;
    }
    k.bwd_bytes = 4 * (out + 2 * in + 2 * weights + bias * c.out_c + 4 * cols);
    return k;
}

}  // namespace

const OpDef kConv2dDef{
    .name = "conv2d",
    .about =
        "NCHW convolution (attrs: out_channels, kernel, stride=1, padding=0, dilation=1, "
        "groups=1, bias=1)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = true,
    .infer = conv2d_infer,
    .residuals = conv2d_residuals,
    .fwd_workspace = conv2d_fwd_workspace,
    .bwd_workspace = conv2d_bwd_workspace,
    .cost = conv2d_cost,
};

}  // namespace rl::ops
