// Products whose C is written once: C [m, n] = op(A) [m, kd] · op(B) [kd, n] + beta·C, row-major,
// where the depth kd is short next to C (a weight gradient dYᵀ·X or dY·colsᵀ over a few rows or
// positions, C the weights' size). The GEMM libraries zero C (or scale it by beta) in one pass and
// add the product in another, so that C crosses the memory bus three or four times for a
// product of a few multiply-adds an element: ViT-B/32's 3072 × 768 weight gradient over 100 rows
// took 5.3-5.5 ms on the GEMM entry point with C cold (OpenBLAS, AVX2), 4.2-4.4 warm. Here a
// tile of C stays in registers down all kd terms and is written once, around the caches where
// it is large.
//
// Two kernels: the short-depth one (kd up to kShortDepthMax, the depth a template constant, the
// loops unrolled) and the panel one (kd up to kPanelDepthMax, the depth a run-time count), whose
// operands are packed as in Goto and van de Geijn ("Anatomy of high-performance matrix
// multiplication", ACM TOMS 34(3), 2008): op(B) in blocks of R·W columns × kd, a group of blocks
// at a time sized for L2, op(A) a tile of R rows × kd at a time, so that neither walks memory at
// C's stride (A's rows 12 KB apart fall into one set of L1). kernels.h says where each is taken.
// Each element of C is one sum over the kd terms in order, whatever the thread count.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "engine/cpu/kernels.h"
#include "engine/cpu/vec8.h"
#include "engine/gemm.h"

namespace rl::cpu {
namespace {

// Whether C's whole vectors of W floats can go around the caches: a build with AVX, C and its
// rows aligned to the vector.
template <int W>
bool can_stream(const float* c, int64_t ldc) {
#if defined(__AVX__)
    return reinterpret_cast<uintptr_t>(c) % (W * sizeof(float)) == 0 && ldc % W == 0;
#else
    (void)c;
    (void)ldc;
    return false;
#endif
}

// One whole vector of C stored around the caches (where can_stream says so; a build without AVX
// never asks).
template <int W>
void stream_vector(float* out, typename Vec<W>::T v) {
#if defined(__AVX__)
    if constexpr (W == kVec8Lanes) _mm256_stream_ps(out, reinterpret_cast<__m256>(v));
#if defined(__AVX512F__)
    else
        _mm512_stream_ps(out, reinterpret_cast<__m512>(v));
#endif
#else
    Vec<W>::store(out, v);
#endif
}

// Short depth: C [m, n] = op(A) [m, kd] · op(B) [kd, n] + beta·C for kd of at most
// kShortDepthMax. op(B) is packed [kd][n] (its rows contiguous over C's columns) and op(A)
// [m][KD], zero past kd; a tile of R rows × NV vectors of columns runs down the KD terms in
// registers and is written once, then the columns left by single vectors, then one by one.
// Where beta is 0 and C is large, the stores go around the caches (a non-temporal store needs
// no read of the line first; C is not read again here).
template <int W, int NV, int R, int KD, bool Stream>
int64_t short_depth_columns(int64_t i0, int64_t rows, int64_t j0, int64_t n, const float* ap,
                            const float* bt, int64_t ldt, float beta, float* c, int64_t ldc) {
    using V = typename Vec<W>::T;
    constexpr int kCols = NV * W;
    const float* ar[R];
    for (int r = 0; r < R; ++r) ar[r] = ap + (i0 + (r < rows ? r : 0)) * KD;
    for (; j0 + kCols <= n; j0 += kCols) {
        V acc[R][NV] = {};
        for (int p = 0; p < KD; ++p) {
            V bv[NV];
            for (int v = 0; v < NV; ++v) bv[v] = Vec<W>::load(bt + p * ldt + j0 + v * W);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) {
                const float s = ar[r][p];
                for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
            }
        }
        for (int64_t r = 0; r < rows; ++r)
            for (int v = 0; v < NV; ++v) {
                float* out = c + (i0 + r) * ldc + j0 + v * W;
                if constexpr (Stream)
                    stream_vector<W>(out, acc[r][v]);
                else
                    Vec<W>::store(out,
                                  beta == 0.0f ? acc[r][v] : acc[r][v] + beta * Vec<W>::load(out));
            }
    }
    return j0;
}

// The first `left` lanes of a W-float vector, loaded (others 0) and stored under a mask, where
// the build has masked moves of that width (kMasks); elsewhere a float at a time.
template <int W>
struct MaskedLanes {
    static constexpr bool kMasks = false;
};
#if defined(__AVX512F__)
template <>
struct MaskedLanes<kVec16Lanes> {
    static constexpr bool kMasks = true;
    __mmask16 m;
    explicit MaskedLanes(int left) : m(static_cast<__mmask16>((1u << left) - 1)) {}
    V16 load(const float* p) const { return reinterpret_cast<V16>(_mm512_maskz_loadu_ps(m, p)); }
    void store(float* p, V16 v) const { _mm512_mask_storeu_ps(p, m, reinterpret_cast<__m512>(v)); }
};
#endif
#if defined(__AVX2__)
template <>
struct MaskedLanes<kVec8Lanes> {
    static constexpr bool kMasks = true;
    __m256i m;
    explicit MaskedLanes(int left)
        : m(_mm256_cmpgt_epi32(_mm256_set1_epi32(left),
                               _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))) {}
    V8 load(const float* p) const { return reinterpret_cast<V8>(_mm256_maskload_ps(p, m)); }
    void store(float* p, V8 v) const { _mm256_maskstore_ps(p, m, reinterpret_cast<__m256>(v)); }
};
#endif

