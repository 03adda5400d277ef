// maxpool2d, avgpool2d and upsample_nearest2d on NCHW float32. The pools take one of two paths,
// both scanning each window in a fixed order, so the results do not depend on the thread count:
// blocks of 16 planes channels-last, one per vector lane, in bands of rows (short rows, the
// common case in late layers), or one plane per task with vector loops along the row's interior
// columns (wide rows). Max pools of 2 × 2 windows at stride 2 on rows of 8 outputs or more (VGG's,
// U-Net's) take a third, a row pair's windows eight at a time, by the same rule.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/vec8.h"
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

// The output columns [lo, hi) whose every tap lies inside the input's width: the first tap's
// span bounds them below, the last tap's above. The columns outside it (at most a few on each
// side, under padding) take the per-window path.
Span interior_columns(const Pool2dGeometry& g) {
    const Window2d& w = g.win;
    const int64_t lo = valid_span(-w.pad_left, w.sw, g.w, g.ow).lo;
    const int64_t hi = valid_span((w.kw - 1) * w.dw - w.pad_left, w.sw, g.w, g.ow).hi;
    return {lo, std::max(lo, hi)};
}

// Max-pool's choice for window (oh, ow): the first maximum in scan order (rows, then columns),
// as its index in the plane (-1 for a window of padding only) and its value (0 then). Forward
// and backward share the rule, so the backward routes to the forward's choice. Each tap after
// the first is taken by selects, not a branch: on random activations a branch per tap
// mispredicted about half the time, and the row path's one window under padding a row cost as
// much as the row's 55 others on ResNet's stem at 224 px (2026-12-07).
int64_t window_argmax(const float* xp, const Pool2dGeometry& g, int64_t oh, int64_t ow, float& v) {
    int64_t best = -1;
    float bv = 0.0f;
    for_window(g, oh, ow, [&](int64_t k) {
        const float x = xp[k];
        if (best < 0) {  // the first tap inside: where it is depends on the geometry, not on x
            best = k;
            bv = x;
            return;
        }
        best = x > bv ? k : best;
        bv = x > bv ? x : bv;
    });
    v = bv;
    return best;
}

// Calls tap(base) for each tap of output row oh's windows that lies inside the input's height,
// in scan order (rows, then columns; with kLastColumnFirst, a row's columns from the last to
// the first), with base the plane index of that tap for column c0; for column c0 + t it is
// base + t·S, S the column stride. Interior columns only: every column tap is inside the width.
template <int64_t S, bool kLastColumnFirst = false, class F>
void interior_taps(const Pool2dGeometry& g, int64_t oh, int64_t c0, F&& tap) {
    const Window2d& w = g.win;
    for (int64_t i = 0; i < w.kh; ++i) {
        const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (int64_t q = 0; q < w.kw; ++q) {
            const int64_t j = kLastColumnFirst ? w.kw - 1 - q : q;
            tap(ih * g.w + c0 * S + j * w.dw - w.pad_left);
        }
    }
}

constexpr int64_t kCols = 256;

// The interior columns of a row that take the vector loops (stride 1 or 2), else none.
Span vector_columns(const Pool2dGeometry& g) {
    const Span inner = interior_columns(g);
    return g.win.sw <= 2 ? inner : Span{0, 0};
}

// --- the row path's max pools, eight windows of a row at once --------------------------------
//
// Interior windows of stride 1 or 2 (every tap inside the row) go eight at a time, one per lane
// of a V8: a tap's values for eight windows are one load (stride 1) or one half of a split_pairs
// (stride 2), each window's choice one compare and two selects, by window_argmax's rule. The
// backward finds the choices so, as offsets in the plane, and adds dY to them one window at a
// time in output order, as before. The windows past the interior go one by one. With the choices
// found per window (int64 indices, stride-2 loads), AlexNet's first pool (55 × 55 to 27 × 27)
// ran at 0.10 (backward) and 0.3 (forward) of its memory roofline (bench_roofline, 2026-12-07);
// bench_pool: 590 µs backward, 126 µs forward, against 230 and 87 eight at a time.
// Adding each tap's dY eight windows at a time instead (-0 where not chosen, tap columns from the
// last to the first for the output order) took 400 µs: a read-modify-write of 16 floats through
// two shuffles per tap costs more than the scalar adds.

// A block of eight windows [t0, t0 + 8) of a row, its first `done` lanes already done by the
// block before it (the last block ends at the interior's end); at stride 2, with `before`, a
// tap's values are the odd elements of the 16 floats from one before the first window's tap,
// not the even ones of the 16 from it, which would run one past the row's end.
struct EightBlock {
    int64_t t0;
    int done;
    bool before;
};

