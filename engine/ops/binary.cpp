// add, sub, mul, div with numpy broadcasting (layout.h's BinaryForm and BroadcastPlan).
//
// Forms: two tensors (x + y, SiLU's x · sigmoid(x), squeeze-excitation's x [N,C,H,W] ·
// s [N,C,1,1]); a tensor and a parameter of shape attr param_shape (layer scale γ [C] ·
// x [N,H,W,C], position embeddings [S,H] + x [B,S,H]); a tensor and a scalar (attr scalar; x + 3
// in hardswish). reversed=1 puts the parameter or scalar first (c - x, c / x). The backward of an
// operand that the output repeats sums its gradient over the repeated axes in row-major order
// (BroadcastPlan::for_each_repeat), so the sum is deterministic.
#include <cstring>
#include <string>
#include <variant>

#include "engine/ops/layout.h"
#include "engine/ops/op_defs.h"

namespace rl {

BinaryForm binary_form(const Node& n) {
    BinaryForm f;
    if (n.inputs.size() == 2) return f;
    const BinaryForm::Source other = n.attrs.has("param_shape")      ? BinaryForm::Source::Param
                                     : n.attrs.has("constant_shape") ? BinaryForm::Source::Constant
                                                                     : BinaryForm::Source::Scalar;
    if (other == BinaryForm::Source::Scalar)
        f.scalar = static_cast<float>(n.attrs.get_float("scalar", 0.0));
    const bool reversed = n.attrs.get_int("reversed", 0) != 0;
    f.source[reversed ? 1 : 0] = BinaryForm::Source::Input;
    f.source[reversed ? 0 : 1] = other;
    f.input[0] = f.input[1] = 0;
    return f;
}

void binary_constant_values(const Node& n, float* dst) {
    const auto* bits = std::get_if<std::vector<int64_t>>(n.attrs.find("constant_bits"));
    if (!bits) throw Error("node '" + n.name + "' has no constant_bits");
    for (size_t k = 0; k < bits->size(); ++k) {
        const auto u = static_cast<uint32_t>((*bits)[k]);
        std::memcpy(dst + k, &u, sizeof(float));
    }
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
    const int rank = std::max(a.rank(), b.rank());
    Shape out;
    out.dims.assign(static_cast<size_t>(rank), 1);
    for (int d = 0; d < rank; ++d) {
        const int da = d - (rank - a.rank()), db = d - (rank - b.rank());
        const int64_t x = da >= 0 ? a[da] : 1, y = db >= 0 ? b[db] : 1;
        if (x != y && x != 1 && y != 1)
            throw Error("shapes " + format_dims(a) + " and " + format_dims(b) +
                        " do not broadcast: aligned at their last axes, each pair of sizes must "
                        "be equal or one of them 1 (axis " +
                        std::to_string(d - rank) + ": " + std::to_string(x) + " vs " +
                        std::to_string(y) + ")");
        out.dims[static_cast<size_t>(d)] = x == 1 ? y : x;
    }
    return out;
}

BroadcastPlan broadcast_plan(const Shape& full, const Shape& a, const Shape& b) {
    BroadcastPlan p;
    p.rank = full.rank();
    const Shape* ops[2] = {&a, &b};
    int64_t stride = 1;
    for (int d = p.rank - 1; d >= 0; --d) {
        p.dims[d] = full[d];
        p.stride[0][d] = full[d] == 1 ? 0 : stride;
        stride *= full[d];
    }
    for (int k = 0; k < 2; ++k) {
        const Shape& s = *ops[k];
        int64_t st = 1;
        for (int d = p.rank - 1; d >= 0; --d) {
            const int ds = d - (p.rank - s.rank());
            const int64_t size = ds >= 0 ? s[ds] : 1;
            p.stride[k + 1][d] = size == 1 ? 0 : st;
            st *= size;
        }
    }
    p.coalesce();
    return p;
}

namespace {

Shape operand_shape(const Graph& g, const Node& n, const BinaryForm& f, int k) {
    switch (f.source[k]) {
        case BinaryForm::Source::Input:
            return g.value(n.inputs[static_cast<size_t>(f.input[k])]).shape;
        case BinaryForm::Source::Param:
            return Shape(n.attrs.get_ints("param_shape"));
        case BinaryForm::Source::Constant:
            return Shape(n.attrs.get_ints("constant_shape"));
        case BinaryForm::Source::Scalar:
            break;
    }
    return Shape{};
}

}  // namespace

BroadcastPlan binary_plan(const Graph& g, const Node& n) {
    const BinaryForm f = binary_form(n);
    return broadcast_plan(g.value(n.output).shape, operand_shape(g, n, f, 0),
                          operand_shape(g, n, f, 1));
}

namespace ops {
namespace {

Inferred binary_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n,
                        {"scalar", "param_shape", "reversed", "constant_shape", "constant_bits"});
    const std::string op(op_name(n.op));
    const bool has_param = n.attrs.has("param_shape"), has_scalar = n.attrs.has("scalar"),
               has_constant = n.attrs.has("constant_shape");
    const int others = int{has_param} + int{has_scalar} + int{has_constant};
    if (n.inputs.size() == 2 && (others > 0 || n.attrs.has("reversed")))
        throw Error(op +
                    " of two inputs takes no scalar, param_shape, constant_shape or reversed "
                    "attribute; give one input and the scalar, the parameter's shape or the "
                    "constant");
    if (n.inputs.size() == 1 && others != 1)
        throw Error(op +
                    " of one input needs its other operand: one of attribute scalar (a number), "
                    "param_shape (a parameter's shape) or constant_shape with constant_bits (a "
                    "constant tensor), not " +
                    (others == 0   ? "neither"
                     : others == 2 ? "both"
                                   : "all three"));
    if (has_constant) {
        const Shape s(n.attrs.get_ints("constant_shape"));
        const int64_t count = checked_numel(s, "constant_shape");
        if (!n.attrs.has("constant_bits") ||
            static_cast<int64_t>(n.attrs.get_ints("constant_bits").size()) != count)
            throw Error("attribute constant_bits must hold the " + std::to_string(count) +
                        " float32 bit patterns of constant_shape " + format_dims(s));
    } else if (n.attrs.has("constant_bits")) {
        throw Error("attribute constant_bits needs constant_shape");
    }
    Inferred out;
    if (has_param) {
        const Shape p(n.attrs.get_ints("param_shape"));
        checked_numel(p, "param_shape");
        const bool mul = n.op == OpKind::Mul || n.op == OpKind::Div;
        out.params.push_back(
            ParamDecl{mul ? "weight" : "bias", p, mul ? ParamInit::Ones : ParamInit::Zeros, 1});
    }
    const BinaryForm f = binary_form(n);
    const Shape a = operand_shape(g, n, f, 0), b = operand_shape(g, n, f, 1);
    out.shape = broadcast_shapes(a, b);
    if (out.shape.rank() > kMaxBroadcastRank)
        throw Error(op + " of " + format_dims(a) + " and " + format_dims(b) + " has rank " +
                    std::to_string(out.shape.rank()) + "; broadcasting supports at most " +
                    std::to_string(kMaxBroadcastRank) + " axes");
    return out;
}

Residuals add_sub_residuals(const Graph&, const Node&) {
    return {};
}

// mul reads each operand for the other's gradient; div reads both (dA = dY/b, dB = -dY·a/b²).
// Only tensor inputs are residuals (parameters are always live; a scalar is an attribute).
Residuals mul_div_residuals(const Graph&, const Node& n) {
    const BinaryForm f = binary_form(n);
    if (n.inputs.size() == 2) return {0b11u, false};
    auto fixed = [](BinaryForm::Source s) {
        return s == BinaryForm::Source::Scalar || s == BinaryForm::Source::Constant;
    };
    const bool scalar = fixed(f.source[0]) || fixed(f.source[1]);
    // x·c and x/c need nothing (c is an attribute); c/x reads x; with a parameter, its gradient
    // reads x.
    if (scalar && (n.op == OpKind::Mul || f.source[0] == BinaryForm::Source::Input)) return {};
    return {0b1u, false};
}

// A constant operand is decoded from its attribute into the workspace, forward and backward.
uint64_t binary_workspace(const Graph&, const Node& n) {
    if (!n.attrs.has("constant_shape")) return 0;
    return 4 * static_cast<uint64_t>(Shape(n.attrs.get_ints("constant_shape")).numel());
}

// FLOPs per output element forward and backward.
template <int Fwd, int Bwd>
OpCost binary_cost(const Graph& g, const Node& n) {
    const double out = numel_d(g.value(n.output).shape);
    double ins = 0;
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) ins += numel_d(in_shape(g, n, i));
    // Forward: read the operands, write the output; backward: read dY (and the residuals),
    // write the operand gradients.
    return {Fwd * out, Bwd * out, 4 * (ins + out), 4 * (out + 2 * ins)};
}

