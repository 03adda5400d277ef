// batchnorm in training mode: each channel (axis 1) normalised by the statistics of the batch.
//
// Running statistics are not modelled. A training step normalises by the batch statistics
// only, so the running mean and variance change neither the loss nor any gradient; keeping them
// would add a state update that a recomputation would apply twice (a known pitfall of
// checkpointed batch norm). The `momentum` attribute is accepted (files and ONNX carry it) and
// has no effect.
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

Inferred batchnorm_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"eps", "momentum"});
    require_rank_at_least(g, n, 0, 2);
    const double eps = n.attrs.get_float("eps", 1e-5);
    if (!(eps > 0)) throw Error("attribute 'eps' is " + std::to_string(eps) + "; it must be > 0");
    const double momentum = n.attrs.get_float("momentum", 0.1);
    if (!(momentum >= 0 && momentum <= 1))
        throw Error("attribute 'momentum' is " + std::to_string(momentum) +
                    "; it must be in [0, 1]");
    const Shape& x = in_shape(g, n, 0);
    const int64_t c = x[1];
    Inferred r{DType::F32, x, {}};
    r.params.push_back({"weight", Shape{c}, ParamInit::Ones, c});
    r.params.push_back({"bias", Shape{c}, ParamInit::Zeros, c});
    return r;
}

// The backward recomputes each channel's mean and variance from the input.
Residuals input_residual(const Graph&, const Node&) {
    return {0b1u, false};
}

OpCost batchnorm_cost(const Graph& g, const Node& n) {
    const Shape& x = in_shape(g, n, 0);
    const double e = numel_d(x), c = static_cast<double>(x[1]);
    // fwd: statistics (two passes over x), then normalise; bwd: statistics again, two
    // reductions over dY·x̂, then dX.
    return {7 * e, 14 * e, 4 * (3 * e + 2 * c), 4 * (6 * e + 4 * c)};
}

}  // namespace

const OpDef kBatchNormDef{
    .name = "batchnorm",
    .about =
        "training-mode batch norm over axis 1 with batch statistics (attrs: eps=1e-5; "
        "momentum accepted, running statistics not kept)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = batchnorm_infer,
    .residuals = input_residual,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = batchnorm_cost,
};

}  // namespace rl::ops
