// RematLab's own float GEMM, for builds with AVX-512: "rematlab" among the GEMM libraries
// (engine/gemm.h), calibrated and chosen per shape beside Eigen, OpenBLAS and BLIS, so that it
// serves only the products it runs faster on this machine.
//
// The layered blocking of Goto and van de Geijn ("Anatomy of high-performance matrix
// multiplication", ACM TOMS 34(3), 2008) as BLIS arranges it (Van Zee and van de Geijn, "BLIS: a
// framework for rapidly instantiating BLAS functionality", ACM TOMS 41(3), 2015), for row-major C
// with its vectors along C's rows:
//   for each block of C's columns (jc), as many as kPanelBytes of packed op(B) hold
//     for each block of at most kKc of the depth (pc), the same split for every product of k
//       pack op(B)[pc, jc] as panels of kNr columns, kc rows each (stays in L2)
//       for each tile of kMr rows of C (i)
//         pack op(A)[i, pc] as kc columns of kMr floats (stays in L1)
//         for each panel (j): the micro-kernel, kMr × kNr of C in 24 registers
// The micro-kernel per k loads one row of the B panel (two vectors of 16 floats) and broadcasts
// each of the kMr floats of A's column: 24 FMAs, 14 loads. Tiles and panels at the edges are
// padded with zeros in the packed copies and stored under masks, so every shape takes the same
// kernel.
//
// Measured on the Intel Xeon of 2026-12-07 (one thread; 16-lane FMAs at 211 GFLOP/s with no
// loads, OpenBLAS's SkylakeX products at 145-160): the micro-kernel alone 176-181 GFLOP/s, no
// faster at 8 × 48 or 6 × 64 tiles or 14 rows, slower with the broadcasts folded into the FMAs;
// whole products against OpenBLAS's 1.00-1.06× at 1024 wide, 1.02-1.08× at 512, 1.05-1.10× at 256
// (docs/benchmarks.md). The calibration and the per-shape timing (engine/gemm.h) decide where.
//
// Bits: each element of C is the sum over the depth blocks in order of one FMA chain over each
// block's k in order, alpha·(that) added to beta·C in the first block. The blocks depend on k
// alone, and threads take whole tiles (columns in panels, or rows in tiles), so a product's bits
// depend on its operands and shape only: not on the thread count, nor on where its operands lie.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "engine/cpu/kernels.h"
#include "engine/errors.h"

namespace rl::cpu {

#if defined(__AVX512F__)
namespace {

constexpr int kMr = 12;                                 // rows of C a tile
constexpr int kNr = 32;                                 // columns of C a panel: two vectors
constexpr int64_t kMc = 8 * kMr;                        // rows of op(A) packed at once
constexpr int64_t kKc = 256;                            // the depth a block, at most
constexpr int64_t kPanelBytes = int64_t{1024} << 10;    // op(B)'s packed block, at most
constexpr int64_t kMinParallelMacs = int64_t{1} << 20;  // below: one thread

// This thread's scratch copy of at least `floats`, 64-byte aligned, kept between products. The
// threads' own: a worker's is not the caller's.
float* scratch(std::vector<float>& v, int64_t floats) {
    if (static_cast<int64_t>(v.size()) < floats + kLineFloats)
        v.resize(static_cast<size_t>(floats + kLineFloats));
    return aligned_line(v.data());
}

// C's tile of `rows` rows and the columns under masks m0, m1: in the depth's first block
// (`first`) alpha·acc + beta·C, or alpha·acc alone where beta is 0 (C is not read); in later
// blocks C + alpha·acc.
void micro_kernel(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c,
                  int64_t ldc, int rows, __mmask16 m0, __mmask16 m1, bool first, float alpha,
                  float beta) {
    __m512 acc[kMr][2];
#pragma GCC unroll 12
    for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    // C's tile, read after the loop where the tile adds to it, on its way from L3 meanwhile (C
    // and the packed op(B) together outgrow L2 on the larger products).
    if (!first || beta != 0.f)
        for (int r = 0; r < rows; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16), _MM_HINT_T0);
        }
    for (int64_t p = 0; p < kc; ++p) {
        const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 12
        for (int r = 0; r < kMr; ++r) {
            const __m512 a = _mm512_set1_ps(ap[r]);
            acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
        }
        ap += kMr;
        bp += kNr;
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    // Over the tile's constant rows with a test, not to `rows`: a loop to a run-time count keeps
    // the accumulators in memory (few_columns.cpp's rows_tile, 2026-12-07).
#pragma GCC unroll 12
    for (int r = 0; r < kMr; ++r) {
        if (r >= rows) continue;
        float* cr = c + r * ldc;
        __m512 x0 = acc[r][0], x1 = acc[r][1];
        if (alpha != 1.f) {
            x0 = _mm512_mul_ps(va, x0);
            x1 = _mm512_mul_ps(va, x1);
        }
        if (!first) {
            x0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, cr), x0);
            x1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, cr + 16), x1);
        } else if (beta != 0.f) {
            x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr), x0);
            x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr + 16), x1);
        }
        _mm512_mask_storeu_ps(cr, m0, x0);
        _mm512_mask_storeu_ps(cr + 16, m1, x1);
    }
}

