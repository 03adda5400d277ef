// Grouped convolutions with whole vectors of channels a group (Conv2dGeometry::grouped_direct:
// RegNet's and ResNeXt's grouped 3×3s, and ungrouped ones with few outputs, as one group:
// DenseNet's 3×3s to 32 channels), computed directly on channels-last padded planes, with no
// im2col matrix.
//
// Why: a group has only 8 to 64 output channels, so each element of an im2col matrix serves that
// many multiply-adds, and building the matrix cost as much as its GEMM (the grouped layers of
// RegNetX-800MF ran at 0.19-0.61 of their raw GEMMs, docs/benchmarks.md). Here the windows read
// the input where it lies. The inner loop is the register-tiled micro-kernel of Goto and van de
// Geijn ("Anatomy of high-performance matrix multiplication", ACM TOMS 34(3), 2008) with the
// packed A panel replaced by the windows' addresses in the padded plane (the "implicit GEMM" of
// direct convolution, as in Georganas et al., "Anatomy of high-performance deep learning
// convolutions on SIMD architectures", SC 2018): a tile of MR output positions × NV vectors of
// channels stays in registers while it runs down the taps and channels. The vectors are 8 floats,
// or 16 where the build has AVX-512 and the channels come in sixteens (with_tile). Groups
// narrower than a vector run a vector's worth at a time, each in its own lanes (packed groups,
// below: 8 channels a group two to an AVX-512 vector; 4 channels four to it, or two to an AVX2
// one; a unit of P groups, its planes those of one group of P times the channels).
//
// Per group, in a slice of the workspace (Conv2dGeometry::grouped_slice_floats; a thread's groups
// take its slice in turn, for_units), a chunk of images at a time (Conv2dGeometry::grouped_images:
// enough that small planes fill the tiles), per image of the chunk:
//   xp [ph][pw][cg]   the input plane zero-padded, channels last: input (ih, iw) at row
//                     ih + pad_top, column iw + pad_left; output (oh, ow) reads tap (i, j) at
//                     row oh·sh + i·dh, column ow·sw + j·dw
//   yc [P][og]        forward: the outputs; backward: the output gradients (P = oh·ow)
//   wk                forward: the weights as [cg·taps][og] (their transpose); dX: as
//                     [tap][og][cg]
//   dwa [cg·taps][og] backward: the weight gradient's running sums (its transpose)
//   dxc [h·w][cg]     backward: the input gradient, channels last
//   dyp [qh][qw][og]  backward: the output gradient, channels last, zero-padded so that every
//                     tap reaching every input position reads inside it
// Forward: y[p][o] = b[o] + Σ_tap Σ_c xp[at(p) + off(tap) + c]·w[o][c][tap], taps then channels
// in order. dW[o][c][tap] = Σ over images, then positions p in order, of
// xp[at(p) + off(tap) + c]·dy[p][o]. dX[q][c] = Σ over the taps (i, j) that reach input q, in
// order, of Σ_o dy[(q - off(tap)) / stride][o]·w[o][c][tap]: gathered, one sum per input, each
// in registers until it is stored (input_tile). Groups (or packs) run in parallel, each computed
// whole in one slice, so every sum has one order whatever the thread count, and a step repeats
// itself bit for bit; a convolution of one group runs its tiles in parallel instead (for_tiles),
// each tile's sums in the same order.
#include "engine/cpu/conv_grouped.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/vec8.h"

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace rl::cpu {
namespace {

static_assert(Conv2dGeometry::kGroupLanes == kVec8Lanes);

// The plane's layout and the taps' offsets in it (floats), shared by the three passes.
struct Layout {
    int64_t ph, pw, cg, og, taps, plane, padded, nb;
    std::vector<int64_t> tap_off;  // tap i·kw + j at (i·dh·pw + j·dw)·cg
    // `count` groups side by side (packed groups), their channels one after another.
    explicit Layout(const Conv2dGeometry& g, int64_t count = 1)
        : ph(g.padded_h()),
          pw(g.padded_w()),
          cg(g.c_per_group() * count),
          og(g.out_per_group() * count),
          taps(g.win.kh * g.win.kw),
          plane(g.oh * g.ow),
          padded(ph * pw * cg),
          nb(g.grouped_images()),
          tap_off(static_cast<size_t>(taps)) {
        for (int64_t i = 0; i < g.win.kh; ++i)
            for (int64_t j = 0; j < g.win.kw; ++j)
                tap_off[static_cast<size_t>(i * g.win.kw + j)] =
                    (i * g.win.dh * pw + j * g.win.dw) * cg;
    }
};

// The group's cg channel planes of one image (x, NCHW) into xp, zero-padded, row by row through
// 8 × 8 transposes (a float at a time, the copy cost more than the convolution); only the
// padding is zeroed. Planes of up to 8 columns (ResNeXt's and RegNet's 2×2 to 8×8) would go a
// float at a time row by row, or 8 calls of one block each; small ones are transposed whole into
// a buffer on the stack and copied into place a row at a time (8×8 planes so: ResNeXt-50's
// strided 3×3 of 32 groups of 16 channels, 8×8 to 4×4, 0.077 → 0.065-0.070 ms forward).
void pack_input(const float* x, const Conv2dGeometry& g, const Layout& l, float* xp) {
    const int64_t top = g.win.pad_top, left = g.win.pad_left, plane = g.h * g.w;
    const int64_t rows = std::min(g.h, l.ph - top), cols = std::min(g.w, l.pw - left);
    const int64_t row_floats = l.pw * l.cg;
    constexpr int64_t kWholeFloats = 4096;
    alignas(64) float whole[kWholeFloats];
    const bool by_plane = g.w <= 8 && plane * l.cg <= kWholeFloats;
    if (by_plane) transpose(x, plane, l.cg, plane, whole, l.cg);
    std::fill(xp, xp + top * row_floats, 0.0f);
    for (int64_t ih = 0; ih < rows; ++ih) {
        float* dst = xp + (ih + top) * row_floats;
        std::fill(dst, dst + left * l.cg, 0.0f);
        if (by_plane)
            std::copy(whole + ih * g.w * l.cg, whole + (ih * g.w + cols) * l.cg, dst + left * l.cg);
        else
            transpose(x + ih * g.w, plane, l.cg, cols, dst + left * l.cg, l.cg);
        std::fill(dst + (cols + left) * l.cg, dst + row_floats, 0.0f);
    }
    std::fill(xp + (rows + top) * row_floats, xp + l.ph * row_floats, 0.0f);
}

// MR output positions × NV vectors of W output channels (from `o0`) of the forward. Not inlined:
// its MR row pointers outnumber the registers, and how many the compiler keeps in them changed
// with the code around the call (a 16×16 plane's forward ran 8-15 % slower inlined into
// for_units' loop than into the plain one before it).
template <int W, int NV, int MR>
[[gnu::noinline]] void forward_tile(const float* xp, const int64_t* at, int64_t rows,
                                    const Layout& l, const float* wk, const float* bias, int64_t o0,
                                    float* yc) {
    using V = typename Vec<W>::T;
    V acc[MR][NV];
    for (int v = 0; v < NV; ++v) {
        const V b = bias ? Vec<W>::load(bias + o0 + v * W) : V{};
        for (int r = 0; r < MR; ++r) acc[r][v] = b;
    }
    const float* base[MR];
    for (int r = 0; r < MR; ++r) base[r] = xp + at[r < rows ? r : 0];
    for (int64_t t = 0; t < l.taps; ++t) {
        const int64_t off = l.tap_off[static_cast<size_t>(t)];
        const float* w = wk + t * l.og + o0;
        const int64_t step = l.taps * l.og;  // from channel c to c + 1
        for (int64_t c = 0; c < l.cg; ++c) {
            V wv[NV];
            for (int v = 0; v < NV; ++v) wv[v] = Vec<W>::load(w + c * step + v * W);
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) {
                const float s = base[r][off + c];
                for (int v = 0; v < NV; ++v) acc[r][v] += s * wv[v];
            }
        }
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int v = 0; v < NV; ++v) Vec<W>::store(yc + r * l.og + o0 + v * W, acc[r][v]);
}

// Tap t × MR input channels from `c0` of the weight gradient × NV vectors of output channels
// (from `o0`): adds a chunk's positions qs[0, count) (all of [0, count) where qs is null; window
// starts at[q], images then positions in order) to the running sums in dwa (row c·taps + t), which
// the `first` chunk starts from 0. The MR reads per position fall on neighbouring channels of one
// tap: one cache line.
template <int W, int NV, int MR>
void weight_tile(const float* xp, const int64_t* at, const int64_t* qs, int64_t count,
                 const Layout& l, const float* dyc, int64_t t, int64_t c0, int64_t rows, int64_t o0,
                 bool first, float* dwa) {
    using V = typename Vec<W>::T;
    V acc[MR][NV];
    for (int r = 0; r < MR; ++r) {
        const int64_t c = c0 + (r < rows ? r : 0);
        for (int v = 0; v < NV; ++v)
            acc[r][v] = first ? V{} : Vec<W>::load(dwa + (c * l.taps + t) * l.og + o0 + v * W);
    }
    // The tile's channels are neighbours: one pointer a position, and for a whole tile MR fixed
    // displacements from it (sixteen offsets of their own did not fit the registers).
    const int64_t off = l.tap_off[static_cast<size_t>(t)] + c0;
    auto run = [&](auto whole, auto listed) {
        for (int64_t k = 0; k < count; ++k) {
            const int64_t q = decltype(listed)::value ? qs[k] : k;
            const float* x = xp + at[q] + off;
            const float* d = dyc + q * l.og + o0;
            V dv[NV];
            for (int v = 0; v < NV; ++v) dv[v] = Vec<W>::load(d + v * W);
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) {
                const float s = decltype(whole)::value ? x[r] : x[r < rows ? r : 0];
                for (int v = 0; v < NV; ++v) acc[r][v] += s * dv[v];
            }
        }
    };
    using std::false_type, std::true_type;
    if (rows == MR && qs)
        run(true_type{}, true_type{});
    else if (rows == MR)
        run(true_type{}, false_type{});
    else if (qs)
        run(false_type{}, true_type{});
    else
        run(false_type{}, false_type{});
    for (int64_t r = 0; r < rows; ++r)
        for (int v = 0; v < NV; ++v)
            Vec<W>::store(dwa + ((c0 + r) * l.taps + t) * l.og + o0 + v * W, acc[r][v]);
}

