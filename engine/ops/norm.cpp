// layernorm and softmax: row-wise ops over the last axis.
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

Inferred layernorm_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_rank_at_least(g, n, 0, 1);
    const double eps = n.attrs.get_float("eps", 1e-5);
    if (!(eps > 0)) throw Error("attribute 'eps' is " + std::to_string(eps) + "; it must be > 0");
    const Shape& x = in_shape(g, n, 0);
    const int64_t d = x[-1];
    Inferred r{DType::F32, x, {}};
    r.params.push_back({"weight", Shape{d}, ParamInit::Ones, d});
    r.params.push_back({"bias", Shape{d}, ParamInit::Zeros, d});
    return r;
}

// The backward recomputes each row's mean and 1/std from the input rather than saving them, so
// the input is the only residual.
Residuals input_residual(const Graph&, const Node&) {
    return {0b1u, false};
}

// Backward scratch: each row's mean and 1/std (two floats per row), kept between the pass that
// produces dX (parallel over rows) and the one that produces dweight/dbias (parallel over
// columns).
uint64_t layernorm_bwd_workspace(const Graph& g, const Node& n) {
    return 2 * sizeof(float) * static_cast<uint64_t>(rows_of(in_shape(g, n, 0)));
}

OpCost layernorm_cost(const Graph& g, const Node& n) {
    const Shape& x = in_shape(g, n, 0);
    const double e = numel_d(x), d = static_cast<double>(x[-1]);
    // fwd: read x, write y, read w, b; bwd: read x, dY, w; write dX, dw, db.
    return {8 * e, 16 * e, 8 * e + 8 * d, 12 * e + 12 * d};
}

Inferred softmax_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_rank_at_least(g, n, 0, 1);
    return {DType::F32, in_shape(g, n, 0), {}};
}

Residuals output_residual(const Graph&, const Node&) {
    return {0, true};
}

Inferred l2_normalize_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_rank_at_least(g, n, 0, 1);
    require_known_attrs(n, {"eps"});
    const double eps = n.attrs.get_float("eps", 1e-12);
    if (!(eps > 0)) throw Error("attribute 'eps' is " + std::to_string(eps) + "; it must be > 0");
    return {DType::F32, in_shape(g, n, 0), {}};
}

OpCost l2_normalize_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    // fwd: the row's sum of squares, then a division; bwd: the norm again, Σ dY·x, then dX.
    return {3 * e, 7 * e, 8 * e, 12 * e};
}

OpCost softmax_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    return {5 * e, 4 * e, 8 * e, 12 * e};
}

}  // namespace

const OpDef kLayerNormDef{
    .name = "layernorm",
    .about = "normalise the last axis, then scale and shift (attr: eps=1e-5)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = layernorm_infer,
    .residuals = input_residual,
    .fwd_workspace = nullptr,
    .bwd_workspace = layernorm_bwd_workspace,
    .cost = layernorm_cost,
};

const OpDef kSoftmaxDef{
    .name = "softmax",
    .about = "softmax over the last axis",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = softmax_infer,
    .residuals = output_residual,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = softmax_cost,
};

// The backward recomputes each row's norm from the input (as layernorm its statistics).
const OpDef kL2NormalizeDef{
    .name = "l2_normalize",
    .about = "x / max(‖x‖₂, eps) over the last axis, F.normalize (attr: eps=1e-12)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = l2_normalize_infer,
    .residuals = input_residual,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = l2_normalize_cost,
};

}  // namespace rl::ops