// The columns past the last whole vector (a squeeze-and-excitation block's 28 or 20 inputs):
// one vector over bt's zero padding, its first n - j0 floats stored. Each element is the same
// sum, in the same order, as in the whole vectors.
template <int W, int R, int KD>
void short_depth_last_columns(int64_t i0, int64_t rows, int64_t j0, int64_t n, const float* ap,
                              const float* bt, int64_t ldt, float beta, float* c, int64_t ldc) {
    using V = typename Vec<W>::T;
    const float* ar[R];  // as short_depth_columns reads them, so that each term is fused alike
    for (int r = 0; r < R; ++r) ar[r] = ap + (i0 + (r < rows ? r : 0)) * KD;
    V acc[R] = {};
    for (int p = 0; p < KD; ++p) {
        const V bv = Vec<W>::load(bt + p * ldt + j0);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r] += ar[r][p] * bv;
    }
    const int left = static_cast<int>(n - j0);
    if constexpr (MaskedLanes<W>::kMasks) {  // a float at a time took half of a 672 × 28 product
        const MaskedLanes<W> mask(left);
        for (int64_t r = 0; r < rows; ++r) {
            float* out = c + (i0 + r) * ldc + j0;
            mask.store(out, beta == 0.0f ? acc[r] : acc[r] + beta * mask.load(out));
        }
        return;
    }
    alignas(64) float t[W];
    for (int64_t r = 0; r < rows; ++r) {
        Vec<W>::store(t, acc[r]);
        float* out = c + (i0 + r) * ldc + j0;
        for (int j = 0; j < left; ++j) out[j] = beta == 0.0f ? t[j] : t[j] + beta * out[j];
    }
}

template <int W, int NV, int R, int KD, bool Stream>
void short_depth_tile(int64_t i0, int64_t rows, int64_t n, const float* ap, const float* bt,
                      int64_t ldt, float beta, float* c, int64_t ldc) {
    int64_t j0 =
        short_depth_columns<W, NV, R, KD, Stream>(i0, rows, 0, n, ap, bt, ldt, beta, c, ldc);
    if constexpr (NV > 1)  // whole vectors left: one at a time (ldc keeps them aligned)
        j0 = short_depth_columns<W, 1, R, KD, Stream>(i0, rows, j0, n, ap, bt, ldt, beta, c, ldc);
    if (j0 < n) short_depth_last_columns<W, R, KD>(i0, rows, j0, n, ap, bt, ldt, beta, c, ldc);
}

// tile(t) for t in [0, tiles), one contiguous range of tiles a thread; where `fence` says the
// tiles streamed their stores, each thread then fences once, so that they are visible before the
// parallel loop's end lets C be read. A fence a tile drains the write-combining buffers every
// few KB: for the panel kernel's 6 × 768 tiles (ViT-B/32's 3072 × 768) it cost 10 %.
template <class F>
void tiles_then_fence(int64_t tiles, int64_t work_per_tile, bool fence, F&& tile) {
    const int64_t ranges = std::min<int64_t>(tiles, cpu_threads());
    parallel_for(ranges, tiles / ranges * work_per_tile, [&](int64_t q) {
        for (int64_t t = tiles * q / ranges; t < tiles * (q + 1) / ranges; ++t) tile(t);
#if defined(__AVX__)
        if (fence) __builtin_ia32_sfence();
#else
        (void)fence;
#endif
    });
}

