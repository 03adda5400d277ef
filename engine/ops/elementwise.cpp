// add and the pointwise activations.
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

Inferred add_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    const Shape& a = in_shape(g, n, 0);
    const Shape& b = in_shape(g, n, 1);
    if (a != b)
        throw Error("input 1 has shape " + format_dims(b) +
                    " but add expects the shape of input 0, " + format_dims(a) +
                    " (add does not broadcast)");
    return {DType::F32, a, {}};
}

Residuals no_residuals(const Graph&, const Node&) {
    return {};
}
Residuals output_residual(const Graph&, const Node&) {
    return {0, true};
}
Residuals input_residual(const Graph&, const Node&) {
    return {0b1u, false};
}

OpCost add_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    return {e, 0, 12 * e, 12 * e};  // bwd: read dY, write both input gradients
}

Inferred unary_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    return {DType::F32, in_shape(g, n, 0), {}};
}

// FLOPs per element forward and backward; the bytes are one read and one write forward, two
// reads (dY and the residual) and one write backward.
template <int Fwd, int Bwd>
OpCost unary_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    return {Fwd * e, Bwd * e, 8 * e, 12 * e};
}

constexpr OpDef unary(std::string_view name, std::string_view about,
                      Residuals (*residuals)(const Graph&, const Node&),
                      OpCost (*cost)(const Graph&, const Node&)) {
    return OpDef{
        .name = name,
        .about = about,
        .min_inputs = 1,
        .max_inputs = 1,
        .is_loss = false,
        .is_dot = false,
        .infer = unary_infer,
        .residuals = residuals,
        .fwd_workspace = nullptr,
        .bwd_workspace = nullptr,
        .cost = cost,
    };
}

}  // namespace

const OpDef kAddDef{
    .name = "add",
    .about = "elementwise sum of two tensors of the same shape",
    .min_inputs = 2,
    .max_inputs = 2,
    .is_loss = false,
    .is_dot = false,
    .infer = add_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = add_cost,
};

const OpDef kReluDef = unary("relu", "max(x, 0)", output_residual, unary_cost<1, 1>);
const OpDef kGeluDef =
    unary("gelu", "x·Φ(x), the exact (erf) form", input_residual, unary_cost<20, 30>);
const OpDef kTanhDef = unary("tanh", "hyperbolic tangent", output_residual, unary_cost<10, 3>);
const OpDef kSigmoidDef = unary("sigmoid", "1 / (1 + exp(-x))", output_residual, unary_cost<6, 3>);
// The backward recomputes cos x (or sin x) from the input. JAX's sin instead saves cos x from the
// forward; docs/policies.md says how the JAX residual listing maps onto ours.
const OpDef kSinDef =
    unary("sin", "sine (the backward reads x)", input_residual, unary_cost<10, 11>);
const OpDef kCosDef =
    unary("cos", "cosine (the backward reads x)", input_residual, unary_cost<10, 11>);

}  // namespace rl::ops
