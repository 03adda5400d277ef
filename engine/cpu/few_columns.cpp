// Products with a few columns: C [m, n] = op(A) [m, k] · B [k, n] + beta·C, with n a whole
// number of vectors (8 or 16 floats): a convolution's products on 2×2 planes of two images
// (ResNet-18's last stage, the RegNets' and DenseNet-121's at 64 px), where Y = W·cols reads
// every weight for only n multiply-adds and the GEMM libraries' packing of W (a copy of it, a
// panel at a time) costs about as much as the product (docs/benchmarks.md).
//
// Here nothing is packed. A tile of R rows of C, each row of n floats in NV vectors, stays in
// registers while k runs: per k, B's row (NV vectors, from L1: B is k × n floats) and one float
// of each of the R rows of op(A), broadcast. op(A) = A streams R rows side by side; op(A) = Aᵀ
// (a convolution's column gradient Wᵀ·dY) reads R neighbouring floats of one row of A per k.
// The register tile is the micro-kernel of Goto and van de Geijn ("Anatomy of high-performance
// matrix multiplication", ACM TOMS 34(3), 2008) with the packed panels left out, which pays only
// where one operand is this thin. Tiles of rows run in parallel; each element of C is one sum
// over k in order, so the thread count changes no bit.
//
// The same tiles serve attention's small products (small_product, below), over blocks of two
// vectors of columns; there op(B) is copied once, transposed or padded with zero columns, where
// it is not already k rows of whole blocks.
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

// C's rows i0 … i0 + rows - 1 (rows ≤ R), NV·W columns from c: alpha·(beta·C + op(A)·B). A tile
// of fewer than R rows repeats row i0 in the others, which are not stored.
template <bool TransA, int W, int NV, int R>
void rows_tile(int64_t i0, int64_t rows, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float beta, float* c, int64_t ldc, float alpha = 1.0f) {
    using V = typename Vec<W>::T;
    V acc[R][NV];
    const float* ar[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        const int64_t i = i0 + (r < rows ? r : 0);
        ar[r] = TransA ? a + i : a + i * lda;
        for (int v = 0; v < NV; ++v)
            acc[r][v] = beta == 0.0f ? V{} : beta * Vec<W>::load(c + i * ldc + v * W);
    }
    const int64_t step = TransA ? lda : int64_t{1};  // op(A)(i, j) at ar[i][j·step]
    for (int64_t j = 0; j < k; ++j) {
        V bv[NV];
        for (int v = 0; v < NV; ++v) bv[v] = Vec<W>::load(b + j * ldb + v * W);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const float s = ar[r][j * step];
            for (int v = 0; v < NV; ++v) acc[r][v] += s * bv[v];
        }
    }
    if (alpha != 1.0f) {
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v) acc[r][v] *= alpha;
    }
    // Over every r of the tile, so that acc is indexed by constants and stays in registers (a
    // loop to `rows` kept it on the stack, and attention's products of depth 32 lost a fifth of
    // their time storing and reloading it).
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
        if (r < rows)
            for (int v = 0; v < NV; ++v) Vec<W>::store(c + (i0 + r) * ldc + v * W, acc[r][v]);
}

#if defined(__AVX512F__)
// op(A) = Aᵀ with n = 8 on AVX-512 (a 1×1 convolution's column gradient Wᵀ·dY on 2×2 planes of
// two images): rows_tile would multiply-add 8-float vectors, half of AVX-512's width (Wᵀ·dY of
// EfficientNet's 1152 → 320 projection, [1152 × 320] · [320 × 8]: 99 µs, against OpenBLAS's 80 on
// an Intel Xeon). Here the vectors run down C's rows instead, which are neighbouring floats of each
// row of A: MV vectors of 16 rows × the 8 columns stay in registers, and per k come MV loads of A
// and 8 broadcasts of B's row. Each element of C is the same sum as rows_tile's, in the same
// order and written the same way (acc += a·b), so the bits are the same; the tile goes to C's
// rows through a buffer at the end.
template <int MV>
void column_vectors_tile(int64_t i0, int64_t k, const float* a, int64_t lda, const float* b,
                         int64_t ldb, float beta, float* c, int64_t ldc) {
    constexpr int kRows = MV * kVec16Lanes, kCols = kVec8Lanes;
    using V = Vec<kVec16Lanes>;
    using T = V::T;
    alignas(64) float t[kCols][kRows];
    if (beta != 0.0f)  // C's tile, by columns
        for (int r = 0; r < kRows; ++r)
            for (int j = 0; j < kCols; ++j) t[j][r] = c[(i0 + r) * ldc + j];
    T acc[MV][kCols];
    for (int j = 0; j < kCols; ++j)
        for (int v = 0; v < MV; ++v)
            acc[v][j] = beta == 0.0f ? T{} : beta * V::load(&t[j][v * kVec16Lanes]);
    for (int64_t p = 0; p < k; ++p) {
        T av[MV];
        for (int v = 0; v < MV; ++v) av[v] = V::load(a + p * lda + i0 + v * kVec16Lanes);
        const float* bp = b + p * ldb;
#pragma GCC unroll 8
        for (int j = 0; j < kCols; ++j) {
            const float s = bp[j];
            for (int v = 0; v < MV; ++v) acc[v][j] += av[v] * s;
        }
    }
    for (int j = 0; j < kCols; ++j)
        for (int v = 0; v < MV; ++v) V::store(&t[j][v * kVec16Lanes], acc[v][j]);
    for (int r = 0; r < kRows; ++r)
        for (int j = 0; j < kCols; ++j) c[(i0 + r) * ldc + j] = t[j][r];
}
constexpr int kColumnVectors = 3;

