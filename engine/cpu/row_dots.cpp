// A linear layer's forward product over a few rows, X·Wᵀ, as dot products along the depth: C [m,
// n] = A [m, k] · Bᵀ + beta·C with B stored [n, k], neither operand packed. Both operands' rows
// run along the depth in memory, so a register tile of 4 rows of A by 3 rows of B needs no copy:
// per eight terms it loads 7 vectors for 12 multiply-adds, and sums each accumulator's lanes
// once, at the end. The tile's 3 rows of B stay in L1 while the rows of A go by from L2, and the
// next 3 rows are prefetched meanwhile, so that reading the weights from memory (a step's weights
// are cold: ViT-B/32's 350 MB do not stay in any cache between uses) overlaps the arithmetic.
//
// The GEMM libraries pack op(B) first, a pass over the weights from memory on its own, before
// any multiply-add, and their register tiles fit 100 rows poorly. On a Zen 5 core, AVX2 kernels,
// one thread, the weights cold (16 copies in turn): ViT-B/32's products at batch 2 ([100 × 768]
// against 768 to 3072 rows of W) at 123-125 GFLOP/s here against OpenBLAS's 119-123; a prototype
// at 50 rows 123 against 91, at 128 rows level (taken up to 100), at 256 rows and at depths of
// 2048 and more behind (at 3072, 12 KB rows, A's and B's rows fall into one set of L1). The
// accumulators stay in registers only with every loop over the tile unrolled (indexing their
// lanes one by one, or a run-time loop in the epilogue, kept them in memory: 4-10 % slower).
// row_dots_apply says where it is taken (docs/benchmarks.md). In builds with AVX-512 our packed
// products (packed_product.cpp) run 16-lane tiles, and this kernel's 8 lanes are not taken.
//
// Bits: each element of C is one chain of eight-lane sums down the depth in order, its lanes
// summed in a fixed order, then added to C where beta is 1: the same whatever the thread count
// (threads take whole blocks of B's rows).
#include <algorithm>
#include <cstdint>
#include <string>

#include "engine/cpu/kernels.h"
#include "engine/cpu/vec8.h"
#include "engine/errors.h"
#include "engine/gemm.h"

namespace rl::cpu {
namespace {

constexpr int kTileRows = 4;  // rows of A a tile
constexpr int kTileCols = 3;  // rows of B a tile: columns of C

// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), by shuffles.
inline float lane_sum(V8 v) {
    const F4 halves =
        __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
    const F4 pairs = halves + __builtin_shufflevector(halves, halves, 2, 3, 0, 1);
    return pairs[0] + pairs[1];
}

// The next block's rows of B, prefetched while a tile computes (none where count is 0).
struct Next {
    const float* rows = nullptr;
    int count = 0;
};

// C's R × S tile at c: rows of A at a, rows of B at b, k a whole number of vectors; `next`'s rows
// prefetched meanwhile, a line of each every two vectors.
template <int R, int S>
__attribute__((always_inline)) inline void tile(const float* a, int64_t lda, const float* b,
                                                int64_t ldb, int64_t k, float beta, float* c,
                                                int64_t ldc, Next next) {
    V8 acc[R][S];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
        for (int s = 0; s < S; ++s) acc[r][s] = V8{};
    for (int64_t p = 0; p < k; p += kVec8Lanes) {
        // S prefetches (the last of fewer rows again): a loop to next.count, a run-time count,
        // ran 4 % slower with the weights cold.
        if (next.count > 0 && p % kLineFloats == 0)
#pragma GCC unroll 3
            for (int s = 0; s < S; ++s)
                __builtin_prefetch(next.rows + std::min(s, next.count - 1) * ldb + p, 0, 3);
        V8 bv[S];
#pragma GCC unroll 3
        for (int s = 0; s < S; ++s) bv[s] = load8(b + s * ldb + p);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
            const V8 av = load8(a + r * lda + p);
#pragma GCC unroll 3
            for (int s = 0; s < S; ++s) acc[r][s] += av * bv[s];
        }
    }
    // Unrolled like the loops above, so that the accumulators stay in registers (see the top).
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 3
        for (int s = 0; s < S; ++s) {
            const float v = lane_sum(acc[r][s]);
            float& out = c[r * ldc + s];
            out = beta != 0.f ? out + v : v;
        }
}

// Columns [j, j + S) of C, every row: tiles of kTileRows rows, then the rest. The second tile
// (the first when there is one) prefetches `next`; the first reads this block's rows of B from
// memory.
template <int S>
void column_block(int64_t m, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                  float beta, float* c, int64_t ldc, Next next) {
    const int64_t fetcher = m >= 2 * kTileRows ? kTileRows : 0;
    int64_t i = 0;
    for (; i + kTileRows <= m; i += kTileRows)
        tile<kTileRows, S>(a + i * lda, lda, b, ldb, k, beta, c + i * ldc, ldc,
                           i == fetcher ? next : Next{});
    const float* pa = a + i * lda;
    float* pc = c + i * ldc;
    const Next pn = i == fetcher ? next : Next{};
    switch (m - i) {
        case 3:
            return tile<3, S>(pa, lda, b, ldb, k, beta, pc, ldc, pn);
        case 2:
            return tile<2, S>(pa, lda, b, ldb, k, beta, pc, ldc, pn);
        case 1:
            return tile<1, S>(pa, lda, b, ldb, k, beta, pc, ldc, pn);
        default:
            return;
    }
}

}  // namespace

bool row_dots_apply(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
    return !trans_a && trans_b && m > kThinRows && m <= kRowDotsMaxRows && k >= kRowDotsMinDepth &&
           k <= kRowDotsMaxDepth && k % kVec8Lanes == 0 && n >= kRowDotsMinColumns;
#else
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k;
    return false;
#endif
}

void row_dots_product(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc) {
    if (k % kVec8Lanes != 0)
        throw Error("row_dots_product: a depth of " + std::to_string(k) +
                    " is not a whole number of " + std::to_string(kVec8Lanes) +
                    "-float vectors (row_dots_apply says where it is taken)");
    const int64_t blocks = (n + kTileCols - 1) / kTileCols;
    parallel_for(blocks, kTileCols * m * k, [&](int64_t blk) {
        const int64_t j = blk * kTileCols, cols = std::min<int64_t>(kTileCols, n - j);
        const float* bj = b + j * ldb;
        const auto ahead = static_cast<int>(std::clamp<int64_t>(n - j - kTileCols, 0, kTileCols));
        const Next next{ahead ? bj + kTileCols * ldb : nullptr, ahead};
        if (cols == 3)
            column_block<3>(m, k, a, lda, bj, ldb, beta, c + j, ldc, next);
        else if (cols == 2)
            column_block<2>(m, k, a, lda, bj, ldb, beta, c + j, ldc, next);
        else
            column_block<1>(m, k, a, lda, bj, ldb, beta, c + j, ldc, next);
    });
}

}  // namespace rl::cpu