// MR input positions × NV vectors of input channels (from `c0`) of the input gradient, gathered
// from the output gradient: dx[q][c] = Σ over the taps that reach q, in order, of
// Σ_o dyp[at(q) - back(tap) + o]·w[tap][o][c]. The positions of a tile share their phase (row
// and column modulo the stride), hence the taps that reach them (`taps`, `back`: their offsets
// back from at(q) in dyp). Row r goes to dxc + dst[r].
template <int W, int NV, int MR>
void input_tile(const float* dyp, const int64_t* at, float* dxc, const int64_t* dst, int64_t rows,
                const Layout& l, const int64_t* taps, const int64_t* back, int64_t ntaps,
                const float* wt, int64_t c0) {
    using V = typename Vec<W>::T;
    V acc[MR][NV];
    for (int r = 0; r < MR; ++r)
        for (int v = 0; v < NV; ++v) acc[r][v] = V{};
    const float* base[MR];
    for (int r = 0; r < MR; ++r) base[r] = dyp + at[r < rows ? r : 0];
    for (int64_t u = 0; u < ntaps; ++u) {
        const int64_t off = back[u];
        const float* w = wt + taps[u] * l.og * l.cg + c0;
        for (int64_t o = 0; o < l.og; ++o) {
            V wv[NV];
            for (int v = 0; v < NV; ++v) wv[v] = Vec<W>::load(w + o * l.cg + v * W);
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) {
                const float s = base[r][o - off];
                for (int v = 0; v < NV; ++v) acc[r][v] += s * wv[v];
            }
        }
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int v = 0; v < NV; ++v) Vec<W>::store(dxc + dst[r] + c0 + v * W, acc[r][v]);
}

// The widest vectors the build has: AVX-512's 16 floats, whose multiply-adds run at twice the
// rate of 8-float ones where the machine has 512-bit FMA units (the AMD EPYC of the pool: Eigen's
// AVX-512 products at 179 GFLOP/s against 116 for OpenBLAS's AVX2 kernels, docs/benchmarks.md),
// else 8.
#if defined(__AVX512F__)
constexpr int kWide = kVec16Lanes;
#else
constexpr int kWide = kVec8Lanes;
#endif

constexpr int kPackedChannels = static_cast<int>(Conv2dGeometry::kPackedChannels);