// The blocks of eight that cover a row's interior columns from its start (the same for every
// row of a plane); `end` receives the first column they do not cover.
std::vector<EightBlock> eight_blocks(const Pool2dGeometry& g, int64_t& end) {
    const Span inner = vector_columns(g);
    const Window2d& w = g.win;
    std::vector<EightBlock> out;
    end = inner.lo;
    if (inner.hi - inner.lo < kVec8Lanes) return out;
    auto add = [&](int64_t t0, int done) {
        // The 16 floats of a stride-2 tap from the first window's run past its last by one.
        const int64_t first = t0 * w.sw - w.pad_left;
        const int64_t last = (t0 + kVec8Lanes - 1) * w.sw - w.pad_left + (w.kw - 1) * w.dw;
        const bool before = w.sw == 2 && last + 1 >= g.w;
        if (before && first < 1) return false;
        out.push_back({t0, done, before});
        end = t0 + kVec8Lanes;
        return true;
    };
    int64_t t0 = inner.lo;
    for (; t0 + kVec8Lanes <= inner.hi; t0 += kVec8Lanes)
        if (!add(t0, 0)) return out;
    if (t0 < inner.hi) add(inner.hi - kVec8Lanes, static_cast<int>(t0 - (inner.hi - kVec8Lanes)));
    return out;
}

// The first of a stride-S tap's values for eight windows, as EightBlock says.
template <int64_t S>
[[gnu::always_inline]] inline V8 tap_values(const float* p, bool before) {
    if constexpr (S == 1) {
        return load8(p);
    } else {
        V8 even, odd;
        split_pairs(before ? p - 1 : p, even, odd);
        return before ? odd : even;
    }
}

// window_argmax for block b's windows of row oh: the maxima, and where each chose, as the
// offset in the plane from its window's first tap (i·dh·w + j·dw), into at (-1 for a window of
// padding only).
template <int64_t S>
[[gnu::always_inline]] inline V8 eight_max(const float* xp, const Pool2dGeometry& g, int64_t oh,
                                           const EightBlock& b, V8i& at) {
    const Window2d& w = g.win;
    V8 best{};
    at = V8i{} - 1;
    bool first = true;
    for (int64_t i = 0; i < w.kh; ++i) {
        const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
        if (ih < 0 || ih >= g.h) continue;
        const float* row = xp + ih * g.w + b.t0 * S - w.pad_left;
        for (int64_t j = 0; j < w.kw; ++j) {
            const V8 v = tap_values<S>(row + j * w.dw, b.before);
            const int offset = static_cast<int>(i * w.dh * g.w + j * w.dw);
            if (first) {
                best = v;
                at = V8i{} + offset;
                first = false;
                continue;
            }
            const V8i take = v > best;
            best = take ? v : best;
            at = take ? V8i{} + offset : at;
        }
    }
    return best;  // every tap row padding: 0 and -1, as window_argmax
}

// Row oh of one plane, forward (dyr null: y into yr) or backward (dY's row dyr into dxp).
template <int64_t S>
void maxpool_row(const float* xp, const Pool2dGeometry& geometry,
                 const std::vector<EightBlock>& blocks, int64_t covered, int64_t oh, float* yr,
                 const float* dyr, float* dxp) {
    // A copy whose address the loops below keep to themselves: the stores (memcpy's, which may
    // alias anything) made GCC load the geometry's fields again after each one.
    const Pool2dGeometry g = geometry;
    const Window2d& w = g.win;
    auto one_by_one = [&](int64_t from, int64_t to) {
        for (int64_t t = from; t < to; ++t) {
            float v;
            const int64_t k = window_argmax(xp, geometry, oh, t, v);
            if (!dyr)
                yr[t] = v;
            else if (k >= 0)
                dxp[k] += dyr[t];
        }
    };
    const int64_t lo = blocks.empty() ? covered : blocks.front().t0;
    one_by_one(0, std::min(lo, g.ow));
    if (!dyr) {
        V8i unused;
        for (const EightBlock& b : blocks) store8(yr + b.t0, eight_max<S>(xp, g, oh, b, unused));
    }
    // Backward, window by window in order: dY to the chosen tap, found eight windows at a time.
    const int64_t origin = (oh * w.sh - w.pad_top) * g.w - w.pad_left;  // window 0's first tap
    for (size_t k = 0; dyr && k < blocks.size(); ++k) {
        const EightBlock& b = blocks[k];
        V8i at;
        eight_max<S>(xp, g, oh, b, at);
        int32_t chosen[kVec8Lanes];
        std::memcpy(chosen, &at, sizeof chosen);
        for (int l = b.done; l < kVec8Lanes; ++l)
            if (chosen[l] >= 0) dxp[origin + (b.t0 + l) * S + chosen[l]] += dyr[b.t0 + l];
    }
    one_by_one(std::max(lo, covered), g.ow);
}