// op(A) = A with n = 8 or 16 on AVX-512 (Y = W·cols of a convolution on 2×2 planes of two
// images): rows_tile broadcasts one float of A per row and k into an 8-float vector, so a
// 128 × 928 · 928 × 8 product (DenseNet-121's last 1×1s) took 30 µs at one thread against
// OpenBLAS's 21. Here four neighbouring floats of A's row are one 128-bit load broadcast to all
// 16 lanes (no shuffle), and B is packed so that lane 4·j + q of group g holds B(k + q, 4·g + j):
// per four k, one load and G multiply-adds of whole vectors a row. Each element of C is four
// partial sums over k ≡ q (mod 4), in order, added as (s0 + s1) + (s2 + s3), then beta·C: the
// same sums for any thread count.
constexpr int kQuad = 4;
template <int G, int R>
void quad_rows_tile(int64_t i0, int64_t rows, int64_t k, const float* a, int64_t lda,
                    const float* bq, float beta, float* c, int64_t ldc) {
    __m512 acc[R][G];
    const float* ar[R];
    for (int r = 0; r < R; ++r) {
        ar[r] = a + (i0 + (r < rows ? r : 0)) * lda;
        for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_ps();
    }
    const int64_t whole = k / kQuad * kQuad;
    auto step = [&](int64_t j, auto load) {
        __m512 bv[G];
        for (int g = 0; g < G; ++g) bv[g] = _mm512_loadu_ps(bq + (j / kQuad * G + g) * 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const __m512 s = _mm512_broadcast_f32x4(load(ar[r] + j));
            for (int g = 0; g < G; ++g) acc[r][g] = _mm512_fmadd_ps(s, bv[g], acc[r][g]);
        }
    };
    for (int64_t j = 0; j < whole; j += kQuad)
        step(j, [](const float* p) { return _mm_loadu_ps(p); });
    if (whole < k) {  // the last k % 4 floats of each row, masked (B is zero past k)
        const __mmask8 mask = static_cast<__mmask8>((1u << (k - whole)) - 1);
        step(whole, [mask](const float* p) { return _mm_maskz_loadu_ps(mask, p); });
    }
    alignas(64) float t[16];
    for (int64_t r = 0; r < rows; ++r)
        for (int g = 0; g < G; ++g) {
            _mm512_store_ps(t, acc[r][g]);
            float* out = c + (i0 + r) * ldc + g * kQuad;
            for (int j = 0; j < kQuad; ++j) {
                const float* q = t + j * kQuad;
                const float sum = (q[0] + q[1]) + (q[2] + q[3]);
                out[j] = beta == 0.0f ? sum : sum + beta * out[j];
            }
        }
}

