// layernorm and softmax: one row of the last axis per task.
#include <cmath>

#include "engine/cpu/kernels.h"

namespace rl::cpu {
namespace {

struct RowStats {
    float mean, rstd;
};

// Shared by forward and backward so that the backward's recomputed statistics are bitwise the
// forward's.
RowStats row_stats(const float* x, int64_t d, float eps) {
    ConstArrMap xr(x, d);
    const float mean = xr.mean();
    const float var = (xr - mean).square().mean();
    return {mean, 1.0f / std::sqrt(var + eps)};
}

struct Rows {
    int64_t rows, d;
};

Rows rows_of(const Shape& s) {
    return {s.numel() / s[-1], s[-1]};
}

}  // namespace

void layernorm_forward(const ForwardCall& c) {
    const Rows rd = rows_of(input_shape(c.graph, c.node, 0));
    const int64_t rows = rd.rows, d = rd.d;
    const float eps = static_cast<float>(c.node.attrs.get_float("eps", 1e-5));
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    ConstArrMap w(c.params[0], d), b(c.params[1], d);
    parallel_for(rows, d, [&](int64_t r) {
        const RowStats st = row_stats(x + r * d, d, eps);
        ArrMap(y + r * d, d) = (ConstArrMap(x + r * d, d) - st.mean) * st.rstd * w + b;
    });
}

// x̂ = (x - mean)·rstd, g = dY·w:  dX = rstd·(g - mean(g) - x̂·mean(g·x̂)),
// dweight = Σ_rows dY·x̂, dbias = Σ_rows dY.
void layernorm_backward(const BackwardCall& c) {
    const Rows rd = rows_of(input_shape(c.graph, c.node, 0));
    const int64_t rows = rd.rows, d = rd.d;
    const float eps = static_cast<float>(c.node.attrs.get_float("eps", 1e-5));
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    float* dx = c.grad_inputs[0];
    const bool acc = c.accumulate[0];
    auto* stats = static_cast<RowStats*>(c.workspace);  // [rows] of (mean, rstd)
    ConstArrMap w(c.params[0], d);
    parallel_for(rows, d, [&](int64_t r) {
        const RowStats st = row_stats(x + r * d, d, eps);
        stats[r] = st;
        if (!dx) return;
        ConstArrMap dyr(dy + r * d, d);
        const auto xhat = (ConstArrMap(x + r * d, d) - st.mean) * st.rstd;
        const auto g = dyr * w;
        const float g_mean = g.mean();
        const float gx_mean = (g * xhat).mean();
        store(ArrMap(dx + r * d, d), st.rstd * (g - g_mean - xhat * gx_mean), acc);
    });

    float* dw = c.grad_params[0];
    float* db = c.grad_params[1];
    if (!dw && !db) return;
    // Parallel over column blocks, each summing its columns over all rows in row order.
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (d + kBlock - 1) / kBlock;
    parallel_for(blocks, rows * kBlock, [&](int64_t blk) {
        const int64_t j0 = blk * kBlock, n = std::min(kBlock, d - j0);
        if (dw) ArrMap(dw + j0, n).setZero();
        if (db) ArrMap(db + j0, n).setZero();
        for (int64_t r = 0; r < rows; ++r) {
            ConstArrMap dyr(dy + r * d + j0, n);
            if (dw)
                ArrMap(dw + j0, n) +=
                    dyr * (ConstArrMap(x + r * d + j0, n) - stats[r].mean) * stats[r].rstd;
            if (db) ArrMap(db + j0, n) += dyr;
        }
    });
}

void softmax_forward(const ForwardCall& c) {
    const Rows rd = rows_of(input_shape(c.graph, c.node, 0));
    const int64_t rows = rd.rows, d = rd.d;
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    parallel_for(rows, d, [&](int64_t r) {
        ConstArrMap xr(x + r * d, d);
        ArrMap yr(y + r * d, d);
        yr = (xr - xr.maxCoeff()).exp();
        yr *= 1.0f / yr.sum();
    });
}

// From the output: dX = y·(dY - Σ dY·y).
void softmax_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Rows rd = rows_of(output_shape(c.graph, c.node));
    const int64_t rows = rd.rows, d = rd.d;
    const float* y = as_f32(c.output);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    parallel_for(rows, d, [&](int64_t r) {
        ConstArrMap yr(y + r * d, d), dyr(dy + r * d, d);
        const float dot = (dyr * yr).sum();
        store(ArrMap(dx + r * d, d), yr * (dyr - dot), acc);
    });
}

// l2_normalize: y = x / max(‖x‖, eps) per row, as F.normalize (norm, clamp_min, divide). Each
// row's norm is summed in double in element order, the same code forward and backward, so the
// backward's recomputed norm is bitwise the forward's.
namespace {

double row_norm(const float* x, int64_t d) {
    double s = 0;
    for (int64_t j = 0; j < d; ++j) s += static_cast<double>(x[j]) * x[j];
    return std::sqrt(s);
}

}  // namespace

void l2_normalize_forward(const ForwardCall& c) {
    const Rows rd = rows_of(input_shape(c.graph, c.node, 0));
    const int64_t rows = rd.rows, d = rd.d;
    const double eps = c.node.attrs.get_float("eps", 1e-12);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    parallel_for(rows, d, [&](int64_t r) {
        const auto denom = static_cast<float>(std::max(row_norm(x + r * d, d), eps));
        ArrMap(y + r * d, d) = ConstArrMap(x + r * d, d) / denom;
    });
}

// With n = ‖x‖: where n >= eps, dX = (dY - x·(Σ dY·x)/n²)/n; below eps the denominator is the
// constant eps (clamp_min passes no gradient there, as PyTorch's), so dX = dY/eps.
void l2_normalize_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Rows rd = rows_of(input_shape(c.graph, c.node, 0));
    const int64_t rows = rd.rows, d = rd.d;
    const double eps = c.node.attrs.get_float("eps", 1e-12);
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    parallel_for(rows, d, [&](int64_t r) {
        const float* xr = x + r * d;
        const float* dyr = dy + r * d;
        float* dxr = dx + r * d;
        const double n = row_norm(xr, d);
        if (n < eps) {
            const double inv = 1.0 / eps;
            for (int64_t j = 0; j < d; ++j) {
                const auto v = static_cast<float>(dyr[j] * inv);
                dxr[j] = acc ? dxr[j] + v : v;
            }
            return;
        }
        double dot = 0;
        for (int64_t j = 0; j < d; ++j) dot += static_cast<double>(dyr[j]) * xr[j];
        const double k = dot / (n * n);
        for (int64_t j = 0; j < d; ++j) {
            const auto v = static_cast<float>((dyr[j] - xr[j] * k) / n);
            dxr[j] = acc ? dxr[j] + v : v;
        }
    });
}

}  // namespace rl::cpu
