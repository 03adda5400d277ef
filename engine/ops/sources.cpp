// parameter and constant: nodes without inputs whose output is a value known before the network
// reads its input. An ONNX graph computes some tensors from parameters and constants alone (Swin
// V2's logit scale, clamp(logit_scale).exp(); its qkv bias with the key part zeroed; its
// continuous position bias, an MLP over a constant table of relative coordinates): these nodes
// start such subgraphs, so that the existing ops compute them as ordinary, recomputable nodes
// once per step. A parameter node's backward is its parameter's gradient (dParam = dY); the
// liveness rules need nothing new, since the output is an activation like any other.
#include "engine/ops/layout.h"
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

Inferred parameter_infer(const Graph&, const Node& n) {
    require_known_attrs(n, {"shape"});
    if (!n.attrs.has("shape"))
        throw Error("parameter needs attribute 'shape', the parameter's shape (e.g. [3, 1, 1])");
    const Shape s(n.attrs.get_ints("shape"));
    for (int64_t d : s.dims)
        if (d <= 0)
            throw Error("attribute 'shape' is " + format_dims(s) +
                        "; every dimension must be positive");
    checked_numel(s, "attribute 'shape'");
    const int64_t fan_in = s.rank() ? s[-1] : 1;
    return {DType::F32, s, {ParamDecl{"weight", s, ParamInit::FanInUniform, fan_in}}};
}

Inferred constant_infer(const Graph&, const Node& n) {
    require_known_attrs(n, {"constant_shape", "constant_bits"});
    if (!n.attrs.has("constant_shape") || !n.attrs.has("constant_bits"))
        throw Error(
            "constant needs attributes constant_shape and constant_bits (the float32 values' bit "
            "patterns, row-major)");
    const Shape s(n.attrs.get_ints("constant_shape"));
    for (int64_t d : s.dims)
        if (d <= 0)
            throw Error("attribute 'constant_shape' is " + format_dims(s) +
                        "; every dimension must be positive");
    const int64_t count = checked_numel(s, "attribute 'constant_shape'");
    const auto* bits = std::get_if<std::vector<int64_t>>(n.attrs.find("constant_bits"));
    if (!bits || static_cast<int64_t>(bits->size()) != count)
        throw Error("attribute constant_bits must hold the " + std::to_string(count) +
                    " float32 bit patterns of constant_shape " + format_dims(s));
    for (int64_t b : *bits)
        if (b < 0 || b > int64_t{0xffffffff})
            throw Error("attribute constant_bits holds " + std::to_string(b) +
                        ", which is not a 32-bit pattern");
    return {DType::F32, s, {}};
}

Residuals no_residuals(const Graph&, const Node&) {
    return {};
}

// A copy forward; the parameter's backward copies dY into its gradient.
OpCost parameter_cost(const Graph& g, const Node& n) {
    const double e = numel_d(g.value(n.output).shape);
    return {0, 0, 8 * e, 8 * e};
}

OpCost constant_cost(const Graph& g, const Node& n) {
    const double e = numel_d(g.value(n.output).shape);
    return {0, 0, 4 * e, 0};
}

}  // namespace

const OpDef kParameterDef{
    .name = "parameter",
    .about = "the node's parameter as a value (attr shape); its gradient is the output's",
    .min_inputs = 0,
    .max_inputs = 0,
    .is_loss = false,
    .is_dot = false,
    .infer = parameter_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = parameter_cost,
};

const OpDef kConstantDef{
    .name = "constant",
    .about =
        "a constant tensor, no gradient (attrs constant_shape, constant_bits: the float32 bit "
        "patterns)",
    .min_inputs = 0,
    .max_inputs = 0,
    .is_loss = false,
    .is_dot = false,
    .infer = constant_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = constant_cost,
};

}  // namespace rl::ops