// Packed groups: P = W / L groups of L input and L output channels side by side in one W-float
// vector (L = 8 with AVX-512: RegNet's 3×3s, two a vector; L = 4: ResNeXt-50's first stage, 32
// groups of 4, four a vector with AVX-512 and two with AVX2). A group alone fills only part of a
// vector: with_tile's 8-float tiles ran the groups of 8 at half the 16-float rate (0.50-0.62 of
// their raw products on RegNetY-400MF), and groups of 4 went through im2col and a GEMM of 4 rows
// a group (0.73 of raw, docs/benchmarks.md). The P groups' planes are one channels-last plane of
// W channels (Layout with count P), interleaved: lane c·P + p holds channel c of group p, so that
// channel c of every group of the pack is P neighbouring floats, and the vector a multiply-add
// takes (channel c of each group in that group's lanes) is one broadcast from memory. Until
// 2026-12-06 the lanes ran group after group and each multiply-add took its operand through a
// permute: on an Intel Xeon permutes issue on one port of the two that run multiply-adds, and a
// loop of permute + multiply-add ran at 110 GFLOP/s against 163 for broadcast + multiply-add
// (docs/benchmarks.md). Every sum runs in the order of the tiles above, one multiply-add per term,
// so a pack gives the bits each group alone gives.

// The P floats at p repeated across a W-float vector: channel c of each group of a pack, in its
// group's lanes (p + c·P in the interleaved plane).
template <int W, int P>
inline typename Vec<W>::T broadcast_lanes(const float* p) {
#if defined(__AVX512F__)
    if constexpr (W == kVec16Lanes && P == 2) {
        double d;
        std::memcpy(&d, p, sizeof d);
        return reinterpret_cast<V16>(_mm512_set1_pd(d));
    } else if constexpr (W == kVec16Lanes && P == 4) {
        return reinterpret_cast<V16>(_mm512_broadcast_f32x4(_mm_loadu_ps(p)));
    }
#endif
#if defined(__AVX__)
    if constexpr (W == kVec8Lanes && P == 2) {
        double d;
        std::memcpy(&d, p, sizeof d);
        return reinterpret_cast<V8>(_mm256_set1_pd(d));
    }
#endif
    typename Vec<W>::T v;
    for (int i = 0; i < W; ++i) v[i] = p[i % P];
    return v;
}

// `rows` vectors of W floats, `stride` apart, from lanes group after group (p·L + c) to the
// interleaved order (c·P + p), or back.
template <int W, int L>
void interleave_lanes(float* v, int64_t rows, int64_t stride, bool back) {
    constexpr int P = W / L;
    for (int64_t r = 0; r < rows; ++r, v += stride) {
        float t[W];
        std::memcpy(t, v, sizeof t);
        for (int p = 0; p < P; ++p)
            for (int c = 0; c < L; ++c) {
                if (back)
                    v[p * L + c] = t[c * P + p];
                else
                    v[c * P + p] = t[p * L + c];
            }
    }
}

// forward_tile for a pack: MR positions × the P groups' L outputs; wk as [c][tap][W lanes],
// lanes interleaved as the plane's.
template <int W, int L, int MR>
void forward_pack_tile(const float* xp, const int64_t* at, int64_t rows, const Layout& l,
                       const float* wk, const float* bias, float* yc) {
    using V = Vec<W>;
    using T = typename V::T;
    T acc[MR];
    const T b = bias ? V::load(bias) : T{};
    for (int r = 0; r < MR; ++r) acc[r] = b;
    const float* base[MR];
    for (int r = 0; r < MR; ++r) base[r] = xp + at[r < rows ? r : 0];
    constexpr int P = W / L;
    for (int64_t t = 0; t < l.taps; ++t) {
        const int64_t off = l.tap_off[static_cast<size_t>(t)];
        const float* w = wk + t * W;
#pragma GCC unroll 8
        for (int c = 0; c < L; ++c) {
            const T wv = V::load(w + c * l.taps * W);
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r)
                acc[r] += broadcast_lanes<W, P>(base[r] + off + c * P) * wv;
        }
    }
    for (int64_t r = 0; r < rows; ++r) V::store(yc + r * W, acc[r]);
}

// weight_tile for a pack: tap t × the L input channels, each a vector of the P groups' L
// outputs; dwa as [c][tap][W lanes]. (With 8 channels a group, two or three taps at a time, 16
// or 24 accumulators, ran RegNetY-400MF's grouped backward no faster: 0.57-0.59 and 0.55-0.74 ms
// against 0.56-0.65, three alternating rounds.)
template <int W, int L>
void weight_pack_tile(const float* xp, const int64_t* at, const int64_t* qs, int64_t count,
                      const Layout& l, const float* dyc, int64_t t, bool first, float* dwa) {
    using V = Vec<W>;
    using T = typename V::T;
    constexpr int P = W / L;
    T acc[L];
    for (int c = 0; c < L; ++c) acc[c] = first ? T{} : V::load(dwa + (c * l.taps + t) * W);
    const int64_t off = l.tap_off[static_cast<size_t>(t)];
    auto run = [&](auto listed) {
        for (int64_t k = 0; k < count; ++k) {
            const int64_t q = decltype(listed)::value ? qs[k] : k;
            const T dv = V::load(dyc + q * W);
            const float* x = xp + at[q] + off;
#pragma GCC unroll 8
            for (int c = 0; c < L; ++c) acc[c] += broadcast_lanes<W, P>(x + c * P) * dv;
        }
    };
    if (qs)
        run(std::true_type{});
    else
        run(std::false_type{});
    for (int c = 0; c < L; ++c) V::store(dwa + (c * l.taps + t) * W, acc[c]);
}

// input_tile for a pack: MR input positions × the P groups' L input channels; wt as
// [tap][o][W lanes].
template <int W, int L, int MR>
void input_pack_tile(const float* dyp, const int64_t* at, float* dxc, const int64_t* dst,
                     int64_t rows, const int64_t* taps, const int64_t* back, int64_t ntaps,
                     const float* wt) {
    using V = Vec<W>;
    using T = typename V::T;
    T acc[MR] = {};
    const float* base[MR];
    for (int r = 0; r < MR; ++r) base[r] = dyp + at[r < rows ? r : 0];
    constexpr int P = W / L;
    for (int64_t u = 0; u < ntaps; ++u) {
        const int64_t off = back[u];
        const float* w = wt + taps[u] * L * W;
#pragma GCC unroll 8
        for (int o = 0; o < L; ++o) {
            const T wv = V::load(w + o * W);
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r)
                acc[r] += broadcast_lanes<W, P>(base[r] - off + o * P) * wv;
        }
    }
    for (int64_t r = 0; r < rows; ++r) V::store(dxc + dst[r], acc[r]);
}

