// batchnorm (training mode) over axis 1 of [N, C, ...]: one channel per task, its N segments of
// `inner` contiguous elements summed in order (in double), so forward and backward compute
// bitwise the same statistics for any thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "engine/cpu/kernels.h"

namespace rl::cpu {
namespace {

struct Layout {
    int64_t n, c, inner;
    int64_t count() const { return n * inner; }  // elements per channel
};

Layout layout_of(const Shape& s) {
    int64_t inner = 1;
    for (int a = 2; a < s.rank(); ++a) inner *= s[a];
    return {s[0], s[1], inner};
}

struct ChannelStats {
    float mean, rstd;
};

// Calls f(segment map) for each of channel ch's N segments, in order.
template <class T, class F>
void for_segments(T* base, const Layout& l, int64_t ch, F&& f) {
    for (int64_t n = 0; n < l.n; ++n) f(base + (n * l.c + ch) * l.inner);
}

// Σ f(block) over a segment in blocks of kBlock floats: each block summed in float (vectorised,
// Eigen's packet tree), the blocks accumulated in double. Converting every element to double
// instead kept these loops at a fifth of the memory roofline (bench_roofline); a float block of
// 256 adds at most ~256·2⁻²⁴ relative error before the double takes over. The order is fixed,
// so the sums are bitwise the same every time.
constexpr int64_t kBlock = 256;

template <class F>
double blocked_sum(int64_t n, F&& block_sum) {
    double total = 0;
    for (int64_t s = 0; s < n; s += kBlock) total += block_sum(s, std::min(kBlock, n - s));
    return total;
}

// Eigen's reductions and expressions cost tens of nanoseconds each to set up, which on the 2×2
// and 4×4 planes of late stages (segments of 4 or 16 floats, thousands of channels) was most of
// the time: batchnorm ran at 0.04-0.05 of its memory roofline on EfficientNet's [2, 2112, 2, 2]
// (bench_roofline). Segments shorter than kShort go through plain loops, in element order.
constexpr int64_t kShort = 16;

// Σ p[i]
float sum_of(const float* p, int64_t n) {
    if (n >= kShort) return ConstArrMap(p, n).sum();
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += p[i];
    return s;
}
// Σ (p[i] - mean)²
float squared_deviations(const float* p, int64_t n, float mean) {
    if (n >= kShort) return (ConstArrMap(p, n) - mean).square().sum();
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += (p[i] - mean) * (p[i] - mean);
    return s;
}
// Σ dy[i]·(x[i] - mean)·rstd
float dot_xhat(const float* dy, const float* x, int64_t n, float mean, float rstd) {
    if (n >= kShort) return (ConstArrMap(dy, n) * ((ConstArrMap(x, n) - mean) * rstd)).sum();
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += dy[i] * ((x[i] - mean) * rstd);
    return s;
}

// Biased (population) variance, as training-mode batch norm normalises with: two passes (the
// mean, then the squared deviations from it), so a large mean does not cancel the variance away.
ChannelStats channel_stats(const float* x, const Layout& l, int64_t ch, double eps) {
    double sum = 0;
    for_segments(x, l, ch, [&](const float* s) {
        sum += blocked_sum(
            l.inner, [&](int64_t o, int64_t n) { return static_cast<double>(sum_of(s + o, n)); });
    });
    const double mean = sum / static_cast<double>(l.count());
    const float meanf = static_cast<float>(mean);
    double sq = 0;
    for_segments(x, l, ch, [&](const float* s) {
        sq += blocked_sum(l.inner, [&](int64_t o, int64_t n) {
            return static_cast<double>(squared_deviations(s + o, n, meanf));
        });
    });
    const double var = sq / static_cast<double>(l.count());
    return {meanf, static_cast<float>(1.0 / std::sqrt(var + eps))};
}

// Short segments (inner < kShort, the 2×2 and 4×4 planes of late stages): four channels'
// statistics at once, one per lane, each lane taking the steps channel_stats takes for a short
// segment (each segment summed in float in element order, the sums accumulated in double, the
// squared deviations from the float mean likewise), so the results are those of one code path
// for every channel, forward and backward alike. One channel at a time, its double square root
// and division (a chain of ~40 cycles) were most of the time: batchnorm ran at 0.07-0.09 of its
// memory roofline on EfficientNet's [2, 1152, 2, 2] (bench_roofline, 2026-12-05).
constexpr int64_t kStatLanes = 4;
using D4 = double __attribute__((vector_size(kStatLanes * sizeof(double))));
using F4 = float __attribute__((vector_size(kStatLanes * sizeof(float))));

// Channels [ch0, ch0 + lanes) of a short-segment group: where element i of segment n of lane k
// lies, and those elements of p as one vector (lanes past `lanes` 0).
struct ShortGroup {
    const Layout& l;
    int64_t ch0, lanes;
    int64_t at(int64_t n, int64_t k, int64_t i) const { return (n * l.c + ch0 + k) * l.inner + i; }
    F4 column(const float* p, int64_t n, int64_t i) const {
        F4 v = {};
        for (int64_t k = 0; k < lanes; ++k) v[k] = p[at(n, k, i)];
        return v;
    }
};

void short_channel_stats(const float* x, const ShortGroup& grp, double eps,
                         ChannelStats out[kStatLanes]) {
    const Layout& l = grp.l;
    auto column = [&](int64_t n, int64_t i) { return grp.column(x, n, i); };
    const double count = static_cast<double>(l.count());
    D4 sum = {};
    for (int64_t n = 0; n < l.n; ++n) {
        F4 s = {};
        for (int64_t i = 0; i < l.inner; ++i) s += column(n, i);
        sum += __builtin_convertvector(s, D4);
    }
    const F4 mean = __builtin_convertvector(sum / count, F4);
    D4 sq = {};
    for (int64_t n = 0; n < l.n; ++n) {
        F4 s = {};
        for (int64_t i = 0; i < l.inner; ++i) {
            const F4 d = column(n, i) - mean;
            s += d * d;
        }
        sq += __builtin_convertvector(s, D4);
    }
    const D4 var = sq / count + eps;
    D4 root;
#if defined(__AVX__)
    __m256d r;
    std::memcpy(&r, &var, sizeof r);
    r = _mm256_sqrt_pd(r);
    std::memcpy(&root, &r, sizeof root);
#else
    for (int64_t k = 0; k < kStatLanes; ++k) root[k] = std::sqrt(var[k]);
#endif
    const F4 rstd = __builtin_convertvector(1.0 / root, F4);
    for (int64_t k = 0; k < grp.lanes; ++k) out[k] = {mean[k], rstd[k]};
}

// The backward of four channels of short segments at once, lane by lane as batchnorm_backward
// does it for one channel (Σ dY and Σ dY·x̂ summed in float per segment, in element order, and
// accumulated in double; then dX); st holds the four channels' statistics.
void short_backward(const float* x, const float* dy, const float* w, const ShortGroup& grp,
                    const ChannelStats st[kStatLanes], float* dw, float* db, float* dx, bool acc) {
    const Layout& l = grp.l;
    const int64_t ch0 = grp.ch0, lanes = grp.lanes;
    F4 mean = {}, rstd = {}, wk = {};
    for (int64_t k = 0; k < lanes; ++k) {
        mean[k] = st[k].mean;
        rstd[k] = st[k].rstd;
        wk[k] = w[ch0 + k];
    }
    D4 sum_dy = {}, sum_dy_xhat = {};
    for (int64_t n = 0; n < l.n; ++n) {
        F4 s = {}, t = {};
        for (int64_t i = 0; i < l.inner; ++i) {
            const F4 g = grp.column(dy, n, i);
            s += g;
            t += g * ((grp.column(x, n, i) - mean) * rstd);
        }
        sum_dy += __builtin_convertvector(s, D4);
        sum_dy_xhat += __builtin_convertvector(t, D4);
    }
    const F4 dwv = __builtin_convertvector(sum_dy_xhat, F4);
    const F4 dbv = __builtin_convertvector(sum_dy, F4);
    for (int64_t k = 0; k < lanes; ++k) {
        if (dw) dw[ch0 + k] = dwv[k];
        if (db) db[ch0 + k] = dbv[k];
    }
    if (!dx) return;
    const double m = static_cast<double>(l.count());
    const F4 mean_dy = __builtin_convertvector(sum_dy / m, F4);
    const F4 mean_dy_xhat = __builtin_convertvector(sum_dy_xhat / m, F4);
    const F4 scale = wk * rstd;
    for (int64_t n = 0; n < l.n; ++n)
        for (int64_t i = 0; i < l.inner; ++i) {
            const F4 v = scale * (grp.column(dy, n, i) - mean_dy -
                                  ((grp.column(x, n, i) - mean) * rstd) * mean_dy_xhat);
            for (int64_t k = 0; k < lanes; ++k) {
                float& d = dx[grp.at(n, k, i)];
                d = acc ? d + v[k] : v[k];
            }
        }
}

// Short segments: calls body(group, its channels' stats) for every group of four channels, in
// parallel.
template <class F>
void for_short_groups(const float* x, const Layout& l, double eps, int64_t work_per_channel,
                      F&& body) {
    parallel_for(
        (l.c + kStatLanes - 1) / kStatLanes, kStatLanes * work_per_channel, [&](int64_t g) {
            const ShortGroup grp{l, g * kStatLanes, std::min(kStatLanes, l.c - g * kStatLanes)};
            ChannelStats st[kStatLanes];
            short_channel_stats(x, grp, eps, st);
            body(grp, st);
        });
}

// Calls body(ch, stats of ch) for every channel, in parallel: channels one at a time where
// segments are long, four at a time (short_channel_stats) where they are short.
template <class F>
void for_channels(const float* x, const Layout& l, double eps, int64_t work_per_channel, F&& body) {
    if (l.inner >= kShort) {
        parallel_for(l.c, work_per_channel,
                     [&](int64_t ch) { body(ch, channel_stats(x, l, ch, eps)); });
        return;
    }
    for_short_groups(x, l, eps, work_per_channel,
                     [&](const ShortGroup& grp, const ChannelStats* st) {
                         for (int64_t k = 0; k < grp.lanes; ++k) body(grp.ch0 + k, st[k]);
                     });
}

}  // namespace

void batchnorm_forward(const ForwardCall& c) {
    const Layout l = layout_of(input_shape(c.graph, c.node, 0));
    const double eps = c.node.attrs.get_float("eps", 1e-5);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const float* w = c.params[0];
    const float* b = c.params[1];
    for_channels(x, l, eps, 2 * l.count(), [&](int64_t ch, const ChannelStats& st) {
        const float scale = st.rstd * w[ch], shift = b[ch] - st.mean * scale;
        for (int64_t n = 0; n < l.n; ++n) {
            const int64_t off = (n * l.c + ch) * l.inner;
            if (l.inner < kShort) {
                for (int64_t i = off; i < off + l.inner; ++i) y[i] = x[i] * scale + shift;
                continue;
            }
            ArrMap(y + off, l.inner) = ConstArrMap(x + off, l.inner) * scale + shift;
        }
    });
}

// x̂ = (x - mean)·rstd over the M = N·inner elements of a channel:
//   dbias = Σ dY,  dweight = Σ dY·x̂,  dX = w·rstd·(dY - dbias/M - x̂·dweight/M).
void batchnorm_backward(const BackwardCall& c) {
    const Layout l = layout_of(input_shape(c.graph, c.node, 0));
    const double eps = c.node.attrs.get_float("eps", 1e-5);
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    const float* w = c.params[0];
    float* dx = c.grad_inputs[0];
    const bool acc = c.accumulate[0];
    float* dw = c.grad_params[0];
    float* db = c.grad_params[1];
    if (l.inner < kShort) {
        for_short_groups(x, l, eps, 4 * l.count(),
                         [&](const ShortGroup& grp, const ChannelStats* st) {
                             short_backward(x, dy, w, grp, st, dw, db, dx, acc);
                         });
        return;
    }
    for_channels(x, l, eps, 4 * l.count(), [&](int64_t ch, const ChannelStats& st) {
        double sum_dy = 0, sum_dy_xhat = 0;
        for (int64_t n = 0; n < l.n; ++n) {
            const int64_t off = (n * l.c + ch) * l.inner;
            sum_dy += blocked_sum(l.inner, [&](int64_t o, int64_t k) {
                return static_cast<double>(sum_of(dy + off + o, k));
            });
            sum_dy_xhat += blocked_sum(l.inner, [&](int64_t o, int64_t k) {
                return static_cast<double>(
                    dot_xhat(dy + off + o, x + off + o, k, st.mean, st.rstd));
            });
        }
        if (dw) dw[ch] = static_cast<float>(sum_dy_xhat);
        if (db) db[ch] = static_cast<float>(sum_dy);
        if (!dx) return;
        const double m = static_cast<double>(l.count());
        const float mean_dy = static_cast<float>(sum_dy / m);
        const float mean_dy_xhat = static_cast<float>(sum_dy_xhat / m);
        const float k = w[ch] * st.rstd;
        for (int64_t n = 0; n < l.n; ++n) {
            const int64_t off = (n * l.c + ch) * l.inner;
            const auto xhat = (ConstArrMap(x + off, l.inner) - st.mean) * st.rstd;
            store(ArrMap(dx + off, l.inner),
                  k * (ConstArrMap(dy + off, l.inner) - mean_dy - xhat * mean_dy_xhat), acc);
        }
    });
}

}  // namespace rl::cpu