// The panel kernel: R rows × NV vectors of C from a packed tile of op(A) ([kd][R]) and a packed
// block of op(B) ([kd][NV·W], zero past n), down kd terms; `cols` of the block's columns and
// `rows` of the tile's rows are C's. Whole vectors go around the caches where Stream says so,
// a last partial vector under a mask (or a float at a time where the build has none).
template <int W, int NV, int R, bool Stream>
void panel_tile(int64_t rows, int64_t cols, int64_t kd, const float* at, const float* bb, float* c,
                int64_t ldc) {
    using V = typename Vec<W>::T;
    constexpr int kCols = NV * W;
    V acc[R][NV] = {};
    for (const float* const end = at + kd * R; at != end; at += R, bb += kCols) {
        V bv[NV];
        for (int v = 0; v < NV; ++v) bv[v] = Vec<W>::load(bb + v * W);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const float s = at[r];
            for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
        }
    }
    if (rows == R && cols == kCols) {  // a whole tile: constant indices, sums kept in registers
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v) {
                if constexpr (Stream)
                    stream_vector<W>(c + r * ldc + v * W, acc[r][v]);
                else
                    Vec<W>::store(c + r * ldc + v * W, acc[r][v]);
            }
        return;
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int v = 0; v < NV; ++v) {
            float* out = c + r * ldc + v * W;
            const int64_t left = cols - v * W;
            if (left >= W && Stream) {
                stream_vector<W>(out, acc[r][v]);
            } else if (left >= W) {
                Vec<W>::store(out, acc[r][v]);
            } else if (left > 0) {
                if constexpr (MaskedLanes<W>::kMasks) {
                    MaskedLanes<W>(static_cast<int>(left)).store(out, acc[r][v]);
                } else {
                    alignas(64) float t[W];
                    Vec<W>::store(t, acc[r][v]);
                    std::copy(t, t + left, out);
                }
            }
        }
}

#if defined(__AVX512F__)
constexpr int kPanelLanes = kVec16Lanes, kPanelRows = 12;  // 24 sums, 2 of B, the broadcast
#else
constexpr int kPanelLanes = kVec8Lanes, kPanelRows = 6;  // AVX2's sixteen: 12 sums, 2, 1
#endif
constexpr int kPanelVectors = 2;
constexpr int64_t kPanelColumns = kPanelVectors * kPanelLanes;
// A group of op(B)'s packed blocks is at most this many floats (256 KB): it stays in L2 while
// every tile of rows runs over it.
constexpr int64_t kPanelGroupFloats = int64_t{1} << 18;

}  // namespace

bool short_depth_apply(int64_t m, int64_t n, int64_t kd) {
    return kd >= 1 && kd <= kShortDepthMax && m >= kShortDepthMinRows && n >= kShortDepthMinColumns;
}

void short_depth_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t kd,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                         float* c, int64_t ldc) {
    auto run = [&](auto depth) {
        constexpr int KD = decltype(depth)::value;
#if defined(__AVX512F__)
        constexpr int W = kVec16Lanes, R = 8;
#else
        constexpr int W = kVec8Lanes, R = 6;
#endif
        const int64_t ldt = (n + W - 1) / W * W;  // bt's rows padded with zeros to whole vectors
        std::vector<float> ap(static_cast<size_t>(m * KD), 0.0f),
            bt(static_cast<size_t>(KD * ldt), 0.0f);
        if (trans_a)  // A stored [kd, m]
            for (int64_t p = 0; p < kd; ++p)
                for (int64_t i = 0; i < m; ++i) ap[i * KD + p] = a[p * lda + i];
        else
            for (int64_t i = 0; i < m; ++i) std::copy(a + i * lda, a + i * lda + kd, &ap[i * KD]);
        for (int64_t p = 0; p < kd; ++p)  // B stored [n, kd] (trans_b) or [kd, n]
            for (int64_t j = 0; j < n; ++j)
                bt[p * ldt + j] = trans_b ? b[j * ldb + p] : b[p * ldb + j];
        constexpr int NV = 2;
        const bool stream =
            beta == 0.0f && m * n >= kShortDepthStreamFloats && can_stream<W>(c, ldc);
        const int64_t tiles = (m + R - 1) / R;
        tiles_then_fence(tiles, R * n * KD, stream, [&](int64_t t) {
            const int64_t i0 = t * R, rows = std::min<int64_t>(R, m - i0);
            if (stream)
                short_depth_tile<W, NV, R, KD, true>(i0, rows, n, ap.data(), bt.data(), ldt, beta,
                                                     c, ldc);
            else
                short_depth_tile<W, NV, R, KD, false>(i0, rows, n, ap.data(), bt.data(), ldt, beta,
                                                      c, ldc);
        });
    };
    // The depth padded to 2, 4, 8 or 16: a classifier's weight gradient at batch 2 takes 2
    // multiply-adds an element, not 8.
    if (kd <= 2)
        run(std::integral_constant<int, 2>{});
    else if (kd <= 4)
        run(std::integral_constant<int, 4>{});
    else if (kd <= 8)
        run(std::integral_constant<int, 8>{});
    else
        run(std::integral_constant<int, 16>{});
}

