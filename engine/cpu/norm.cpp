// layernorm and softmax: one row of the last axis per task.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "engine/cpu/kernels.h"
#include "engine/cpu/packet_exp.h"
#include "engine/cpu/pairwise.h"

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
    // Parallel over column blocks, each summing its columns over all rows pairwise.
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (d + kBlock - 1) / kBlock;
    parallel_for(blocks, rows * kBlock, [&](int64_t blk) {
        const int64_t j0 = blk * kBlock, n = std::min(kBlock, d - j0);
        pairwise_over_rows<2>(rows, n, {dw ? dw + j0 : nullptr, db ? db + j0 : nullptr},
                              [&](int64_t r, const std::array<float*, 2>& sums) {
                                  ConstArrMap dyr(dy + r * d + j0, n);
                                  if (dw)
                                      ArrMap(sums[0], n) +=
                                          dyr * (ConstArrMap(x + r * d + j0, n) - stats[r].mean) *
                                          stats[r].rstd;
                                  if (db) ArrMap(sums[1], n) += dyr;
                              });
    });
}

namespace {

// One row of softmax in Eigen's packets (16 floats on AVX-512, 8 on AVX2): the tail by a masked
// load, padded with -inf for the maximum and zeroed after the exp, so every element takes the
// same vector exp. Eigen's array expressions peel scalar elements up to the row's first 64-byte
// boundary and after its last packet, through libm's scalar exp; on attention's short rows (49
// keys in a 7×7 window) that was most of each row, and the forward ran at 14–23 % of its memory
// roofline (bench_roofline, 2026-12-03).
#if defined(EIGEN_VECTORIZE_AVX)
namespace ei = Eigen::internal;
using packet_exp::exp_or_zero;
using packet_exp::kLanes;
using packet_exp::Packet;
using LaneMask = std::conditional_t<kLanes == 16, uint16_t, uint8_t>;  // Eigen's mask_t

// The first n (< kLanes) lanes of p into y: a masked store on AVX-512; AVX2's vmaskmovps store
// is microcoded on AMD's cores, so through a buffer there.
inline void store_first(float* y, const Packet& p, int64_t n) {
#if defined(EIGEN_VECTORIZE_AVX512)
    ei::pstoreu(y, p, static_cast<LaneMask>((1u << n) - 1));
#else
    alignas(64) float buf[kLanes];
    ei::pstore(buf, p);
    std::copy(buf, buf + n, y);
#endif
}

// The largest lane. On AVX-512 by halves through memory: GCC 12 reports a false -Wuninitialized
// in every AVX-512 intrinsic that extracts or shuffles lanes (they pass _mm512_undefined_ps), and
// Eigen's predux_max is one of them.
inline float max_lane(const Packet& p) {
#if defined(EIGEN_VECTORIZE_AVX512)
    alignas(64) float t[16];
    ei::pstore(t, p);
    return ei::predux_max(ei::pmax(ei::pload<ei::Packet8f>(t), ei::pload<ei::Packet8f>(t + 8)));
#else
    return ei::predux_max(p);
#endif
}

// The lanes below `tail` (0 < tail < kLanes), and x's first `tail` floats in them with `pad` in
// the others (a masked load: nothing past the row is read).
inline Packet first_lanes(int64_t tail) {
    return ei::pcmp_lt(ei::plset<Packet>(0.0f), ei::pset1<Packet>(static_cast<float>(tail)));
}
inline Packet load_first(const float* x, int64_t tail, const Packet& lanes, const Packet& pad) {
    return ei::pselect(lanes, ei::ploadu<Packet>(x, static_cast<LaneMask>((1u << tail) - 1)), pad);
}

#endif

}  // namespace

#if defined(EIGEN_VECTORIZE_AVX)
float max_of_row(const float* x, int64_t d) {
    using P = Packet;
    constexpr int64_t L = kLanes;
    const int64_t body = d - d % L, tail = d - body;
    P vmax = ei::pset1<P>(-std::numeric_limits<float>::infinity());
    if (tail) vmax = load_first(x + body, tail, first_lanes(tail), vmax);
    for (int64_t j = 0; j < body; j += L) vmax = ei::pmax(vmax, ei::ploadu<P>(x + j));
    return max_lane(vmax);
}

