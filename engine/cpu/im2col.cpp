// im2col and col2im (im2col.h): the column matrix of a convolution's GEMM path, by geometry.
#include "engine/cpu/im2col.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "engine/cpu/kernels.h"
#include "engine/cpu/vec8.h"

namespace rl::cpu {
namespace {

// dst[i] = src[2·i] for i < n: the even elements of a stride-2 row, eight from two loads that end
// at the last element read (src[2·i + 14]: the second load starts one early), never past it. A
// strided 1×1 projection's im2col is this copy; element by element it cost a fifth of the layer.
[[gnu::always_inline]] inline void copy_even(const float* src, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + kVec8Lanes <= n; i += kVec8Lanes) {
        const V8 a = load8(src + 2 * i), b = load8(src + 2 * i + 7);
        store8(dst + i, __builtin_shuffle(a, b, V8i{0, 2, 4, 6, 9, 11, 13, 15}));
    }
    for (; i < n; ++i) dst[i] = src[2 * i];
}

// dst[2·i] += src[i] for i < n, the odd elements between left as they are: -0 is added to them,
// and x + -0 is x for every x, signed zeros included. The two stores overlap on dst[2·i + 7],
// which both write back unchanged.
[[gnu::always_inline]] inline void add_to_even(float* dst, const float* src, int64_t n) {
    const V8 keep = {-0.f, -0.f, -0.f, -0.f, -0.f, -0.f, -0.f, -0.f};
    int64_t i = 0;
    for (; i + kVec8Lanes <= n; i += kVec8Lanes) {
        const V8 s = load8(src + i);
        const V8 a = load8(dst + 2 * i) + __builtin_shuffle(s, keep, V8i{0, 8, 1, 8, 2, 8, 3, 8});
        const V8 b =
            load8(dst + 2 * i + 7) + __builtin_shuffle(s, keep, V8i{8, 4, 8, 5, 8, 6, 8, 7});
        store8(dst + 2 * i, a);
        store8(dst + 2 * i + 7, b);
    }
    for (; i < n; ++i) dst[2 * i] += src[i];
}

// d0[t] = s[2·t], d1[t] = s[2·t + 1] for t < n.
[[gnu::always_inline]] inline void deinterleave2(const float* s, int n, float* d0, float* d1) {
    int t = 0;
    for (; t + kVec8Lanes <= n; t += kVec8Lanes) {
        V8 even, odd;
        split_pairs(s + 2 * t, even, odd);
        store8(d0 + t, even);
        store8(d1 + t, odd);
    }
    for (const float* p = s + 2 * t; t < n; ++t, p += 2) d0[t] = p[0], d1[t] = p[1];
}

// d[2·t] = s0[t] and d[2·t + 1] = s1[t] for t < n: with kSum, added to d's when accumulating,
// else to 0 (as the general col2im sums them: -0 becomes +0); without, copied.
template <bool kSum>
[[gnu::always_inline]] inline void interleave2(const float* s0, const float* s1, int n, float* d,
                                               bool accumulate) {
    auto put = [&](float* e, auto v) { return !kSum ? v : accumulate ? *e + v : 0.0f + v; };
    int t = 0;
    for (; t + kVec8Lanes <= n; t += kVec8Lanes) {
        const V8 a = load8(s0 + t), b = load8(s1 + t);
        float* e = d + 2 * t;
        if (kSum && accumulate) {
            V8 even, odd;
            split_pairs(e, even, odd);
            join_pairs(e, even + a, odd + b);
        } else {
            join_pairs(e, kSum ? V8{} + a : a, kSum ? V8{} + b : b);
        }
    }
    for (float* e = d + 2 * t; t < n; ++t, e += 2) {
        e[0] = put(e, s0[t]);
        e[1] = put(e + 1, s1[t]);
    }
}

// d[ow·stride + off] += sr[ow] for ow in span s: col2im's adds on the row path.
void add_row(float* d, int64_t off, int64_t stride, Span s, const float* sr) {
    if (s.hi <= s.lo) return;
    if (stride == 2) return add_to_even(d + 2 * s.lo + off, sr + s.lo, s.hi - s.lo);
    for (int64_t ow = s.lo; ow < s.hi; ++ow) d[ow * stride + off] += sr[ow];
}

// --- through a zero-padded plane ----------------------------------------------------------
//
// On small planes the per-row bounds work of im2col and col2im below cost more than their
// copies: on ResNeXt-50's grouped 3×3 convolutions at 64 px (8 channels a group, 8×8 planes) the
// two took 60 % of the backward and its GEMMs 18 % (perf, 2026-12-04). Where the window's extent
// of the plane, padding included, fits on the stack (Conv2dGeometry::im2col_through_padded_plane),
// each channel goes through a zero-padded copy of it: every row of a tap is then ow floats at a
// fixed step from one pointer, with no bounds. col2im adds into the padded copy in the same order
// (taps, then rows, then columns) as the row path adds into dx, so each input gradient is the
// same sum, bit for bit.
constexpr int64_t kPaddedPlaneMax = Conv2dGeometry::kPaddedPlaneFloats;

// The extent's rows r = ih + pad_top and columns q = iw + pad_left that lie inside the plane.
struct PlaneInside {
    int64_t r0, r1, q0, q1;
    // The extent covers the whole plane: every input is reached by some window's rows and columns.
    bool covers(const Conv2dGeometry& g) const { return r1 - r0 == g.h && q1 - q0 == g.w; }
};
PlaneInside plane_inside(const Conv2dGeometry& g) {
    const int64_t hp = g.padded_h(), wp = g.padded_w();
    return {std::min(g.win.pad_top, hp), std::min(g.win.pad_top + g.h, hp),
            std::min(g.win.pad_left, wp), std::min(g.win.pad_left + g.w, wp)};
}

// P = the extent of plane xc, zero outside the plane.
void pad_plane(const float* xc, const Conv2dGeometry& g, float* P) {
    const int64_t hp = g.padded_h(), wp = g.padded_w();
    const PlaneInside in = plane_inside(g);
    for (int64_t r = 0; r < hp; ++r) {
        float* pr = P + r * wp;
        if (r < in.r0 || r >= in.r1) {
            for (int64_t q = 0; q < wp; ++q) pr[q] = 0.0f;
            continue;
        }
        const float* xr = xc + (r - g.win.pad_top) * g.w - g.win.pad_left;
        for (int64_t q = 0; q < in.q0; ++q) pr[q] = 0.0f;
        for (int64_t q = in.q0; q < in.q1; ++q) pr[q] = xr[q];
        for (int64_t q = in.q1; q < wp; ++q) pr[q] = 0.0f;
    }
}

// At stride 2 across, each padded row is kept as its even columns, then its odd ones (`half` =
// ⌈wp / 2⌉ floats each): column q at (q mod 2)·half + ⌊q / 2⌋. A tap's row, columns
// ow·2 + j·dw, is then a contiguous run of its phase, and the taps copy (im2col) or add (col2im)
// whole vectors: their stride-2 moves, float by float, took 16 % of ResNet-18's 3×3 stride-2
// backward from 64 to 128 channels on 8×8 outputs (perf, 2026-12-05). Each column takes the same
// sums in the same order as on the plain padded plane, so the bits are the same.
struct Phases {
    int64_t half;
    int64_t at(int64_t q) const { return (q & 1) * half + (q >> 1); }
};

// Rows in phases fit the stack copy (the plane plus at most one column a row).
bool phased_fits(const Conv2dGeometry& g) {
    return g.win.sw == 2 && g.padded_h() * 2 * ((g.padded_w() + 1) / 2) <= kPaddedPlaneMax;
}

// row[ph.at(q)] = src[q] for q in [q0, q1), and back (from_phases: dst[q] = row[ph.at(q)]).
[[gnu::always_inline]] inline void to_phases(const float* src, int64_t q0, int64_t q1, Phases ph,
                                             float* row) {
    const int64_t n = q1 - q0, pairs = n / 2;
    deinterleave2(src + q0, static_cast<int>(pairs), row + ph.at(q0), row + ph.at(q0 + 1));
    if (n & 1) row[ph.at(q1 - 1)] = src[q1 - 1];
}
[[gnu::always_inline]] inline void from_phases(const float* row, Phases ph, int64_t q0, int64_t q1,
                                               float* dst) {
    const int64_t n = q1 - q0, pairs = n / 2;
    interleave2<false>(row + ph.at(q0), row + ph.at(q0 + 1), static_cast<int>(pairs), dst + q0,
                       false);
    if (n & 1) dst[q1 - 1] = row[ph.at(q1 - 1)];
}

// P = the extent of plane xc, zero outside the plane, in phases of stride 2 across (rows of
// 2·half floats).
void pad_plane_phased(const float* xc, const Conv2dGeometry& g, float* P) {
    const Phases ph{(g.padded_w() + 1) / 2};
    const int64_t hp = g.padded_h(), row = 2 * ph.half;
    const PlaneInside in = plane_inside(g);
    std::fill(P, P + hp * row, 0.0f);
    for (int64_t r = in.r0; r < in.r1; ++r)
        to_phases(xc + (r - g.win.pad_top) * g.w - g.win.pad_left, in.q0, in.q1, ph, P + r * row);
}

// Where a padded plane's floats lie: rows of wp floats, column q at q, a tap's row read at the
// stride across (SW, or the geometry's where 0) ...
template <int SW>
struct PlainPlane {
    int64_t wp, sw;
    explicit PlainPlane(const Conv2dGeometry& g) : wp(g.padded_w()), sw(g.win.sw) {}
    int64_t row() const { return wp; }
    int64_t at(int64_t q) const { return q; }
    int64_t step() const { return SW ? SW : sw; }  // a constant where SW is one
    void pad(const float* xc, const Conv2dGeometry& g, float* P) const { pad_plane(xc, g, P); }
    void unpad(const float* pr, int64_t q0, int64_t q1, float* d) const {
        for (int64_t q = q0; q < q1; ++q) d[q] = pr[q];
    }
};
// ... or, at stride 2 across, rows in phases (Phases), a tap's row contiguous.
struct PhasedPlane {
    Phases ph;
    explicit PhasedPlane(const Conv2dGeometry& g) : ph{(g.padded_w() + 1) / 2} {}
    int64_t row() const { return 2 * ph.half; }
    int64_t at(int64_t q) const { return ph.at(q); }
    static constexpr int64_t step() { return 1; }
    void pad(const float* xc, const Conv2dGeometry& g, float* P) const {
        pad_plane_phased(xc, g, P);
    }
    void unpad(const float* pr, int64_t q0, int64_t q1, float* d) const {
        from_phases(pr, ph, q0, q1, d);
    }
};

// Calls f(layout) with the padded plane's layout: in phases at stride 2 across where they fit
// the stack copy, plain otherwise.
template <int SW, class F>
void with_plane_layout(const Conv2dGeometry& g, F&& f) {
    if (SW == 2 && phased_fits(g)) return f(PhasedPlane(g));
    f(PlainPlane<SW>(g));
}

// OW, SW: the output width and the stride across as compile-time constants (0: the geometry's),
// so that the row loops of the common small planes are fixed-length vector moves.
template <int OW, int SW>
void im2col_padded(const float* x, const Conv2dGeometry& g, float* col, int64_t ld) {
    const Window2d& w = g.win;
    const int64_t ow_n = OW ? OW : g.ow;
    with_plane_layout<SW>(g, [&](const auto L) {
        const int64_t row = L.row();
        parallel_for(g.c_per_group(), w.kh * w.kw * g.oh * g.ow, [&](int64_t c) {
            float P[kPaddedPlaneMax];
            L.pad(x + c * g.h * g.w, g, P);
            for (int64_t i = 0; i < w.kh; ++i)
                for (int64_t j = 0; j < w.kw; ++j) {
                    float* out = col + ((c * w.kh + i) * w.kw + j) * ld;
                    const float* tap = P + i * w.dh * row + L.at(j * w.dw);
                    for (int64_t oh = 0; oh < g.oh; ++oh) {
                        const float* src = tap + oh * w.sh * row;
                        float* o = out + oh * ow_n;
                        for (int64_t ow = 0; ow < ow_n; ++ow) o[ow] = src[ow * L.step()];
                    }
                }
        });
    });
}

// Without accumulation the sums start from zeros, as on the row path, in P alone where the
// extent covers the plane; else the inputs no window reaches (past the last whole stride) get
// their zeros in dx first.
void fresh_gradient(float* dxc, const Conv2dGeometry& g, bool covered, float* P, int64_t floats) {
    if (!covered) std::fill(dxc, dxc + g.h * g.w, 0.0f);
    std::fill(P, P + floats, 0.0f);
}

template <int OW, int SW>
void col2im_padded(const float* col, int64_t ld, const Conv2dGeometry& g, float* dx,
                   bool accumulate) {
    const Window2d& w = g.win;
    const int64_t ow_n = OW ? OW : g.ow;
    const PlaneInside in = plane_inside(g);
    const bool covered = in.covers(g);
    with_plane_layout<SW>(g, [&](const auto L) {
        const int64_t row = L.row();
        parallel_for(g.c_per_group(), w.kh * w.kw * g.oh * g.ow, [&](int64_t c) {
            float P[kPaddedPlaneMax];
            float* dxc = dx + c * g.h * g.w;
            if (accumulate)
                L.pad(dxc, g, P);
            else
                fresh_gradient(dxc, g, covered, P, g.padded_h() * row);
            for (int64_t i = 0; i < w.kh; ++i)
                for (int64_t j = 0; j < w.kw; ++j) {
                    const float* src = col + ((c * w.kh + i) * w.kw + j) * ld;
                    float* tap = P + i * w.dh * row + L.at(j * w.dw);
                    for (int64_t oh = 0; oh < g.oh; ++oh) {
                        float* dst = tap + oh * w.sh * row;
                        const float* sr = src + oh * ow_n;
                        for (int64_t ow = 0; ow < ow_n; ++ow) dst[ow * L.step()] += sr[ow];
                    }
                }
            for (int64_t r = in.r0; r < in.r1; ++r)
                L.unpad(P + r * row, in.q0, in.q1, dxc + (r - w.pad_top) * g.w - w.pad_left);
        });
    });
}

// Calls f(W) with `v` as a compile-time constant where it is one of Ws; false where it is none.
template <int... Ws, class F>
bool with_one_of(Widths<Ws...>, int64_t v, F&& f) {
    return ((v == Ws ? (f(std::integral_constant<int, Ws>{}), true) : false) || ...);
}

// Calls f(W) with `width` as a compile-time constant where it is one of Ws, else with 0.
template <int... Ws, class F>
void with_width(int64_t width, F&& f) {
    if (!with_one_of(Widths<Ws...>{}, width, f)) f(std::integral_constant<int, 0>{});
}

// Calls f(OW, SW) with the plane's output width and stride across as compile-time constants
// where they are common (widths 2 to 16 at 64 px and 224 px, strides 1 and 2), else as 0.
template <class F>
void with_row_constants(const Conv2dGeometry& g, F&& f) {
    using std::integral_constant;
    auto by_width = [&](auto sw) {
        with_width<2, 4, 7, 8, 14, 16>(g.ow, [&](auto ow) { f(ow, sw); });
    };
    if (g.win.sw == 1) return by_width(integral_constant<int, 1>{});
    if (g.win.sw == 2) return by_width(integral_constant<int, 2>{});
    f(integral_constant<int, 0>{}, integral_constant<int, 0>{});
}

// --- rows that fit one or two vectors (Conv2dGeometry::im2col_in_vector_rows) ---------------
//
// Where every input row and every output row fits two V8s (16×16, 14×14, 8×8, 7×7, 4×4 and 2×2
// planes), a tap's output row is a permute of its input row: lane ow takes column
// ow·sw + j·dw - pad_left, +0 where that lies outside the row. There is no padded copy of the
// plane: on ResNet-18's 3×3 convolutions on 8×8 planes its zeroing and copy cost as much as the
// taps' moves themselves (perf, 2026-12-06: 4.7 % and 5.2 % of the forward at stride 1; 12 % and
// 6 % at stride 2, where the copy splits each row into its phases; 16×16 to 8×8 at stride 2: 6 %
// and 5 %). col2im is the adjoint: each input row's sums are built in vectors from its start (dx,
// or zeros), adding every tap row that reaches it permuted back, taps in the padded path's order
// (i, then j); the lanes a tap does not reach add -0, which leaves every float as it is, signed
// zeros included. The moves and sums are the padded path's, so the bits are the same.
constexpr int64_t kVectorRowTaps = Conv2dGeometry::kVectorRowMaxKernel;

using V2 = float __attribute__((vector_size(2 * sizeof(float))));
using V4 = float __attribute__((vector_size(4 * sizeof(float))));

// A row of N ≤ 16 floats in one or two V8s, floats [8·r, 8·r + 8) in v[r]; lanes past N are
// unspecified (never taken into a result).
template <int N>
struct Row {
    static_assert(N == 1 || N == 2 || N == 4 || N == 7 || N == 8 || N == 14 || N == 16);
    static constexpr int kRegs = N > kVec8Lanes ? 2 : 1;
    V8 v[kRegs];
};

// Loads by the row's own floats: never a store to the stack and a wider load back, which the
// CPU cannot forward (that cost 25 cycles a tap row in col2im, perf).
template <int N>
[[gnu::always_inline]] inline Row<N> load_row(const float* p) {
    if constexpr (N == kVec8Lanes) {
        return {load8(p)};
    } else if constexpr (N == 1) {
        return {V8{*p}};
    } else if constexpr (N == 2) {
#if defined(__SSE2__)
        // One 8-byte load into a vector register (movq; unaligned, no aliasing of a double):
        // through a V2, GCC loaded the pair into a general register, stored it to the stack and
        // read 32 bytes back, a forwarding stall that took a fifth of a 3×3 backward on 2×2
        // planes (perf, 2026-12-06).
        const V4 a = reinterpret_cast<V4>(_mm_loadu_si64(p));
        return {__builtin_shufflevector(a, a, 0, 1, 2, 3, 0, 1, 2, 3)};
#else
        V2 a;
        std::memcpy(&a, p, sizeof a);
        return {__builtin_shufflevector(a, a, 0, 1, 0, 1, 0, 1, 0, 1)};
#endif
    } else if constexpr (N == 4 || N == 7) {
        V4 a, b;  // 7: floats 0-3 and 3-6
        std::memcpy(&a, p, sizeof a);
        if constexpr (N == 4) return {__builtin_shufflevector(a, a, 0, 1, 2, 3, 0, 1, 2, 3)};
        std::memcpy(&b, p + 3, sizeof b);
        return {__builtin_shufflevector(a, b, 0, 1, 2, 3, 5, 6, 7, 7)};
    } else if constexpr (N == 14) {
        const V8 b = load8(p + 6);  // floats 6-13
        return {load8(p), __builtin_shufflevector(b, b, 2, 3, 4, 5, 6, 7, 6, 7)};
    } else {
        return {load8(p), load8(p + kVec8Lanes)};
    }
}
template <int N>
[[gnu::always_inline]] inline void store_row(float* p, const Row<N>& r) {
    const V8 v = r.v[0];
    if constexpr (N == kVec8Lanes) {
        store8(p, v);
    } else if constexpr (N == 1) {
        *p = v[0];
    } else if constexpr (N == 2) {
        const V2 a = __builtin_shufflevector(v, v, 0, 1);
        std::memcpy(p, &a, sizeof a);
    } else if constexpr (N == 4 || N == 7) {
        const V4 a = __builtin_shufflevector(v, v, 0, 1, 2, 3);
        std::memcpy(p, &a, sizeof a);
        if constexpr (N == 7) {
            const V4 b = __builtin_shufflevector(v, v, 3, 4, 5, 6);
            std::memcpy(p + 3, &b, sizeof b);
        }
    } else if constexpr (N == 14) {  // floats 6-7 stored twice, with the same values
        store8(p, v);
        store8(p + 6, __builtin_shufflevector(v, r.v[1], 6, 7, 8, 9, 10, 11, 12, 13));
    } else {
        store8(p, v);
        store8(p + kVec8Lanes, r.v[1]);
    }
}

// Lane l of a result is lane from[l] of a row's 16 (two V8s; of one where the row has one)
// where live[l] (all ones), else `dead`'s bits.
struct LanePick {
    V8i from{}, live{};
    void set(int l, int64_t lane) {
        from[l] = static_cast<int>(lane);
        live[l] = -1;
    }
};
template <int N>
[[gnu::always_inline]] inline V8 pick(const Row<N>& row, const LanePick& p, V8i dead) {
    V8 v;
    if constexpr (Row<N>::kRegs == 1)
        v = __builtin_shuffle(row.v[0], p.from);
    else
        v = __builtin_shuffle(row.v[0], row.v[1], p.from);
    const V8i r = reinterpret_cast<V8i>(v);
    return reinterpret_cast<V8>((r & p.live) | (dead & ~p.live));
}

// W, OW, KW: the input and output widths and the kernel's (KW = 0: the geometry's).
template <int W, int OW, int KW>
void im2col_vector_rows(const float* x, const Conv2dGeometry& g, float* col, int64_t ld) {
    constexpr int NO = Row<OW>::kRegs;
    const Window2d& w = g.win;
    const int64_t kh = w.kh, kw = KW ? KW : w.kw, sh = w.sh, dh = w.dh, pt = w.pad_top;
    const int64_t h = g.h, oh_n = g.oh;
    LanePick tap[kVectorRowTaps][NO];  // tap j: lane ow from column ow·sw + j·dw - pad_left
    for (int64_t j = 0; j < kw; ++j)
        for (int l = 0; l < OW; ++l)
            if (const int64_t q = l * w.sw + j * w.dw - w.pad_left; q >= 0 && q < W)
                tap[j][l / kVec8Lanes].set(l % kVec8Lanes, q);
    parallel_for(g.c_per_group(), kh * kw * oh_n * OW, [&](int64_t c) {
        const float* xc = x + c * h * W;
        for (int64_t i = 0; i < kh; ++i) {
            float* out = col + (c * kh + i) * kw * ld;
            for (int64_t oh = 0; oh < oh_n; ++oh, out += OW) {
                const int64_t ih = oh * sh - pt + i * dh;
                if (ih < 0 || ih >= h) {
                    for (int64_t j = 0; j < kw; ++j) store_row<OW>(out + j * ld, Row<OW>{});
                    continue;
                }
                const Row<W> row = load_row<W>(xc + ih * W);
                for (int64_t j = 0; j < kw; ++j) {
                    Row<OW> o;
                    for (int r = 0; r < NO; ++r) o.v[r] = pick(row, tap[j][r], V8i{});
                    store_row<OW>(out + j * ld, o);
                }
            }
        }
    });
}

template <int W, int OW, int KW>
void col2im_vector_rows(const float* col, int64_t ld, const Conv2dGeometry& g, float* dx,
                        bool accumulate) {
    constexpr int NI = Row<W>::kRegs;
    const Window2d& w = g.win;
    const int64_t kh = w.kh, kw = KW ? KW : w.kw, sh = w.sh, dh = w.dh, pt = w.pad_top;
    const int64_t h = g.h, oh_n = g.oh;
    // tap j: input lane q from lane ow, where ow·sw + j·dw - pl = q
    LanePick back[kVectorRowTaps][NI];
    for (int64_t j = 0; j < kw; ++j)
        for (int q = 0; q < W; ++q)
            if (const int64_t t = q + w.pad_left - j * w.dw;
                t >= 0 && t % w.sw == 0 && t / w.sw < OW)
                back[j][q / kVec8Lanes].set(q % kVec8Lanes, t / w.sw);
    const V8i minus_zero = V8i{} + static_cast<int>(0x80000000u);
    parallel_for(g.c_per_group(), kh * kw * oh_n * OW, [&](int64_t c) {
        float* dxc = dx + c * h * W;
        const float* colc = col + c * kh * kw * ld;
        for (int64_t r = 0; r < h; ++r) {
            Row<W> acc = accumulate ? load_row<W>(dxc + r * W) : Row<W>{};
            for (int64_t i = 0; i < kh; ++i) {
                int64_t oh = r + pt - i * dh;  // oh·sh, then oh (no division at stride 1)
                if (oh < 0) break;
                if (sh != 1) {
                    if (oh % sh != 0) continue;
                    oh /= sh;
                }
                if (oh >= oh_n) continue;
                const float* src = colc + i * kw * ld + oh * OW;
                for (int64_t j = 0; j < kw; ++j) {
                    const Row<OW> from = load_row<OW>(src + j * ld);
                    for (int q = 0; q < NI; ++q) acc.v[q] += pick(from, back[j][q], minus_zero);
                }
            }
            store_row<W>(dxc + r * W, acc);
        }
    });
}

// Calls f(W, OW, KW) with the input and output widths as compile-time constants, dispatched on
// the lists Conv2dGeometry::im2col_in_vector_rows holds them to, and the kernel's width where it
// is 3 (else 0). For geometries that predicate admits.
template <class F>
void with_vector_rows(const Conv2dGeometry& g, F&& f) {
    using G = Conv2dGeometry;
    auto with_kernel = [&](auto iw, auto ow) {
        if (g.win.kw == 3) return f(iw, ow, std::integral_constant<int, 3>{});
        f(iw, ow, std::integral_constant<int, 0>{});
    };
    auto by_output = [&](auto outputs) {
        return [&, outputs](auto iw) {
            with_one_of(outputs, g.ow, [&](auto ow) { with_kernel(iw, ow); });
        };
    };
    if (G::VectorRowsIn::has(g.w))
        with_one_of(G::VectorRowsIn{}, g.w, by_output(G::VectorRowsOut{}));
    else
        with_one_of(G::WideVectorRowsIn{}, g.w, by_output(G::WideVectorRowsOut{}));
}

// --- windows that tile the plane (Conv2dGeometry::tiles) ------------------------------------
//
// Input row oh·kh + i holds the i-th kernel row of every window of output row oh, side by side:
// its floats ow·kw + j go to column row (c, i, j), position oh·OW + ow. One pass over the input
// rows, no padding, no bounds. KW, OW: the kernel's and the output's widths as compile-time
// constants (0: the geometry's), so that the small common rows unroll. 2 wide, the compiler
// vectorises the split of a row; its join, float by float, took a tenth of ConvNeXt's 2×2
// downsampling backward (perf, 2026-12-05) and goes by vector shuffles. 4 wide, both go by
// shuffles, twice by 2: the 4×4 stem ran 0.028 → 0.025 ms forward at 64 px, 1.8 → 1.55 at 224.

// Rows of up to kTileRowMax windows split through buffers on the stack at kernel width 4.
constexpr int64_t kTileRowMax = 256;

// out[j·ld + ow] = xr[ow·kw + j] for j < kw, ow < n.
template <int KW>
void split_row(const float* xr, int64_t kw, int n, float* out, int64_t ld) {
    if constexpr (KW == 4) {
        if (n <= kTileRowMax) {
            float even[2 * kTileRowMax], odd[2 * kTileRowMax];  // columns 0, 2 and 1, 3
            deinterleave2(xr, 2 * n, even, odd);
            deinterleave2(even, n, out, out + 2 * ld);
            deinterleave2(odd, n, out + ld, out + 3 * ld);
            return;
        }
    }
    for (int64_t j = 0; j < kw; ++j)
        for (int64_t ow = 0; ow < n; ++ow) out[j * ld + ow] = xr[ow * kw + j];
}

// The adjoint: d[ow·kw + j] (+)= src[j·ld + ow].
template <int KW>
void join_row(const float* src, int64_t ld, int64_t kw, int n, float* d, bool accumulate) {
    if constexpr (KW == 2) {
        interleave2<true>(src, src + ld, n, d, accumulate);
        return;
    } else if constexpr (KW == 4) {
        if (n <= kTileRowMax) {
            float even[2 * kTileRowMax], odd[2 * kTileRowMax];
            interleave2<false>(src, src + 2 * ld, n, even, false);
            interleave2<false>(src + ld, src + 3 * ld, n, odd, false);
            interleave2<true>(even, odd, 2 * n, d, accumulate);
            return;
        }
    }
    for (int64_t j = 0; j < kw; ++j)
        for (int64_t ow = 0; ow < n; ++ow) {
            const float v = src[j * ld + ow];
            d[ow * kw + j] = (accumulate ? d[ow * kw + j] : 0.0f) + v;
        }
}

template <int KW, int OW>
void im2col_tiles(const float* x, const Conv2dGeometry& g, float* col, int64_t ld) {
    const int64_t kh = g.win.kh, kw = KW ? KW : g.win.kw, ow_n = OW ? OW : g.ow;
    parallel_for(g.c_per_group(), kh * kw * g.oh * ow_n, [&](int64_t c) {
        const float* xc = x + c * g.h * g.w;
        for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t i = 0; i < kh; ++i)
                split_row<KW>(xc + (oh * kh + i) * g.w, kw, static_cast<int>(ow_n),
                              col + (c * kh + i) * kw * ld + oh * ow_n, ld);
    });
}