void maxpool_rows(const float* xp, const Pool2dGeometry& g, const std::vector<EightBlock>& blocks,
                  int64_t covered, int64_t oh, float* yr, const float* dyr, float* dxp) {
    if (g.win.sw == 1)
        maxpool_row<1>(xp, g, blocks, covered, oh, yr, dyr, dxp);
    else
        maxpool_row<2>(xp, g, blocks, covered, oh, yr, dyr, dxp);
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

// --- 16 planes at once, one per vector lane, in bands of rows ---------------------------------
//
// On short rows (GoogLeNet's 3×3 pools on 28×28 to 2×2 planes, ResNet's stem, AlexNet's 13×13)
// the row loops above have too few columns to vectorise and spend their time on per-tap
// overhead: max-pool ran at 1–4 % of its memory roofline and took 43 % of GoogLeNet's step at
// 64 px (bench_roofline, 2026-12-03). Here 16 planes go through as one channels-last block
// [position][16], so every tap of every window is one vector compare-and-select (or add) across
// the planes, with the window's bounds worked out once for all 16. A block holds a band of
// output rows and the input rows their windows read, at most kBandPositions positions of each, on
// the stack; rows too wide for one output row's band take the row path. Each lane follows the
// per-plane rules: the first maximum in scan order, sums in scan order.

constexpr int64_t kBandPositions = 512;  // positions per block of 16 lanes: 32 KB

// Output rows per band: as many as fit, 0 when one output row's input rows do not, or when the
// row path is the faster (bench_roofline on 3×3 and 2×2 pools, 2026-12-03): on rows of 16 columns
// or more with no column under padding (VGG's 2×2/2: the row path's vector loops cover every
// column; the blocks' transposes cost more), and, forward, on rows of 48 or more (ResNet's stem
// at 56: the transposes cost twice the row path's time; its backward is slower still, through a
// scalar scatter, so the backward keeps the blocks).
int64_t band_rows(const Pool2dGeometry& g, bool backward) {
    const Span inner = interior_columns(g);
    const bool every_column_inside = inner.lo == 0 && inner.hi == g.ow;
    if ((every_column_inside && g.ow >= 16 && g.win.sw <= 2) || (!backward && g.ow >= 48)) return 0;
    const int64_t span = (g.win.kh - 1) * g.win.dh + 1;  // input rows of one output row
    const int64_t rows_in = kBandPositions / g.w, rows_out = kBandPositions / g.ow;
    if (rows_in < span || rows_out < 1) return 0;
    return std::min({g.oh, (rows_in - span) / g.win.sh + 1, rows_out});
}

// Output rows [oh0, oh1) and the input rows [ih0, ih1) that their windows read.
struct Band {
    int64_t oh0, oh1, ih0, ih1;
};

// One past the last input row that output rows before oh1 read (unclamped).
int64_t input_rows_end(const Pool2dGeometry& g, int64_t oh1) {
    const Window2d& w = g.win;
    return (oh1 - 1) * w.sh - w.pad_top + (w.kh - 1) * w.dh + 1;
}

template <class F>
void for_bands(const Pool2dGeometry& g, int64_t rows, F&& body) {
    for (int64_t oh0 = 0; oh0 < g.oh; oh0 += rows) {
        const int64_t oh1 = std::min(g.oh, oh0 + rows);
        const int64_t ih0 = std::clamp(oh0 * g.win.sh - g.win.pad_top, int64_t{0}, g.h);
        const int64_t ih1 = std::clamp(input_rows_end(g, oh1), ih0, g.h);
        body(Band{oh0, oh1, ih0, ih1});
    }
}

// A block position's 16 lanes, as GCC vectors of the machine's width: one of 16 floats on
// AVX-512, two of 8 on AVX2. The lane loops were plain loops of 16 first; GCC 12 unrolled them
// completely before vectorising and left the selects scalar with a branch per lane (the
// backward ran no faster than the per-plane path it replaced); and a vector of 16 on AVX2 is
// lowered to scalar selects too. Positions in the blocks are 64-byte aligned; may_alias: they
// are float arrays.
constexpr int64_t kVecLanes = kLaneVectorWidth;
constexpr int64_t kParts = kLaneVectors;
typedef float Vec __attribute__((vector_size(kVecLanes * sizeof(float)), may_alias));
typedef int32_t VecMask __attribute__((vector_size(kVecLanes * sizeof(int32_t))));

struct __attribute__((may_alias, aligned(64))) Lanes {
    Vec part[kParts];

    static Lanes all(float x) {
        Lanes r;
        for (int64_t h = 0; h < kParts; ++h) r.part[h] = Vec{} + x;
        return r;
    }
    static Lanes negative_zero() {  // all(-0.0f) would be 0 + -0, +0
        Lanes r;
        for (int64_t h = 0; h < kParts; ++h) r.part[h] = -Vec{};
        return r;
    }
    Lanes& operator+=(const Lanes& o) {
        for (int64_t h = 0; h < kParts; ++h) part[h] += o.part[h];
        return *this;
    }
    Lanes operator/(float d) const {
        Lanes r;
        for (int64_t h = 0; h < kParts; ++h) r.part[h] = part[h] / d;
        return r;
    }
};
struct LaneMask {
    VecMask part[kParts];
};
inline LaneMask operator>(const Lanes& a, const Lanes& b) {
    LaneMask m;
    for (int64_t h = 0; h < kParts; ++h) m.part[h] = a.part[h] > b.part[h];
    return m;
}
inline LaneMask operator==(const Lanes& a, float x) {
    LaneMask m;
    for (int64_t h = 0; h < kParts; ++h) m.part[h] = a.part[h] == x;
    return m;
}
// m ? a : b, lane by lane.
inline Lanes select(const LaneMask& m, const Lanes& a, const Lanes& b) {
    Lanes r;
    for (int64_t h = 0; h < kParts; ++h) r.part[h] = m.part[h] ? a.part[h] : b.part[h];
    return r;
}

inline Lanes& lanes_at(float* b, int64_t pos) {
    return *reinterpret_cast<Lanes*>(b + pos * kPlaneLanes);
}
inline const Lanes& lanes_at(const float* b, int64_t pos) {
    return *reinterpret_cast<const Lanes*>(b + pos * kPlaneLanes);
}

// The taps of each window's rows and columns inside the input (kernels.h), worked out once a
// call: testing each tap of each window against the plane's bounds (for_window) cost the blocks
// more than their compares (3×3 pools on 8×8 and 4×4 planes: 0.2-0.3 of their roofline,
// 2026-12-06).
struct TapSpans : WindowTapSpans {
    explicit TapSpans(const Pool2dGeometry& g) : WindowTapSpans(g.win, g.h, g.w, g.oh, g.ow) {}
};

// Calls tap(position in the band's input block) for each tap of window (oh, ow) inside the
// input, in scan order (for_window's).
template <class F>
void band_window(const Pool2dGeometry& g, const TapSpans& ts, const Band& b, int64_t oh, int64_t ow,
                 F&& tap) {
    const Window2d& w = g.win;
    const Span si = ts.rows[oh], sj = ts.cols[ow];
    const int64_t r0 = oh * w.sh - w.pad_top - b.ih0, c0 = ow * w.sw - w.pad_left;
    for (int64_t i = si.lo; i < si.hi; ++i) {
        const int64_t row = (r0 + i * w.dh) * g.w + c0;
        for (int64_t j = sj.lo; j < sj.hi; ++j) tap(row + j * w.dw);
    }
}

// window_argmax for window (oh, ow) across the 16 planes of the band's input block xt: values
// into bv and, with kIndex, each lane's chosen tap (its block position, -1 for padding only)
// into bi, as a float (exact: a block holds 512 positions) so that values and indices select
// alike. The scan keeps both in locals: into bv itself (the output block, may_alias like xt)
// every tap was a store and a load, a chain the forward spent 49 cycles a window in (16 planes
// of 8 × 8, 2026-12-07).
template <bool kIndex>
void lanes_argmax(const float* xt, const Pool2dGeometry& g, const TapSpans& ts, const Band& b,
                  int64_t oh, int64_t ow, Lanes& bv, Lanes& bi) {
    bool first = true;
    Lanes best = Lanes::all(0.0f);
    band_window(g, ts, b, oh, ow, [&](int64_t k) {
        const Lanes& v = lanes_at(xt, k);
        const auto at = static_cast<float>(k);
        if (first) {
            best = v;
            if constexpr (kIndex) bi = Lanes::all(at);
            first = false;
            return;
        }
        const LaneMask take = v > best;
        best = select(take, v, best);
        if constexpr (kIndex) bi = select(take, Lanes::all(at), bi);
    });
    bv = best;  // padding only: 0 (and -1)
    if (kIndex && first) bi = Lanes::all(-1.0f);
}

// body(p0, band, xt) for each block of 16 planes (in parallel) and each band of its rows, with
// the band's input rows of x packed into the block xt (x null: nothing packed, xt scratch).
template <class F>
void for_lane_blocks(const float* x, const Pool2dGeometry& g, int64_t rows, F&& body) {
    const int64_t planes = g.n * g.c, in = g.h * g.w;
    const int64_t blocks = (planes + kPlaneLanes - 1) / kPlaneLanes;
    parallel_for(blocks, g.oh * g.ow * g.win.kh * g.win.kw * kPlaneLanes, [&](int64_t blk) {
        alignas(64) float xt[kBandPositions * kPlaneLanes];
        const int64_t p0 = blk * kPlaneLanes;
        for_bands(g, rows, [&](const Band& b) {
            if (x) planes_to_lanes(x + b.ih0 * g.w, in, (b.ih1 - b.ih0) * g.w, planes, p0, xt);
            body(p0, b, xt);
        });
    });
}

void maxpool_lanes_forward(const float* x, const Pool2dGeometry& g, int64_t rows, float* y) {
    const TapSpans ts(g);
    const int64_t planes = g.n * g.c, out = g.oh * g.ow;
    for_lane_blocks(x, g, rows, [&](int64_t p0, const Band& b, float* xt) {
        alignas(64) float yt[kBandPositions * kPlaneLanes];
        Lanes unused;
        for (int64_t oh = b.oh0; oh < b.oh1; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow)
                lanes_argmax<false>(xt, g, ts, b, oh, ow, lanes_at(yt, (oh - b.oh0) * g.ow + ow),
                                    unused);
        planes_from_lanes(yt, out, (b.oh1 - b.oh0) * g.ow, planes, p0, y + b.oh0 * g.ow, false);
    });
}

// The planes' gradients start at 0 unless accumulating. Each band starts its input rows'
// gradients from what they hold (the caller's values when accumulating, what the band above left
// in the rows they share), adds its windows' shares in (oh, ow) order and stores them back: every
// input's gradient is the sum, in output order, from the value it started at, as the per-plane
// path and the CUDA kernels add. (Summing a band from 0 and adding that to dx rounded differently
// when accumulating onto an existing gradient, e.g. where a pooled value has a second consumer:
// the first GPU run caught it.)
void zero_unless(bool accumulate, const Pool2dGeometry& g, float* dx) {
    if (!accumulate)
        parallel_for(g.n * g.c, g.h * g.w, [&](int64_t q) {
            std::fill(dx + q * g.h * g.w, dx + (q + 1) * g.h * g.w, 0.0f);
        });
}

// The band's input-row gradients into the block dxt: loaded from dx where they may hold
// something (every row when accumulating, else the rows the band above also read), 0 elsewhere,
// so that a band with no shared rows costs a fill, not a transpose.
void start_band(const float* dx, const Pool2dGeometry& g, const Band& b, int64_t p0,
                bool accumulate, float* dxt) {
    const int64_t above_end =
        b.oh0 == 0 ? b.ih0 : std::clamp(input_rows_end(g, b.oh0), b.ih0, b.ih1);
    const int64_t loaded = (accumulate ? b.ih1 : above_end) - b.ih0;
    planes_to_lanes(dx + b.ih0 * g.w, g.h * g.w, loaded * g.w, g.n * g.c, p0, dxt);
    std::fill(dxt + loaded * g.w * kPlaneLanes, dxt + (b.ih1 - b.ih0) * g.w * kPlaneLanes, 0.0f);
}

// Each window's gradient goes, lane by lane, to the tap its forward chose: tap by tap, a
// select of dY or -0, windows in (oh, ow) order within a band, bands in order. (A +0 turned an
// accumulated gradient's -0 into +0 where the scatter of the row path left it.)
void maxpool_lanes_backward(const float* x, const float* dy, const Pool2dGeometry& g, int64_t rows,
                            float* dx, bool accumulate) {
    const TapSpans ts(g);
    const int64_t planes = g.n * g.c, in = g.h * g.w, out = g.oh * g.ow;
    zero_unless(accumulate, g, dx);
    for_lane_blocks(x, g, rows, [&](int64_t p0, const Band& b, float* xt) {
        alignas(64) float dyt[kBandPositions * kPlaneLanes], dxt[kBandPositions * kPlaneLanes];
        const int64_t size_in = (b.ih1 - b.ih0) * g.w;
        planes_to_lanes(dy + b.oh0 * g.ow, out, (b.oh1 - b.oh0) * g.ow, planes, p0, dyt);
        start_band(dx, g, b, p0, accumulate, dxt);
        Lanes bv, bi;
        for (int64_t oh = b.oh0; oh < b.oh1; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
                lanes_argmax<true>(xt, g, ts, b, oh, ow, bv, bi);
                const Lanes& gy = lanes_at(dyt, (oh - b.oh0) * g.ow + ow);
                const Lanes nothing = Lanes::negative_zero();  // x + -0 is x, -0 included
                band_window(g, ts, b, oh, ow, [&](int64_t k) {
                    lanes_at(dxt, k) += select(bi == static_cast<float>(k), gy, nothing);
                });
            }
        planes_from_lanes(dxt, in, size_in, planes, p0, dx + b.ih0 * g.w, false);
    });
}

void avgpool_lanes_forward(const float* x, const Pool2dGeometry& g, int64_t rows, float* y) {
    const TapSpans ts(g);
    const int64_t planes = g.n * g.c, out = g.oh * g.ow;
    for_lane_blocks(x, g, rows, [&](int64_t p0, const Band& b, float* xt) {
        alignas(64) float yt[kBandPositions * kPlaneLanes];
        for (int64_t oh = b.oh0; oh < b.oh1; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
                Lanes s = Lanes::all(0.0f);
                band_window(g, ts, b, oh, ow, [&](int64_t k) { s += lanes_at(xt, k); });
                const float d = window_divisor(g, oh, ow);
                lanes_at(yt, (oh - b.oh0) * g.ow + ow) = d > 0 ? s / d : Lanes::all(0.0f);
            }
        planes_from_lanes(yt, out, (b.oh1 - b.oh0) * g.ow, planes, p0, y + b.oh0 * g.ow, false);
    });
}

// The block for_lane_blocks packs nothing into serves as the band's input gradient.
void avgpool_lanes_backward(const float* dy, const Pool2dGeometry& g, int64_t rows, float* dx,
                            bool accumulate) {
    const TapSpans ts(g);
    const int64_t planes = g.n * g.c, in = g.h * g.w, out = g.oh * g.ow;
    zero_unless(accumulate, g, dx);
    for_lane_blocks(nullptr, g, rows, [&](int64_t p0, const Band& b, float* dxt) {
        alignas(64) float dyt[kBandPositions * kPlaneLanes];
        const int64_t size_in = (b.ih1 - b.ih0) * g.w;
        planes_to_lanes(dy + b.oh0 * g.ow, out, (b.oh1 - b.oh0) * g.ow, planes, p0, dyt);
        start_band(dx, g, b, p0, accumulate, dxt);
        for (int64_t oh = b.oh0; oh < b.oh1; ++oh)
            for (int64_t ow = 0; ow < g.ow; ++ow) {
                const float d = window_divisor(g, oh, ow);
                if (d <= 0) continue;
                const Lanes v = lanes_at(dyt, (oh - b.oh0) * g.ow + ow) / d;
                band_window(g, ts, b, oh, ow, [&](int64_t k) { lanes_at(dxt, k) += v; });
            }
        planes_from_lanes(dxt, in, size_in, planes, p0, dx + b.ih0 * g.w, false);
    });
}

}  // namespace

