// conv2d on NCHW float32: im2col + GEMM per group and chunk of images, direct kernels for
// depthwise convolutions (channels-last blocks of 16 where rows are short, zero-padded planes of
// whole vectors where they are longer, per row otherwise), direct kernels on channels-last padded
// planes for grouped convolutions with whole vectors of channels a group (conv_grouped.cpp), and
// no im2col at all for 1×1 stride-1 unpadded ones.
//
// Forward, per chunk of nb images (Conv2dGeometry::images_per_gemm: 1 unless the plane is small)
// and group g (K = (C/groups)·kh·kw, P = oh·ow):
//   col [K, nb·P] = im2col(x[each image of the chunk, group g's channels])  (the workspace)
//   y[those images, group g's out channels] [O/groups, nb·P] = W_g [O/groups, K] · col (+ bias)
//   (with nb > 1 the GEMM writes a gathered copy in the workspace, scattered to the images after)
// im2col and col2im (im2col.h) pick their path by the window's geometry.
// Backward, per chunk and group, reusing the same workspace:
//   dW_g += dY_g · colᵀ          (chunks summed in order: deterministic)
//   col   = W_gᵀ · dY_g;  dX += col2im(col)   (col2im: one thread per input channel)
//   or, at stride 1 (Conv2dGeometry::input_grad_by_correlation), dX as a correlation of dY with
//   the flipped kernel: dX_g += W̃_g · im2col(dY_g), with no fold.
//   db    = Σ over images and positions of dY, per channel, in a fixed order.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/cpu/conv_grouped.h"
#include "engine/cpu/im2col.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/vec8.h"
#include "engine/gemm.h"
#include "engine/ops/window.h"