// dx (+)= col2im(col) for tiling windows: each input float takes at most one column value, so
// without accumulation it is stored (as 0 + v), and inputs no window reaches (where the kernel
// does not divide the plane) get 0.
template <int KW, int OW>
void col2im_tiles(const float* col, int64_t ld, const Conv2dGeometry& g, float* dx,
                  bool accumulate) {
    const int64_t kh = g.win.kh, kw = KW ? KW : g.win.kw, ow_n = OW ? OW : g.ow;
    const bool covered = g.oh * kh == g.h && ow_n * kw == g.w;
    parallel_for(g.c_per_group(), kh * kw * g.oh * ow_n, [&](int64_t c) {
        float* dxc = dx + c * g.h * g.w;
        if (!accumulate && !covered) std::fill(dxc, dxc + g.h * g.w, 0.0f);
        for (int64_t oh = 0; oh < g.oh; ++oh)
            for (int64_t i = 0; i < kh; ++i)
                join_row<KW>(col + (c * kh + i) * kw * ld + oh * ow_n, ld, kw,
                             static_cast<int>(ow_n), dxc + (oh * kh + i) * g.w, accumulate);
    });
}

// Calls f(KW, OW) with the kernel's width 2 or 4 and the output width as compile-time constants
// where they are common (ConvNeXt's 2×2 downsampling to 2 to 28 columns, its 4×4 stem to 16 or
// 56), else as 0.
template <class F>
void with_tile_constants(const Conv2dGeometry& g, F&& f) {
    using std::integral_constant;
    auto by_width = [&](auto kw) {
        with_width<2, 4, 7, 8, 14, 16, 28, 56>(g.ow, [&](auto ow) { f(kw, ow); });
    };
    if (g.win.kw == 2) return by_width(integral_constant<int, 2>{});
    if (g.win.kw == 4) return by_width(integral_constant<int, 4>{});
    f(integral_constant<int, 0>{}, integral_constant<int, 0>{});
}

