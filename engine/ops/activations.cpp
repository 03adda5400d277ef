// clip (ReLU6), hard_sigmoid, hard_swish and gelu_tanh: the pointwise activations of mobile and
// GPT-style networks, as PyTorch defines them (torch.nn.functional.hardtanh/relu6, hardsigmoid,
// hardswish, gelu(approximate="tanh")). Each backward reads the input, so a kernel at the kinks
// picks the side PyTorch picks.
#include <cmath>

#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

Inferred activation_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    switch (n.op) {
        case OpKind::Clip: {
            require_known_attrs(n, {"min", "max"});
            const double lo = n.attrs.get_float("min", -INFINITY);
            const double hi = n.attrs.get_float("max", INFINITY);
            if (std::isnan(lo) || std::isnan(hi) || lo > hi)
                throw Error("clip needs min <= max, but min is " + std::to_string(lo) +
                            " and max " + std::to_string(hi));
            break;
        }
        case OpKind::HardSigmoid: {
            require_known_attrs(n, {"alpha", "beta"});
            const double a = n.attrs.get_float("alpha", 1.0 / 6),
                         b = n.attrs.get_float("beta", 0.5);
            if (!std::isfinite(a) || !std::isfinite(b) || a == 0)
                throw Error("hard_sigmoid needs a finite, non-zero alpha and a finite beta");
            break;
        }
        default:
            require_known_attrs(n, {});
    }
    return {DType::F32, in_shape(g, n, 0), {}};
}

Residuals input_residual(const Graph&, const Node&) {
    return {0b1u, false};
}

template <int Fwd, int Bwd>
OpCost activation_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    return {Fwd * e, Bwd * e, 8 * e, 12 * e};
}

constexpr OpDef activation(std::string_view name, std::string_view about,
                           OpCost (*cost)(const Graph&, const Node&)) {
    return OpDef{
        .name = name,
        .about = about,
        .min_inputs = 1,
        .max_inputs = 1,
        .is_loss = false,
        .is_dot = false,
        .infer = activation_infer,
        .residuals = input_residual,
        .fwd_workspace = nullptr,
        .bwd_workspace = nullptr,
        .cost = cost,
        .in_place_inputs = 0b1u,
    };
}

}  // namespace

const OpDef kClipDef = activation("clip", "min(max(x, min), max) (attrs min, max; ReLU6 is 0, 6)",
                                  activation_cost<2, 2>);
const OpDef kHardSigmoidDef = activation(
    "hard_sigmoid", "max(0, min(1, alpha·x + beta)) (alpha 1/6, beta 0.5)", activation_cost<4, 3>);
const OpDef kHardSwishDef = activation("hard_swish", "x · relu6(x + 3) / 6", activation_cost<5, 4>);
const OpDef kGeluTanhDef =
    activation("gelu_tanh", "0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GELU's tanh form",
               activation_cost<15, 25>);

}  // namespace rl::ops
