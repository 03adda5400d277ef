// The CPU kernels' one transpose between planes and channels-last layouts (kernels.h).
#include <cstdint>

#include "engine/cpu/kernels.h"

#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace rl::cpu {
namespace {

constexpr int64_t kLanes = 8;

#if defined(__AVX2__)
// r[i][j] → r[j][i] for an 8 × 8 block of floats.
inline void transpose8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
#endif

#if defined(__AVX512F__)
// Where the build has AVX-512, 16 × 16 blocks through 16 registers: a 3×3's weights of 16
// output channels a group and a 16-channel group's input rows go as one block each where they
// were four; ResNeXt-50's strided grouped 3×3 (8×8 → 4×4, 16 channels a group) ran 0.064–0.073
// ms forward against 0.083–0.098 by eights (docs/benchmarks.md).
constexpr int64_t kWide = 16;

// r[i][j] → r[j][i] for a 16 × 16 block: 4 × 4 transposes within each 128-bit lane, then the
// lanes across registers.
inline void transpose16(__m512 r[kWide]) {
    __m512 t[kWide];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {  // lane L of r[4i + q]: column 4L + q of rows 4i to 4i + 3
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int q = 0; q < 4; ++q) {
        t[q] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x88);
        t[4 + q] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xDD);
        t[8 + q] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x88);
        t[12 + q] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xDD);
    }
    for (int q = 0; q < 4; ++q) {
        r[q] = _mm512_shuffle_f32x4(t[q], t[8 + q], 0x88);
        r[8 + q] = _mm512_shuffle_f32x4(t[q], t[8 + q], 0xDD);
        r[4 + q] = _mm512_shuffle_f32x4(t[4 + q], t[12 + q], 0x88);
        r[12 + q] = _mm512_shuffle_f32x4(t[4 + q], t[12 + q], 0xDD);
    }
}
#endif

#if defined(__AVX2__)
// A block's registers, their loads, stores, sum and transpose, by width.
struct Eights {
    static constexpr int64_t n = kLanes;
    using R = __m256;
    static R load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
    static R sum(R x, R y) { return _mm256_add_ps(x, y); }
    static void transpose(R* r) { transpose8(r); }
};
#endif
#if defined(__AVX512F__)
struct Sixteens {
    static constexpr int64_t n = kWide;
    using R = __m512;
    static R load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
    static R sum(R x, R y) { return _mm512_add_ps(x, y); }
    static void transpose(R* r) { transpose16(r); }
};
#endif

#if defined(__AVX512F__)
// 16 planes of 2×2 positions to and from channels-last (planes_to_lanes, planes_from_lanes: the
// pools', the depthwise blocks' and batch norm's blocks): 16 rows of 4 contiguous floats (64
// floats, four registers) as 4 rows of 16, and back, by two-source permutes. By 4 × 4 blocks the
// calls' set-up cost as much as the moves.
// a: 16 × 4 contiguous; b[j·ldb + i] (+)= a[4i + j].
inline void rows16_cols4(const float* a, float* b, int64_t ldb, bool add) {
    // Columns 0 and 1 of rows 0-7 (or 8-15), then columns 2 and 3.
    const __m512i c01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i c23 =
        _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    const __m512 v0 = _mm512_loadu_ps(a), v1 = _mm512_loadu_ps(a + 16),
                 v2 = _mm512_loadu_ps(a + 32), v3 = _mm512_loadu_ps(a + 48);
    const __m512 lo01 = _mm512_permutex2var_ps(v0, c01, v1),
                 hi01 = _mm512_permutex2var_ps(v2, c01, v3);
    const __m512 lo23 = _mm512_permutex2var_ps(v0, c23, v1),
                 hi23 = _mm512_permutex2var_ps(v2, c23, v3);
    const __m512 r[4] = {
        _mm512_shuffle_f32x4(lo01, hi01, 0x44), _mm512_shuffle_f32x4(lo01, hi01, 0xEE),
        _mm512_shuffle_f32x4(lo23, hi23, 0x44), _mm512_shuffle_f32x4(lo23, hi23, 0xEE)};
    for (int64_t j = 0; j < 4; ++j) {
        float* d = b + j * ldb;
        _mm512_storeu_ps(d, add ? _mm512_add_ps(_mm512_loadu_ps(d), r[j]) : r[j]);
    }
}