namespace rl::cpu {
namespace {

// The row loops of the direct kernels, over the output columns ow in span `s` of a window tap at
// input column ow·stride + off. Stride 1 is the common case and runs contiguously (vectorised).
void axpy_from(float* y, const float* x_row, int64_t off, int64_t stride, Span s, float k) {
    if (stride == 1) {
        const float* x = x_row + s.lo + off;
        float* out = y + s.lo;
        for (int64_t i = 0; i < s.hi - s.lo; ++i) out[i] += k * x[i];
    } else {
        for (int64_t ow = s.lo; ow < s.hi; ++ow) y[ow] += k * x_row[ow * stride + off];
    }
}

void axpy_to(float* x_row, int64_t off, int64_t stride, Span s, const float* y, float k) {
    if (stride == 1) {
        float* out = x_row + s.lo + off;
        const float* in = y + s.lo;
        for (int64_t i = 0; i < s.hi - s.lo; ++i) out[i] += k * in[i];
    } else {
        for (int64_t ow = s.lo; ow < s.hi; ++ow) x_row[ow * stride + off] += k * y[ow];
    }
}

float dot_with(const float* y, const float* x_row, int64_t off, int64_t stride, Span s) {
    const int64_t len = s.hi - s.lo;
    if (len <= 0) return 0.0f;
    using Vec = Eigen::Map<const Eigen::VectorXf>;
    if (stride == 1) return Vec(y + s.lo, len).dot(Vec(x_row + s.lo + off, len));
    float acc = 0;
    for (int64_t ow = s.lo; ow < s.hi; ++ow) acc += y[ow] * x_row[ow * stride + off];
    return acc;
}

// C = op(A)·B + beta·C with B [k, n] not transposed: a product with 8 or 16 columns (2×2 planes
// of two images) on few_columns_product, which reads W without packing it; others on the GEMM.
void columns_product(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    if (few_columns_apply(trans_a, m, n, k))
        few_columns_product(trans_a, m, n, k, a, lda, b, ldb, beta, c, ldc);
    else
        sgemm(trans_a, false, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
}

// Images side by side (Conv2dGeometry::images_per_gemm): rows r < `rows` of m images' planes,
// image j's at src + j·image_stride, become row r of a [rows, m·plane] matrix (ld = m·plane), and
// back. The planes of 2×2 outputs (GoogLeNet's and DenseNet's last 1×1 convolutions, hundreds of
// rows of 4 floats) have a compile-time length, moved as one vector: with the length at run time
// the moves took 36 % of the backward of a 1×1 from 832 to 32 channels there (perf, 2026-12-06;
// 4×4 planes showed no difference).
template <int P, class F>
void for_each_image_row(int64_t rows, int64_t plane, int64_t m, F&& f) {
    const int64_t n = P ? P : plane;
    parallel_for(rows, m * n, [&](int64_t r) {
        for (int64_t j = 0; j < m; ++j) f(r, j, n);
    });
}
template <class F>
void with_plane_length(int64_t plane, F&& f) {
    if (plane == 4) return f(std::integral_constant<int, 4>{});
    f(std::integral_constant<int, 0>{});
}

void gather_images(const float* src, int64_t image_stride, int64_t rows, int64_t plane, int64_t m,
                   float* dst) {
    const int64_t ld = m * plane;
    with_plane_length(plane, [&](auto length) {
        constexpr int P = decltype(length)::value;
        for_each_image_row<P>(rows, plane, m, [&](int64_t r, int64_t j, int64_t n) {
            const float* s = src + j * image_stride + r * n;
            float* d = dst + r * ld + j * n;
            for (int64_t p = 0; p < (P ? P : n); ++p) d[p] = s[p];
        });
    });
}

void scatter_images(const float* src, int64_t rows, int64_t plane, int64_t m, float* dst,
                    int64_t image_stride, bool accumulate) {
    const int64_t ld = m * plane;
    with_plane_length(plane, [&](auto length) {
        constexpr int P = decltype(length)::value;
        for_each_image_row<P>(rows, plane, m, [&](int64_t r, int64_t j, int64_t n) {
            const float* s = src + r * ld + j * n;
            float* d = dst + j * image_stride + r * n;
            if (accumulate)
                for (int64_t p = 0; p < (P ? P : n); ++p) d[p] += s[p];
            else
                for (int64_t p = 0; p < (P ? P : n); ++p) d[p] = s[p];
        });
    });
}

// The column matrix [K, m·P] of one group for the m images of a chunk, xg pointing at the
// first image's group: im2col of each image side by side in `col`, or, for a 1×1 stride-1
// unpadded convolution, the images' planes gathered there — or read in place when the chunk is
// one image (its plane already is its column matrix).
const float* chunk_columns(const float* xg, const Conv2dGeometry& g, int64_t m, float* col) {
    const int64_t plane = g.oh * g.ow, image = g.c * g.h * g.w;
    if (g.pointwise()) {
        if (g.images_per_gemm() == 1) return xg;
        gather_images(xg, image, g.c_per_group(), plane, m, col);
        return col;
    }
    for (int64_t j = 0; j < m; ++j) im2col(xg + j * image, g, col + j * plane, m * plane);
    return col;
}

// Non-overlapping windows (Conv2dGeometry::patches): row (j, oh, ow) of P [m·P, K] is image j's
// window at (oh, ow), its kernel rows copied whole, channel by channel (K = C·kh·kw, the weights'
// order), for the m images of a chunk from x.
void gather_patches(const float* x, const Conv2dGeometry& g, int64_t m, float* p) {
    const int64_t kh = g.win.kh, kw = g.win.kw, plane = g.h * g.w, k = g.patch();
    parallel_for(m * g.oh, g.ow * k, [&](int64_t r) {
        const int64_t j = r / g.oh, oh = r % g.oh;
        const float* img = x + j * g.c * plane + oh * kh * g.w;
        for (int64_t ow = 0; ow < g.ow; ++ow) {
            float* row = p + (r * g.ow + ow) * k;
            for (int64_t c = 0; c < g.c; ++c)
                for (int64_t i = 0; i < kh; ++i) {
                    const float* src = img + c * plane + i * g.w + ow * kw;
                    std::copy(src, src + kw, row + (c * kh + i) * kw);
                }
        }
    });
}

// And back: the rows of dP [m·P, K] to (or onto, when accumulating) the windows they came from;
// inputs no window reaches (the last rows and columns, where the kernel does not divide the
// plane) get 0, or keep what they had.
void scatter_patches(const float* p, const Conv2dGeometry& g, int64_t m, float* dx,
                     bool accumulate) {
    const int64_t kh = g.win.kh, kw = g.win.kw, plane = g.h * g.w, k = g.patch();
    const bool covered = g.oh * kh == g.h && g.ow * kw == g.w;
    parallel_for(m * g.c, plane, [&](int64_t r) {
        const int64_t j = r / g.c, c = r % g.c;
        float* dst = dx + r * plane;
        if (!accumulate && !covered) std::fill(dst, dst + plane, 0.0f);
        for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
                const float* row = p + ((j * g.oh + oh) * g.ow + ow) * k + c * kh * kw;
                for (int64_t i = 0; i < kh; ++i) {
                    float* d = dst + (oh * kh + i) * g.w + ow * kw;
                    const float* s = row + i * kw;
                    if (accumulate)
                        for (int64_t q = 0; q < kw; ++q) d[q] += s[q];
                    else
                        std::copy(s, s + kw, d);
                }
            }
    });
}

// dX_g (+)= W̃_g · im2col(dY_g) for the m images of a chunk, dyg and dxg pointing at the first
// image's group (Conv2dGeometry::input_grad_by_correlation). ws: dY's columns [O/g·kh·kw, m·H·W],
// then the flipped weights W̃_g, then, for m > 1, the chunk's dX side by side.
void input_grad_by_correlation(const float* dyg, const float* wg, const Conv2dGeometry& g,
                               int64_t m, float* dxg, bool acc, float* ws) {
    const Conv2dGeometry t = g.input_grad_geometry();
    const int64_t cg = g.c_per_group(), og = g.out_per_group(), taps = g.win.kh * g.win.kw;
    const int64_t kt = og * taps, hw = g.h * g.w, ld = m * hw;
    float* cols = ws;
    float* wf = cols + kt * ld;
    float* dxt = wf + cg * kt;
    // Eight input channels at a time, so that each output channel's weights for them are one
    // contiguous read.
    constexpr int64_t kBlock = 8;
    parallel_for((cg + kBlock - 1) / kBlock, kBlock * kt, [&](int64_t b) {
        const int64_t c0 = b * kBlock, c1 = std::min(cg, c0 + kBlock);
        for (int64_t o = 0; o < og; ++o)
            for (int64_t ci = c0; ci < c1; ++ci) {
                const float* src = wg + (o * cg + ci) * taps;
                float* dst = wf + ci * kt + o * taps + taps - 1;
                for (int64_t q = 0; q < taps; ++q) dst[-q] = src[q];
            }
    });
    for (int64_t j = 0; j < m; ++j) im2col(dyg + j * g.out_c * g.oh * g.ow, t, cols + j * hw, ld);
    if (m == 1) {
        sgemm(false, false, cg, hw, kt, 1.f, wf, kt, cols, hw, acc ? 1.f : 0.f, dxg, hw);
        return;
    }
    sgemm(false, false, cg, ld, kt, 1.f, wf, kt, cols, ld, 0.f, dxt, ld);
    scatter_images(dxt, cg, hw, m, dxg, g.c * hw, acc);
}

// db[o] = Σ_n Σ_p dy[n, o, p], images in order. On 1×1 planes (a squeeze-and-excitation block's
// projections) each channel's sum is its images' floats in order, as below, but channels side by
// side: one Eigen sum of one float per channel and image took 7 µs of a 9 µs backward there.
void channel_sums(const float* dy, const Conv2dGeometry& g, float* db) {
    const int64_t plane = g.oh * g.ow;
    if (plane == 1) {
        std::fill(db, db + g.out_c, 0.0f);
        for (int64_t n = 0; n < g.n; ++n)
            for (int64_t o = 0; o < g.out_c; ++o) db[o] += dy[n * g.out_c + o];
        return;
    }
    parallel_for(g.out_c, g.n * plane, [&](int64_t o) {
        float s = 0;
        for (int64_t n = 0; n < g.n; ++n)
            s += ConstArrMap(dy + (n * g.out_c + o) * plane, plane).sum();
        db[o] = s;
    });
}

// --- depthwise: one input channel per group, `mult` output channels each ---------------------

// Stride-1 rows with the kw taps of one kernel row fused (kw = 3, 5, 7), so the row loops are
// long and vectorise; other shapes take the per-tap loops further down.
bool fused_rows(const Window2d& w) {
    return w.sw == 1 && (w.kw == 3 || w.kw == 5 || w.kw == 7);
}

// y[o] += Σ_{j<KW} k[j]·x[o + off + j·d] for o in [0, ylen); taps outside [0, xlen) are skipped.
template <int KW>
void correlate_row(float* y, int64_t ylen, const float* x, int64_t xlen, int64_t off, int64_t d,
                   const float* k_in) {
    float k[KW];
    for (int j = 0; j < KW; ++j) k[j] = k_in[j];
    // [a, b): the positions whose taps all lie inside x.
    const int64_t a = std::clamp<int64_t>(-off, 0, ylen);
    const int64_t b = std::clamp<int64_t>(xlen - off - (KW - 1) * d, a, ylen);
    auto edge = [&](int64_t o) {
        float s = y[o];
        for (int j = 0; j < KW; ++j) {
            const int64_t idx = o + off + j * d;
            if (idx >= 0 && idx < xlen) s += k[j] * x[idx];
        }
        y[o] = s;
    };
    for (int64_t o = 0; o < a; ++o) edge(o);
    if (b > a) {
        const float* xs = x + (a + off);
        float* ys = y + a;
        for (int64_t t = 0; t < b - a; ++t) {
            float s = ys[t];
            for (int j = 0; j < KW; ++j) s += k[j] * xs[t + j * d];
            ys[t] = s;
        }
    }
    for (int64_t o = b; o < ylen; ++o) edge(o);
}

void correlate_row(int kw, float* y, int64_t ylen, const float* x, int64_t xlen, int64_t off,
                   int64_t d, const float* k) {
    if (kw == 3) correlate_row<3>(y, ylen, x, xlen, off, d, k);
    if (kw == 5) correlate_row<5>(y, ylen, x, xlen, off, d, k);
    if (kw == 7) correlate_row<7>(y, ylen, x, xlen, off, d, k);
}

void depthwise_forward(const float* x, const float* wt, const float* b, const Conv2dGeometry& g,
                       float* y) {
    const Window2d& w = g.win;
    const int64_t plane = g.oh * g.ow, mult = g.out_per_group();
    parallel_for(g.n * g.out_c, plane * w.kh * w.kw, [&](int64_t q) {
        const int64_t n = q / g.out_c, oc = q % g.out_c, ic = oc / mult;
        const float* xc = x + (n * g.c + ic) * g.h * g.w;
        float* yp = y + q * plane;
        std::fill(yp, yp + plane, b ? b[oc] : 0.0f);
        if (fused_rows(w)) {
            for (int64_t oh = 0; oh < g.oh; ++oh)
                for (int64_t i = 0; i < w.kh; ++i) {
                    const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
                    if (ih < 0 || ih >= g.h) continue;
                    correlate_row(static_cast<int>(w.kw), yp + oh * g.ow, g.ow, xc + ih * g.w, g.w,
                                  -w.pad_left, w.dw, wt + (oc * w.kh + i) * w.kw);
                }
            return;
        }
        for_each_tap_row(g, [&](int64_t i, int64_t j, int64_t off, Span s, int64_t oh, int64_t ih) {
            const float k = wt[(oc * w.kh + i) * w.kw + j];
            axpy_from(yp + oh * g.ow, xc + ih * g.w, off, w.sw, s, k);
        });
    });
}

void depthwise_backward_input(const float* dy, const float* wt, const Conv2dGeometry& g, float* dx,
                              bool accumulate) {
    const Window2d& w = g.win;
    const int64_t plane = g.oh * g.ow, mult = g.out_per_group();
    parallel_for(g.n * g.c, mult * plane * w.kh * w.kw, [&](int64_t q) {
        const int64_t n = q / g.c, ic = q % g.c;
        float* dxc = dx + q * g.h * g.w;
        if (!accumulate) std::fill(dxc, dxc + g.h * g.w, 0.0f);
        for (int64_t m = 0; m < mult; ++m) {
            const int64_t oc = ic * mult + m;
            const float* dyp = dy + (n * g.out_c + oc) * plane;
            if (fused_rows(w)) {
                // dx[iw] += Σ_j k[j]·dy[iw + pad_left - j·dw]: a correlation with the kernel row
                // reversed.
                for (int64_t oh = 0; oh < g.oh; ++oh)
                    for (int64_t i = 0; i < w.kh; ++i) {
                        const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
                        if (ih < 0 || ih >= g.h) continue;
                        float reversed[7];
                        const float* k = wt + (oc * w.kh + i) * w.kw;
                        for (int64_t j = 0; j < w.kw; ++j) reversed[j] = k[w.kw - 1 - j];
                        correlate_row(static_cast<int>(w.kw), dxc + ih * g.w, g.w, dyp + oh * g.ow,
                                      g.ow, w.pad_left - (w.kw - 1) * w.dw, w.dw, reversed);
                    }
                continue;
            }
            for_each_tap_row(
                g, [&](int64_t i, int64_t j, int64_t off, Span s, int64_t oh, int64_t ih) {
                    const float k = wt[(oc * w.kh + i) * w.kw + j];
                    axpy_to(dxc + ih * g.w, off, w.sw, s, dyp + oh * g.ow, k);
                });
        }
    });
}

void depthwise_backward_weight(const float* x, const float* dy, const Conv2dGeometry& g,
                               float* dw) {
    const Window2d& w = g.win;
    const int64_t plane = g.oh * g.ow, mult = g.out_per_group();
    parallel_for(g.out_c, g.n * plane * w.kh * w.kw, [&](int64_t oc) {
        const int64_t ic = oc / mult;
        for (int64_t i = 0; i < w.kh; ++i)
            for (int64_t j = 0; j < w.kw; ++j) {
                const int64_t off = j * w.dw - w.pad_left;
                const Span s = valid_span(off, w.sw, g.w, g.ow);
                float acc = 0;
                for (int64_t n = 0; n < g.n; ++n) {
                    const float* xc = x + (n * g.c + ic) * g.h * g.w;
                    const float* dyp = dy + (n * g.out_c + oc) * plane;
                    for (int64_t oh = 0; oh < g.oh; ++oh) {
                        const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
                        if (ih < 0 || ih >= g.h) continue;
                        const float* xr = xc + ih * g.w;
                        const float* dr = dyp + oh * g.ow;
                        acc += dot_with(dr, xr, off, w.sw, s);
                    }
                }
                dw[(oc * w.kh + i) * w.kw + j] = acc;
            }
    });
}

// --- depthwise, channels-last blocks (Conv2dGeometry::depthwise_blocked) -----------------------
//
// Short rows leave a per-row kernel mostly overhead (MobileNet's 7×7 and smaller planes ran at
// 1-3 % of their roofline). Here 16 channels go at once, one per vector lane: the block's
// input plane is transposed to [h][w][16], so every tap of every output position is one vector
// multiply-add, and transposed back at the end. Each output sums its bias, then its taps row by
// row, as the row kernel does, and like it skips the taps that read padding (on ConvNeXt's 4×4 and
// 2×2 planes, 7×7 windows padded by 3, two thirds and eleven twelfths of them); the weight gradient
// skips the positions whose tap reads padding. Blocks run in parallel, each in its own slice of the
// declared workspace, its weights packed once and the images one after another.

constexpr int64_t kLanes = Conv2dGeometry::kDepthwiseLanes;
static_assert(kLanes == kPlaneLanes);

// The blocks' sums are LaneVectors (kernels.h). As float[16] loops, GCC kept the weight
// gradient's sums as 16 scalars between output rows and moved them in and out of a vector per row
// (a fifth of the blocks' backward in shuffles).
// acc += k · x, lane by lane (one multiply-add each, as the scalar loops contracted).
inline void add_product(LaneVectors& acc, const float* k, const float* x) {
    using V = Vec<kLaneVectorWidth>;
    for (int h = 0; h < kLaneVectors; ++h)
        acc.part[h] += V::load(k + h * kLaneVectorWidth) * V::load(x + h * kLaneVectorWidth);
}

// The block's weights, [tap][16].
void pack_weights(const float* wt, const Conv2dGeometry& g, int64_t c0, float* wk) {
    const int64_t taps = g.win.kh * g.win.kw, lanes = std::min(kLanes, g.c - c0);
    if (lanes < kLanes) std::fill(wk, wk + taps * kLanes, 0.0f);
    transpose(wt + c0 * taps, taps, lanes, taps, wk, kLanes);
}

// The block position of tap (i, j) of output (oh, ow), in floats, for a tap inside the plane (the
// kernels skip the others).
struct TapGrid {
    int64_t w, sh, sw, dh, dw, pad_top, pad_left;
    int64_t at(int64_t oh, int64_t ow, int64_t i, int64_t j) const {
        return ((oh * sh + i * dh - pad_top) * w + ow * sw + j * dw - pad_left) * kLanes;
    }
};
TapGrid tap_grid(const Conv2dGeometry& g) {
    return {g.w, g.win.sh, g.win.sw, g.win.dh, g.win.dw, g.win.pad_top, g.win.pad_left};
}

// The spans of valid taps, worked out once a call: per output row and column the taps inside the
// plane (WindowTapSpans), and per tap row the output rows whose tap lies inside it, per tap
// column the output columns.
struct BlockSpans : WindowTapSpans {
    std::vector<Span> out_rows, out_cols;
    explicit BlockSpans(const Conv2dGeometry& g) : WindowTapSpans(g.win, g.h, g.w, g.oh, g.ow) {
        const Window2d& w = g.win;
        for (int64_t i = 0; i < w.kh; ++i)
            out_rows.push_back(valid_span(i * w.dh - w.pad_top, w.sh, g.h, g.oh));
        for (int64_t j = 0; j < w.kw; ++j)
            out_cols.push_back(valid_span(j * w.dw - w.pad_left, w.sw, g.w, g.ow));
    }
};

// For each input coordinate x (a row, or a column) of `extent`, the window taps t that read it,
// in tap order, each with the output coordinate o that reads it through t:
// x + pad = o·s + t·d, 0 <= o < outs. The readers of x are at [begin[x], begin[x + 1]).
struct TapReaders {
    struct Reader {
        int64_t tap, out;
    };
    std::vector<int64_t> begin;
    std::vector<Reader> readers;
    TapReaders(int64_t extent, int64_t pad, int64_t taps, int64_t d, int64_t s, int64_t outs) {
        for (int64_t x = 0; x < extent; ++x) {
            begin.push_back(static_cast<int64_t>(readers.size()));
            for (int64_t t = 0; t < taps; ++t) {
                const int64_t u = x + pad - t * d;
                if (u >= 0 && u % s == 0 && u / s < outs) readers.push_back({t, u / s});
            }
        }
        begin.push_back(static_cast<int64_t>(readers.size()));
    }
};

void depthwise_blocked_forward(const float* x, const float* wt, const float* b,
                               const Conv2dGeometry& g, float* y, float* ws) {
    const int64_t blocks = g.depthwise_blocks(), plane = g.oh * g.ow;
    const int64_t in = g.h * g.w;
    const TapGrid tg = tap_grid(g);
    const Window2d& w = g.win;
    const BlockSpans spans(g);
    parallel_for(blocks, g.n * plane * w.kh * w.kw * kLanes, [&](int64_t blk) {
        const int64_t c0 = blk * kLanes;
        float* xp = ws + blk * g.depthwise_block_floats(false);
        float* yb = xp + in * kLanes;
        float* wk = yb + plane * kLanes;
        pack_weights(wt, g, c0, wk);
        alignas(64) float bias[kLanes] = {};
        if (b)
            for (int64_t l = 0; l < std::min(kLanes, g.c - c0); ++l) bias[l] = b[c0 + l];
        for (int64_t n = 0; n < g.n; ++n) {
            planes_to_lanes(x + n * g.c * in, in, in, g.c, c0, xp);
            for (int64_t oh = 0; oh < g.oh; ++oh) {
                const Span si = spans.rows[oh];
                for (int64_t ow = 0; ow < g.ow; ++ow) {
                    const Span sj = spans.cols[ow];
                    LaneVectors acc = LaneVectors::load(bias);
                    for (int64_t i = si.lo; i < si.hi; ++i)
                        for (int64_t j = sj.lo; j < sj.hi; ++j)
                            add_product(acc, wk + (i * w.kw + j) * kLanes,
                                        xp + tg.at(oh, ow, i, j));
                    acc.store(yb + (oh * g.ow + ow) * kLanes);
                }
            }
            planes_from_lanes(yb, plane, plane, g.c, c0, y + n * g.c * plane, false);
        }
    });
}

// Input positions of a block's input gradient gathered at a time, channels-last on the stack
// (16 KB) and then transposed into dx's planes.
constexpr int64_t kGatherPositions = 256;
// Independent chains of multiply-adds the blocks' backward runs side by side (taps or positions),
// their count a constant so that the sums stay in registers: f(C) for C = min(left, 4).
constexpr int64_t kChainTaps = 4;
template <class F>
void with_chains(int64_t left, F&& f) {
    using std::integral_constant;
    if (left >= 4) return f(integral_constant<int, 4>{});
    if (left == 3) return f(integral_constant<int, 3>{});
    if (left == 2) return f(integral_constant<int, 2>{});
    f(integral_constant<int, 1>{});
}

// dW and dX of a block together. The weight gradient sums, tap by tap, each image's positions
// (oh, ow) in order, and adds the images' sums in order. The input gradient is gathered: each
// input position sums, over the taps (i, j) in order, the output gradients whose window reads it
// (none where the stride skips it), and goes to dx (added when `accumulate`). Which taps read a
// position is worked out once a call (TapReaders): testing every tap of every position, with a
// division each, took 4-5× the forward's time on ConvNeXt's 7×7s on 4×4 and 2×2 planes, and
// writing each position's 16 channels one float at a time, 64 KB apart, cost more again.
void depthwise_blocked_backward(const float* x, const float* dy, const float* wt,
                                const Conv2dGeometry& g, float* dw, float* dx, bool accumulate,
                                float* ws) {
    const int64_t blocks = g.depthwise_blocks(), plane = g.oh * g.ow;
    const int64_t in = g.h * g.w, taps = g.win.kh * g.win.kw;
    const TapGrid tg = tap_grid(g);
    const Window2d& w = g.win;
    const BlockSpans spans(g);
    const TapReaders row_readers(g.h, w.pad_top, w.kh, w.dh, w.sh, g.oh);
    const TapReaders col_readers(g.w, w.pad_left, w.kw, w.dw, w.sw, g.ow);
    parallel_for(blocks, g.n * plane * taps * kLanes * 2, [&](int64_t blk) {
        const int64_t c0 = blk * kLanes, lanes = std::min(kLanes, g.c - c0);
        float* xp = ws + blk * g.depthwise_block_floats(true);
        float* dyb = xp + in * kLanes;
        float* wk = dyb + plane * kLanes;
        float* dwk = wk + taps * kLanes;
        pack_weights(wt, g, c0, wk);
        std::fill(dwk, dwk + taps * kLanes, 0.0f);
        for (int64_t n = 0; n < g.n; ++n) {
            planes_to_lanes(dy + n * g.c * plane, plane, plane, g.c, c0, dyb);
            const float* __restrict gb = dyb;
            if (dw) {
                // Tap by tap, this image's sum over in in a register, then added.
                planes_to_lanes(x + n * g.c * in, in, in, g.c, c0, xp);
                const float* __restrict xb = xp;
                // kChainTaps taps of a row at a time, each its own chain of multiply-adds over
                // the positions in order (one chain at a time waited on the multiply-add's
                // latency: EfficientNet's 5×5 on 672 channels of 4×4 planes, 0.38 of its
                // roofline backward); each tap's sum keeps its order, so its bits.
                for (int64_t i = 0; i < w.kh; ++i) {
                    const Span so = spans.out_rows[i];
                    for (int64_t j0 = 0; j0 < w.kw; j0 += kChainTaps)
                        with_chains(w.kw - j0, [&](auto chains) {
                            constexpr int C = decltype(chains)::value;
                            LaneVectors acc[C];
                            for (int q = 0; q < C; ++q) acc[q] = LaneVectors::zero();
                            for (int64_t oh = so.lo; oh < so.hi; ++oh)
                                for (int q = 0; q < C; ++q) {
                                    const Span sp = spans.out_cols[j0 + q];
                                    for (int64_t ow = sp.lo; ow < sp.hi; ++ow)
                                        add_product(acc[q], xb + tg.at(oh, ow, i, j0 + q),
                                                    gb + (oh * g.ow + ow) * kLanes);
                                }
                            for (int q = 0; q < C; ++q) {
                                float* a = dwk + (i * w.kw + j0 + q) * kLanes;
                                LaneVectors sum = LaneVectors::load(a);
                                for (int h = 0; h < kLaneVectors; ++h)
                                    sum.part[h] += acc[q].part[h];
                                sum.store(a);
                            }
                        });
                }
            }
            if (!dx) continue;
            float* img = dx + n * g.c * in;
            for (int64_t p0 = 0; p0 < in; p0 += kGatherPositions) {
                const int64_t p1 = std::min(in, p0 + kGatherPositions);
                alignas(64) float dxb[kGatherPositions * kLanes];
                // Up to kChainTaps neighbouring positions of a row at a time, each its own
                // chain over its taps in order (the same sums, as for the weight gradient).
                for (int64_t p = p0; p < p1;) {
                    const int64_t ih = p / g.w, iw0 = p % g.w;
                    const int64_t count = std::min({kChainTaps, p1 - p, g.w - iw0});
                    with_chains(count, [&](auto chains) {
                        constexpr int C = decltype(chains)::value;
                        LaneVectors acc[C];
                        for (int q = 0; q < C; ++q) acc[q] = LaneVectors::zero();
                        for (int64_t a = row_readers.begin[ih]; a < row_readers.begin[ih + 1];
                             ++a) {
                            const TapReaders::Reader r = row_readers.readers[a];
                            const float* wr = wk + r.tap * w.kw * kLanes;
                            const float* gr = gb + r.out * g.ow * kLanes;
                            for (int q = 0; q < C; ++q)
                                for (int64_t e = col_readers.begin[iw0 + q];
                                     e < col_readers.begin[iw0 + q + 1]; ++e) {
                                    const TapReaders::Reader c = col_readers.readers[e];
                                    add_product(acc[q], wr + c.tap * kLanes, gr + c.out * kLanes);
                                }
                        }
                        for (int q = 0; q < C; ++q) acc[q].store(dxb + (p + q - p0) * kLanes);
                    });
                    p += count;
                }
                planes_from_lanes(dxb, in, p1 - p0, g.c, c0, img + p0, accumulate);
            }
        }
        if (dw) transpose(dwk, kLanes, taps, lanes, dw + c0 * taps, taps);
    });
}

// --- depthwise, zero-padded planes (Conv2dGeometry::depthwise_padded) --------------------------
//
// Rows longer than the blocks take. The row kernel above summed the weight gradient as one dot
// product per tap and row (a dot of 16 to 56 floats: 0.04-0.12 of the roofline on
// EfficientNet's 16x16 planes). Here each channel copies its input plane, and backward its
// output-gradient plane, once into its own zero-padded slice of the workspace (geometry in
// window.h), with rows a whole number of 8-float vectors and the padding in place, so every
// output row is whole vectors of taps with no edge cases. With s = sw, xp_p the input plane's
// column phase p and M = (kw - 1) / s:
//   forward  y[oh, t..t+8)  = b + Σ_i Σ_j w[i, j]·xp_{j mod s}[oh·sh + i, t + j / s ..]
//   dW[i, j] = Σ over images, rows oh and vectors t of dy[oh, t..]·xp_{j mod s}[oh·sh + i,
//              t + j / s ..], in 8 partial sums (one per lane), added in lane order at the end
//   dX: for input row ih, the taps i with (ih + pad_top - i) = oh·sh, oh in range; for input
//       columns iw = u·s + p - pad_left (one phase p at a time), u a vector at a time,
//       dx[ih, iw] = Σ_i Σ_m w[i, p + m·s]·gp[oh, u - m + M]
// Channels run in parallel, each in its own slice and over the images in order, so the result
// does not depend on the thread count. (A vector past the last column computes lanes that are not
// stored; the dy plane is zero there, so they add nothing to dW.)

constexpr int64_t kPlaneLanes = Conv2dGeometry::kPlaneLanes;
static_assert(kPlaneLanes == kVec8Lanes);
// The first n (< L where a row ends) lanes of v to p[l·stride], added to what is there when
// `add`.
template <int L = kPlaneLanes>
inline void put(float* p, int64_t stride, typename Vec<L>::T v, int64_t n, bool add) {
    float lanes[L];
    Vec<L>::store(lanes, v);
    for (int64_t l = 0; l < n; ++l) p[l * stride] = add ? p[l * stride] + lanes[l] : lanes[l];
}

// x's plane [h, w] into the padded input planes at (pad_top, pad_left), split into column phases:
// padded column q = iw + pad_left goes to phase q mod s, column q / s. One strided copy per
// phase and row (a division per element cost more than the convolution), with the stride S a
// constant where it is 1 or 2 (0: the geometry's), so that the copies vectorise: as a call to
// memmove per row (stride 1) or a float at a time (stride 2) they took a fifth of the padded
// kernels' time on EfficientNet's and ConvNeXt's planes (2026-12-06).
template <int S>
void place_input(const float* __restrict x, const Conv2dGeometry& g, float* __restrict xp) {
    const int64_t ph = g.input_plane_h(), pw = g.input_plane_w(), s = S ? S : g.win.sw;
    const int64_t rows = std::min(g.h, ph - g.win.pad_top), q0 = g.win.pad_left;
    for (int64_t p = 0; p < s; ++p) {
        const int64_t iw0 = ((p - q0) % s + s) % s;  // the first column of phase p
        const int64_t col0 = (q0 + iw0) / s;
        const int64_t n = std::min((g.w - iw0 + s - 1) / s, pw - col0);
        if (iw0 >= g.w || n <= 0) continue;
        for (int64_t ih = 0; ih < rows; ++ih) {
            const float* __restrict src = x + ih * g.w + iw0;
            float* __restrict dst = xp + (p * ph + ih + g.win.pad_top) * pw + col0;
            for (int64_t k = 0; k < n; ++k) dst[k] = src[k * s];
        }
    }
}

// Tap j's offset in the input planes: its phase plane (j mod s), then its column (j / s);
// folded to constants when the stride S is one (then no phases: the offset is j) or two.
template <int KW, int S>
struct TapOffsets {
    int64_t at[KW];
    TapOffsets(int64_t s, int64_t phase_floats) {
        for (int j = 0; j < KW; ++j) at[j] = (j % s) * phase_floats + j / s;
    }
    int64_t operator()(int j) const {
        if constexpr (S == 1) return j;
        return at[j];
    }
};

// Output vectors computed at once, each its own chain of multiply-adds: one vector at a time
// ran at the multiply-add's latency (4 cycles a tap), a quarter of the machine's rate and 0.18
// of the roofline on ConvNeXt's 7×7s (an Intel Xeon, 2026-12-06). Each vector still sums its
// taps in the same order, so the chains change no bit.
constexpr int kChains = 8;

// The output vectors [v0, min(v0 + kChains, end)) of a plane of `per_row` vectors a row (the
// last one repeated to make kChains, computed and not stored): their row and first column.
struct ChainGroup {
    int64_t count, row[kChains], col[kChains];
    ChainGroup(int64_t v0, int64_t end, int64_t per_row, int64_t lanes = kPlaneLanes)
        : count(std::min<int64_t>(kChains, end - v0)) {
        for (int q = 0; q < kChains; ++q) {
            const int64_t v = v0 + std::min<int64_t>(q, count - 1);
            row[q] = v / per_row;
            col[q] = v % per_row * lanes;
        }
    }
};

// S: the stride across when it is 1 or 2 (a constant, so the tap loops unroll); 0 for others.
// L = 16 (AVX-512, where a row is an even number of 8-float vectors): each pair of a row's
// vectors as one, its lanes summing the same terms in the same order (the same bits) with half
// the instructions: ConvNeXt's 7×7 on 16×16 planes 90-91 → 76-77 µs forward, EfficientNet's 3×3
// on 144 of them 45-46 → 34-36 (one thread, 2026-12-06).
template <int KW, int S, int L = kPlaneLanes>
void padded_forward(const float* x, const float* wt, const float* b, const Conv2dGeometry& g,
                    float* y, float* ws) {
    using V = Vec<L>;
    const int64_t kh = g.win.kh, sh = g.win.sh, s = S ? S : g.win.sw, plane = g.oh * g.ow;
    const int64_t ph = g.input_plane_h(), pw = g.input_plane_w();
    const int64_t per_row = g.whole_lanes(g.ow) / L, total = g.oh * per_row;
    parallel_for(g.c, g.n * plane * kh * KW, [&](int64_t c) {
        float* xp = ws + c * g.depthwise_plane_floats(false);
        std::fill(xp, xp + g.input_planes_floats(), 0.0f);
        const float* k = wt + c * kh * KW;
        const float bias = b ? b[c] : 0.0f;
        const TapOffsets<KW, S> tap_at(s, ph * pw);
        for (int64_t n = 0; n < g.n; ++n) {
            place_input<S>(x + (n * g.c + c) * g.h * g.w, g, xp);
            float* yc = y + (n * g.c + c) * plane;
            for (int64_t v0 = 0; v0 < total; v0 += kChains) {
                const ChainGroup cg(v0, total, per_row, L);
                const float* base[kChains];
                typename V::T acc[kChains];
                for (int q = 0; q < kChains; ++q) {
                    base[q] = xp + cg.row[q] * sh * pw + cg.col[q];
                    acc[q] = typename V::T{} + bias;
                }
                for (int64_t i = 0; i < kh; ++i)
                    for (int j = 0; j < KW; ++j) {
                        const float kv = k[i * KW + j];
                        const int64_t off = i * pw + tap_at(j);
                        for (int q = 0; q < kChains; ++q) acc[q] += kv * V::load(base[q] + off);
                    }
                for (int64_t q = 0; q < cg.count; ++q)
                    put<L>(yc + cg.row[q] * g.ow + cg.col[q], 1, acc[q],
                           std::min<int64_t>(L, g.ow - cg.col[q]), false);
            }
        }
    });
}

// A row of zeros: the output-gradient rows that no input row reaches through a tap row (above
// and below the plane, or between its rows at a stride down), for dx_rows. The padded planes
// apply where the output-gradient plane's rows fit in it (Conv2dGeometry::planes_apply).
alignas(64) constexpr float kZeroRow[Conv2dGeometry::kPlaneMaxGradWidth] = {};

// The input gradient of one channel's plane, phase p of its columns (iw = u·s + p - pad_left,
// one phase at stride 1), R = kChains / T input rows and T vectors of u of each at a time, from
// u0: kChains chains of multiply-adds that share each tap's weight. Input row ih gets tap row i
// from output row (ih + pad_top - i) / sh where that divides and lies in the plane, and reads a
// row of zeros otherwise, so every row takes every tap row: each element sums the taps (i, j) in
// order, with ±0 terms where no output row reaches it (as the plane's zero columns already give
// across), which leave the sum as it was (for finite weights: an infinite one makes them NaN). One
// vector at a time, each with its own list of tap rows, ran at the multiply-add's latency
// (ConvNeXt's 7×7 on 16×16 planes: 253 µs backward, 208 with chains at stride 1;
// docs/benchmarks.md).
//
// L = 16 (AVX-512; T = 1): one vector of 16 columns where dx_rows<KW, S, 2> would take two of 8
// from u0, the same lanes summing the same terms in the same order (the same bits), with
// kChains rows and half the instructions: ConvNeXt's 7×7 on 16×16 planes 214-222 → 184-191 µs
// backward, a 3×3 on 96 of them 66-68 → 57-63 (one thread, 2026-12-06).
template <int KW, int S, int T, int L = kPlaneLanes>
void dx_rows(const float* k, const float* gp, int64_t gw, int64_t m_max, const Conv2dGeometry& g,
             int64_t p, Span u_span, int64_t u0, float* dxc, bool accumulate) {
    using V = Vec<L>;
    constexpr int R = kChains / T;
    const int64_t kh = g.win.kh, sh = g.win.sh, pt = g.win.pad_top, s = S ? S : g.win.sw;
    const int64_t last = u_span.lo + (u_span.hi - u_span.lo - 1) / kPlaneLanes * kPlaneLanes;
    int64_t u[T];
    for (int t = 0; t < T; ++t) u[t] = std::min(u0 + t * L, last);
    auto row_at = [&](int64_t ih, int64_t i) {
        const int64_t from = ih + pt - i;
        int64_t oh = from;
        if (sh == 2) {  // (no division at stride 1 or 2: one per row and tap row cost more)
            if (from & 1) return kZeroRow + m_max;
            oh = from >> 1;
        } else if (sh != 1) {
            if (from % sh != 0) return kZeroRow + m_max;
            oh = from / sh;
        }
        return from >= 0 && oh < g.oh ? gp + oh * gw + m_max : kZeroRow + m_max;
    };
    for (int64_t ih0 = 0; ih0 < g.h; ih0 += R) {
        typename V::T acc[R][T];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[r][t] = typename V::T{};
        for (int64_t i = 0; i < kh; ++i) {
            const float* rows[R];
            for (int r = 0; r < R; ++r) rows[r] = row_at(std::min(ih0 + r, g.h - 1), i);
            for (int64_t j = p, m = 0; j < KW; j += s, ++m) {
                const float kv = k[i * KW + j];
                for (int r = 0; r < R; ++r)
                    for (int t = 0; t < T; ++t) acc[r][t] += kv * V::load(rows[r] + u[t] - m);
            }
        }
        for (int64_t r = 0; r < std::min<int64_t>(R, g.h - ih0); ++r)
            for (int t = 0; t < T; ++t)
                if (u0 + t * L < u_span.hi)
                    put<L>(dxc + (ih0 + r) * g.w + u[t] * s + p - g.win.pad_left, s, acc[r][t],
                           std::min<int64_t>(L, u_span.hi - u[t]), accumulate);
    }
}

template <int KW, int S>
void padded_backward(const float* x, const float* dy, const float* wt, const Conv2dGeometry& g,
                     float* dw, float* dx, bool accumulate, float* ws) {
    const int64_t kh = g.win.kh, sh = g.win.sh, s = S ? S : g.win.sw, taps = kh * KW;
    const int64_t plane = g.oh * g.ow, ph = g.input_plane_h(), pw = g.input_plane_w();
    const int64_t gw = g.grad_plane_w(), owv = g.whole_lanes(g.ow), m_max = (KW - 1) / s;
    parallel_for(g.c, g.n * plane * taps * 2, [&](int64_t c) {
        float* xp = ws + c * g.depthwise_plane_floats(true);
        float* gp = xp + g.input_planes_floats();
        float* lanes = gp + g.oh * gw;
        std::fill(xp, xp + g.input_planes_floats(), 0.0f);
        std::fill(gp, gp + g.oh * gw, 0.0f);
        std::fill(lanes, lanes + taps * kPlaneLanes, 0.0f);
        const float* k = wt + c * taps;
        const TapOffsets<KW, S> tap_at(s, ph * pw);
        for (int64_t n = 0; n < g.n; ++n) {
            const int64_t at = n * g.c + c;
            for (int64_t oh = 0; oh < g.oh; ++oh) {
                const float* __restrict from = dy + at * plane + oh * g.ow;
                float* __restrict to = gp + oh * gw + m_max;
                for (int64_t t = 0; t < g.ow; ++t) to[t] = from[t];
            }
            if (dw) {
                place_input<S>(x + at * g.h * g.w, g, xp);
#if defined(__AVX512F__)
                // Rows of whole 16-float vectors: a 16-lane sum per tap over the image, folded
                // into the 8 lanes after it (lane l + lane l + 8), so that each tap's chain is
                // half as long (the chains waited on the multiply-add's latency).
                if (owv % kVec16Lanes == 0) {
                    using V = Vec<kVec16Lanes>;
                    for (int64_t i = 0; i < kh; ++i) {
                        V16 acc[KW];
                        for (int j = 0; j < KW; ++j) acc[j] = V16{};
                        for (int64_t oh = 0; oh < g.oh; ++oh) {
                            const float* grow = gp + oh * gw + m_max;
                            const float* xrow = xp + (oh * sh + i) * pw;
                            for (int64_t t = 0; t < owv; t += kVec16Lanes) {
                                const V16 d = V::load(grow + t);
                                for (int j = 0; j < KW; ++j)
                                    acc[j] += d * V::load(xrow + t + tap_at(j));
                            }
                        }
                        for (int j = 0; j < KW; ++j) {
                            float* l8 = lanes + (i * KW + j) * kPlaneLanes;
                            const V8 lo = __builtin_shufflevector(acc[j], acc[j], 0, 1, 2, 3, 4, 5,
                                                                  6, 7),
                                     hi = __builtin_shufflevector(acc[j], acc[j], 8, 9, 10, 11, 12,
                                                                  13, 14, 15);
                            store8(l8, load8(l8) + (lo + hi));
                        }
                    }
                } else
#endif
                    for (int64_t i = 0; i < kh; ++i) {
                        V8 acc[KW];
                        for (int j = 0; j < KW; ++j)
                            acc[j] = load8(lanes + (i * KW + j) * kPlaneLanes);
                        for (int64_t oh = 0; oh < g.oh; ++oh) {
                            const float* grow = gp + oh * gw + m_max;
                            const float* xrow = xp + (oh * sh + i) * pw;
                            for (int64_t t = 0; t < owv; t += kPlaneLanes) {
                                const V8 d = load8(grow + t);
                                for (int j = 0; j < KW; ++j)
                                    acc[j] += d * load8(xrow + t + tap_at(j));
                            }
                        }
                        for (int j = 0; j < KW; ++j)
                            store8(lanes + (i * KW + j) * kPlaneLanes, acc[j]);
                    }
            }
            if (!dx) continue;
            float* dxc = dx + at * g.h * g.w;
            for (int64_t p = 0; p < s; ++p) {
                // Input columns iw = u·s + p - pad_left for u in [u_lo, u_hi).
                const int64_t last = g.w - 1 + g.win.pad_left - p;
                if (last < 0) continue;
                const Span us{(g.win.pad_left - p + s - 1) / s, last / s + 1};
                if (us.hi <= us.lo) continue;
                if (us.hi - us.lo <= kPlaneLanes) {
                    dx_rows<KW, S, 1>(k, gp, gw, m_max, g, p, us, us.lo, dxc, accumulate);
                    continue;
                }
                for (int64_t u0 = us.lo; u0 < us.hi; u0 += 2 * kPlaneLanes) {
#if defined(__AVX512F__)
                    const int64_t last_u = us.lo + (us.hi - us.lo - 1) / kPlaneLanes * kPlaneLanes;
                    if (u0 + kPlaneLanes <= last_u) {  // the two would be u0 and u0 + 8: one
                        dx_rows<KW, S, 1, kVec16Lanes>(k, gp, gw, m_max, g, p, us, u0, dxc,
                                                       accumulate);
                        continue;
                    }
#endif
                    dx_rows<KW, S, 2>(k, gp, gw, m_max, g, p, us, u0, dxc, accumulate);
                }
            }
        }
        if (dw)
            for (int64_t tap = 0; tap < taps; ++tap) {
                float sum = 0;
                for (int64_t l = 0; l < kPlaneLanes; ++l) sum += lanes[tap * kPlaneLanes + l];
                dw[c * taps + tap] = sum;
            }
    });
}

// Calls f(KW, S) with the kernel width and the stride across (1, 2, or 0 for others) as
// compile-time constants: the tap loops unroll.
template <class F>
void with_plane_constants(const Conv2dGeometry& g, F&& f) {
    auto by_stride = [&](auto kw) {
        using std::integral_constant;
        if (g.win.sw == 1) return f(kw, integral_constant<int, 1>{});
        if (g.win.sw == 2) return f(kw, integral_constant<int, 2>{});
        f(kw, integral_constant<int, 0>{});
    };
    if (g.win.kw == 3) by_stride(std::integral_constant<int, 3>{});
    if (g.win.kw == 5) by_stride(std::integral_constant<int, 5>{});
    if (g.win.kw == 7) by_stride(std::integral_constant<int, 7>{});
}

void depthwise_padded_forward(const float* x, const float* wt, const float* b,
                              const Conv2dGeometry& g, float* y, float* ws) {
    with_plane_constants(g, [&](auto kw, auto s) {
        constexpr int KW = decltype(kw)::value, S = decltype(s)::value;
#if defined(__AVX512F__)
        if (g.whole_lanes(g.ow) % kVec16Lanes == 0) {
            padded_forward<KW, S, kVec16Lanes>(x, wt, b, g, y, ws);
            return;
        }
#endif
        padded_forward<KW, S>(x, wt, b, g, y, ws);
    });
}

void depthwise_padded_backward(const float* x, const float* dy, const float* wt,
                               const Conv2dGeometry& g, float* dw, float* dx, bool accumulate,
                               float* ws) {
    with_plane_constants(g, [&](auto kw, auto s) {
        padded_backward<decltype(kw)::value, decltype(s)::value>(x, dy, wt, g, dw, dx, accumulate,
                                                                 ws);
    });
}

}  // namespace

void conv2d_forward(const ForwardCall& c) {
    const Conv2dGeometry g = conv2d_geometry(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    const float* wt = c.params[0];
    const float* b = g.bias ? c.params[1] : nullptr;
    float* y = as_f32(c.output);
    if (g.depthwise_blocked()) {
        depthwise_blocked_forward(x, wt, b, g, y, as_f32(c.workspace));
        return;
    }
    if (g.depthwise_padded()) {
        depthwise_padded_forward(x, wt, b, g, y, as_f32(c.workspace));
        return;
    }
    if (g.depthwise()) {
        depthwise_forward(x, wt, b, g, y);
        return;
    }
    if (g.grouped_direct()) {
        grouped_direct_forward(x, wt, b, g, y, as_f32(c.workspace));
        return;
    }
    if (g.linear_like()) {  // Y [N, O] = X [N, C] · Wᵀ (+ b)
        linear_products_forward(x, wt, b, g.n, g.c, g.out_c, y);
        return;
    }
    const int64_t plane = g.oh * g.ow, cg = g.c_per_group(), og = g.out_per_group();
    const int64_t k = g.patch(), nb = g.images_per_gemm(), image = g.c * g.h * g.w;
    const bool patches = g.patches();
    float* col = as_f32(c.workspace);
    float* yt = col + k * nb * plane;  // the chunk's outputs, when images are batched
    for (int64_t n0 = 0; n0 < g.n; n0 += nb) {
        const int64_t m = std::min(nb, g.n - n0), ld = m * plane;
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            const float* xg = x + n0 * image + gi * cg * g.h * g.w;
            float* yg = y + (n0 * g.out_c + gi * og) * plane;
            float* out = nb > 1 ? yt : yg;
            if (b)  // seed with the bias; the GEMM adds into it
                for (int64_t o = 0; o < og; ++o)
                    std::fill(out + o * ld, out + (o + 1) * ld, b[gi * og + o]);
            if (patches) {  // Y = W·Pᵀ
                gather_patches(xg, g, m, col);
                sgemm(false, true, og, ld, k, 1.f, wt, k, col, k, b ? 1.f : 0.f, out, ld);
            } else {  // Y = W·cols
                const float* cols = chunk_columns(xg, g, m, col);
                columns_product(false, og, ld, k, wt + gi * og * k, k, cols, ld, b ? 1.f : 0.f, out,
                                ld);
            }
            if (nb > 1) scatter_images(yt, og, plane, m, yg, g.out_c * plane, false);
        }
    }
}

void conv2d_backward(const BackwardCall& c) {
    const Conv2dGeometry g = conv2d_geometry(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    const float* wt = c.params[0];
    const float* dy = c.grad_output;
    float* dx = c.grad_inputs[0];
    const bool acc = c.accumulate[0];
    float* dw = c.grad_params[0];
    float* db = g.bias ? c.grad_params[1] : nullptr;
    if (db) channel_sums(dy, g, db);
    if (g.depthwise_blocked()) {
        if (dw || dx) depthwise_blocked_backward(x, dy, wt, g, dw, dx, acc, as_f32(c.workspace));
        return;
    }
    if (g.depthwise_padded()) {
        if (dw || dx) depthwise_padded_backward(x, dy, wt, g, dw, dx, acc, as_f32(c.workspace));
        return;
    }
    if (g.depthwise()) {
        if (dw) depthwise_backward_weight(x, dy, g, dw);
        if (dx) depthwise_backward_input(dy, wt, g, dx, acc);
        return;
    }
    if (g.grouped_direct()) {
        if (dw || dx) grouped_direct_backward(x, dy, wt, g, dw, dx, acc, as_f32(c.workspace));
        return;
    }
    if (g.linear_like()) {  // dX (+)= dY·W [N, C], dW = dYᵀ·X [O, C]
        linear_products_backward(x, wt, dy, g.n, g.c, g.out_c, dx, acc, dw);
        return;
    }
    const int64_t plane = g.oh * g.ow, cg = g.c_per_group(), og = g.out_per_group();
    const int64_t k = g.patch(), nb = g.images_per_gemm(), image = g.c * g.h * g.w;
    const bool patches = g.patches();
    float* col = as_f32(c.workspace);
    float* dyt = col + k * nb * plane;  // the chunk's output gradients, when images are batched
    for (int64_t n0 = 0; n0 < g.n; n0 += nb) {
        const int64_t m = std::min(nb, g.n - n0), ld = m * plane;
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            const float* xg = x + n0 * image + gi * cg * g.h * g.w;
            const float* dyg = dy + (n0 * g.out_c + gi * og) * plane;
            if (nb > 1) {
                gather_images(dyg, g.out_c * plane, og, plane, m, dyt);
                dyg = dyt;
            }
            const float* wg = wt + gi * og * k;
            float* dxg = dx ? dx + n0 * image + gi * cg * g.h * g.w : nullptr;
            if (patches) {  // dW += dY·P; dP = dYᵀ·W, back to its windows
                if (dw) {
                    gather_patches(xg, g, m, col);
                    sgemm(false, false, og, k, ld, 1.f, dyg, ld, col, k, n0 > 0 ? 1.f : 0.f, dw, k);
                }
                if (dx) {
                    sgemm(true, false, ld, k, og, 1.f, dyg, ld, wg, k, 0.f, col, k);
                    scatter_patches(col, g, m, dxg, acc);
                }
                continue;
            }
            if (dw) {  // dW += dY·colsᵀ
                const float* cols = chunk_columns(xg, g, m, col);
                short_depth_or_gemm(false, true, og, k, ld, dyg, ld, cols, ld, n0 > 0 ? 1.f : 0.f,
                                    dw + gi * og * k, k);
            }
            if (!dx) continue;
            if (g.pointwise() && nb == 1) {  // dX = Wᵀ·dY (k == cg)
                columns_product(true, cg, plane, og, wg, k, dyg, plane, acc ? 1.f : 0.f, dxg,
                                plane);
            } else if (g.pointwise()) {  // the chunk's dX side by side, then back to its images
                columns_product(true, cg, ld, og, wg, k, dyg, ld, 0.f, col, ld);
                scatter_images(col, cg, plane, m, dxg, image, acc);
            } else if (g.input_grad_by_correlation()) {
                input_grad_by_correlation(dy + (n0 * g.out_c + gi * og) * plane, wg, g, m, dxg, acc,
                                          col);
            } else {  // cols = Wᵀ·dY, folded back image by image
                columns_product(true, k, ld, og, wg, k, dyg, ld, 0.f, col, ld);
                for (int64_t j = 0; j < m; ++j)
                    col2im(col + j * plane, ld, g, dxg + j * image, acc);
            }
        }
    }
}

}  // namespace rl::cpu
