// concat, flatten and dropout: data movement and masking, no parameters.
#include "engine/ops/layout.h"
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

// A possibly negative axis attribute, checked against rank (axis may equal rank when
// `allow_end`, as flatten's can).
int normalized_axis(const Node& n, int64_t fallback, int rank, bool allow_end) {
    const int64_t a = n.attrs.get_int("axis", fallback);
    const int64_t hi = allow_end ? rank : rank - 1;
    const int64_t r = a < 0 ? a + rank : a;
    if (r < 0 || r > hi)
        throw Error("attribute 'axis' is " + std::to_string(a) + " but input 0 has rank " +
                    std::to_string(rank) + "; it must be in [" + std::to_string(-rank) + ", " +
                    std::to_string(hi) + "]");
    return static_cast<int>(r);
}

Inferred concat_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"axis"});
    const Shape& first = in_shape(g, n, 0);
    if (first.rank() == 0) throw Error("input 0 is a scalar; concat needs at least one axis");
    const int axis = normalized_axis(n, 1, first.rank(), false);
    Shape out = first;
    for (int i = 1; i < static_cast<int>(n.inputs.size()); ++i) {
        const Shape& s = in_shape(g, n, i);
        bool fits = s.rank() == first.rank();
        for (int a = 0; fits && a < s.rank(); ++a) fits = a == axis || s[a] == first[a];
        if (!fits)
            throw Error("input " + std::to_string(i) + " has shape " + format_dims(s) +
                        " but concat along axis " + std::to_string(axis) +
                        " needs every other axis to match input 0 " + format_dims(first));
        if (s[axis] > (int64_t{1} << 62) - out[axis])
            throw Error("concat along axis " + std::to_string(axis) +
                        " would have more than 2^62 entries there; use smaller sizes");
        out.dims[static_cast<size_t>(axis)] += s[axis];
    }
    return {DType::F32, out, {}};
}

Residuals no_residuals(const Graph&, const Node&) {
    return {};
}

OpCost copy_cost(const Graph& g, const Node& n) {
    double e = 0;
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) e += numel_d(in_shape(g, n, i));
    return {0, 0, 8 * e, 8 * e};
}

Inferred flatten_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"axis"});
    const Shape& x = in_shape(g, n, 0);
    const int axis = normalized_axis(n, 1, x.rank(), true);
    int64_t outer = 1, inner = 1;
    for (int a = 0; a < x.rank(); ++a) (a < axis ? outer : inner) *= x[a];
    return {DType::F32, Shape{outer, inner}, {}};
}

double dropout_p(const Node& n) {
    const double p = n.attrs.get_float("p", 0.5);
    if (!(p >= 0 && p < 1))
        throw Error("attribute 'p' is " + std::to_string(p) + "; it must be in [0, 1)");
    return p;
}

// dropout(x) hashes its mask again in the backward; dropout(x, mask) reads the u8 mask that a
// dropout_mask node drew, as Megatron keeps one byte per element for the backward.
Inferred dropout_infer(const Graph& g, const Node& n) {
    require_known_attrs(n, {"p"});
    const double p = dropout_p(n);
    const Value& x = input(g, n, 0);
    if (!is_floating(x.dtype))
        throw Error("input 0 ('" + x.name + "') is " + std::string(dtype_name(x.dtype)) +
                    " but dropout expects a floating tensor (f32, bf16 or f16)");
    if (n.inputs.size() == 2) {
        const Value& m = input(g, n, 1);
        if (m.dtype != DType::U8 || m.shape != x.shape)
            throw Error("input 1 (the mask) is " + format_type(m.dtype, m.shape) +
                        "; it must be the u8 output of a dropout_mask node, shaped like input 0 " +
                        format_type(DType::U8, x.shape));
        if (m.producer == kNoId || g.node(m.producer).op != OpKind::DropoutMask)
            throw Error("input 1 ('" + m.name + "') is not the output of a dropout_mask node");
        const Node& maker = g.node(m.producer);
        if (maker.attrs.get_float("p", 0.5) != p)
            throw Error("input 1 (the mask '" + m.name +
                        "') drops with p=" + std::to_string(maker.attrs.get_float("p", 0.5)) +
                        " but this dropout has p=" + std::to_string(p) + "; give both the same p");
    }
    return {DType::F32, x.shape, {}};
}

Residuals dropout_residuals(const Graph&, const Node& n) {
    return {n.inputs.size() == 2 ? 0b10u : 0u, false};
}

OpCost dropout_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    if (n.inputs.size() == 2) return {e, e, 9 * e, 9 * e};  // a select per element, mask read
    // The mask is hashed again in the backward rather than stored.
    return {6 * e, 6 * e, 8 * e, 8 * e};
}

Inferred dropout_mask_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"p"});
    dropout_p(n);
    return {DType::U8, in_shape(g, n, 0), {}};
}

OpCost dropout_mask_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    return {6 * e, 0, e, 0};
}

}  // namespace

const OpDef kConcatDef{
    .name = "concat",
    .about = "join 2 or more inputs along an axis (attr: axis=1, the channels of NCHW)",
    .min_inputs = 2,
    .max_inputs = 1024,
    .is_loss = false,
    .is_dot = false,
    .infer = concat_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = copy_cost,
};

const OpDef kFlattenDef{
    .name = "flatten",
    .about = "copy into 2 axes, [d0·…·d(axis-1), d(axis)·…] (attr: axis=1; NCHW -> [N, C·H·W])",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = flatten_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = copy_cost,
};

const OpDef kDropoutDef{
    .name = "dropout",
    .about =
        "zero each element with probability p, scale the rest by 1/(1-p) (attr: p=0.5); "
        "the mask is a hash of (graph seed, node name, element index)",
    .min_inputs = 1,
    .max_inputs = 2,
    .is_loss = false,
    .is_dot = false,
    .infer = dropout_infer,
    .residuals = dropout_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = dropout_cost,
    .in_place_inputs = 0b1u,     // y[i] reads x[i] (and mask[i]) only
    .derivative_inputs = 0b10u,  // the mask passes no gradient
};

// Reads only its input's shape: the keep-mask is a hash of (graph seed, this node's name,
// element index), one byte per element, kept for the dropout's backward (or recomputed).
const OpDef kDropoutMaskDef{
    .name = "dropout_mask",
    .about =
        "the u8 keep-mask of dropout, shaped like its input (attr: p=0.5); feed it to "
        "dropout as input 1 so that the backward reads 1 byte per element",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = dropout_mask_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = dropout_mask_cost,
};

}  // namespace rl::ops

namespace rl {

ConcatLayout concat_layout(const Graph& g, const Node& n) {
    const Shape& y = g.value(n.output).shape;
    ConcatLayout l;
    l.axis = n.attrs.get_int("axis", 1);
    if (l.axis < 0) l.axis += y.rank();
    for (int a = 0; a < y.rank(); ++a) {
        if (a < l.axis) l.outer *= y[a];
        if (a > l.axis) l.inner *= y[a];
    }
    l.row = y[static_cast<int>(l.axis)] * l.inner;
    return l;
}

}  // namespace rl
