// linear and matmul: the "dot" ops.
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

Inferred linear_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_rank_at_least(g, n, 0, 1);
    const Shape& x = in_shape(g, n, 0);
    const int64_t in = x[-1];
    const int64_t out = n.attrs.get_int("out_features");
    if (out <= 0)
        throw Error("attribute 'out_features' is " + std::to_string(out) + "; it must be positive");
    // in_features is optional; when given it documents (and checks) the expected input width.
    const int64_t want_in = n.attrs.get_int("in_features", in);
    if (want_in != in)
        throw Error("input 0 has shape " + format_dims(x) + " but linear expects last axis " +
                    std::to_string(want_in) + " (in_features)");
    Inferred r;
    r.shape = x;
    r.shape.dims.back() = out;
    r.params.push_back({"weight", Shape{out, in}, ParamInit::FanInUniform, in});
    if (n.attrs.get_int("bias", 1) != 0)
        r.params.push_back({"bias", Shape{out}, ParamInit::FanInUniform, in});
    return r;
}

Residuals linear_residuals(const Graph&, const Node&) {
    return {0b1u, false};
}

OpCost linear_cost(const Graph& g, const Node& n) {
    const Shape& x = in_shape(g, n, 0);
    const double m = static_cast<double>(rows_of(x)), in = static_cast<double>(x[-1]);
    const double out = static_cast<double>(n.attrs.get_int("out_features"));
    const double bias = n.attrs.get_int("bias", 1) != 0 ? 1.0 : 0.0;
    OpCost c;
    c.fwd_flops = 2 * m * in * out + bias * m * out;
    c.bwd_flops = 4 * m * in * out + bias * m * out;
    c.fwd_bytes = 4 * (m * in + out * in + m * out + bias * out);
    // Reads dY, X, W; writes dX, dW, db.
    c.bwd_bytes = 4 * (m * out + 2 * m * in + 2 * out * in + bias * out);
    return c;
}

struct MatMulDims {
    int64_t b, m, k, n;
    bool transpose_b;
};

MatMulDims matmul_dims(const Graph& g, const Node& n) {
    const Shape& a = in_shape(g, n, 0);
    const Shape& b = in_shape(g, n, 1);
    const bool tb = n.attrs.get_int("transpose_b", 0) != 0;
    return {a[0], a[1], a[2], tb ? b[1] : b[2], tb};
}

Inferred matmul_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    const int64_t tb = n.attrs.get_int("transpose_b", 0);
    if (tb != 0 && tb != 1)
        throw Error("attribute 'transpose_b' is " + std::to_string(tb) + "; it must be 0 or 1");
    n.attrs.get_float("alpha", 1.0);  // type check: throws when alpha is not a number
    const Shape& a = in_shape(g, n, 0);
    const Shape& b = in_shape(g, n, 1);
    for (int i = 0; i < 2; ++i) {
        const Shape& s = i == 0 ? a : b;
        if (s.rank() != 3)
            throw Error("input " + std::to_string(i) + " has shape " + format_dims(s) +
                        " but matmul expects rank 3 [batch, rows, cols]; reshape it first");
    }
    const int64_t k_of_b = tb ? b[2] : b[1];
    if (b[0] != a[0] || k_of_b != a[2]) {
        // Built by appending: GCC 12 warns falsely (-Wrestrict) on `"[" + std::to_string(…)`.
        std::string want = "[";
        want += std::to_string(a[0]);
        want += tb ? ",N," : ",";
        want += std::to_string(a[2]);
        want += tb ? "]" : ",N]";
        throw Error("input 1 has shape " + format_dims(b) + " but matmul" +
                    (tb ? " with transpose_b=1" : "") + " expects " + want + " to match input 0 " +
                    format_dims(a) + " (same batch, contracted axis K=" + std::to_string(a[2]) +
                    ")");
    }
    const MatMulDims d = matmul_dims(g, n);
    Inferred r;
    r.shape = Shape{d.b, d.m, d.n};
    return r;
}

Residuals matmul_residuals(const Graph&, const Node&) {
    return {0b11u, false};
}

OpCost matmul_cost(const Graph& g, const Node& n) {
    const MatMulDims d = matmul_dims(g, n);
    const double b = static_cast<double>(d.b), m = static_cast<double>(d.m);
    const double k = static_cast<double>(d.k), nn = static_cast<double>(d.n);
    OpCost c;
    c.fwd_flops = 2 * b * m * nn * k;
    c.bwd_flops = 4 * b * m * nn * k;
    c.fwd_bytes = 4 * b * (m * k + k * nn + m * nn);
    c.bwd_bytes = 4 * b * (m * nn + 2 * m * k + 2 * k * nn);
    return c;
}

}  // namespace

const OpDef kLinearDef{
    .name = "linear",
    .about = "y = x·Wᵀ + b over the last axis (attrs: out_features, bias=1)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = true,
    .infer = linear_infer,
    .residuals = linear_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = linear_cost,
};

const OpDef kMatMulDef{
    .name = "matmul",
    .about = "batched a[B,M,K]·b[B,K,N] times alpha (attrs: transpose_b=0, alpha=1)",
    .min_inputs = 2,
    .max_inputs = 2,
    .is_loss = false,
    .is_dot = true,
    .infer = matmul_infer,
    .residuals = matmul_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = matmul_cost,
};

}  // namespace rl::ops
