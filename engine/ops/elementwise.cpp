// The pointwise activations (add and the other binary ops are in binary.cpp).
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

Residuals output_residual(const Graph&, const Node&) {
    return {0, true};
}
Residuals input_residual(const Graph&, const Node&) {
    return {0b1u, false};
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
        .in_place_inputs = 0b1u,  // every unary op here is pointwise
    };
}

// sin(x) and cos(x): the backward reads x and computes the derivative itself. With a second
// input d, the derivative computed in the forward — sin(x, cos(x)), cos(x, sin(x)), as JAX's jvp
// rules do — the backward reads d instead of x, so a saved-residual listing shows "output of cos"
// where JAX's does (docs/policies.md). d is a derivative input: it receives no gradient.
Inferred sin_cos_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    if (n.inputs.size() == 2) {
        if (in_shape(g, n, 1) != in_shape(g, n, 0))
            throw Error("input 1 (the derivative) has shape " + format_dims(in_shape(g, n, 1)) +
                        " but must have the shape of input 0, " + format_dims(in_shape(g, n, 0)));
        if (n.inputs[0] == n.inputs[1])
            throw Error("input 1 (the derivative) is input 0 itself; pass the derivative of " +
                        std::string(op_name(n.op)) + " computed by its own node");
    }
    return {DType::F32, in_shape(g, n, 0), {}};
}

Residuals derivative_or_input_residual(const Graph&, const Node& n) {
    return {n.inputs.size() == 2 ? 0b10u : 0b1u, false};
}

constexpr OpDef sin_cos(std::string_view name, std::string_view about) {
    OpDef d = unary(name, about, derivative_or_input_residual, unary_cost<10, 11>);
    d.max_inputs = 2;
    d.infer = sin_cos_infer;
    d.derivative_inputs = 0b10u;
    return d;
}

}  // namespace

const OpDef kReluDef = unary("relu", "max(x, 0)", output_residual, unary_cost<1, 1>);
const OpDef kGeluDef =
    unary("gelu", "x·Φ(x), the exact (erf) form", input_residual, unary_cost<20, 30>);
const OpDef kTanhDef = unary("tanh", "hyperbolic tangent", output_residual, unary_cost<10, 3>);
const OpDef kSigmoidDef = unary("sigmoid", "1 / (1 + exp(-x))", output_residual, unary_cost<6, 3>);
const OpDef kExpDef = unary("exp", "e^x", output_residual, unary_cost<10, 1>);
const OpDef kSinDef =
    sin_cos("sin", "sine; an optional second input cos(x) is what the backward reads");
const OpDef kCosDef =
    sin_cos("cos", "cosine; an optional second input sin(x) is what the backward reads");

}  // namespace rl::ops
