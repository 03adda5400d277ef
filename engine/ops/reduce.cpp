// reduce_mean over given axes (ONNX ReduceMean): spatial means ([N,C,H,W] over 2,3), last-axis
// means outside LayerNorm. The forward sums each output element's inputs in row-major order
// (BroadcastPlan::for_each_repeat), the backward spreads dY / count back: no residuals.
#include <algorithm>
#include <string>

#include "engine/ops/layout.h"
#include "engine/ops/op_defs.h"

namespace rl {

namespace {

// The sorted, distinct axes to reduce, each in [0, rank); throws for a bad list.
std::vector<int> reduce_axes(const Shape& x, const Node& n) {
    if (!n.attrs.has("axes")) {
        std::vector<int> all(static_cast<size_t>(x.rank()));
        for (int d = 0; d < x.rank(); ++d) all[static_cast<size_t>(d)] = d;
        return all;
    }
    std::vector<int> axes;
    for (int64_t a : n.attrs.get_ints("axes")) {
        const int64_t r = a < 0 ? a + x.rank() : a;
        if (r < 0 || r >= x.rank())
            throw Error("axis " + std::to_string(a) + " is out of range for input 0 " +
                        format_dims(x) + "; axes must be in [" + std::to_string(-x.rank()) + ", " +
                        std::to_string(x.rank() - 1) + "]");
        if (std::find(axes.begin(), axes.end(), static_cast<int>(r)) != axes.end())
            throw Error("axis " + std::to_string(a) + " is listed twice in axes");
        axes.push_back(static_cast<int>(r));
    }
    std::sort(axes.begin(), axes.end());
    return axes;
}

Shape kept_shape(const Shape& x, const std::vector<int>& axes) {
    Shape k = x;
    for (int a : axes) k.dims[static_cast<size_t>(a)] = 1;
    return k;
}

}  // namespace

BroadcastPlan reduce_mean_plan(const Graph& g, const Node& n) {
    const Shape& x = g.value(n.inputs[0]).shape;
    const Shape k = kept_shape(x, reduce_axes(x, n));
    return broadcast_plan(x, k, k);  // coalesced: spatial means sum one contiguous run
}

namespace ops {
namespace {

Inferred reduce_mean_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"axes", "keepdims"});
    const Shape& x = in_shape(g, n, 0);
    if (x.rank() > kMaxBroadcastRank)
        throw Error("input 0 " + format_dims(x) + " has more than " +
                    std::to_string(kMaxBroadcastRank) + " axes");
    const std::vector<int> axes = reduce_axes(x, n);
    if (n.attrs.get_int("keepdims", 1) != 0) return {DType::F32, kept_shape(x, axes), {}};
    Shape out;
    for (int d = 0; d < x.rank(); ++d)
        if (!std::binary_search(axes.begin(), axes.end(), d)) out.dims.push_back(x[d]);
    return {DType::F32, out, {}};
}

Residuals no_residuals(const Graph&, const Node&) {
    return {};
}

OpCost reduce_mean_cost(const Graph& g, const Node& n) {
    const double in = numel_d(in_shape(g, n, 0)), out = numel_d(g.value(n.output).shape);
    return {in + out, in, 4 * (in + out), 4 * (in + out)};
}

}  // namespace

const OpDef kReduceMeanDef{
    .name = "reduce_mean",
    .about = "mean over the axes in attr axes (all when absent), keepdims 1 (default) or 0",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = reduce_mean_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = reduce_mean_cost,
    .in_place_inputs = 0,
};

}  // namespace ops

}  // namespace rl