constexpr OpDef binary(std::string_view name, std::string_view about,
                       Residuals (*residuals)(const Graph&, const Node&),
                       OpCost (*cost)(const Graph&, const Node&)) {
    return OpDef{
        .name = name,
        .about = about,
        .min_inputs = 1,
        .max_inputs = 2,
        .is_loss = false,
        .is_dot = false,
        .infer = binary_infer,
        .residuals = residuals,
        .fwd_workspace = binary_workspace,
        .bwd_workspace = binary_workspace,
        .cost = cost,
        // Output element j reads element j of an input of the output's size (a broadcast input
        // is never the output's size, so liveness never hands it over: it compares bytes).
        .in_place_inputs = 0b11u,
    };
}

}  // namespace

const OpDef kAddDef = binary("add",
                             "elementwise sum with numpy broadcasting; or x + a parameter "
                             "(param_shape), a scalar, or a constant tensor (constant_shape, "
                             "constant_bits: float32 bit patterns)",
                             add_sub_residuals, binary_cost<1, 1>);
const OpDef kSubDef = binary("sub", "a - b with numpy broadcasting (or with a parameter / scalar)",
                             add_sub_residuals, binary_cost<1, 1>);
const OpDef kMulDef = binary("mul", "a · b with numpy broadcasting (or with a parameter / scalar)",
                             mul_div_residuals, binary_cost<1, 2>);
const OpDef kDivDef = binary("div", "a / b with numpy broadcasting (or with a parameter / scalar)",
                             mul_div_residuals, binary_cost<1, 4>);

}  // namespace ops

}  // namespace rl
