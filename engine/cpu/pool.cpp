// maxpool2d, avgpool2d and upsample_nearest2d on NCHW float32: one (image, channel) plane per
// task, windows scanned in a fixed order, so the results do not depend on the thread count.
#include <algorithm>
#include <cstdint>

#include "engine/cpu/kernels.h"
#include "engine/ops/window.h"

namespace rl::cpu {
namespace {

// Calls tap(input index within the plane) for each tap of window (oh, ow) that lies inside the
// input, rows then columns.
template <class F>
void for_window(const Pool2dGeometry& g, int64_t oh, int64_t ow, F&& tap) {
    const Window2d& w = g.win;
    const int64_t h0 = oh * w.sh - w.pad_top, w0 = ow * w.sw - w.pad_left;
    for (int64_t i = 0; i < w.kh; ++i) {
        const int64_t ih = h0 + i * w.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t iw = w0 + j * w.dw;
            if (iw >= 0 && iw < g.w) tap(ih * g.w + iw);
        }
    }
}

// Max-pool's choice for output row oh, columns [c0, c0 + n): the first maximum of each window
// in scan order (rows, then columns) into bi (its index in the plane; -1 for a window of padding
// only) and bv (its value). Taps outer, columns inner: the columns are independent, so nothing
// chains through a running maximum. Scanning one window at a time was latency-bound (compare,
// select, compare … per tap) and ran at 2-3 % of max-pool's memory roofline (bench_roofline).
// Forward and backward share it, so the backward routes to the forward's choice.
constexpr int64_t kCols = 256;

void row_argmax(const float* xp, const Pool2dGeometry& g, int64_t oh, int64_t c0, int64_t n,
                float* __restrict bv, int64_t* __restrict bi) {
    // Locals, not g's fields: stores through bi could alias them, and GCC reloaded them per tap.
    const Window2d w = g.win;
    const int64_t width = g.w, height = g.h, outs = g.ow;
    std::fill(bi, bi + n, int64_t{-1});
    std::fill(bv, bv + n, 0.0f);
    for (int64_t i = 0; i < w.kh; ++i) {
        const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
        if (ih < 0 || ih >= height) continue;
        const float* __restrict xr = xp + ih * width;
        const int64_t base = ih * width;
        for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t off = j * w.dw - w.pad_left;
            const Span s = valid_span(off, w.sw, width, outs);
            const int64_t lo = std::max(s.lo, c0) - c0, hi = std::min(s.hi, c0 + n) - c0;
            const float* __restrict xs = xr + c0 * w.sw + off;  // column t's tap: xs[t·sw]
            const int64_t sw = w.sw, first = base + c0 * w.sw + off;
            for (int64_t t = lo; t < hi; ++t) {  // both sides loaded and stored: a blend
                const float v = xs[t * sw], cur = bv[t];
                const int64_t ci = bi[t];
                const bool take = (ci < 0) | (v > cur);
                bv[t] = take ? v : cur;
                bi[t] = take ? first + t * sw : ci;
            }
        }
    }
}

// avgpool's divisor: the taps inside the input, or with count_include_pad the taps inside the
// padded input.
float window_divisor(const Pool2dGeometry& g, int64_t oh, int64_t ow) {
    const Window2d& w = g.win;
    const int64_t lo_h = g.count_include_pad ? -w.pad_top : 0;
    const int64_t hi_h = g.count_include_pad ? g.h + w.pad_bottom : g.h;
    const int64_t lo_w = g.count_include_pad ? -w.pad_left : 0;
    const int64_t hi_w = g.count_include_pad ? g.w + w.pad_right : g.w;
    int64_t rows = 0, cols = 0;
    for (int64_t i = 0; i < w.kh; ++i) {
        const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
        rows += ih >= lo_h && ih < hi_h;
    }
    for (int64_t j = 0; j < w.kw; ++j) {
        const int64_t iw = ow * w.sw - w.pad_left + j * w.dw;
        cols += iw >= lo_w && iw < hi_w;
    }
    return static_cast<float>(rows * cols);
}

bool is_global(const Pool2dGeometry& g) {
    return g.oh == 1 && g.ow == 1 && g.win.kh == g.h && g.win.kw == g.w && g.win.pad_top == 0 &&
           g.win.pad_left == 0 && g.win.pad_bottom == 0 && g.win.pad_right == 0 && g.win.dh == 1 &&
           g.win.dw == 1;
}

}  // namespace

void maxpool2d_forward(const ForwardCall& c) {
    const Pool2dGeometry g = pool2d_geometry(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    parallel_for(g.n * g.c, out_plane * g.win.kh * g.win.kw, [&](int64_t q) {
        const float* xp = x + q * in_plane;
        float* yp = y + q * out_plane;
        float bv[kCols];
        int64_t bi[kCols];
        for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t c0 = 0; c0 < g.ow; c0 += kCols) {
                const int64_t n = std::min(kCols, g.ow - c0);
                row_argmax(xp, g, oh, c0, n, bv, bi);
                for (int64_t t = 0; t < n; ++t) yp[oh * g.ow + c0 + t] = bi[t] < 0 ? 0.0f : bv[t];
            }
    });
}