namespace {

// 2 × 2 windows of stride 2 inside the input (VGG's and U-Net's pools, in floor mode), on rows of
// eight outputs or more: a row pair's windows eight at a time, the rows' even and odd columns
// split by shuffles and each window's choice made as lane masks, by window_argmax's rule (the
// first maximum in scan order: a, b, then the next row's c, d, each taken only when greater).
// No input element is in two windows, so the backward writes dX once: the chosen tap 0 + dy (as
// the row path adds dy onto its zeroed plane), the others 0, the input rows and columns no window
// reads (an odd size's last) 0; accumulating, the chosen tap dX + dy and the others as they
// are. The row path zeroed the plane, found each window's index and scattered dy one element at
// a time; with the selects of a plain loop GCC left branches, which the ties of real activations
// mispredict. VGG's pools ran at 0.07–0.09 of their memory roofline backward, 0.3–0.6 forward
// (bench_roofline, 2026-12-07).
bool pool_tiles_by_two(const Pool2dGeometry& g) {
    const Window2d& w = g.win;
    return w.kh == 2 && w.kw == 2 && w.sh == 2 && w.sw == 2 && w.dh == 1 && w.dw == 1 &&
           w.pad_top == 0 && w.pad_left == 0 && 2 * g.oh <= g.h && 2 * g.ow <= g.w &&
           g.ow >= kVec8Lanes;
}

// Eight windows' choice: the maximum, and which tap (a, b: row x0; c, d: row x1) holds it.
struct ByTwoChoice {
    V8 max;
    V8i a, b, c, d;  // lane masks, one of the four set in each lane
};
inline ByTwoChoice choose_by_two(const float* x0, const float* x1) {
    V8 a, b, c, d;
    split_pairs(x0, a, b);
    split_pairs(x1, c, d);
    const V8i tb = b > a;
    const V8 ab = tb ? b : a;
    const V8i tc = c > ab;
    const V8 abc = tc ? c : ab;
    const V8i td = d > abc;
    return {td ? d : abc, ~(tb | tc | td), tb & ~(tc | td), tc & ~td, td};
}

// One window of the row functions below, for the columns past their vectors: the same rule.
inline int by_two_choice(const float* x0, const float* x1, int64_t t, float& v) {
    const float taps[4] = {x0[2 * t], x0[2 * t + 1], x1[2 * t], x1[2 * t + 1]};
    int k = 0;
    for (int j = 1; j < 4; ++j)
        if (taps[j] > taps[k]) k = j;
    v = taps[k];
    return k;
}

void maxpool_by_two_row_forward(const float* x0, const float* x1, int64_t ow, float* y) {
    int64_t t = 0;
    for (; t + kVec8Lanes <= ow; t += kVec8Lanes)
        store8(y + t, choose_by_two(x0 + 2 * t, x1 + 2 * t).max);
    for (; t < ow; ++t) by_two_choice(x0, x1, t, y[t]);
}

template <bool kAcc>
void maxpool_by_two_row_backward(const float* x0, const float* x1, const float* dyr, int64_t ow,
                                 float* d0, float* d1) {
    int64_t t = 0;
    for (; t + kVec8Lanes <= ow; t += kVec8Lanes) {
        const int64_t j = 2 * t;
        const ByTwoChoice k = choose_by_two(x0 + j, x1 + j);
        const V8 gy = load8(dyr + t);
        V8 e0, o0, e1, o1;
        if constexpr (kAcc) {
            split_pairs(d0 + j, e0, o0);
            split_pairs(d1 + j, e1, o1);
            e0 = k.a ? e0 + gy : e0;
            o0 = k.b ? o0 + gy : o0;
            e1 = k.c ? e1 + gy : e1;
            o1 = k.d ? o1 + gy : o1;
        } else {
            const V8 zero{}, v = zero + gy;
            e0 = k.a ? v : zero;
            o0 = k.b ? v : zero;
            e1 = k.c ? v : zero;
            o1 = k.d ? v : zero;
        }
        join_pairs(d0 + j, e0, o0);
        join_pairs(d1 + j, e1, o1);
    }
    for (; t < ow; ++t) {
        float v;
        const int k = by_two_choice(x0, x1, t, v);
        float* const tap[4] = {d0 + 2 * t, d0 + 2 * t + 1, d1 + 2 * t, d1 + 2 * t + 1};
        for (int j = 0; j < 4; ++j) {
            if constexpr (kAcc) {
                if (j == k) *tap[j] += dyr[t];
            } else {
                *tap[j] = j == k ? 0.0f + dyr[t] : 0.0f;
            }
        }
    }
}

void maxpool_by_two_forward(const float* x, const Pool2dGeometry& g, float* y) {
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    parallel_for(g.n * g.c, in_plane, [&](int64_t q) {
        const float* xp = x + q * in_plane;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
            const float* x0 = xp + 2 * oh * g.w;
            maxpool_by_two_row_forward(x0, x0 + g.w, g.ow, y + q * out_plane + oh * g.ow);
        }
    });
}