// B [k, n] (ld ldb) into quad_rows_tile's order, zero past k.
void pack_quads(int64_t k, int64_t n, const float* b, int64_t ldb, std::vector<float>& bq) {
    const int64_t groups = n / kQuad, quads = (k + kQuad - 1) / kQuad, whole = k / kQuad;
    bq.resize(static_cast<size_t>(quads * groups * 16));
    float* d = bq.data();
    for (int64_t j = 0; j < whole; ++j)  // 4 rows × 4 columns of B, transposed: one group
        for (int64_t g = 0; g < groups; ++g, d += 16) {
            __m128 r0 = _mm_loadu_ps(b + (j * kQuad + 0) * ldb + g * kQuad);
            __m128 r1 = _mm_loadu_ps(b + (j * kQuad + 1) * ldb + g * kQuad);
            __m128 r2 = _mm_loadu_ps(b + (j * kQuad + 2) * ldb + g * kQuad);
            __m128 r3 = _mm_loadu_ps(b + (j * kQuad + 3) * ldb + g * kQuad);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            _mm_storeu_ps(d, r0);
            _mm_storeu_ps(d + 4, r1);
            _mm_storeu_ps(d + 8, r2);
            _mm_storeu_ps(d + 12, r3);
        }
    if (whole < quads) {  // the last k % 4 rows, zero past k
        std::fill(d, d + groups * 16, 0.0f);
        for (int64_t j = whole * kQuad; j < k; ++j)
            for (int64_t col = 0; col < n; ++col)
                d[col / kQuad * 16 + col % kQuad * kQuad + j % kQuad] = b[j * ldb + col];
    }
}

constexpr int64_t kColumnRows = kColumnVectors * kVec16Lanes;
#else
constexpr int64_t kColumnRows = 1;  // no column tiles: `whole` stays 0
#endif

// Calls f(W, NV, R): 16-float vectors where the build has AVX-512 and n is 16, else 8-float ones;
// as many rows as leave registers for B's row and the broadcast (AVX2's sixteen, AVX-512's 32).
template <class F>
void with_tile(int64_t n, F&& f) {
    using std::integral_constant;
    using Eight = integral_constant<int, kVec8Lanes>;
#if defined(__AVX512F__)
    if (n == kVec16Lanes) {
        f(integral_constant<int, kVec16Lanes>{}, integral_constant<int, 1>{},
          integral_constant<int, 16>{});
        return;
    }
    f(Eight{}, integral_constant<int, 1>{}, integral_constant<int, 16>{});
#else
    if (n == 2 * kVec8Lanes)
        f(Eight{}, integral_constant<int, 2>{}, integral_constant<int, 6>{});
    else
        f(Eight{}, integral_constant<int, 1>{}, integral_constant<int, 12>{});
#endif
}

}  // namespace

bool few_columns_apply(bool trans_a, int64_t m, int64_t n, int64_t k) {
    return (n == kVec8Lanes || n == 2 * kVec8Lanes) && m >= kFewColumnsMinRows &&
           k >= kFewColumnsMinDepth && (!trans_a || m * k <= kFewColumnsMaxTransposedFloats);
}

void few_columns_product(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if defined(__AVX512F__)
    if (!trans_a) {  // B packed once, then quad_rows_tile's tiles of rows
        static thread_local std::vector<float> bq;
        pack_quads(k, n, b, ldb, bq);
        const float* packed = bq.data();  // thread_local: the workers' own would be empty
        auto run = [&](auto groups, auto rows_per_tile) {
            constexpr int G = decltype(groups)::value, QR = decltype(rows_per_tile)::value;
            parallel_for((m + QR - 1) / QR, QR * k * n, [&](int64_t t) {
                const int64_t i0 = t * QR;
                quad_rows_tile<G, QR>(i0, std::min<int64_t>(QR, m - i0), k, a, lda, packed, beta, c,
                                      ldc);
            });
        };
        using std::integral_constant;
        if (n == kVec8Lanes)  // registers: 12 × 2 sums, 2 of B, the broadcast
            run(integral_constant<int, 2>{}, integral_constant<int, 12>{});
        else  // 6 × 4 sums, 4 of B
            run(integral_constant<int, 4>{}, integral_constant<int, 6>{});
        return;
    }
#endif
    with_tile(n, [&](auto w, auto nv, auto r) {
        constexpr int W = decltype(w)::value, NV = decltype(nv)::value, R = decltype(r)::value;
        // Whole tiles of column vectors first where they apply, then rows_tile's tiles.
        int64_t whole = 0;
#if defined(__AVX512F__)
        if (trans_a && n == kVec8Lanes) whole = m / kColumnRows;
#endif
        const int64_t first = whole * kColumnRows;
        const int64_t tiles = whole + (m - first + R - 1) / R;
        parallel_for(tiles, R * k * n, [&](int64_t t) {
#if defined(__AVX512F__)
            if (t < whole) {
                column_vectors_tile<kColumnVectors>(t * kColumnRows, k, a, lda, b, ldb, beta, c,
                                                    ldc);
                return;
            }
#endif
            const int64_t i0 = first + (t - whole) * R, rows = std::min<int64_t>(R, m - i0);
            if (trans_a)
                rows_tile<true, W, NV, R>(i0, rows, k, a, lda, b, ldb, beta, c, ldc);
            else
                rows_tile<false, W, NV, R>(i0, rows, k, a, lda, b, ldb, beta, c, ldc);
        });
    });
}