// Each output's gradient goes to the input its forward chose, outputs in (oh, ow) order, so
// overlapping windows add in a fixed order.
void maxpool2d_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Pool2dGeometry g = pool2d_geometry(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    parallel_for(g.n * g.c, out_plane * g.win.kh * g.win.kw, [&](int64_t q) {
        const float* xp = x + q * in_plane;
        const float* dyp = dy + q * out_plane;
        float* dxp = dx + q * in_plane;
        if (!acc) std::fill(dxp, dxp + in_plane, 0.0f);
        float bv[kCols];
        int64_t bi[kCols];
        for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t c0 = 0; c0 < g.ow; c0 += kCols) {
                const int64_t n = std::min(kCols, g.ow - c0);
                row_argmax(xp, g, oh, c0, n, bv, bi);
                for (int64_t t = 0; t < n; ++t)
                    if (bi[t] >= 0) dxp[bi[t]] += dyp[oh * g.ow + c0 + t];
            }
    });
}

void avgpool2d_forward(const ForwardCall& c) {
    const Pool2dGeometry g = pool2d_geometry(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    if (is_global(g)) {
        const float scale = 1.0f / static_cast<float>(in_plane);
        parallel_for(g.n * g.c, in_plane, [&](int64_t q) {
            y[q] = ConstArrMap(x + q * in_plane, in_plane).sum() * scale;
        });
        return;
    }
    parallel_for(g.n * g.c, out_plane * g.win.kh * g.win.kw, [&](int64_t q) {
        const float* xp = x + q * in_plane;
        float* yp = y + q * out_plane;
        for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
                float s = 0;
                for_window(g, oh, ow, [&](int64_t k) { s += xp[k]; });
                const float d = window_divisor(g, oh, ow);
                yp[oh * g.ow + ow] = d > 0 ? s / d : 0.0f;
            }
    });
}

void avgpool2d_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Pool2dGeometry g = pool2d_geometry(c.graph, c.node);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    if (is_global(g)) {
        const float scale = 1.0f / static_cast<float>(in_plane);
        parallel_for(g.n * g.c, in_plane, [&](int64_t q) {
            store(ArrMap(dx + q * in_plane, in_plane),
                  Eigen::ArrayXf::Constant(in_plane, dy[q] * scale), acc);
        });
        return;
    }
    parallel_for(g.n * g.c, out_plane * g.win.kh * g.win.kw, [&](int64_t q) {
        const float* dyp = dy + q * out_plane;
        float* dxp = dx + q * in_plane;
        if (!acc) std::fill(dxp, dxp + in_plane, 0.0f);
        for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
                const float d = window_divisor(g, oh, ow);
                if (d <= 0) continue;
                const float v = dyp[oh * g.ow + ow] / d;
                for_window(g, oh, ow, [&](int64_t k) { dxp[k] += v; });
            }
    });
}

namespace {

struct Upsample {
    int64_t planes, h, w, sh, sw;
};

Upsample upsample_dims(const Graph& graph, const Node& n) {
    const Shape& x = input_shape(graph, n, 0);
    const Shape& y = output_shape(graph, n);
    return {x[0] * x[1], x[2], x[3], y[2] / x[2], y[3] / x[3]};
}

}  // namespace

void upsample_nearest2d_forward(const ForwardCall& c) {
    const Upsample u = upsample_dims(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const int64_t ow = u.w * u.sw, out_plane = u.h * u.sh * ow;
    parallel_for(u.planes, out_plane, [&](int64_t q) {
        const float* xp = x + q * u.h * u.w;
        float* yp = y + q * out_plane;
        for (int64_t ih = 0; ih < u.h; ++ih) {
            float* row = yp + ih * u.sh * ow;
            for (int64_t iw = 0; iw < u.w; ++iw)
                std::fill(row + iw * u.sw, row + (iw + 1) * u.sw, xp[ih * u.w + iw]);
            for (int64_t a = 1; a < u.sh; ++a) std::copy(row, row + ow, row + a * ow);
        }
    });
}

// dX[ih, iw] = Σ of dY over its sh×sw block, rows then columns.
void upsample_nearest2d_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Upsample u = upsample_dims(c.graph, c.node);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    const int64_t ow = u.w * u.sw, out_plane = u.h * u.sh * ow;
    parallel_for(u.planes, out_plane, [&](int64_t q) {
        const float* dyp = dy + q * out_plane;
        float* dxp = dx + q * u.h * u.w;
        for (int64_t ih = 0; ih < u.h; ++ih)
            for (int64_t iw = 0; iw < u.w; ++iw) {
                float s = 0;
                for (int64_t a = 0; a < u.sh; ++a)
                    for (int64_t b = 0; b < u.sw; ++b)
                        s += dyp[(ih * u.sh + a) * ow + iw * u.sw + b];
                float& d = dxp[ih * u.w + iw];
                d = acc ? d + s : s;
            }
    });
}

}  // namespace rl::cpu
