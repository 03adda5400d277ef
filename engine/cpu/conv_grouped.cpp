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
// or 16 where the build has AVX-512 and the channels come in sixteens (with_tile); there, groups
// of 8 channels run two at a time, one in each half of a 16-float vector (paired groups, below:
// a unit of two groups, its planes those of one group of 16 channels).
//
// Per group, in its own slice of the workspace (Conv2dGeometry::grouped_slice_floats), a chunk of
// images at a time (Conv2dGeometry::grouped_images: enough that small planes fill the tiles),
// per image of the chunk:
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
// in registers until it is stored (input_tile). Groups (or pairs) run in parallel, each in its own
// slice, so every sum has one order whatever the thread count, and a step repeats itself bit for
// bit; a convolution of one group runs its tiles in parallel instead (for_tiles), each tile's
// sums in the same order.
#include "engine/cpu/conv_grouped.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/vec8.h"

namespace rl::cpu {
namespace {

static_assert(Conv2dGeometry::kGroupLanes == kVec8Lanes);

// The plane's layout and the taps' offsets in it (floats), shared by the three passes.
struct Layout {
    int64_t ph, pw, cg, og, taps, plane, padded, nb;
    std::vector<int64_t> tap_off;  // tap i·kw + j at (i·dh·pw + j·dw)·cg
    // `count` groups side by side (paired groups: two), their channels one after another.
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
// padding is zeroed. Planes narrower than 8 columns (ResNeXt's and RegNet's 2×2 to 7×7) would
// go a float at a time row by row; small ones are transposed whole into a buffer on the stack
// and copied into place a row at a time.
void pack_input(const float* x, const Conv2dGeometry& g, const Layout& l, float* xp) {
    const int64_t top = g.win.pad_top, left = g.win.pad_left, plane = g.h * g.w;
    const int64_t rows = std::min(g.h, l.ph - top), cols = std::min(g.w, l.pw - left);
    const int64_t row_floats = l.pw * l.cg;
    constexpr int64_t kWholeFloats = 4096;
    alignas(64) float whole[kWholeFloats];
    const bool by_plane = g.w < 8 && plane * l.cg <= kWholeFloats;
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

// MR output positions × NV vectors of W output channels (from `o0`) of the forward.
template <int W, int NV, int MR>
void forward_tile(const float* xp, const int64_t* at, int64_t rows, const Layout& l,
                  const float* wk, const float* bias, int64_t o0, float* yc) {
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
// (from `o0`): adds a chunk's positions (window starts `at`, images then positions in order) to
// the running sums in dwa (row c·taps + t), which the `first` chunk starts from 0.
// The MR reads per position fall on neighbouring channels of one tap: one cache line.
template <int W, int NV, int MR>
void weight_tile(const float* xp, const int64_t* at, int64_t positions, const Layout& l,
                 const float* dyc, int64_t t, int64_t c0, int64_t rows, int64_t o0, bool first,
                 float* dwa) {
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
    auto run = [&](auto whole) {
        for (int64_t q = 0; q < positions; ++q) {
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
    if (rows == MR)
        run(std::true_type{});
    else
        run(std::false_type{});
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

#if defined(__AVX512F__)
// Paired groups: two groups of 8 input and 8 output channels (RegNet's 3×3s) side by side in one
// 16-float vector, the first group's 8 lanes then the second's. A group alone fills only half an
// AVX-512 vector, and with_tile's 8-float tiles ran its layers at half the 16-float rate
// (0.50-0.62 of their raw products on RegNetY-400MF, docs/benchmarks.md). The two groups' planes
// are one 16-channel channels-last plane (Layout with count 2); each multiply-add takes its operand
// from that vector of 16 channels, channel c of each half broadcast to that half's lanes (one
// permute). Every sum runs in the order of the 8-float tiles above, each one multiply-add per
// term, so a pair gives the bits a group alone gives.
using I16 = int __attribute__((vector_size(kVec16Lanes * sizeof(int))));
constexpr int kPairLanes = kVec8Lanes;  // channels a group

// Lanes 0-7: channel c of the first group (lane c of v); lanes 8-15: of the second (8 + c).
inline V16 pair_channel(V16 v, int c) {
    const I16 first = {0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8};
    return __builtin_shuffle(v, first + c);
}

// forward_tile for a pair: MR positions × both groups' 8 outputs; wk as [c][tap][16 lanes].
template <int MR>
void forward_pair_tile(const float* xp, const int64_t* at, int64_t rows, const Layout& l,
                       const float* wk, const float* bias, float* yc) {
    using V = Vec<kVec16Lanes>;
    V16 acc[MR];
    const V16 b = bias ? V::load(bias) : V16{};
    for (int r = 0; r < MR; ++r) acc[r] = b;
    const float* base[MR];
    for (int r = 0; r < MR; ++r) base[r] = xp + at[r < rows ? r : 0];
    for (int64_t t = 0; t < l.taps; ++t) {
        const int64_t off = l.tap_off[static_cast<size_t>(t)];
        V16 x[MR];
        for (int r = 0; r < MR; ++r) x[r] = V::load(base[r] + off);
        const float* w = wk + t * kVec16Lanes;
#pragma GCC unroll 8
        for (int c = 0; c < kPairLanes; ++c) {
            const V16 wv = V::load(w + c * l.taps * kVec16Lanes);
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) acc[r] += pair_channel(x[r], c) * wv;
        }
    }
    for (int64_t r = 0; r < rows; ++r) V::store(yc + r * kVec16Lanes, acc[r]);
}

// weight_tile for a pair: tap t × the 8 input channels, each a vector of both groups' 8
// outputs; dwa as [c][tap][16 lanes]. (Two or three taps at a time, 16 or 24 accumulators, ran
// RegNetY-400MF's grouped backward no faster: 0.57-0.59 and 0.55-0.74 ms against 0.56-0.65,
// three alternating rounds.)
void weight_pair_tile(const float* xp, const int64_t* at, int64_t positions, const Layout& l,
                      const float* dyc, int64_t t, bool first, float* dwa) {
    using V = Vec<kVec16Lanes>;
    V16 acc[kPairLanes];
    for (int c = 0; c < kPairLanes; ++c)
        acc[c] = first ? V16{} : V::load(dwa + (c * l.taps + t) * kVec16Lanes);
    const int64_t off = l.tap_off[static_cast<size_t>(t)];
    for (int64_t q = 0; q < positions; ++q) {
        const V16 dv = V::load(dyc + q * kVec16Lanes);
        const V16 x = V::load(xp + at[q] + off);
#pragma GCC unroll 8
        for (int c = 0; c < kPairLanes; ++c) acc[c] += pair_channel(x, c) * dv;
    }
    for (int c = 0; c < kPairLanes; ++c) V::store(dwa + (c * l.taps + t) * kVec16Lanes, acc[c]);
}

// input_tile for a pair: MR input positions × both groups' 8 input channels; wt as
// [tap][o][16 lanes].
template <int MR>
void input_pair_tile(const float* dyp, const int64_t* at, float* dxc, const int64_t* dst,
                     int64_t rows, const int64_t* taps, const int64_t* back, int64_t ntaps,
                     const float* wt) {
    using V = Vec<kVec16Lanes>;
    V16 acc[MR] = {};
    const float* base[MR];
    for (int r = 0; r < MR; ++r) base[r] = dyp + at[r < rows ? r : 0];
    for (int64_t u = 0; u < ntaps; ++u) {
        const int64_t off = back[u];
        const float* w = wt + taps[u] * kPairLanes * kVec16Lanes;
        V16 d[MR];
        for (int r = 0; r < MR; ++r) d[r] = V::load(base[r] - off);
#pragma GCC unroll 8
        for (int o = 0; o < kPairLanes; ++o) {
            const V16 wv = V::load(w + o * kVec16Lanes);
#pragma GCC unroll 16
            for (int r = 0; r < MR; ++r) acc[r] += pair_channel(d[r], o) * wv;
        }
    }
    for (int64_t r = 0; r < rows; ++r) V::store(dxc + dst[r], acc[r]);
}

// Calls f(MR) for a pair's position tiles: twelve rows (twelve accumulators and the twelve
// vectors they read, of the 32 registers), eight for few positions.
template <class F>
void with_pair_tile(int64_t positions, F&& f) {
    if (positions <= 8)
        f(std::integral_constant<int, 8>{});
    else
        f(std::integral_constant<int, 12>{});
}
#endif

// Groups a unit of work takes: two where they pair (AVX-512, 8 input and 8 output channels a
// group), else one.
int64_t groups_per_unit(const Conv2dGeometry& g) {
#if defined(__AVX512F__)
    if (g.groups > 1 && g.c_per_group() == kVec8Lanes && g.out_per_group() == kVec8Lanes) return 2;
#endif
    (void)g;
    return 1;
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

// Calls f(W, NV, MR) for `channels` (a multiple of 8): NV vectors of W floats by MR rows.
// 8-float vectors: two vectors and six rows where the channels are a multiple of 16, else one
// vector and twelve rows (twelve accumulators of AVX2's sixteen registers either way). Where the
// rows are at most 8 `positions` (a chunk of 2×2 planes; 0: rows are not positions), six would
// leave a third of the second tile empty: there it is four rows of two vectors, or eight of one.
// 16-float vectors (AVX-512's 32 registers) where the channels are a multiple of 16: two vectors
// by twelve rows for multiples of 32, one by sixteen otherwise; eight rows for few positions.
template <class F>
void with_tile(int64_t channels, int64_t positions, F&& f) {
    using std::integral_constant;
    using Eight = integral_constant<int, kVec8Lanes>;
    const bool few = positions > 0 && positions <= 8;
    if constexpr (kWide == kVec16Lanes) {
        using Sixteen = integral_constant<int, kVec16Lanes>;
        if (channels % (2 * kVec16Lanes) == 0) {
            if (few)
                f(Sixteen{}, integral_constant<int, 2>{}, integral_constant<int, 8>{});
            else
                f(Sixteen{}, integral_constant<int, 2>{}, integral_constant<int, 12>{});
            return;
        }
        if (channels % kVec16Lanes == 0) {
            if (few)
                f(Sixteen{}, integral_constant<int, 1>{}, integral_constant<int, 8>{});
            else
                f(Sixteen{}, integral_constant<int, 1>{}, integral_constant<int, 16>{});
            return;
        }
    }
    if (channels % (2 * kVec8Lanes) == 0) {
        if (few)
            f(Eight{}, integral_constant<int, 2>{}, integral_constant<int, 4>{});
        else
            f(Eight{}, integral_constant<int, 2>{}, integral_constant<int, 6>{});
    } else if (few) {
        f(Eight{}, integral_constant<int, 1>{}, integral_constant<int, 8>{});
    } else {
        f(Eight{}, integral_constant<int, 1>{}, integral_constant<int, 12>{});
    }
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

}  // namespace

void grouped_direct_forward(const float* x, const float* wt, const float* b,
                            const Conv2dGeometry& g, float* y, float* ws) {
    const int64_t per = groups_per_unit(g), units = (g.groups + per - 1) / per;
    const int64_t slice = g.grouped_slice_floats(false), k = g.patch(), image = g.h * g.w;
    const int64_t cg1 = g.c_per_group(), og1 = g.out_per_group();
    parallel_for(units, per * g.n * g.oh * g.ow * k * og1, [&](int64_t u) {
        const int64_t g0 = u * per, count = std::min(per, g.groups - g0);
        const Layout l(g, count);
        float* xp = ws + g0 * slice;  // a unit of two groups takes their two slices
        float* yc = xp + l.nb * l.padded;
        float* wk = yc + l.nb * l.plane * l.og;
        for (int64_t grp = 0; grp < count; ++grp)  // [og][cg·taps] → [cg·taps][og]
            transpose(wt + (g0 + grp) * og1 * k, k, og1, k, wk + grp * og1, l.og);
        const float* bg = b ? b + g0 * og1 : nullptr;
        for (int64_t n0 = 0; n0 < g.n; n0 += l.nb) {
            const int64_t m = std::min(l.nb, g.n - n0), positions = m * l.plane;
            for (int64_t j = 0; j < m; ++j)
                pack_input(x + ((n0 + j) * g.c + g0 * cg1) * image, g, l, xp + j * l.padded);
#if defined(__AVX512F__)
            if (count == 2) {
                with_pair_tile(positions, [&](auto mr) {
                    constexpr int MR = decltype(mr)::value;
                    for (int64_t q0 = 0; q0 < positions; q0 += MR) {
                        int64_t at[kMaxRows];
                        const int64_t rows = std::min<int64_t>(MR, positions - q0);
                        starts(g, l, q0, rows, at);
                        forward_pair_tile<MR>(xp, at, rows, l, wk, bg, yc + q0 * l.og);
                    }
                });
            } else
#endif
            {
                with_tile(l.og, positions, [&](auto w, auto nv, auto mr) {
                    constexpr int W = decltype(w)::value, NV = decltype(nv)::value;
                    constexpr int MR = decltype(mr)::value;
                    for_tiles(g, (positions + MR - 1) / MR, MR * k * l.og, [&](int64_t tile) {
                        int64_t at[kMaxRows];
                        const int64_t q0 = tile * MR, rows = std::min<int64_t>(MR, positions - q0);
                        starts(g, l, q0, rows, at);
                        for (int64_t o0 = 0; o0 < l.og; o0 += NV * W)
                            forward_tile<W, NV, MR>(xp, at, rows, l, wk, bg, o0, yc + q0 * l.og);
                    });
                });
            }
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
    // Input positions of one phase (row and column modulo the stride): the taps that reach them
    // (`taps`, `back`: their offsets back from a position in dyp) and, for a chunk of nb images,
    // each position's place in dyp (`at`) and in dxc (`dst`), images one after another, each in
    // row-major order; a chunk of m images takes the first m·per_image.
    struct Phase {
        std::vector<int64_t> taps, back, at, dst;
        int64_t per_image = 0;
    };
    // The window starts, the phases and their positions for a unit's layout, worked out once
    // per call rather than per group and chunk.
    struct Plan {
        std::vector<int64_t> window_at;
        std::vector<Phase> phases;
    };
    auto plan_of = [&](const Layout& l) {
        Plan plan;
        if (dw) {
            plan.window_at.resize(static_cast<size_t>(l.nb * l.plane));
            starts(g, l, 0, l.nb * l.plane, plan.window_at.data());
        }
        if (!dx) return plan;
        const int64_t grad_plane = qh * qw * l.og;
        for (int64_t pr = 0; pr < sh; ++pr)
            for (int64_t pq = 0; pq < sw; ++pq) {
                Phase ph;
                for (int64_t i = 0; i < g.win.kh; ++i)
                    for (int64_t j = 0; j < g.win.kw; ++j)
                        if ((i * dh - pr) % sh == 0 && (j * dwl - pq) % sw == 0 && i * dh >= pr &&
                            j * dwl >= pq) {
                            ph.taps.push_back(i * g.win.kw + j);
                            ph.back.push_back(((i * dh - pr) / sh * qw + (j * dwl - pq) / sw) *
                                              l.og);
                        }
                const int64_t ih0 = (pr - g.win.pad_top % sh + sh) % sh;
                const int64_t iw0 = (pq - g.win.pad_left % sw + sw) % sw;
                const int64_t a0 = (ih0 + g.win.pad_top) / sh, b0 = (iw0 + g.win.pad_left) / sw;
                for (int64_t j = 0; j < l.nb; ++j)
                    for (int64_t ih = ih0, a = a0; ih < g.h; ih += sh, ++a)
                        for (int64_t iw = iw0, b = b0; iw < g.w; iw += sw, ++b) {
                            ph.at.push_back(j * grad_plane + ((a + eh) * qw + b + ew) * l.og);
                            ph.dst.push_back((j * image + ih * g.w + iw) * l.cg);
                        }
                ph.per_image = static_cast<int64_t>(ph.at.size()) / l.nb;
                plan.phases.push_back(std::move(ph));
            }
        return plan;
    };
    const int64_t per = groups_per_unit(g), units = (g.groups + per - 1) / per;
    const int64_t cg1 = g.c_per_group(), og1 = g.out_per_group();
    const Plan unit_plan = plan_of(Layout(g, per));
    const Plan lone_plan = per > 1 ? plan_of(Layout(g, 1)) : Plan{};
    parallel_for(units, 2 * per * g.n * g.oh * g.ow * k * og1, [&](int64_t un) {
        const int64_t g0 = un * per, count = std::min(per, g.groups - g0);
        const Layout l(g, count);
        const int64_t grad_plane = qh * qw * l.og;
        const Plan& plan = count == per ? unit_plan : lone_plan;
        float* xp = ws + g0 * slice;  // a unit of two groups takes their two slices
        float* dyc = xp + l.nb * l.padded;
        float* dxc = dyc + l.nb * l.plane * l.og;
        float* dyp = dxc + l.nb * image * l.cg;
        float* wk = dyp + l.nb * grad_plane;
        float* dwa = wk + k * l.og;
        const float* wg = wt + g0 * og1 * k;  // per group [og][cg][taps]
        // [tap][og][cg]: each output channel's [cg][taps] transposed into place; for one group,
        // its [og·cg][taps] at once.
        if (dx && count == 1)
            transpose(wg, l.taps, og1 * cg1, l.taps, wk, og1 * cg1);
        else if (dx)
            for (int64_t grp = 0; grp < count; ++grp)
                for (int64_t o = 0; o < og1; ++o)
                    transpose(wg + (grp * og1 + o) * k, l.taps, cg1, l.taps,
                              wk + o * l.cg + grp * cg1, og1 * l.cg);
        for (int64_t n0 = 0; n0 < g.n; n0 += l.nb) {
            const int64_t m = std::min(l.nb, g.n - n0);
            for (int64_t j = 0; j < m; ++j)
                transpose(dy + ((n0 + j) * g.out_c + g0 * og1) * l.plane, l.plane, l.og, l.plane,
                          dyc + j * l.plane * l.og, l.og);
            if (dw) {
                const int64_t positions = m * l.plane;
                const int64_t* window_at = plan.window_at.data();
                for (int64_t j = 0; j < m; ++j)
                    pack_input(x + ((n0 + j) * g.c + g0 * cg1) * image, g, l, xp + j * l.padded);
#if defined(__AVX512F__)
                if (count == 2) {
                    for (int64_t t = 0; t < l.taps; ++t)
                        weight_pair_tile(xp, window_at, positions, l, dyc, t, n0 == 0, dwa);
                } else
#endif
                {
                    with_weight_tile(l.og, l.cg, [&](auto w, auto nv, auto mr) {
                        constexpr int W = decltype(w)::value, NV = decltype(nv)::value;
                        constexpr int MR = decltype(mr)::value;
                        const int64_t blocks = (l.cg + MR - 1) / MR;
                        for_tiles(g, l.taps * blocks, positions * MR * l.og, [&](int64_t i) {
                            const int64_t t = i / blocks, c0 = i % blocks * MR;
                            for (int64_t o0 = 0; o0 < l.og; o0 += NV * W)
                                weight_tile<W, NV, MR>(xp, window_at, positions, l, dyc, t, c0,
                                                       std::min<int64_t>(MR, l.cg - c0), o0,
                                                       n0 == 0, dwa);
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
#if defined(__AVX512F__)
                if (count == 2) {
                    with_pair_tile(m * image / (sh * sw), [&](auto mr) {
                        constexpr int MR = decltype(mr)::value;
                        for (int64_t q0 = 0; q0 < count_q; q0 += MR)
                            input_pair_tile<MR>(dyp, ph.at.data() + q0, dxc, ph.dst.data() + q0,
                                                std::min<int64_t>(MR, count_q - q0), ph.taps.data(),
                                                ph.back.data(), ntaps, wk);
                    });
                    continue;
                }
#endif
                with_tile(l.cg, m * image / (sh * sw), [&](auto w, auto nv, auto mr) {
                    constexpr int W = decltype(w)::value, NV = decltype(nv)::value;
                    constexpr int MR = decltype(mr)::value;
                    for_tiles(g, (count_q + MR - 1) / MR, MR * ntaps * l.og * l.cg, [&](int64_t i) {
                        const int64_t q0 = i * MR;
                        const int64_t rows = std::min<int64_t>(MR, count_q - q0);
                        for (int64_t c0 = 0; c0 < l.cg; c0 += NV * W)
                            input_tile<W, NV, MR>(dyp, ph.at.data() + q0, dxc, ph.dst.data() + q0,
                                                  rows, l, ph.taps.data(), ph.back.data(), ntaps,
                                                  wk, c0);
                    });
                });
            }
            for (int64_t j = 0; j < m; ++j)
                transpose(dxc + j * image * l.cg, l.cg, image, l.cg,
                          dx + ((n0 + j) * g.c + g0 * cg1) * image, image, accumulate);
        }
        if (dw)  // → [og][cg·taps], group by group
            for (int64_t grp = 0; grp < count; ++grp)
                transpose(dwa + grp * og1, l.og, k, og1, dw + (g0 + grp) * og1 * k, k);
    });
}

}  // namespace rl::cpu