// Calls f(W, L, MR) for a pack of groups of `channels` (4, or 8 with AVX-512) and its position
// tiles: with 16-float vectors twelve rows (twelve accumulators and the twelve vectors they
// read, of the 32 registers), eight for few positions; with 8-float ones six (of 16), four.
template <class F>
void with_pack_tile(int64_t channels, int64_t positions, F&& f) {
    using std::integral_constant;
    auto rows = [&](auto w, auto l) {
        if constexpr (decltype(w)::value == kVec8Lanes) {
            if (positions <= 4)
                f(w, l, integral_constant<int, 4>{});
            else
                f(w, l, integral_constant<int, 6>{});
        } else if (positions <= 8) {
            f(w, l, integral_constant<int, 8>{});
        } else {
            f(w, l, integral_constant<int, 12>{});
        }
    };
    const integral_constant<int, kWide> w;
    if (channels == kPackedChannels) {
        rows(w, integral_constant<int, kPackedChannels>{});
        return;
    }
#if defined(__AVX512F__)
    rows(w, integral_constant<int, kVec8Lanes>{});
#endif
}

// interleave_lanes for a full pack of groups of `channels` (with_pack_tile's vectors; a unit of
// more than one group is always full: Conv2dGeometry::grouped_direct).
void interleave_pack(int64_t channels, float* v, int64_t rows, int64_t stride, bool back) {
    with_pack_tile(channels, 0, [&](auto w, auto lanes, auto) {
        interleave_lanes<decltype(w)::value, decltype(lanes)::value>(v, rows, stride, back);
    });
}

// Groups a unit of work takes: a vector's worth where they pack (4 channels a group in and
// out, or 8 with AVX-512), else one.
int64_t groups_per_unit(const Conv2dGeometry& g) {
    const int64_t cg = g.c_per_group();
    if (g.groups > 1 && cg == g.out_per_group() && cg < kWide &&
        (cg == kPackedChannels || cg == kVec8Lanes))
        return kWide / cg;
    return 1;
}

// Calls f(W, NV, MR) for `channels` (a multiple of 8): NV vectors of W floats by MR rows.
// 8-float vectors: two vectors and six rows where the channels are a multiple of 16, else one
// vector and twelve rows (twelve accumulators of AVX2's sixteen registers either way). Where the
// rows are at most 8 `positions` (a chunk of 2×2 planes; 0: rows are not positions), six would
// leave a third of the second tile empty: there it is four rows of two vectors, or eight of one.
// 16-float vectors (AVX-512's 32 registers) where the channels are a multiple of 16: two vectors
// by twelve rows for multiples of 32, one by sixteen otherwise; eight rows for few positions.
// Two or four rows for two or four positions at most (the input gradient's positions that the
// same taps reach: on small planes, a corner's positions of a chunk), whose rows past the last
// would compute nothing kept; with two rows, four 16-float vectors where the channels allow, so
// that eight sums are in flight (two by two ran ResNeXt-101's last grouped 3×3s' backward 3-4 %
// slower).
template <class F>
void with_tile(int64_t channels, int64_t positions, F&& f) {
    using std::integral_constant;
    using Eight = integral_constant<int, kVec8Lanes>;
    using One = integral_constant<int, 1>;
    using Two = integral_constant<int, 2>;
    auto rows = [&](auto w, auto nv, auto many, auto few) {
        if (positions > 0 && positions <= 2)
            f(w, nv, Two{});
        else if (positions > 0 && positions <= 4)
            f(w, nv, integral_constant<int, 4>{});
        else if (positions > 0 && positions <= 8)
            f(w, nv, few);
        else
            f(w, nv, many);
    };
    if constexpr (kWide == kVec16Lanes) {
        using Sixteen = integral_constant<int, kVec16Lanes>;
        if (channels % (4 * kVec16Lanes) == 0 && positions > 0 && positions <= 2) {
            f(Sixteen{}, integral_constant<int, 4>{}, Two{});  // eight accumulators still
            return;
        }
        if (channels % (2 * kVec16Lanes) == 0) {
            rows(Sixteen{}, Two{}, integral_constant<int, 12>{}, integral_constant<int, 8>{});
            return;
        }
        if (channels % kVec16Lanes == 0) {
            rows(Sixteen{}, One{}, integral_constant<int, 16>{}, integral_constant<int, 8>{});
            return;
        }
    }
    if (channels % (2 * kVec8Lanes) == 0)
        rows(Eight{}, Two{}, integral_constant<int, 6>{}, integral_constant<int, 4>{});
    else
        rows(Eight{}, One{}, integral_constant<int, 12>{}, integral_constant<int, 8>{});
}

// The weight gradient's tiles run over input channels (rows) × vectors of output channels. With
// one 8-float vector (8 output channels a group), with_tile's twelve rows computed 12 or 24 rows
// for 8 or 16 input channels (RegNetY-400MF's groups), half again the work: there the rows are
// eight where twelve do not divide cg (a 3×3 of 8 channels a group on 8×8 planes: 0.097 → 0.063
// ms backward). With two, six rows stay: four, dividing any cg, made 16 channels a group 12 %
// slower. With 16-float vectors: two by twelve rows (eight where twelve do not divide cg), or
// one by sixteen (eight).
template <class F>
void with_weight_tile(int64_t og, int64_t cg, F&& f) {
    using std::integral_constant;
    using Eight = integral_constant<int, kVec8Lanes>;
    if constexpr (kWide == kVec16Lanes) {
        using Sixteen = integral_constant<int, kVec16Lanes>;
        if (og % (2 * kVec16Lanes) == 0) {
            if (cg % 12 == 0)
                f(Sixteen{}, integral_constant<int, 2>{}, integral_constant<int, 12>{});
            else
                f(Sixteen{}, integral_constant<int, 2>{}, integral_constant<int, 8>{});
            return;
        }
        if (og % kVec16Lanes == 0) {
            if (cg % 16 == 0)
                f(Sixteen{}, integral_constant<int, 1>{}, integral_constant<int, 16>{});
            else
                f(Sixteen{}, integral_constant<int, 1>{}, integral_constant<int, 8>{});
            return;
        }
    }
    if (og % (2 * kVec8Lanes) == 0)
        f(Eight{}, integral_constant<int, 2>{}, integral_constant<int, 6>{});
    else if (cg % 12 == 0)
        f(Eight{}, integral_constant<int, 1>{}, integral_constant<int, 12>{});
    else
        f(Eight{}, integral_constant<int, 1>{}, integral_constant<int, 8>{});
}