bool panel_depth_apply(bool trans_b, int64_t m, int64_t n, int64_t kd, float beta) {
    return !trans_b && beta == 0.0f && kd >= kPanelMinDepth && kd <= kPanelDepthMax &&
           m >= kShortDepthMinRows && n >= kShortDepthMinColumns && m * n >= kPanelMinFloats;
}

void panel_depth_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t kd,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                         int64_t ldc) {
    constexpr int W = kPanelLanes, NV = kPanelVectors, R = kPanelRows;
    constexpr int64_t kCols = kPanelColumns;
    const bool stream = can_stream<W>(c, ldc);
    const int64_t blocks = (n + kCols - 1) / kCols, tiles = (m + R - 1) / R;
    const int64_t group = std::clamp<int64_t>(kPanelGroupFloats / (kd * kCols), 1, blocks);
    static thread_local std::vector<float> packed_b;
    packed_b.resize(static_cast<size_t>(group * kd * kCols + kCols));
    // thread_local: the workers' own would be empty. Whole lines: a block's rows are one each.
    float* const bp = aligned_line(packed_b.data());
    for (int64_t g0 = 0; g0 < blocks; g0 += group) {
        const int64_t gb = std::min(group, blocks - g0);
        for (int64_t jb = 0; jb < gb; ++jb) {  // op(B)'s columns of the block, zero past n
            const int64_t j0 = (g0 + jb) * kCols, cols = std::min(kCols, n - j0);
            float* d = bp + jb * kd * kCols;
            for (int64_t p = 0; p < kd; ++p, d += kCols) {
                if (trans_b)
                    for (int64_t j = 0; j < cols; ++j) d[j] = b[(j0 + j) * ldb + p];
                else if (cols == kCols)  // a constant count: no memmove call
                    std::copy_n(b + p * ldb + j0, kCols, d);
                else
                    std::copy_n(b + p * ldb + j0, cols, d);
                std::fill(d + cols, d + kCols, 0.0f);
            }
        }
        tiles_then_fence(tiles, R * kd * gb * kCols, stream, [&](int64_t t) {
            const int64_t i0 = t * R, rows = std::min<int64_t>(R, m - i0);
            // op(A)'s tile, [kd][R], zero past m; on the heap: on the stack, next to the sums'
            // spills, it ran 5 % slower. Each thread's own.
            static thread_local std::vector<float> tile(R * kPanelDepthMax + kCols);
            float* const at = aligned_line(tile.data());
            if (rows < R) std::fill(at, at + kd * R, 0.0f);
            if (trans_a && rows == R)  // R floats a term, a constant count: no memmove call
                for (int64_t p = 0; p < kd; ++p) std::copy_n(a + p * lda + i0, R, at + p * R);
            else if (trans_a)
                for (int64_t p = 0; p < kd; ++p) std::copy_n(a + p * lda + i0, rows, at + p * R);
            else
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t p = 0; p < kd; ++p) at[p * R + r] = a[(i0 + r) * lda + p];
            for (int64_t jb = 0; jb < gb; ++jb) {
                const int64_t j0 = (g0 + jb) * kCols, cols = std::min(kCols, n - j0);
                float* ct = c + i0 * ldc + j0;
                const float* bb = bp + jb * kd * kCols;
                if (stream)
                    panel_tile<W, NV, R, true>(rows, cols, kd, at, bb, ct, ldc);
                else
                    panel_tile<W, NV, R, false>(rows, cols, kd, at, bb, ct, ldc);
            }
        });
    }
}

// The two tests short_depth_or_gemm makes, in one answer.
bool written_once_apply(bool trans_b, int64_t m, int64_t n, int64_t kd, float beta) {
    return short_depth_apply(m, n, kd) || panel_depth_apply(trans_b, m, n, kd, beta);
}

void short_depth_or_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t kd,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                         float* c, int64_t ldc) {
    if (short_depth_apply(m, n, kd))
        short_depth_product(trans_a, trans_b, m, n, kd, a, lda, b, ldb, beta, c, ldc);
    else if (panel_depth_apply(trans_b, m, n, kd, beta))
        panel_depth_product(trans_a, trans_b, m, n, kd, a, lda, b, ldb, c, ldc);
    else
        sgemm(trans_a, trans_b, m, n, kd, 1.f, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace rl::cpu