__mmask16 first_lanes(int64_t n) {
    return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

struct Product {
    bool ta, tb;
    int64_t k;
    float alpha;
    const float* a;
    int64_t lda;
    const float* b;
    int64_t ldb;
    float beta;
    float* c;
    int64_t ldc;
};

// op(B)'s rows [pc, pc + kc), columns [j0, j0 + w) (w ≤ kNr) as a panel of kc rows of kNr floats,
// zero past w.
void pack_b_panel(const Product& p, int64_t pc, int64_t kc, int64_t j0, int64_t w, float* dst) {
    if (p.tb) {  // B is n × k: the panel is a transpose of w of its rows
        transpose(p.b + j0 * p.ldb + pc, p.ldb, w, kc, dst, kNr);
        if (w < kNr)
            for (int64_t q = 0; q < kc; ++q) std::fill(dst + q * kNr + w, dst + (q + 1) * kNr, 0.f);
        return;
    }
    const __mmask16 m0 = first_lanes(w), m1 = first_lanes(w - 16);
    for (int64_t q = 0; q < kc; ++q) {
        const float* src = p.b + (pc + q) * p.ldb + j0;
        _mm512_store_ps(dst + q * kNr, _mm512_maskz_loadu_ps(m0, src));
        _mm512_store_ps(dst + q * kNr + 16, _mm512_maskz_loadu_ps(m1, src + 16));
    }
}

// op(A)'s rows [i0, i0 + rows) (rows ≤ kMc), depth [pc, pc + kc), as tiles of kMr rows one after
// another, each kc columns of kMr floats, zero past rows.
void pack_a_block(const Product& p, int64_t pc, int64_t kc, int64_t i0, int64_t rows, float* dst) {
    if (p.ta) {
        // A is k × m: a tile's column is kMr neighbouring floats of one of A's rows. Row by row
        // across the block's tiles, so that A is read as it lies: tile by tile, each tile's pass
        // had read its floats from kc rows 4 KB apart (A 1024 wide), 13 % of a TN 1024 × 256 ×
        // 256 product; reading the tiles in place, without the copy, took 20 % longer than that.
        for (int64_t q = 0; q < kc; ++q) {
            const float* src = p.a + (pc + q) * p.lda + i0;
            for (int64_t r0 = 0; r0 < rows; r0 += kMr)
                _mm512_mask_storeu_ps(dst + r0 * kc + q * kMr, __mmask16(0x0fff),
                                      _mm512_maskz_loadu_ps(first_lanes(rows - r0), src + r0));
        }
        return;
    }
    // A tile at a time (transposing the block whole into a scratch copy first, 16 × 16 at a time,
    // then scattering it to the tiles, was 2-5 % slower on 256-wide NT and NN products).
    for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
        const int64_t n = std::min<int64_t>(kMr, rows - r0);
        float* t = dst + r0 * kc;
        transpose(p.a + (i0 + r0) * p.lda + pc, p.lda, n, kc, t, kMr);
        if (n < kMr)
            for (int64_t q = 0; q < kc; ++q) std::fill(t + q * kMr + n, t + (q + 1) * kMr, 0.f);
    }
}