float exp_shifted_sum(const float* __restrict x, float* __restrict y, int64_t d, float m) {
    using P = Packet;
    constexpr int64_t L = kLanes;
    const int64_t body = d - d % L, tail = d - body;
    const P mv = ei::pset1<P>(m);
    P vsum = ei::pzero(mv);
    // The padding lanes take exp(0), not exp(-inf): Eigen's exp of a large negative argument is
    // a denormal, and a denormal result cost a microcode assist per row on AMD's AVX2 path (the
    // row ran 1.5× slower than through the scalar exp).
    if (tail) {
        const P valid = first_lanes(tail);
        vsum = ei::pselect(valid, exp_or_zero(ei::psub(load_first(x + body, tail, valid, mv), mv)),
                           vsum);
        if (y) store_first(y + body, vsum, tail);
    }
    for (int64_t j = 0; j < body; j += L) {
        const P e = exp_or_zero(ei::psub(ei::ploadu<P>(x + j), mv));
        if (y) ei::pstoreu(y + j, e);
        vsum = ei::padd(vsum, e);
    }
    return ei::predux(vsum);
}

void scale_row(float* y, int64_t d, float s) {
    using P = Packet;
    constexpr int64_t L = kLanes;
    const int64_t body = d - d % L;
    const P sv = ei::pset1<P>(s);
    for (int64_t j = 0; j < body; j += L) ei::pstoreu(y + j, ei::pmul(ei::ploadu<P>(y + j), sv));
    for (int64_t j = body; j < d; ++j) y[j] *= s;
}
#else
float max_of_row(const float* x, int64_t d) {
    return ConstArrMap(x, d).maxCoeff();
}

float exp_shifted_sum(const float* x, float* y, int64_t d, float m) {
    if (!y) return (ConstArrMap(x, d) - m).exp().sum();
    ArrMap yr(y, d);
    yr = (ConstArrMap(x, d) - m).exp();
    return yr.sum();
}

void scale_row(float* y, int64_t d, float s) {
    ArrMap(y, d) *= s;
}
#endif

namespace {

void softmax_row(const float* x, float* y, int64_t d) {
    const float m = max_of_row(x, d);
    scale_row(y, d, 1.0f / exp_shifted_sum(x, y, d, m));
}

}  // namespace

void softmax_forward(const ForwardCall& c) {
    const Rows rd = rows_of(input_shape(c.graph, c.node, 0));
    const int64_t rows = rd.rows, d = rd.d;
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    parallel_for(rows, d, [&](int64_t r) { softmax_row(x + r * d, y + r * d, d); });
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
// row's norm is summed in double, the same code forward and backward, so the backward's
// recomputed norm is bitwise the forward's.

// Σ a[j]·b[j] in double over eight partial sums (element j into sum j mod 8, the tail into the
// first ones), added pairwise at the end: a fixed order, so the same row gives the same sum, and
// the partial sums vectorise. One running sum was a chain of dependent adds, which ran
// l2_normalize at 14–42 % of its memory roofline (bench_roofline, 2026-12-03).
double dot_double(const float* a, const float* b, int64_t d) {
    double s[8] = {};
    int64_t j = 0;
    for (; j + 8 <= d; j += 8)
        for (int k = 0; k < 8; ++k) s[k] += static_cast<double>(a[j + k]) * b[j + k];
    for (int k = 0; j < d; ++j, ++k) s[k] += static_cast<double>(a[j]) * b[j];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

namespace {

double row_norm(const float* x, int64_t d) {
    return std::sqrt(dot_double(x, x, d));
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
        const double k = dot_double(dyr, xr, d) / (n * n);
        for (int64_t j = 0; j < d; ++j) {
            const auto v = static_cast<float>((dyr[j] - xr[j] * k) / n);
            dxr[j] = acc ? dxr[j] + v : v;
        }
    });
}

}  // namespace rl::cpu