void maxpool_by_two_backward(const float* x, const float* dy, const Pool2dGeometry& g, float* dx,
                             bool acc) {
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    parallel_for(g.n * g.c, in_plane, [&](int64_t q) {
        const float* xp = x + q * in_plane;
        const float* dyp = dy + q * out_plane;
        float* dxp = dx + q * in_plane;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
            const float* x0 = xp + 2 * oh * g.w;
            float* d0 = dxp + 2 * oh * g.w;
            const float* dyr = dyp + oh * g.ow;
            if (acc) {
                maxpool_by_two_row_backward<true>(x0, x0 + g.w, dyr, g.ow, d0, d0 + g.w);
                continue;
            }
            maxpool_by_two_row_backward<false>(x0, x0 + g.w, dyr, g.ow, d0, d0 + g.w);
            std::fill(d0 + 2 * g.ow, d0 + g.w, 0.0f);
            std::fill(d0 + g.w + 2 * g.ow, d0 + 2 * g.w, 0.0f);
        }
        if (!acc) std::fill(dxp + 2 * g.oh * g.w, dxp + in_plane, 0.0f);
    });
}

}  // namespace

void maxpool2d_forward(const ForwardCall& c) {
    const Pool2dGeometry g = pool2d_geometry(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    if (pool_tiles_by_two(g)) return maxpool_by_two_forward(x, g, y);
    if (const int64_t rows = band_rows(g, false)) return maxpool_lanes_forward(x, g, rows, y);
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    int64_t covered = 0;
    const std::vector<EightBlock> blocks = eight_blocks(g, covered);
    parallel_for(g.n * g.c, out_plane * g.win.kh * g.win.kw, [&](int64_t q) {
        const float* xp = x + q * in_plane;
        float* yp = y + q * out_plane;
        for (int64_t oh = 0; oh < g.oh; ++oh)
            maxpool_rows(xp, g, blocks, covered, oh, yp + oh * g.ow, nullptr, nullptr);
    });
}

// Each output's gradient goes to the input its forward chose (the same rule, recomputed),
// outputs in (oh, ow) order, so overlapping windows add in a fixed order.
void maxpool2d_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Pool2dGeometry g = pool2d_geometry(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    if (pool_tiles_by_two(g)) return maxpool_by_two_backward(x, dy, g, dx, acc);
    if (const int64_t rows = band_rows(g, true))
        return maxpool_lanes_backward(x, dy, g, rows, dx, acc);
    const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    int64_t covered = 0;
    const std::vector<EightBlock> blocks = eight_blocks(g, covered);
    parallel_for(g.n * g.c, out_plane * g.win.kh * g.win.kw, [&](int64_t q) {
        const float* xp = x + q * in_plane;
        const float* dyp = dy + q * out_plane;
        float* dxp = dx + q * in_plane;
        if (!acc) std::fill(dxp, dxp + in_plane, 0.0f);
        for (int64_t oh = 0; oh < g.oh; ++oh)
            maxpool_rows(xp, g, blocks, covered, oh, nullptr, dyp + oh * g.ow, dxp);
    });
}

namespace {

// Σ of each interior column's window taps (from 0, in scan order, as the per-window path adds
// them) into s[0, n) for columns [c0, c0 + n) of row oh.
template <int64_t S>
void interior_sum(const float* __restrict xp, const Pool2dGeometry& g, int64_t oh, int64_t c0,
                  int64_t n, float* __restrict s) {
    std::fill(s, s + n, 0.0f);
    interior_taps<S>(g, oh, c0, [&](int64_t base) {
        const float* __restrict xs = xp + base;
        for (int64_t t = 0; t < n; ++t) s[t] += xs[t * S];
    });
}

// dX at each interior column's window taps += v[t], for columns [c0, c0 + n) of row oh: tap
// rows in order, tap columns from the last to the first. An input column that two windows of
// the row share is tap j of column t and tap j' < j of column t' > t, so the last tap first adds
// their shares in column (output) order, as the per-window path, the 16-plane blocks and the CUDA
// kernel do: the same sum, bit for bit, onto the same starting gradient.
template <int64_t S>
void interior_spread(float* __restrict dxp, const Pool2dGeometry& g, int64_t oh, int64_t c0,
                     int64_t n, const float* __restrict v) {
    interior_taps<S, true>(g, oh, c0, [&](int64_t base) {
        float* __restrict ds = dxp + base;
        for (int64_t t = 0; t < n; ++t) ds[t * S] += v[t];
    });
}

}  // namespace

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
    if (const int64_t rows = band_rows(g, false)) return avgpool_lanes_forward(x, g, rows, y);
    const Span inner = vector_columns(g);
    parallel_for(g.n * g.c, out_plane * g.win.kh * g.win.kw, [&](int64_t q) {
        const float* xp = x + q * in_plane;
        float* yp = y + q * out_plane;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
            float* yr = yp + oh * g.ow;
            for (int64_t ow = 0; ow < g.ow; ++ow) {
                if (ow == inner.lo && inner.hi > inner.lo) {
                    // Every interior window has the same taps inside, so the same divisor.
                    const int64_t n = inner.hi - inner.lo;
                    if (g.win.sw == 1)
                        interior_sum<1>(xp, g, oh, ow, n, yr + ow);
                    else
                        interior_sum<2>(xp, g, oh, ow, n, yr + ow);
                    const float d = window_divisor(g, oh, ow);
                    for (int64_t t = ow; t < inner.hi; ++t) yr[t] = d > 0 ? yr[t] / d : 0.0f;
                    ow = inner.hi - 1;
                    continue;
                }
                float s = 0;
                for_window(g, oh, ow, [&](int64_t k) { s += xp[k]; });
                const float d = window_divisor(g, oh, ow);
                yr[ow] = d > 0 ? s / d : 0.0f;
            }
        }
    });
}

