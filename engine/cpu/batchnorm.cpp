// batchnorm (training mode) over axis 1 of [N, C, ...]: one channel per task where its N segments
// of `inner` contiguous elements are long, 16 channels per task (one per vector lane) where they
// are short; either way each channel's segments are summed in a fixed order (in double), so
// forward and backward compute bitwise the same statistics for any thread count.
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

// Eigen's reductions and expressions cost tens of nanoseconds each to set up, and a channel's
// statistics end in a double square root and division (a chain of ~40 cycles): on the 2×2, 4×4
// and 5×5 planes of late stages (segments of 4 to 25 floats, hundreds of channels) that was most
// of the time. Segments shorter than kShort take 16 channels at once, one per vector lane
// (LaneBlocks below); longer ones one channel at a time, where blocks shorter than kPlainLoop (a
// segment's tail) go through plain loops, in element order. Segments of 16 to 31 floats (4×4 and
// 5×5 planes) were summed by Eigen's packet tree before 2026-12-06 and are summed in element
// order since, so their gradients' last bits moved then; below 16 they did not.
constexpr int64_t kShort = 32;
constexpr int64_t kPlainLoop = 16;

// Σ p[i]
float sum_of(const float* p, int64_t n) {
    if (n >= kPlainLoop) return ConstArrMap(p, n).sum();
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += p[i];
    return s;
}
// Σ (p[i] - mean)²
float squared_deviations(const float* p, int64_t n, float mean) {
    if (n >= kPlainLoop) return (ConstArrMap(p, n) - mean).square().sum();
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += (p[i] - mean) * (p[i] - mean);
    return s;
}
// Σ dy[i]·(x[i] - mean)·rstd
float dot_xhat(const float* dy, const float* x, int64_t n, float mean, float rstd) {
    if (n >= kPlainLoop) return (ConstArrMap(dy, n) * ((ConstArrMap(x, n) - mean) * rstd)).sum();
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

// Short segments (inner < kShort): 16 channels at once, one per lane of a vector, through
// channels-last blocks (planes_to_lanes: the 16 channels' segments of one image, transposed). Each
// lane takes the steps that the 4-lane code before it took (2026-12-05, and the same bits where
// segments are shorter than 16): each segment summed in float in element order, the sums
// accumulated in double over the images, the mean rounded to float, the squared deviations from
// it likewise, then the double square root and division, so forward and backward compute the same
// statistics. 16 lanes rather than 4 because each lane's element was gathered one float at a
// time, and the square roots and divisions are whole vectors now.
// The per-position loops work on LaneVectors (kernels.h): the 16 lanes as the machine's vectors
// (one on AVX-512, two of 8 on AVX2), the same operation per lane, and the sums over positions one
// machine vector at a time. The statistics per image are Doubles, four vectors of 4. As 16-lane
// GCC vectors, GCC kept an AVX2 build's running sums in memory (a store and a load per position)
// and converted floats to doubles one at a time: batch norm ran at half the speed of the code
// before the lanes (DenseNet-121's backward 2.5 → 3.8 ms).
using FV = LaneVectors::V;
inline FV load_part(const float* p, int h) {
    return Vec<kLaneVectorWidth>::load(p + h * kLaneVectorWidth);
}
template <class Op>
inline LaneVectors each(const LaneVectors& a, const LaneVectors& b, Op op) {
    LaneVectors r;
    for (int h = 0; h < kLaneVectors; ++h) r.part[h] = op(a.part[h], b.part[h]);
    return r;
}
inline LaneVectors operator+(const LaneVectors& a, const LaneVectors& b) {
    return each(a, b, [](FV x, FV y) { return x + y; });
}
inline LaneVectors operator-(const LaneVectors& a, const LaneVectors& b) {
    return each(a, b, [](FV x, FV y) { return x - y; });
}
inline LaneVectors operator*(const LaneVectors& a, const LaneVectors& b) {
    return each(a, b, [](FV x, FV y) { return x * y; });
}
struct Doubles {
    D4 q[kPlaneLanes / 4];
    Doubles& operator+=(const Doubles& b) {
        for (int k = 0; k < kPlaneLanes / 4; ++k) q[k] += b.q[k];
        return *this;
    }
    template <class Op>
    Doubles map(Op op) const {
        Doubles r;
        for (int k = 0; k < kPlaneLanes / 4; ++k) r.q[k] = op(q[k]);
        return r;
    }
};
// Float lanes as doubles (exact), and doubles rounded to float, lane by lane.
inline Doubles widen(const LaneVectors& a) {
    alignas(64) float f[kPlaneLanes];
    a.store(f);
    Doubles d;
    for (int k = 0; k < kPlaneLanes / 4; ++k) {
        F4 v;
        std::memcpy(&v, f + 4 * k, sizeof v);
        d.q[k] = __builtin_convertvector(v, D4);
    }
    return d;
}
inline void narrow(const Doubles& d, float* f) {
    for (int k = 0; k < kPlaneLanes / 4; ++k) {
        const F4 v = __builtin_convertvector(d.q[k], F4);
        std::memcpy(f + 4 * k, &v, sizeof v);
    }
}
inline LaneVectors narrow(const Doubles& d) {
    alignas(64) float f[kPlaneLanes];
    narrow(d, f);
    return LaneVectors::load(f);
}

// One tensor's channels [ch0, ch0 + 16) of a group, channels-last (lanes past c are zero and
// not written back). Where all images' segments fit (N·inner ≤ kCachedPositions) they are
// transposed once and kept, which the statistics' two passes, the forward's and the backward's
// read again: on 2×2 planes a transpose of 16 × 4 floats costs more than the arithmetic on it.
// Otherwise image n is transposed again at each pass.
constexpr int64_t kCachedPositions = 256;

class LaneBlocks {
  public:
    LaneBlocks(const Layout& l, int64_t ch0, const float* src)
        : l_(l), ch0_(ch0), src_(src), cached_(l.n * l.inner <= kCachedPositions) {
        if (cached_)
            for (int64_t n = 0; n < l.n; ++n) load(n, buf_ + n * l.inner * kPlaneLanes);
    }
    // Image n's segments: element i of lane k at [i·16 + k].
    const float* image(int64_t n) {
        if (cached_) return buf_ + n * l_.inner * kPlaneLanes;
        load(n, buf_);
        return buf_;
    }

  private:
    void load(int64_t n, float* dst) const {
        planes_to_lanes(src_ + n * l_.c * l_.inner, l_.inner, l_.inner, l_.c, ch0_, dst);
    }
    const Layout& l_;
    int64_t ch0_;
    const float* src_;
    bool cached_;
    alignas(64) float buf_[kCachedPositions * kPlaneLanes];
};

// Channels [ch0, ch0 + 16) of the group.
struct LaneGroup {
    const Layout& l;
    int64_t ch0;
    // Image n's segments of dst from a channels-last block (added where accumulate).
    void store(const float* block, float* dst, int64_t n, bool accumulate) const {
        planes_from_lanes(block, l.inner, l.inner, l.c, ch0, dst + n * l.c * l.inner, accumulate);
    }
    // Channel-indexed values (a weight, a bias) as a vector, 0 past c.
    LaneVectors per_channel(const float* v) const {
        alignas(64) float out[kPlaneLanes] = {};
        for (int64_t k = 0; k < std::min(kPlaneLanes, l.c - ch0); ++k) out[k] = v[ch0 + k];
        return LaneVectors::load(out);
    }
};

struct LaneStats {
    LaneVectors mean, rstd;
};

LaneStats lane_stats(const Layout& l, LaneBlocks& x, double eps) {
    const double count = static_cast<double>(l.count());
    Doubles sum = {};
    for (int64_t n = 0; n < l.n; ++n) {
        const float* b = x.image(n);
        LaneVectors s;
        for (int h = 0; h < kLaneVectors; ++h) {  // a register's sum at a time (see LaneVectors)
            FV a = {};
            for (int64_t i = 0; i < l.inner; ++i) a += load_part(b + i * kPlaneLanes, h);
            s.part[h] = a;
        }
        sum += widen(s);
    }
    const LaneVectors mean = narrow(sum.map([&](D4 v) { return v / count; }));
    Doubles sq = {};
    for (int64_t n = 0; n < l.n; ++n) {
        const float* b = x.image(n);
        LaneVectors s;
        for (int h = 0; h < kLaneVectors; ++h) {
            FV a = {};
            for (int64_t i = 0; i < l.inner; ++i) {
                const FV d = load_part(b + i * kPlaneLanes, h) - mean.part[h];
                a += d * d;
            }
            s.part[h] = a;
        }
        sq += widen(s);
    }
    const Doubles rstd = sq.map([&](D4 v) {
        D4 root = v / count + eps;
#if defined(__AVX__)
        __m256d r;
        std::memcpy(&r, &root, sizeof r);
        r = _mm256_sqrt_pd(r);
        std::memcpy(&root, &r, sizeof r);
#else
        for (int k = 0; k < 4; ++k) root[k] = std::sqrt(root[k]);
#endif
        return 1.0 / root;
    });
    return {mean, narrow(rstd)};
}

// Calls body(group) for every group of 16 channels, in parallel.
template <class F>
void for_lane_groups(const Layout& l, int64_t work_per_channel, F&& body) {
    parallel_for((l.c + kPlaneLanes - 1) / kPlaneLanes, kPlaneLanes * work_per_channel,
                 [&](int64_t g) {
                     body(LaneGroup{l, g * kPlaneLanes});
                 });
}

void lanes_forward(const float* x, const float* w, const float* bias, const Layout& l, double eps,
                   float* y) {
    for_lane_groups(l, 2 * l.count(), [&](const LaneGroup& grp) {
        LaneBlocks xb(l, grp.ch0, x);
        const LaneStats st = lane_stats(l, xb, eps);
        const LaneVectors scale = st.rstd * grp.per_channel(w);
        const LaneVectors shift = grp.per_channel(bias) - st.mean * scale;
        alignas(64) float out[kShort * kPlaneLanes];
        for (int64_t n = 0; n < l.n; ++n) {
            const float* b = xb.image(n);
            for (int64_t i = 0; i < l.inner; ++i)
                (LaneVectors::load(b + i * kPlaneLanes) * scale + shift)
                    .store(out + i * kPlaneLanes);
            grp.store(out, y, n, false);
        }
    });
}

// The backward, lane by lane as batchnorm_backward does it for one channel (Σ dY and Σ dY·x̂
// summed in float per segment, in element order, and accumulated in double; then dX).
void lanes_backward(const float* x, const float* dy, const float* w, const Layout& l, double eps,
                    float* dw, float* db, float* dx, bool acc) {
    for_lane_groups(l, 4 * l.count(), [&](const LaneGroup& grp) {
        LaneBlocks xb(l, grp.ch0, x), gb(l, grp.ch0, dy);
        const LaneStats st = lane_stats(l, xb, eps);
        Doubles sum_dy = {}, sum_dy_xhat = {};
        for (int64_t n = 0; n < l.n; ++n) {
            const float* xn = xb.image(n);
            const float* gn = gb.image(n);
            LaneVectors s, t;
            for (int h = 0; h < kLaneVectors; ++h) {
                FV a = {}, e = {};
                for (int64_t i = 0; i < l.inner; ++i) {
                    const FV g = load_part(gn + i * kPlaneLanes, h);
                    a += g;
                    e += g *
                         ((load_part(xn + i * kPlaneLanes, h) - st.mean.part[h]) * st.rstd.part[h]);
                }
                s.part[h] = a;
                t.part[h] = e;
            }
            sum_dy += widen(s);
            sum_dy_xhat += widen(t);
        }
        alignas(64) float dwv[kPlaneLanes], dbv[kPlaneLanes];
        narrow(sum_dy_xhat, dwv);
        narrow(sum_dy, dbv);
        const int64_t lanes = std::min(kPlaneLanes, l.c - grp.ch0);
        for (int64_t k = 0; k < lanes; ++k) {
            if (dw) dw[grp.ch0 + k] = dwv[k];
            if (db) db[grp.ch0 + k] = dbv[k];
        }
        if (!dx) return;
        const double m = static_cast<double>(l.count());
        const LaneVectors mean_dy = narrow(sum_dy.map([&](D4 v) { return v / m; }));
        const LaneVectors mean_dy_xhat = narrow(sum_dy_xhat.map([&](D4 v) { return v / m; }));
        const LaneVectors scale = grp.per_channel(w) * st.rstd;
        alignas(64) float out[kShort * kPlaneLanes];
        for (int64_t n = 0; n < l.n; ++n) {
            const float* xn = xb.image(n);
            const float* gn = gb.image(n);
            for (int64_t i = 0; i < l.inner; ++i) {
                const LaneVectors xhat =
                    (LaneVectors::load(xn + i * kPlaneLanes) - st.mean) * st.rstd;
                (scale * (LaneVectors::load(gn + i * kPlaneLanes) - mean_dy - xhat * mean_dy_xhat))
                    .store(out + i * kPlaneLanes);
            }
            grp.store(out, dx, n, acc);
        }
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
    if (l.inner < kShort) {
        lanes_forward(x, w, b, l, eps, y);
        return;
    }
    parallel_for(l.c, 2 * l.count(), [&](int64_t ch) {
        const ChannelStats st = channel_stats(x, l, ch, eps);
        const float scale = st.rstd * w[ch], shift = b[ch] - st.mean * scale;
        for (int64_t n = 0; n < l.n; ++n) {
            const int64_t off = (n * l.c + ch) * l.inner;
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
        lanes_backward(x, dy, w, l, eps, dw, db, dx, acc);
        return;
    }
    parallel_for(l.c, 4 * l.count(), [&](int64_t ch) {
        const ChannelStats st = channel_stats(x, l, ch, eps);
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