// a: 4 rows of 16 (lda apart); b, 16 × 4 contiguous: b[4j + i] (+)= a[i·lda + j].
inline void rows4_cols16(const float* a, int64_t lda, float* b, bool add) {
    // Rows 0 and 1 (2 and 3) interleaved over columns 0-7, then 8-15; then pairs of those.
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i q0 = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    const __m512i q1 =
        _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
    const __m512 u0 = _mm512_loadu_ps(a), u1 = _mm512_loadu_ps(a + lda),
                 u2 = _mm512_loadu_ps(a + 2 * lda), u3 = _mm512_loadu_ps(a + 3 * lda);
    const __m512 s01l = _mm512_permutex2var_ps(u0, lo, u1),
                 s23l = _mm512_permutex2var_ps(u2, lo, u3);
    const __m512 s01h = _mm512_permutex2var_ps(u0, hi, u1),
                 s23h = _mm512_permutex2var_ps(u2, hi, u3);
    const __m512 r[4] = {
        _mm512_permutex2var_ps(s01l, q0, s23l), _mm512_permutex2var_ps(s01l, q1, s23l),
        _mm512_permutex2var_ps(s01h, q0, s23h), _mm512_permutex2var_ps(s01h, q1, s23h)};
    for (int64_t m = 0; m < 4; ++m) {
        float* d = b + 16 * m;
        _mm512_storeu_ps(d, add ? _mm512_add_ps(_mm512_loadu_ps(d), r[m]) : r[m]);
    }
}
#endif

// Rows [i0, i0 + n) × columns [j0, j0 + n) of a, through n registers, into b (with `add`, +=).
// Inlined where it is called, as the blocks were written before it (a call of its own made GCC 12
// warn that AVX-512's unpacks read an uninitialized operand, the intrinsics' own placeholder).
template <class B>
[[gnu::always_inline]] inline void move_block(const float* a, int64_t lda, int64_t i0, int64_t j0,
                                              float* b, int64_t ldb, bool add) {
    typename B::R r[B::n];
    for (int64_t k = 0; k < B::n; ++k) r[k] = B::load(a + (i0 + k) * lda + j0);
    B::transpose(r);
    for (int64_t k = 0; k < B::n; ++k) {
        float* d = b + (j0 + k) * ldb + i0;
        B::store(d, add ? B::sum(B::load(d), r[k]) : r[k]);
    }
}

// Rows [i0, i1) × columns [j0, j1) of a into b (with `add`, +=): 4 × 4 blocks through SSE
// registers where whole fours fit, single floats at the edges. The columns past the 8 × 8
// blocks, and whole transposes of four rows or four columns: the 16 planes of 2×2 positions that
// the pools, the depthwise blocks and batch norm move to and from channels-last (4 × 16 and
// 16 × 4) went a float at a time, a load, a store and a branch each. (The 8 × 8 blocks' edge
// rows stay a loop of their own: a call to this inside the blocks' loop made GCC keep the
// blocks' registers across it, and the AVX2 build's transposes of whole 8 × 8 blocks ran 1.5×
// longer.)
void transpose_by_fours(const float* a, int64_t lda, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
                        float* b, int64_t ldb, bool add) {
    auto put = [&](int64_t i, int64_t j) {
        float& d = b[j * ldb + i];
        d = add ? d + a[i * lda + j] : a[i * lda + j];
    };
    int64_t j = j0;
#if defined(__SSE__)
    for (; j + 4 <= j1; j += 4) {
        int64_t i = i0;
        for (; i + 4 <= i1; i += 4) {
            __m128 r0 = _mm_loadu_ps(a + i * lda + j), r1 = _mm_loadu_ps(a + (i + 1) * lda + j),
                   r2 = _mm_loadu_ps(a + (i + 2) * lda + j),
                   r3 = _mm_loadu_ps(a + (i + 3) * lda + j);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            const __m128 r[4] = {r0, r1, r2, r3};
            for (int64_t k = 0; k < 4; ++k) {
                float* d = b + (j + k) * ldb + i;
                _mm_storeu_ps(d, add ? _mm_add_ps(_mm_loadu_ps(d), r[k]) : r[k]);
            }
        }
        for (; i < i1; ++i)
            for (int64_t k = 0; k < 4; ++k) put(i, j + k);
    }
#endif
    for (; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) put(i, j);
}