// Outputs in (oh, ow) order; a row's interior columns spread tap by tap (each tap across all of
// them) in an order that adds each input's shares in that same order (interior_spread).
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
    if (const int64_t rows = band_rows(g, true))
        return avgpool_lanes_backward(dy, g, rows, dx, acc);
    const Span inner = vector_columns(g);
    parallel_for(g.n * g.c, out_plane * g.win.kh * g.win.kw, [&](int64_t q) {
        const float* dyp = dy + q * out_plane;
        float* dxp = dx + q * in_plane;
        if (!acc) std::fill(dxp, dxp + in_plane, 0.0f);
        float v[kCols];
        for (int64_t oh = 0; oh < g.oh; ++oh) {
            const float* dyr = dyp + oh * g.ow;
            for (int64_t ow = 0; ow < g.ow; ++ow) {
                const float d = window_divisor(g, oh, ow);
                if (ow == inner.lo && inner.hi > inner.lo) {
                    for (int64_t c0 = ow; c0 < inner.hi && d > 0; c0 += kCols) {
                        const int64_t n = std::min(kCols, inner.hi - c0);
                        for (int64_t t = 0; t < n; ++t) v[t] = dyr[c0 + t] / d;
                        if (g.win.sw == 1)
                            interior_spread<1>(dxp, g, oh, c0, n, v);
                        else
                            interior_spread<2>(dxp, g, oh, c0, n, v);
                    }
                    ow = inner.hi - 1;
                    continue;
                }
                if (d <= 0) continue;
                const float vd = dyr[ow] / d;
                for_window(g, oh, ow, [&](int64_t k) { dxp[k] += vd; });
            }
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

// A column factor of 2 (U-Net's 2 × 2) takes vectors: eight input columns written as sixteen,
// each twice (forward), and dY's even and odd columns split by shuffles and summed eight windows
// at a time in the same order (backward). Filling two floats per input pixel and summing four
// per output pixel ran U-Net's upsampling at 0.25 (forward) and 0.06 (backward) of its memory
// roofline (bench_roofline, 2026-12-07).
void upsample_nearest2d_forward(const ForwardCall& c) {
    const Upsample u = upsample_dims(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const int64_t ow = u.w * u.sw, out_plane = u.h * u.sh * ow;
    parallel_for(u.planes, out_plane, [&](int64_t q) {
        const float* xp = x + q * u.h * u.w;
        float* yp = y + q * out_plane;
        for (int64_t ih = 0; ih < u.h; ++ih) {
            const float* xr = xp + ih * u.w;
            float* row = yp + ih * u.sh * ow;
            int64_t iw = 0;
            if (u.sw == 2)
                for (; iw + kVec8Lanes <= u.w; iw += kVec8Lanes) {
                    const V8 v = load8(xr + iw);
                    join_pairs(row + 2 * iw, v, v);
                }
            for (; iw < u.w; ++iw) std::fill(row + iw * u.sw, row + (iw + 1) * u.sw, xr[iw]);
            for (int64_t a = 1; a < u.sh; ++a) std::copy(row, row + ow, row + a * ow);
        }
    });
}

// dX[ih, iw] = Σ of dY over its sh×sw block, from 0, rows then columns.
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
        for (int64_t ih = 0; ih < u.h; ++ih) {
            const float* block = dyp + ih * u.sh * ow;  // the first dY row of this input row
            float* dr = dxp + ih * u.w;
            int64_t iw = 0;
            if (u.sw == 2)
                for (; iw + kVec8Lanes <= u.w; iw += kVec8Lanes) {
                    V8 s{}, even, odd;
                    for (int64_t a = 0; a < u.sh; ++a) {
                        split_pairs(block + a * ow + 2 * iw, even, odd);
                        s += even;
                        s += odd;
                    }
                    store8(dr + iw, acc ? load8(dr + iw) + s : s);
                }
            for (; iw < u.w; ++iw) {
                float s = 0;
                for (int64_t a = 0; a < u.sh; ++a)
                    for (int64_t b = 0; b < u.sw; ++b) s += block[a * ow + iw * u.sw + b];
                dr[iw] = acc ? dr[iw] + s : s;
            }
        }
    });
}

}  // namespace rl::cpu