// --- strided 1×1 windows without padding (Conv2dGeometry::strided_pointwise) ---------------
//
// Row oh of a channel's column row is every sw-th float of input row oh·sh; back, input rows
// and columns the stride skips get zeros. On ResNet-18's projection from 64 to 128 channels on
// 8×8 outputs the row path's per-row bounds and calls took 27 % of its forward and 21 % of its
// backward (perf, 2026-12-05). OW: the output width as a compile-time constant (0: the
// geometry's), so that the short rows unroll.

// d[2·t] = 0 + s[t] and d[2·t + 1] = 0 for t < n, on a row of `w` ≥ 2·n - 1 floats (the last
// odd one only where the row has it), then zeros to the row's end: a fresh input-gradient row of
// a stride-2 projection, summed as the general col2im sums it (+0, then the value).
[[gnu::always_inline]] inline void spread_even(const float* s, int64_t n, float* d, int64_t w) {
    const V8 z{};
    int64_t t = 0;
    for (; 2 * (t + kVec8Lanes) <= w && t + kVec8Lanes <= n; t += kVec8Lanes) {
        const V8 a = z + load8(s + t);
        store8(d + 2 * t, __builtin_shuffle(a, z, V8i{0, 8, 1, 8, 2, 8, 3, 8}));
        store8(d + 2 * t + kVec8Lanes, __builtin_shuffle(a, z, V8i{4, 8, 5, 8, 6, 8, 7, 8}));
    }
    for (; t < n; ++t) {
        d[2 * t] = 0.0f + s[t];
        if (2 * t + 1 < w) d[2 * t + 1] = 0.0f;
    }
    for (int64_t q = 2 * n; q < w; ++q) d[q] = 0.0f;
}

