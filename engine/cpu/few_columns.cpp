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
#include <algorithm>
#include <type_traits>

#include "engine/cpu/kernels.h"
#include "engine/cpu/vec8.h"

namespace rl::cpu {
namespace {

template <bool TransA, int W, int NV, int R>
void rows_tile(int64_t i0, int64_t rows, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, float beta, float* c, int64_t ldc) {
    using V = typename Vec<W>::T;
    V acc[R][NV];
    const float* ar[R];
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
    for (int64_t r = 0; r < rows; ++r)
        for (int v = 0; v < NV; ++v) Vec<W>::store(c + (i0 + r) * ldc + v * W, acc[r][v]);
}

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
    with_tile(n, [&](auto w, auto nv, auto r) {
        constexpr int W = decltype(w)::value, NV = decltype(nv)::value, R = decltype(r)::value;
        const int64_t tiles = (m + R - 1) / R;
        parallel_for(tiles, R * k * n, [&](int64_t t) {
            const int64_t i0 = t * R, rows = std::min<int64_t>(R, m - i0);
            if (trans_a)
                rows_tile<true, W, NV, R>(i0, rows, k, a, lda, b, ldb, beta, c, ldc);
            else
                rows_tile<false, W, NV, R>(i0, rows, k, a, lda, b, ldb, beta, c, ldc);
        });
    });
}

}  // namespace rl::cpu