// C's rows [i_lo, i_hi) and columns [j_lo, j_hi) on this thread, j_lo a multiple of kNr.
void product_part(const Product& p, int64_t i_lo, int64_t i_hi, int64_t j_lo, int64_t j_hi) {
    const int64_t blocks = (p.k + kKc - 1) / kKc, step = (p.k + blocks - 1) / blocks;
    const int64_t nc = std::max<int64_t>(kNr, kPanelBytes / (sizeof(float) * step) / kNr * kNr);
    static thread_local std::vector<float> packed_b, packed_a;
    float* bp = scratch(packed_b, step * std::min(nc, (j_hi - j_lo + kNr - 1) / kNr * kNr));
    float* ap = scratch(packed_a, kKc * kMc);
    for (int64_t jc = j_lo; jc < j_hi; jc += nc) {
        const int64_t jn = std::min(nc, j_hi - jc);
        for (int64_t pc = 0; pc < p.k; pc += step) {
            const int64_t kc = std::min(step, p.k - pc);
            for (int64_t j = 0; j < jn; j += kNr)
                pack_b_panel(p, pc, kc, jc + j, std::min<int64_t>(kNr, jn - j), bp + j * kc);
            for (int64_t ic = i_lo; ic < i_hi; ic += kMc) {
                const int64_t block = std::min(kMc, i_hi - ic);
                pack_a_block(p, pc, kc, ic, block, ap);
                for (int64_t r0 = 0; r0 < block; r0 += kMr) {
                    const int rows = static_cast<int>(std::min<int64_t>(kMr, block - r0));
                    const int64_t i = ic + r0;
                    for (int64_t j = 0; j < jn; j += kNr) {
                        const int64_t w = std::min<int64_t>(kNr, jn - j);
                        micro_kernel(kc, ap + r0 * kc, bp + j * kc, p.c + i * p.ldc + jc + j, p.ldc,
                                     rows, first_lanes(w), first_lanes(w - 16), pc == 0, p.alpha,
                                     p.beta);
                    }
                }
            }
        }
    }
}

}  // namespace

bool packed_product_built() {
    return true;
}

// Raised with every change to the blocking or the tile that moves their speed: the version is
// part of the calibration's cache key (engine/gemm.h), so machines time the new kernels again
// rather than keep choices made on the old ones. 1: 7b3f40e; 2: a transposed A packed 96 rows at
// once (3a2d5a3).
constexpr int kRevision = 2;

const char* packed_product_version() {
    static const std::string v =
        "RematLab's 12 × 32 AVX-512 kernels, revision " + std::to_string(kRevision);
    return v.c_str();
}

void packed_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc) {
    if (m <= 0 || n <= 0 || k <= 0) return;  // library_sgemm settles these before any library
    const Product p{trans_a, trans_b, k, alpha, a, lda, b, ldb, beta, c, ldc};
    const int threads = omp_in_parallel() ? 1 : cpu_threads();
    const int64_t panels = (n + kNr - 1) / kNr, tiles = (m + kMr - 1) / kMr;
    // Whole panels to each thread where there are enough of them, else whole tiles of rows.
    const bool by_columns = panels >= 2 * int64_t{threads} || panels >= tiles;
    const int64_t units = by_columns ? panels : tiles;
    const int parts = static_cast<int>(std::min<int64_t>(
        {int64_t{threads}, units, std::max<int64_t>(1, m * n * k / kMinParallelMacs)}));
    auto part = [&](int t) {
        const int64_t lo = units * t / parts, hi = units * (t + 1) / parts;
        if (by_columns)
            product_part(p, 0, m, lo * kNr, std::min(n, hi * kNr));
        else
            product_part(p, lo * kMr, std::min(m, hi * kMr), 0, n);
    };
    if (parts <= 1) {
        part(0);
        return;
    }
    std::exception_ptr failed;
#pragma omp parallel num_threads(parts)
    {
        for (int t = omp_get_thread_num(); t < parts; t += omp_get_num_threads()) {
            try {
                part(t);
            } catch (...) {
#pragma omp critical(rl_packed_product)
                failed = std::current_exception();
            }
        }
    }
    if (failed) std::rethrow_exception(failed);
}

#else  // no AVX-512: not built (gemm.cpp reports it unavailable and never calls it)

bool packed_product_built() {
    return false;
}

const char* packed_product_version() {
    return "";
}

void packed_product(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                    const float*, int64_t, float, float*, int64_t) {
    throw Error(
        "RematLab's own GEMM kernels are built only with AVX-512 (REMATLAB_NATIVE=ON on "
        "a machine that has it); choose another GEMM library");
}

#endif

}  // namespace rl::cpu