template <int OW>
void im2col_strided_1x1(const float* x, const Conv2dGeometry& g, float* col, int64_t ld) {
    const int64_t ow_n = OW ? OW : g.ow, sh = g.win.sh, sw = g.win.sw;
    parallel_for(g.c_per_group(), g.oh * ow_n, [&](int64_t c) {
        const float* xc = x + c * g.h * g.w;
        float* out = col + c * ld;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
            const float* xr = xc + oh * sh * g.w;
            float* o = out + oh * ow_n;
            if (sw == 2)
                copy_even(xr, o, ow_n);
            else
                for (int64_t ow = 0; ow < ow_n; ++ow) o[ow] = xr[ow * sw];
        }
    });
}

template <int OW>
void col2im_strided_1x1(const float* col, int64_t ld, const Conv2dGeometry& g, float* dx,
                        bool accumulate) {
    const int64_t ow_n = OW ? OW : g.ow, sh = g.win.sh, sw = g.win.sw;
    parallel_for(g.c_per_group(), g.h * g.w, [&](int64_t c) {
        float* dxc = dx + c * g.h * g.w;
        const float* src = col + c * ld;
        if (accumulate) {
            for (int64_t oh = 0; oh < g.oh; ++oh) {
                float* d = dxc + oh * sh * g.w;
                const float* sr = src + oh * ow_n;
                if (sw == 2)
                    add_to_even(d, sr, ow_n);
                else
                    for (int64_t ow = 0; ow < ow_n; ++ow) d[ow * sw] += sr[ow];
            }
            return;
        }
        for (int64_t ih = 0; ih < g.h; ++ih) {
            float* d = dxc + ih * g.w;
            if (ih % sh != 0 || ih / sh >= g.oh) {
                std::fill(d, d + g.w, 0.0f);
                continue;
            }
            const float* sr = src + ih / sh * ow_n;
            if (sw == 2) {
                spread_even(sr, ow_n, d, g.w);
                continue;
            }
            std::fill(d, d + g.w, 0.0f);
            for (int64_t ow = 0; ow < ow_n; ++ow) d[ow * sw] = 0.0f + sr[ow];
        }
    });
}

}  // namespace