namespace {

// small_product's register tile: two vectors of columns, as many rows as leave registers for B's
// two vectors and the broadcast (AVX2's sixteen, AVX-512's 32), and the tiles of the last rows.
#if defined(__AVX512F__)
constexpr int kSmallLanes = kVec16Lanes, kSmallRows = 8, kSmallTailRows = 4;
#else
constexpr int kSmallLanes = kVec8Lanes, kSmallRows = 6, kSmallTailRows = 2;
#endif
constexpr int kSmallVectors = 2;
constexpr int64_t kSmallBlock = kSmallVectors * kSmallLanes;

template <bool TransA>
void small_rows(int64_t m, int64_t np, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    constexpr int W = kSmallLanes, NV = kSmallVectors;
    // Whole tiles of kSmallRows, then of kSmallTailRows, then single rows.
    const int64_t whole = m / kSmallRows, tail = m % kSmallRows / kSmallTailRows;
    const int64_t first_tail = whole * kSmallRows,
                  first_single = first_tail + tail * kSmallTailRows;
    const int64_t tiles = whole + tail + (m - first_single);
    parallel_for(tiles, kSmallRows * k * np, [&](int64_t t) {
        for (int64_t j0 = 0; j0 < np; j0 += kSmallBlock) {
            if (t < whole)
                rows_tile<TransA, W, NV, kSmallRows>(t * kSmallRows, kSmallRows, k, a, lda, b + j0,
                                                     ldb, beta, c + j0, ldc, alpha);
            else if (t < whole + tail)
                rows_tile<TransA, W, NV, kSmallTailRows>(first_tail + (t - whole) * kSmallTailRows,
                                                         kSmallTailRows, k, a, lda, b + j0, ldb,
                                                         beta, c + j0, ldc, alpha);
            else
                rows_tile<TransA, W, NV, 1>(first_single + (t - whole - tail), 1, k, a, lda, b + j0,
                                            ldb, beta, c + j0, ldc, alpha);
        }
    });
}

}  // namespace

bool small_product_apply(bool trans_b, int64_t m, int64_t n, int64_t k) {
    const int64_t np = (n + kSmallBlock - 1) / kSmallBlock * kSmallBlock;
    if (m < kSmallProductMinRows || n < kSmallProductMinColumns || k < kSmallProductMinDepth ||
        k * np > kSmallProductMaxOperandFloats || m * k > kSmallProductMaxOperandFloats)
        return false;
#if defined(__AVX512F__)
    return trans_b;
#else
    return !trans_b || np == n;
#endif
}

void small_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
    const int64_t np = (n + kSmallBlock - 1) / kSmallBlock * kSmallBlock;
    // op(B) as k rows of np floats: B itself where it is [k, n] and n a whole number of blocks,
    // else a copy (transposed where trans_b) with zeros past n.
    static thread_local std::vector<float> packed_b, staged_c;
    if (trans_b || np != n) {
        packed_b.resize(static_cast<size_t>(k * np));
        float* pb = packed_b.data();
        if (trans_b)
            transpose(b, ldb, n, k, pb, np);
        else
            for (int64_t p = 0; p < k; ++p) std::copy(b + p * ldb, b + p * ldb + n, pb + p * np);
        for (int64_t p = 0; p < k; ++p) std::fill(pb + p * np + n, pb + (p + 1) * np, 0.0f);
        b = pb;  // thread_local: the workers' own would be empty
        ldb = np;
    }
    // The tiles write whole blocks of columns and fold beta·C in before alpha: where C is
    // narrower than its blocks, or both scale, they write a staging C and C is updated from it.
    if (np == n && (beta == 0.0f || alpha == 1.0f)) {
        if (trans_a)
            small_rows<true>(m, np, k, alpha, a, lda, b, ldb, beta, c, ldc);
        else
            small_rows<false>(m, np, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    staged_c.resize(static_cast<size_t>(m * np));
    float* sc = staged_c.data();
    if (trans_a)
        small_rows<true>(m, np, k, alpha, a, lda, b, ldb, 0.0f, sc, np);
    else
        small_rows<false>(m, np, k, alpha, a, lda, b, ldb, 0.0f, sc, np);
    for (int64_t i = 0; i < m; ++i) {
        const float* s = sc + i * np;
        float* out = c + i * ldc;
        if (beta == 0.0f)
            std::copy(s, s + n, out);
        else
            for (int64_t j = 0; j < n; ++j) out[j] = s[j] + beta * out[j];
    }
}

}  // namespace rl::cpu