// The window starts of positions [q0, q0 + rows) of a chunk's images (position q: image q / P,
// output position q mod P), walked without a division each.
void starts(const Conv2dGeometry& g, const Layout& l, int64_t q0, int64_t rows, int64_t* at) {
    int64_t j = q0 / l.plane, oh = q0 % l.plane / g.ow, ow = q0 % l.plane % g.ow;
    for (int64_t r = 0; r < rows; ++r) {
        at[r] = j * l.padded + (oh * g.win.sh * l.pw + ow * g.win.sw) * l.cg;
        if (++ow == g.ow) {
            ow = 0;
            if (++oh == g.oh) oh = 0, ++j;
        }
    }
}

constexpr int kMaxRows = 16;

// The groups run in parallel; a convolution of one group (an ungrouped one with few outputs)
// runs its tiles in parallel instead. Each tile writes outputs of its own, each a sum in a fixed
// order, so the thread count changes nothing.
template <class F>
void for_tiles(const Conv2dGeometry& g, int64_t n, int64_t work_per_item, F&& body) {
    if (g.groups == 1) {
        parallel_for(n, work_per_item, body);
        return;
    }
    for (int64_t i = 0; i < n; ++i) body(i);
}

// Runs body(u, slice) for the `units` units of `per` groups: in parallel lanes, one a thread up
// to the workspace's slices (Conv2dGeometry::grouped_slices), each lane's units one after
// another in the lane's `per` slices of `slice` floats, so that a thread's reordered weights and
// sums stay in its cache from one group to the next. A unit is computed whole in its slice,
// whichever it is.
template <class F>
void for_units(const Conv2dGeometry& g, int64_t units, int64_t per, int64_t slice,
               int64_t work_per_unit, float* ws, F&& body) {
    const int64_t lanes = std::max<int64_t>(
        1, std::min({units, g.grouped_slices() / per, static_cast<int64_t>(cpu_threads())}));
    const int64_t units_per_lane = (units + lanes - 1) / lanes;
    parallel_for(lanes, units_per_lane * work_per_unit, [&](int64_t lane) {
        for (int64_t u = lane; u < units; u += lanes) body(u, ws + lane * per * slice);
    });
}

}  // namespace

void grouped_direct_forward(const float* x, const float* wt, const float* b,
                            const Conv2dGeometry& g, float* y, float* ws) {
    const int64_t per = groups_per_unit(g), units = (g.groups + per - 1) / per;
    const int64_t slice = g.grouped_slice_floats(false), k = g.patch(), image = g.h * g.w;
    const int64_t cg1 = g.c_per_group(), og1 = g.out_per_group();
    for_units(
        g, units, per, slice, per * g.n * g.oh * g.ow * k * og1, ws, [&](int64_t u, float* xp) {
            const int64_t g0 = u * per, count = std::min(per, g.groups - g0);
            const Layout l(g, count);
            float* yc = xp + l.nb * l.padded;
            float* wk = yc + l.nb * l.plane * l.og;
            for (int64_t grp = 0; grp < count; ++grp)  // [og][cg·taps] → [cg·taps][og]
                transpose(wt + (g0 + grp) * og1 * k, k, og1, k, wk + grp * og1, l.og);
            const bool pack = count > 1;
            if (pack) interleave_pack(cg1, wk, k, l.og, false);
            // The bias in the pack's lanes (interleaved like the outputs).
            alignas(64) float bias_lanes[kWide];
            const float* bg = b ? b + g0 * og1 : nullptr;
            if (bg && pack) {
                std::copy(bg, bg + l.og, bias_lanes);
                interleave_pack(cg1, bias_lanes, 1, l.og, false);
                bg = bias_lanes;
            }
            for (int64_t n0 = 0; n0 < g.n; n0 += l.nb) {
                const int64_t m = std::min(l.nb, g.n - n0), positions = m * l.plane;
                for (int64_t j = 0; j < m; ++j) {
                    pack_input(x + ((n0 + j) * g.c + g0 * cg1) * image, g, l, xp + j * l.padded);
                    if (pack) interleave_pack(cg1, xp + j * l.padded, l.ph * l.pw, l.cg, false);
                }
                if (pack) {
                    with_pack_tile(cg1, positions, [&](auto w, auto lanes, auto mr) {
                        constexpr int W = decltype(w)::value, L = decltype(lanes)::value;
                        constexpr int MR = decltype(mr)::value;
                        for (int64_t q0 = 0; q0 < positions; q0 += MR) {
                            int64_t at[kMaxRows];
                            const int64_t rows = std::min<int64_t>(MR, positions - q0);
                            starts(g, l, q0, rows, at);
                            forward_pack_tile<W, L, MR>(xp, at, rows, l, wk, bg, yc + q0 * l.og);
                        }
                    });
                } else {
                    with_tile(l.og, positions, [&](auto w, auto nv, auto mr) {
                        constexpr int W = decltype(w)::value, NV = decltype(nv)::value;
                        constexpr int MR = decltype(mr)::value;
                        for_tiles(g, (positions + MR - 1) / MR, MR * k * l.og, [&](int64_t tile) {
                            int64_t at[kMaxRows];
                            const int64_t q0 = tile * MR,
                                          rows = std::min<int64_t>(MR, positions - q0);
                            starts(g, l, q0, rows, at);
                            for (int64_t o0 = 0; o0 < l.og; o0 += NV * W)
                                forward_tile<W, NV, MR>(xp, at, rows, l, wk, bg, o0,
                                                        yc + q0 * l.og);
                        });
                    });
                }
                if (pack) interleave_pack(cg1, yc, positions, l.og, true);
                for (int64_t j = 0; j < m; ++j)
                    transpose(yc + j * l.plane * l.og, l.og, l.plane, l.og,
                              y + ((n0 + j) * g.out_c + g0 * og1) * l.plane, l.plane);
            }
        });
}