// --- row by row, with the bounds -----------------------------------------------------------

void im2col(const float* x, const Conv2dGeometry& g, float* col, int64_t ld) {
    if (g.strided_pointwise())
        return with_width<2, 4, 7, 8, 14, 16, 28, 56>(
            g.ow, [&](auto ow) { im2col_strided_1x1<decltype(ow)::value>(x, g, col, ld); });
    if (g.tiles())
        return with_tile_constants(g, [&](auto kw, auto ow) {
            im2col_tiles<decltype(kw)::value, decltype(ow)::value>(x, g, col, ld);
        });
    if (g.im2col_in_vector_rows())
        return with_vector_rows(g, [&](auto iw, auto ow, auto kw) {
            im2col_vector_rows<decltype(iw)::value, decltype(ow)::value, decltype(kw)::value>(
                x, g, col, ld);
        });
    if (g.im2col_through_padded_plane())
        return with_row_constants(g, [&](auto ow, auto sw) {
            im2col_padded<decltype(ow)::value, decltype(sw)::value>(x, g, col, ld);
        });
    const Window2d& w = g.win;
    // One channel per item, rows by pointer steps: per-row divisions cost more than the copies
    // on 2×2 and 4×4 planes.
    parallel_for(g.c_per_group(), w.kh * w.kw * g.oh * g.ow, [&](int64_t c) {
        const float* xc = x + c * g.h * g.w;
        for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t off = j * w.dw - w.pad_left;
            const Span s = valid_span(off, w.sw, g.w, g.ow);
            for (int64_t i = 0; i < w.kh; ++i) {
                float* out = col + ((c * w.kh + i) * w.kw + j) * ld;
                for (int64_t oh = 0; oh < g.oh; ++oh) {
                    float* o = out + oh * g.ow;
                    const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
                    if (ih < 0 || ih >= g.h) {
                        for (int64_t ow = 0; ow < g.ow; ++ow) o[ow] = 0.0f;
                        continue;
                    }
                    const float* xr = xc + ih * g.w;
                    for (int64_t ow = 0; ow < s.lo; ++ow) o[ow] = 0.0f;
                    if (w.sw == 1) {
                        for (int64_t ow = s.lo; ow < s.hi; ++ow) o[ow] = xr[ow + off];
                    } else if (w.sw == 2) {
                        if (s.hi > s.lo) copy_even(xr + 2 * s.lo + off, o + s.lo, s.hi - s.lo);
                    } else {
                        for (int64_t ow = s.lo; ow < s.hi; ++ow) o[ow] = xr[ow * w.sw + off];
                    }
                    for (int64_t ow = s.hi; ow < g.ow; ++ow) o[ow] = 0.0f;
                }
            }
        }
    });
}