// The 8 × 8 blocks' transpose (all of it without AVX-512).
void transpose_by_eights(const float* a, int64_t lda, int64_t rows, int64_t cols, float* b,
                         int64_t ldb, bool add) {
    int64_t j = 0;
#if defined(__AVX2__)
    auto block = [&](int64_t i0, int64_t j0) { move_block<Eights>(a, lda, i0, j0, b, ldb, add); };
    const int64_t whole_rows = rows / kLanes * kLanes, whole_cols = cols / kLanes * kLanes;
    const bool overlap_rows = !add && whole_rows > 0 && rows - whole_rows >= 2;
    const bool overlap_cols = !add && whole_cols > 0 && cols - whole_cols >= 2;
    // The 8 columns from j0: down the whole rows' blocks, then the edge rows.
    auto column = [&](int64_t j0) {
        for (int64_t i = 0; i < whole_rows; i += kLanes) block(i, j0);
        if (overlap_rows)
            block(rows - kLanes, j0);
        else
            for (int64_t i = whole_rows; i < rows; ++i)
                for (int64_t k = 0; k < kLanes; ++k) {
                    float& d = b[(j0 + k) * ldb + i];
                    d = add ? d + a[i * lda + j0 + k] : a[i * lda + j0 + k];
                }
    };
    for (; j < whole_cols; j += kLanes) column(j);
    if (overlap_cols) {
        column(cols - kLanes);
        return;
    }
#endif
    transpose_by_fours(a, lda, 0, rows, j, cols, b, ldb, add);
}

}  // namespace

// b[j·ldb + i] = a[i·lda + j] for i < rows, j < cols (with `add`, +=): 8 × 8 blocks through
// registers where the build has AVX2, single floats at the edges. The blocks go down the rows
// of a for each 8 columns, so that b is written as 8 streams at a time: with all of a row's
// columns in turn (16 streams for 16 channels, 4 KB apart on a 32×32 plane) the lines of b
// shared one cache set and were evicted half-written, and the input gradient's transpose took
// 40 % of a stride-2 backward.
// Without `add`, an edge of 2 to 7 rows (columns) past the last whole block is a block too,
// starting 8 before the end and overlapping the one before it: the floats they share are written
// again with the same values, where a float at a time took a load, a store and a branch each
// (grouped convolutions' rows of 14 or 28 columns, their 4×4 and 6×6 planes). An edge of one goes
// a float at a time (a 3×3's ninth tap: a block would move eight floats again for each new one).
void transpose(const float* a, int64_t lda, int64_t rows, int64_t cols, float* b, int64_t ldb,
               bool add) {
#if defined(__AVX512F__)
    if (cols == 4 && lda == 4 && rows % kWide == 0) {
        for (int64_t i = 0; i < rows; i += kWide) rows16_cols4(a + i * 4, b + i, ldb, add);
        return;
    }
    if (rows == 4 && ldb == 4 && cols % kWide == 0) {
        for (int64_t j = 0; j < cols; j += kWide) rows4_cols16(a + j, lda, b + j * 4, add);
        return;
    }
    // 16 × 16 blocks over the whole 16s of rows and columns, down the rows of each 16 columns
    // (16 streams of b at a time); the edges by eights.
    const int64_t rows16 = rows / kWide * kWide, cols16 = cols / kWide * kWide;
    if (rows16 > 0 && cols16 > 0) {
        for (int64_t j0 = 0; j0 < cols16; j0 += kWide)
            for (int64_t i0 = 0; i0 < rows16; i0 += kWide)
                move_block<Sixteens>(a, lda, i0, j0, b, ldb, add);
        if (cols > cols16)
            transpose_by_eights(a + cols16, lda, rows16, cols - cols16, b + cols16 * ldb, ldb, add);
        if (rows > rows16)
            transpose_by_eights(a + rows16 * lda, lda, rows - rows16, cols, b + rows16, ldb, add);
        return;
    }
#endif
    // Four columns or four rows (2×2 planes in a build without AVX-512, or not packed): the 4 × 4
    // blocks without the eights' set-up.
    if ((cols == 4 && rows % 4 == 0) || (rows == 4 && cols % 4 == 0)) {
        transpose_by_fours(a, lda, 0, rows, 0, cols, b, ldb, add);
        return;
    }
    transpose_by_eights(a, lda, rows, cols, b, ldb, add);
}

}  // namespace rl::cpu