void grouped_direct_backward(const float* x, const float* dy, const float* wt,
                             const Conv2dGeometry& g, float* dw, float* dx, bool accumulate,
                             float* ws) {
    const int64_t slice = g.grouped_slice_floats(true), k = g.patch();
    const int64_t image = g.h * g.w;
    // dyp: dy (oh, ow) at row oh + eh, column ow + ew (Conv2dGeometry::grouped_grad_h/w). Input
    // (ih, iw) sits at padded row r = ih + pad_top = ph_r + sh·a (phase ph_r = r mod sh); tap i
    // reaches it when i·dh ≡ ph_r (mod sh), from output row a - (i·dh - ph_r) / sh.
    const int64_t sh = g.win.sh, sw = g.win.sw, dh = g.win.dh, dwl = g.win.dw;
    const int64_t eh = (g.win.kh - 1) * dh / sh, ew = (g.win.kw - 1) * dwl / sw;
    const int64_t qh = g.grouped_grad_h(), qw = g.grouped_grad_w();
    // Input positions of one phase (row and column modulo the stride) that the same taps reach
    // from an output: those taps (`taps`, `back`: their offsets back from a position in dyp)
    // and, for a chunk of nb images, each position's place in dyp (`at`) and in dxc (`dst`),
    // images one after another, each in row-major order; a chunk of m images takes the first
    // m·per_image.
    struct Phase {
        std::vector<int64_t> taps, back, at, dst;
        int64_t per_image = 0;
    };
    // The window starts, the phases and their positions for a unit's layout, worked out once
    // per call rather than per group and chunk.
    //
    // A tap that falls in the padding reads a zero, and its term adds nothing to a sum that
    // starts from +0 (the sum keeps its bits without it). On small planes most of a padded
    // 3×3's taps do: on 2×2 planes, 5 of each position's 9. There the sums leave them out: the
    // weight gradient's per tap, over the positions whose window has that tap inside the input
    // (tap_q, images then positions in order; tap_per_image a plane's), and the input
    // gradient's per set of positions that the same taps reach from an output (a phase's
    // positions split by that set). Only where that leaves at most kSkippedTapsPay of the
    // terms: a split phase runs shorter tiles, and on larger planes (RegNetY-400MF's 16×16,
    // where the border is a small part of the plane) it ran the backward at half the speed.
    // Packed groups keep their phases whole (their tiles of 8 or 12 rows would run a set of
    // two positions at a quarter of their rows; tiles of two and four made the 16×16 ones
    // 15 % slower, from the code they added alone).
    struct Plan {
        std::vector<int64_t> window_at;
        std::vector<std::vector<int64_t>> tap_q;  // empty: every tap reads every position
        std::vector<int64_t> tap_per_image;
        std::vector<Phase> phases;
    };
    constexpr double kSkippedTapsPay = 0.75;
    // Rows (or columns) [0, count) by the taps that reach inside from them: each row's class,
    // and each class's mask over the taps.
    struct Classes {
        std::vector<size_t> of;
        std::vector<std::vector<char>> masks;
    };
    auto classes = [](int64_t count, size_t taps, auto&& inside) {
        Classes c;
        for (int64_t r = 0; r < count; ++r) {
            std::vector<char> mask(taps);
            for (size_t u = 0; u < taps; ++u) mask[u] = inside(r, u);
            const auto at = std::find(c.masks.begin(), c.masks.end(), mask);
            c.of.push_back(static_cast<size_t>(at - c.masks.begin()));
            if (at == c.masks.end()) c.masks.push_back(std::move(mask));
        }
        return c;
    };
    auto plan_of = [&](const Layout& l, bool split_phases) {
        Plan plan;
        if (dw) {
            plan.window_at.resize(static_cast<size_t>(l.nb * l.plane));
            starts(g, l, 0, l.nb * l.plane, plan.window_at.data());
            // Per tap row i (column j), the output rows (columns) whose window has it inside.
            auto inside = [](int64_t outputs, int64_t stride, int64_t off, int64_t size) {
                std::vector<int64_t> in;
                for (int64_t o = 0; o < outputs; ++o)
                    if (o * stride + off >= 0 && o * stride + off < size) in.push_back(o);
                return in;
            };
            std::vector<std::vector<int64_t>> rows_in, cols_in;
            for (int64_t i = 0; i < g.win.kh; ++i)
                rows_in.push_back(inside(g.oh, sh, i * dh - g.win.pad_top, g.h));
            for (int64_t j = 0; j < g.win.kw; ++j)
                cols_in.push_back(inside(g.ow, sw, j * dwl - g.win.pad_left, g.w));
            int64_t terms = 0;
            for (const auto& r : rows_in)
                for (const auto& c : cols_in) terms += static_cast<int64_t>(r.size() * c.size());
            if (terms <= kSkippedTapsPay * static_cast<double>(l.taps * l.plane)) {
                plan.tap_q.resize(static_cast<size_t>(l.taps));
                plan.tap_per_image.resize(static_cast<size_t>(l.taps));
                for (size_t i = 0; i < rows_in.size(); ++i)
                    for (size_t j = 0; j < cols_in.size(); ++j) {
                        const size_t t = i * cols_in.size() + j;
                        const auto per_image =
                            static_cast<int64_t>(rows_in[i].size() * cols_in[j].size());
                        plan.tap_per_image[t] = per_image;
                        plan.tap_q[t].reserve(static_cast<size_t>(l.nb * per_image));
                        for (int64_t n = 0; n < l.nb; ++n)
                            for (const int64_t oh : rows_in[i])
                                for (const int64_t ow : cols_in[j])
                                    plan.tap_q[t].push_back(n * l.plane + oh * g.ow + ow);
                    }
            }
        }
        if (!dx) return plan;
        const int64_t grad_plane = qh * qw * l.og;
        for (int64_t pr = 0; pr < sh; ++pr)
            for (int64_t pq = 0; pq < sw; ++pq) {
                // The phase's taps: index, offset back in dyp, output row and column back.
                std::vector<int64_t> taps, back, up, left;
                for (int64_t i = 0; i < g.win.kh; ++i)
                    for (int64_t j = 0; j < g.win.kw; ++j)
                        if ((i * dh - pr) % sh == 0 && (j * dwl - pq) % sw == 0 && i * dh >= pr &&
                            j * dwl >= pq) {
                            taps.push_back(i * g.win.kw + j);
                            up.push_back((i * dh - pr) / sh);
                            left.push_back((j * dwl - pq) / sw);
                            back.push_back((up.back() * qw + left.back()) * l.og);
                        }
                const size_t ntaps = taps.size();
                // The phase's rows (ih = ih0 + sh·r, dyp row a0 + r) and columns, by the taps
                // that reach an output row (column) from them; a position's taps are its row's
                // and its column's.
                const int64_t ih0 = (pr - g.win.pad_top % sh + sh) % sh;
                const int64_t iw0 = (pq - g.win.pad_left % sw + sw) % sw;
                const int64_t a0 = (ih0 + g.win.pad_top) / sh, b0 = (iw0 + g.win.pad_left) / sw;
                const int64_t rows = ih0 < g.h ? (g.h - ih0 + sh - 1) / sh : 0;
                const int64_t cols = iw0 < g.w ? (g.w - iw0 + sw - 1) / sw : 0;
                const Classes rc = classes(rows, ntaps, [&](int64_t r, size_t u) {
                    return a0 + r - up[u] >= 0 && a0 + r - up[u] < g.oh;
                });
                const Classes cc = classes(cols, ntaps, [&](int64_t c, size_t u) {
                    return b0 + c - left[u] >= 0 && b0 + c - left[u] < g.ow;
                });
                // Sets of taps: each pair of a row class and a column class, the same set once.
                std::vector<std::vector<char>> sets;
                std::vector<size_t> set_of(rc.masks.size() * cc.masks.size());
                std::vector<int64_t> rows_of(rc.masks.size()), cols_of(cc.masks.size());
                for (const size_t x : rc.of) ++rows_of[x];
                for (const size_t y : cc.of) ++cols_of[y];
                int64_t terms = 0;
                for (size_t x = 0; x < rc.masks.size(); ++x)
                    for (size_t y = 0; y < cc.masks.size(); ++y)
                        for (size_t u = 0; u < ntaps; ++u)
                            terms += rows_of[x] * cols_of[y] * (rc.masks[x][u] && cc.masks[y][u]);
                const bool split = split_phases && terms <= kSkippedTapsPay *
                                                                static_cast<double>(rows * cols) *
                                                                static_cast<double>(ntaps);
                for (size_t x = 0; x < rc.masks.size(); ++x)
                    for (size_t y = 0; y < cc.masks.size(); ++y) {
                        std::vector<char> mask(ntaps, 1);
                        if (split)
                            for (size_t u = 0; u < ntaps; ++u)
                                mask[u] = rc.masks[x][u] && cc.masks[y][u];
                        const auto at = std::find(sets.begin(), sets.end(), mask);
                        set_of[x * cc.masks.size() + y] = static_cast<size_t>(at - sets.begin());
                        if (at == sets.end()) sets.push_back(std::move(mask));
                    }
                std::vector<Phase> phases(sets.size());
                for (size_t k = 0; k < sets.size(); ++k) {
                    for (size_t u = 0; u < ntaps; ++u)
                        if (sets[k][u]) {
                            phases[k].taps.push_back(taps[u]);
                            phases[k].back.push_back(back[u]);
                        }
                    phases[k].at.reserve(static_cast<size_t>(l.nb * rows * cols));
                    phases[k].dst.reserve(static_cast<size_t>(l.nb * rows * cols));
                }
                for (int64_t j = 0; j < l.nb; ++j)
                    for (int64_t r = 0; r < rows; ++r)
                        for (int64_t c = 0; c < cols; ++c) {
                            Phase& ph =
                                phases[set_of[rc.of[static_cast<size_t>(r)] * cc.masks.size() +
                                              cc.of[static_cast<size_t>(c)]]];
                            const int64_t ih = ih0 + r * sh, iw = iw0 + c * sw;
                            ph.at.push_back(j * grad_plane +
                                            ((a0 + r + eh) * qw + b0 + c + ew) * l.og);
                            ph.dst.push_back((j * image + ih * g.w + iw) * l.cg);
                            ph.per_image += j == 0;
                        }
                for (Phase& ph : phases) plan.phases.push_back(std::move(ph));
            }
        return plan;
    };
    // Worked out once per geometry and kept for the process: on small planes, building a plan
    // (its vectors of positions) and freeing it again was a seventh of a backward's time
    // (GoogLeNet's 3×3 of 24 → 64 channels on 4×4 planes, 0.03 ms, docs/benchmarks.md). The key
    // is every field of the geometry and what the plan depends on beside it; a plan is only
    // read once made. At most kKeptPlans (a network's distinct convolutions); past that the
    // cache starts again.
    auto plan_for = [&](int64_t count, bool split) {
        using Key = std::array<int64_t, 22>;
        const Key key = {g.n,
                         g.c,
                         g.h,
                         g.w,
                         g.out_c,
                         g.oh,
                         g.ow,
                         g.groups,
                         g.win.kh,
                         g.win.kw,
                         g.win.sh,
                         g.win.sw,
                         g.win.dh,
                         g.win.dw,
                         g.win.pad_top,
                         g.win.pad_left,
                         g.win.pad_bottom,
                         g.win.pad_right,
                         count,
                         split,
                         dw != nullptr,
                         dx != nullptr};
        constexpr size_t kKeptPlans = 512;
        static std::mutex mutex;
        static std::map<Key, std::shared_ptr<const Plan>> plans;
        {
            const std::lock_guard lock(mutex);
            const auto it = plans.find(key);
            if (it != plans.end()) return it->second;
        }
        auto plan = std::make_shared<const Plan>(plan_of(Layout(g, count), split));
        const std::lock_guard lock(mutex);
        if (plans.size() >= kKeptPlans) plans.clear();
        plans.emplace(key, plan);
        return std::shared_ptr<const Plan>(std::move(plan));
    };
    const int64_t per = groups_per_unit(g), units = (g.groups + per - 1) / per;
    const int64_t cg1 = g.c_per_group(), og1 = g.out_per_group();
    const std::shared_ptr<const Plan> unit_plan = plan_for(per, per == 1);
    // A last unit of fewer groups (an odd count of paired groups) has a plan of its own.
    const std::shared_ptr<const Plan> lone_plan = g.groups % per != 0 ? plan_for(1, true) : nullptr;
    for_units(
        g, units, per, slice, 2 * per * g.n * g.oh * g.ow * k * og1, ws,
        [&](int64_t un, float* xp) {
            const int64_t g0 = un * per, count = std::min(per, g.groups - g0);
            const Layout l(g, count);
            const int64_t grad_plane = qh * qw * l.og;
            const Plan& plan = count == per ? *unit_plan : *lone_plan;
            float* dyc = xp + l.nb * l.padded;
            float* dxc = dyc + l.nb * l.plane * l.og;
            float* dyp = dxc + l.nb * image * l.cg;
            float* wk = dyp + l.nb * grad_plane;
            float* dwa = wk + k * l.og;
            const float* wg = wt + g0 * og1 * k;  // per group [og][cg][taps]
            // [tap][og][cg]: a group's [og·cg][taps] transposed at once; for packed groups, into
            // a buffer first, then each tap's og rows of cg floats to their place in the unit's
            // rows. (An 8 × 9 transpose per output channel, 440 of them for RegNetY-400MF's last
            // stage, took a third of its backward on 2×2 planes.)
            if (dx && count == 1)
                transpose(wg, l.taps, og1 * cg1, l.taps, wk, og1 * cg1);
            else if (dx)
                for (int64_t grp = 0; grp < count; ++grp) {
                    float* t = dwa;  // free until the weight gradient's first tile writes it
                    transpose(wg + grp * og1 * k, l.taps, og1 * cg1, l.taps, t, og1 * cg1);
                    for (int64_t r = 0; r < l.taps * og1; ++r)  // (tap, o): cg1 = 4 or 8
                        for (int64_t c = 0; c < cg1; ++c)
                            wk[r * l.cg + grp * cg1 + c] = t[r * cg1 + c];
                }
            const bool pack = count > 1;
            if (dx && pack) interleave_pack(cg1, wk, l.taps * og1, l.cg, false);
            for (int64_t n0 = 0; n0 < g.n; n0 += l.nb) {
                const int64_t m = std::min(l.nb, g.n - n0);
                for (int64_t j = 0; j < m; ++j)
                    transpose(dy + ((n0 + j) * g.out_c + g0 * og1) * l.plane, l.plane, l.og,
                              l.plane, dyc + j * l.plane * l.og, l.og);
                if (pack) interleave_pack(cg1, dyc, m * l.plane, l.og, false);
                if (dw) {
                    const int64_t positions = m * l.plane;
                    const int64_t* window_at = plan.window_at.data();
                    // Tap t's positions of the chunk (null: all of them, in order) and count.
                    auto tap_q = [&](int64_t t) {
                        return plan.tap_q.empty() ? nullptr
                                                  : plan.tap_q[static_cast<size_t>(t)].data();
                    };
                    auto tap_count = [&](int64_t t) {
                        return plan.tap_q.empty() ? positions
                                                  : m * plan.tap_per_image[static_cast<size_t>(t)];
                    };
                    for (int64_t j = 0; j < m; ++j) {
                        pack_input(x + ((n0 + j) * g.c + g0 * cg1) * image, g, l,
                                   xp + j * l.padded);
                        if (pack) interleave_pack(cg1, xp + j * l.padded, l.ph * l.pw, l.cg, false);
                    }
                    if (pack) {
                        with_pack_tile(cg1, 0, [&](auto w, auto lanes, auto) {
                            constexpr int W = decltype(w)::value, L = decltype(lanes)::value;
                            for (int64_t t = 0; t < l.taps; ++t)
                                weight_pack_tile<W, L>(xp, window_at, tap_q(t), tap_count(t), l,
                                                       dyc, t, n0 == 0, dwa);
                        });
                    } else {
                        with_weight_tile(l.og, l.cg, [&](auto w, auto nv, auto mr) {
                            constexpr int W = decltype(w)::value, NV = decltype(nv)::value;
                            constexpr int MR = decltype(mr)::value;
                            const int64_t blocks = (l.cg + MR - 1) / MR;
                            for_tiles(g, l.taps * blocks, positions * MR * l.og, [&](int64_t i) {
                                const int64_t t = i / blocks, c0 = i % blocks * MR;
                                for (int64_t o0 = 0; o0 < l.og; o0 += NV * W)
                                    weight_tile<W, NV, MR>(
                                        xp, window_at, tap_q(t), tap_count(t), l, dyc, t, c0,
                                        std::min<int64_t>(MR, l.cg - c0), o0, n0 == 0, dwa);
                            });
                        });
                    }
                }
                if (!dx) continue;
                std::fill(dyp, dyp + m * grad_plane, 0.0f);
                for (int64_t j = 0; j < m; ++j)
                    for (int64_t oh = 0; oh < g.oh; ++oh)
                        std::copy(dyc + (j * l.plane + oh * g.ow) * l.og,
                                  dyc + (j * l.plane + (oh + 1) * g.ow) * l.og,
                                  dyp + j * grad_plane + ((oh + eh) * qw + ew) * l.og);
                // Phase by phase, the input positions of that phase, image by image in row-major
                // order, a tile at a time; every input position gets its sum (0 where no tap
                // reaches it).
                for (const Phase& ph : plan.phases) {
                    const int64_t count_q = m * ph.per_image;
                    const int64_t ntaps = static_cast<int64_t>(ph.taps.size());
                    if (pack) {
                        with_pack_tile(cg1, count_q, [&](auto w, auto lanes, auto mr) {
                            constexpr int W = decltype(w)::value, L = decltype(lanes)::value;
                            constexpr int MR = decltype(mr)::value;
                            for (int64_t q0 = 0; q0 < count_q; q0 += MR)
                                input_pack_tile<W, L, MR>(
                                    dyp, ph.at.data() + q0, dxc, ph.dst.data() + q0,
                                    std::min<int64_t>(MR, count_q - q0), ph.taps.data(),
                                    ph.back.data(), ntaps, wk);
                        });
                        continue;
                    }
                    with_tile(l.cg, count_q, [&](auto w, auto nv, auto mr) {
                        constexpr int W = decltype(w)::value, NV = decltype(nv)::value;
                        constexpr int MR = decltype(mr)::value;
                        for_tiles(g, (count_q + MR - 1) / MR, MR * ntaps * l.og * l.cg,
                                  [&](int64_t i) {
                                      const int64_t q0 = i * MR;
                                      const int64_t rows = std::min<int64_t>(MR, count_q - q0);
                                      for (int64_t c0 = 0; c0 < l.cg; c0 += NV * W)
                                          input_tile<W, NV, MR>(
                                              dyp, ph.at.data() + q0, dxc, ph.dst.data() + q0, rows,
                                              l, ph.taps.data(), ph.back.data(), ntaps, wk, c0);
                                  });
                    });
                }
                if (pack) interleave_pack(cg1, dxc, m * image, l.cg, true);
                for (int64_t j = 0; j < m; ++j)
                    transpose(dxc + j * image * l.cg, l.cg, image, l.cg,
                              dx + ((n0 + j) * g.c + g0 * cg1) * image, image, accumulate);
            }
            if (dw && pack) interleave_pack(cg1, dwa, k, l.og, true);
            if (dw)  // → [og][cg·taps], group by group
                for (int64_t grp = 0; grp < count; ++grp)
                    transpose(dwa + grp * og1, l.og, k, og1, dw + (g0 + grp) * og1 * k, k);
        });
}

}  // namespace rl::cpu
