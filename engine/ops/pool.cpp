// maxpool2d, avgpool2d (global average pooling with global=1) and upsample_nearest2d: NCHW
// window ops without parameters.
#include <array>

#include "engine/ops/op_defs.h"
#include "engine/ops/window.h"

namespace rl::ops {
namespace {

Inferred pool_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    if (n.op == OpKind::MaxPool2d)
        require_known_attrs(n, {"kernel", "stride", "padding", "dilation", "ceil_mode"});
    else
        require_known_attrs(n, {"kernel", "stride", "padding", "dilation", "ceil_mode",
                                "count_include_pad", "global"});
    const Pool2dGeometry p = pool2d_geometry(g, n);
    return {DType::F32, Shape{p.n, p.c, p.oh, p.ow}, {}};
}

// maxpool's backward routes each output gradient to its window's maximum, which it finds again
// in the input (the first maximum in window order, as the forward does): the input is the only
// residual and no indices are stored.
Residuals input_residual(const Graph&, const Node&) {
    return {0b1u, false};
}

// avgpool's and upsample's backwards need only the shapes.
Residuals no_residuals(const Graph&, const Node&) {
    return {};
}

OpCost pool_cost(const Graph& g, const Node& n) {
    const Pool2dGeometry p = pool2d_geometry(g, n);
    const double in = static_cast<double>(p.n * p.c * p.h * p.w);
    const double out = static_cast<double>(p.n * p.c * p.oh * p.ow);
    const double window = static_cast<double>(p.win.kh * p.win.kw);
    const bool is_max = n.op == OpKind::MaxPool2d;
    OpCost c;
    c.fwd_flops = out * window;
    c.bwd_flops = out * window;
    c.fwd_bytes = 4 * (in + out);
    // max reads X and dY, writes dX; avg reads dY, writes dX.
    c.bwd_bytes = 4 * ((is_max ? 2 : 1) * in + out);
    return c;
}

std::array<int64_t, 2> upsample_scale(const Node& n) {
    const AttrValue* v = n.attrs.find("scale");
    if (!v) throw Error("attribute 'scale' is required");
    std::array<int64_t, 2> s{};
    if (const auto* i = std::get_if<int64_t>(v)) {
        s = {*i, *i};
    } else if (const auto* l = std::get_if<std::vector<int64_t>>(v); l && l->size() == 2) {
        s = {(*l)[0], (*l)[1]};
    } else {
        throw Error("attribute 'scale' must be an integer or a list of 2 integers [sh, sw]");
    }
    for (int64_t x : s)
        if (x < 1 || x > (int64_t{1} << 31))
            throw Error("attribute 'scale' has " + std::to_string(x) +
                        "; it must lie in [1, 2^31]");
    return s;
}

Inferred upsample_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"scale"});
    const Shape& x = in_shape(g, n, 0);
    if (x.rank() != 4)
        throw Error("input 0 has shape " + format_dims(x) +
                    " but upsample_nearest2d expects rank 4 [N, C, H, W]");
    const auto s = upsample_scale(n);
    // Checked here: the products would overflow before checked_numel could see them.
    constexpr int64_t kLimit = int64_t{1} << 62;
    if (x[2] > kLimit / s[0] || x[3] > kLimit / s[1])
        throw Error("input 0 " + format_dims(x) + " upsampled by [" + std::to_string(s[0]) + ", " +
                    std::to_string(s[1]) + "] has more than 2^62 elements; use smaller sizes");
    return {DType::F32, Shape{x[0], x[1], x[2] * s[0], x[3] * s[1]}, {}};
}

OpCost upsample_cost(const Graph& g, const Node& n) {
    const auto s = upsample_scale(n);
    const double in = numel_d(in_shape(g, n, 0));
    const double out = in * static_cast<double>(s[0] * s[1]);
    return {0, out, 4 * (in + out), 4 * (in + out)};
}

}  // namespace

const OpDef kMaxPool2dDef{
    .name = "maxpool2d",
    .about =
        "NCHW max over windows (attrs: kernel, stride=kernel, padding=0, dilation=1, "
        "ceil_mode=0)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = pool_infer,
    .residuals = input_residual,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = pool_cost,
};

const OpDef kAvgPool2dDef{
    .name = "avgpool2d",
    .about =
        "NCHW mean over windows (attrs: kernel, stride=kernel, padding=0, dilation=1, "
        "ceil_mode=0, count_include_pad=0), or over each plane with global=1",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = pool_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = pool_cost,
};

const OpDef kUpsampleNearest2dDef{
    .name = "upsample_nearest2d",
    .about = "NCHW nearest-neighbour upsampling (attr: scale, an integer or [sh, sw])",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = upsample_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = upsample_cost,
};

}  // namespace rl::ops