// dx (+)= col2im(col): the adjoint of im2col (rows ld apart). One thread per input channel, taps
// and positions in a fixed order, so the sums do not depend on the thread count.
void col2im(const float* col, int64_t ld, const Conv2dGeometry& g, float* dx, bool accumulate) {
    if (g.strided_pointwise())
        return with_width<2, 4, 7, 8, 14, 16, 28, 56>(g.ow, [&](auto ow) {
            col2im_strided_1x1<decltype(ow)::value>(col, ld, g, dx, accumulate);
        });
    if (g.tiles())
        return with_tile_constants(g, [&](auto kw, auto ow) {
            col2im_tiles<decltype(kw)::value, decltype(ow)::value>(col, ld, g, dx, accumulate);
        });
    if (g.im2col_in_vector_rows())
        return with_vector_rows(g, [&](auto iw, auto ow, auto kw) {
            col2im_vector_rows<decltype(iw)::value, decltype(ow)::value, decltype(kw)::value>(
                col, ld, g, dx, accumulate);
        });
    if (g.im2col_through_padded_plane())
        return with_row_constants(g, [&](auto ow, auto sw) {
            col2im_padded<decltype(ow)::value, decltype(sw)::value>(col, ld, g, dx, accumulate);
        });
    const Window2d& w = g.win;
    const int64_t plane = g.oh * g.ow;
    parallel_for(g.c_per_group(), w.kh * w.kw * plane, [&](int64_t c) {
        float* dxc = dx + c * g.h * g.w;
        if (!accumulate) std::fill(dxc, dxc + g.h * g.w, 0.0f);
        for_each_tap_row(g, [&](int64_t i, int64_t j, int64_t off, Span s, int64_t oh, int64_t ih) {
            const float* src = col + ((c * w.kh + i) * w.kw + j) * ld + oh * g.ow;
            add_row(dxc + ih * g.w, off, w.sw, s, src);
        });
    });
}

}  // namespace rl::cpu
