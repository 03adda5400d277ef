#pragma once
// Internal to the CPU backend: the float32 kernels (one forward and one backward per op, grouped
// by family in dense.cpp, elementwise.cpp, norm.cpp, shape_ops.cpp, losses.cpp) and the helpers
// they share. cpu_backend.cpp dispatches to them through a table indexed by OpKind.
//
// Every kernel works on Eigen Maps over the caller's buffers (row-major) with noalias() and
// lazy array expressions, so nothing is allocated; GEMMs go through rl::sgemm (engine/gemm.h),
// which runs whichever library was chosen for the process. Parallel loops split independent output
// rows or columns statically; no reduction's order depends on the thread count or on timing, so a
// kernel gives bitwise the same result every time (for most kernels, for any thread count).
// One caveat: Eigen's vectorised loops over dynamic Maps peel scalar elements up to the first
// 64-byte boundary, and the scalar and packet paths of exp/tanh/erf and of sums round
// differently, so results are reproducible for a given buffer alignment. The allocator hands
// out 64-byte aligned buffers, one per tensor, so a tensor always has the same alignment.
// GCC 12 reports a false -Wmaybe-uninitialized inside Eigen's AVX-512 GEMM packing
// (_mm512_unpacklo_ps in gemm_pack_lhs); the pragma covers Eigen's headers only.
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning, and warns of the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#pragma GCC diagnostic pop
#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/vec8.h"
#include "engine/ops/window.h"

namespace rl::cpu {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMat>;
using ConstMatMap = Eigen::Map<const RowMat>;
using ArrMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrMap = Eigen::Map<const Eigen::ArrayXf>;

inline const Shape& input_shape(const Graph& g, const Node& n, int i) {
    return g.value(n.inputs[static_cast<size_t>(i)]).shape;
}
inline const Shape& output_shape(const Graph& g, const Node& n) {
    return g.value(n.output).shape;
}
inline const float* as_f32(const void* p) {
    return static_cast<const float*>(p);
}
inline float* as_f32(void* p) {
    return static_cast<float*>(p);
}

// dst = e, or dst += e when accumulating into an existing gradient.
template <class Dst, class Expr>
inline void store(Dst&& dst, const Expr& e, bool accumulate) {
    if (accumulate)
        dst += e;
    else
        dst = e;
}

// The first 64-byte boundary at or after p: the start of a kernel's scratch copy (a thread_local
// vector with kLineFloats floats to spare), so that its rows load as whole cache lines.
constexpr int64_t kLineFloats = 16;
inline float* aligned_line(float* p) {
    return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

// Runs body(i) for i in [0, n), split statically over the CPU threads when the total work
// (n · work_per_item, in elements) is worth a parallel region.
template <class F>
void parallel_for(int64_t n, int64_t work_per_item, F&& body) {
    constexpr int64_t kMinParallelWork = int64_t{1} << 15;
    const int threads = cpu_threads();
    if (threads <= 1 || n <= 1 || n * work_per_item < kMinParallelWork) {
        // No parallel region at all: even one that the if clause keeps on one thread costs a
        // call into the OpenMP runtime, which showed in kernels run thousands of times per step
        // on small planes (im2col per group).
        for (int64_t i = 0; i < n; ++i) body(i);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) body(i);
}

// Two independent products at two threads, such as a layer's dX and dW, run side by side, each
// on one thread (the GEMM libraries stay single-threaded inside a parallel region), rather than
// one after the other on both: the libraries' own two threads split one product and meet at its
// end, and for a layer's products of 256 to 1024 wide they scale 1.4-1.9× where two products
// side by side scale 1.9-2.1× (OpenBLAS, docs/benchmarks.md). side_by_side_pays says where: at
// exactly two threads, outside a parallel region, for products of kSideBySideMinMacs or more
// multiply-adds each. An exception in either is rethrown after both.
constexpr int64_t kSideBySideMinMacs = int64_t{1} << 18;
bool side_by_side_pays(int64_t macs_each);
void side_by_side(const std::function<void()>& first, const std::function<void()>& second);

// The output columns [lo, hi) whose window tap at input column offset `off` (= j·dw - pad_left)
// lands inside [0, w): 0 <= ow·s + off < w. Shared by the direct convolutions and the pools.
struct Span {
    int64_t lo, hi;
};
inline Span valid_span(int64_t off, int64_t s, int64_t w, int64_t out) {
    const int64_t lo = off >= 0 ? 0 : (-off + s - 1) / s;
    const int64_t hi = w - off <= 0 ? 0 : std::min(out, (w - off + s - 1) / s);
    return {std::min(lo, hi), hi};
}

// The taps of each output row and column of a window that lie inside the plane: per output row
// oh the tap rows i, per output column ow the tap columns j (valid_span). Worked out once a call
// by the kernels that walk windows of 16 planes at a time (the depthwise blocks, conv.cpp; the
// pools' blocks, pool.cpp): testing each tap of each window against the plane's bounds, or
// dividing per window, cost those kernels more than their multiply-adds or compares.
struct WindowTapSpans {
    std::vector<Span> rows, cols;
    WindowTapSpans(const Window2d& w, int64_t h, int64_t wd, int64_t oh, int64_t ow) {
        for (int64_t o = 0; o < oh; ++o)
            rows.push_back(valid_span(o * w.sh - w.pad_top, w.dh, h, w.kh));
        for (int64_t o = 0; o < ow; ++o)
            cols.push_back(valid_span(o * w.sw - w.pad_left, w.dw, wd, w.kw));
    }
};

// Calls f(i, j, off, s, oh, ih) for every tap (i, j) of a convolution's window, in that order,
// and every output row oh, ascending, whose tap row ih = oh·sh - pad_top + i·dh lies in the
// plane; off = j·dw - pad_left, s its valid output columns. The row loops of the direct
// depthwise kernels (conv.cpp) and of col2im's row path (im2col.cpp).
template <class F>
void for_each_tap_row(const Conv2dGeometry& g, F&& f) {
    const Window2d& w = g.win;
    for (int64_t i = 0; i < w.kh; ++i)
        for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t off = j * w.dw - w.pad_left;
            const Span s = valid_span(off, w.sw, g.w, g.ow);
            for (int64_t oh = 0; oh < g.oh; ++oh) {
                const int64_t ih = oh * w.sh - w.pad_top + i * w.dh;
                if (ih >= 0 && ih < g.h) f(i, j, off, s, oh, ih);
            }
        }
}

// b[j·ldb + i] = a[i·lda + j] for i < rows, j < cols; with `add`, b[j·ldb + i] += a[i·lda + j].
// The one transpose between planes (NCHW) and channels-last layouts: 8 × 8 blocks through
// registers where the build has AVX2, floats one by one at the edges (transpose.cpp). A pure copy
// (or one add per element), so any layout change through it keeps every value's bits.
void transpose(const float* a, int64_t lda, int64_t rows, int64_t cols, float* b, int64_t ldb,
               bool add = false);

// Channels-last blocks of 16 planes, one per vector lane, for ops whose planes are too small
// for row loops to vectorise (depthwise convolution, pooling): `size` floats of each of planes
// [p0, p0 + 16), plane p starting at src + p·stride (NCHW: a plane per image and channel; a band
// of rows is a part of each plane), to and from the block b[size][16]. Of `count` planes in all:
// lanes past the last are zero in the block and not written back.
constexpr int64_t kPlaneLanes = 16;
// A block position's 16 lanes as the machine's vectors: one of 16 floats on AVX-512, two of 8
// elsewhere (the pools' Lanes, pool.cpp; the depthwise blocks' LaneAcc, conv.cpp).
#if defined(__AVX512F__)
constexpr int kLaneVectorWidth = 16;
#else
constexpr int kLaneVectorWidth = 8;
#endif
constexpr int kLaneVectors = kPlaneLanes / kLaneVectorWidth;

// A block position's 16 lanes in registers, as those vectors, loaded from and stored to any
// alignment: the depthwise blocks' sums (conv.cpp) and batch norm's lanes (batchnorm.cpp). The
// pools' Lanes (pool.cpp) work in place on 64-byte-aligned blocks instead.
struct LaneVectors {
    using V = Vec<kLaneVectorWidth>::T;
    V part[kLaneVectors];
    static LaneVectors load(const float* p) {
        LaneVectors a;
        for (int h = 0; h < kLaneVectors; ++h)
            a.part[h] = Vec<kLaneVectorWidth>::load(p + h * kLaneVectorWidth);
        return a;
    }
    static LaneVectors zero() {
        LaneVectors a;
        for (int h = 0; h < kLaneVectors; ++h) a.part[h] = V{};
        return a;
    }
    void store(float* p) const {
        for (int h = 0; h < kLaneVectors; ++h)
            Vec<kLaneVectorWidth>::store(p + h * kLaneVectorWidth, part[h]);
    }
};

inline void planes_to_lanes(const float* src, int64_t stride, int64_t size, int64_t count,
                            int64_t p0, float* b) {
    const int64_t lanes = std::min(kPlaneLanes, count - p0);
    if (lanes < kPlaneLanes) std::fill(b, b + size * kPlaneLanes, 0.0f);
    transpose(src + p0 * stride, stride, lanes, size, b, kPlaneLanes);
}
inline void planes_from_lanes(const float* b, int64_t stride, int64_t size, int64_t count,
                              int64_t p0, float* dst, bool accumulate) {
    transpose(b, kPlaneLanes, size, std::min(kPlaneLanes, count - p0), dst + p0 * stride, stride,
              accumulate);
}

// Runs body(begin, length) over fixed chunks of [0, n), for elementwise kernels.
template <class F>
void for_chunks(int64_t n, F&& body) {
    constexpr int64_t kChunk = int64_t{1} << 14;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    parallel_for(chunks, kChunk, [&](int64_t c) {
        const int64_t begin = c * kChunk;
        body(begin, std::min(kChunk, n - begin));
    });
}

// Σ a[j]·b[j] in double, in a fixed order of eight partial sums (norm.cpp): the same floats give
// the same sum whatever the thread count.
double dot_double(const float* a, const float* b, int64_t d);

// dst[j] = Σ_r src[r, j] over a row-major [rows, cols] matrix; each column is summed in row order
// by one thread.
void column_sums(const float* src, int64_t rows, int64_t cols, float* dst);

using ForwardKernel = void (*)(const ForwardCall&);
using BackwardKernel = void (*)(const BackwardCall&);

// A linear layer's products on [rows, in] inputs and an [out, in] weight: Y = X·Wᵀ (+ b, when b
// is given); dX (+)= dY·W and dW = dYᵀ·X, each where its pointer is given. conv2d's 1×1
// convolutions on 1×1 planes run them too (Conv2dGeometry::linear_like).
void linear_products_forward(const float* x, const float* w, const float* b, int64_t rows,
                             int64_t in, int64_t out, float* y);
void linear_products_backward(const float* x, const float* w, const float* dy, int64_t rows,
                              int64_t in, int64_t out, float* dx, bool accumulate, float* dw);
void linear_forward(const ForwardCall& c);
void linear_backward(const BackwardCall& c);

// C [m, n] = op(A) [m, k] · B [k, n] + beta·C, row-major, op(A) = A or Aᵀ (trans_a), for n of 8
// or 16 columns, without packing either operand (few_columns.cpp): a convolution's products on
// 2×2 planes of two images. few_columns_apply says where it is taken: 8 or 16 columns, at least
// kFewColumnsMinRows rows and kFewColumnsMinDepth terms (below, the libraries' products are
// short anyway), and, for op(A) = Aᵀ, whose rows are read across A's a few floats at a time, at
// most kFewColumnsMaxTransposedFloats of A: with it for Wᵀ of 2.4M floats, ResNet-18's 3×3s on
// 2×2 planes went 0.64 → 0.73 ms backward, while RegNetX-800MF's 1×1s (0.45M) went faster.
constexpr int64_t kFewColumnsMinRows = 32;
constexpr int64_t kFewColumnsMinDepth = 32;
constexpr int64_t kFewColumnsMaxTransposedFloats = int64_t{1} << 19;
bool few_columns_apply(bool trans_a, int64_t m, int64_t n, int64_t k);
void few_columns_product(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// C [m, n] = alpha·op(A) [m, k] · op(B) [k, n] + beta·C, row-major, as sgemm's transposes say,
// for the small products of attention (few_columns.cpp): Q·Kᵀ and P·V per head and their
// gradients, whose operands sit in L1 and L2. rows_tile's register tiles over blocks of two
// vectors of columns, op(A) unpacked, op(B) as it is where it is [k, n] with n a whole number of
// blocks, else transposed or copied once into k rows of whole blocks. small_product_apply says
// where matmul takes it, as measured against the libraries on attention's shapes at 128 tokens
// × 32 a head and ViT-B/32's 50 × 64 (docs/benchmarks.md): with AVX-512, op(B) = Bᵀ only (Q·Kᵀ
// and dY·Vᵀ: 1.2× OpenBLAS's rate at 128 × 128 × 32; OpenBLAS's own packing is as fast as
// rows_tile for A·B and Aᵀ·B there, and faster at 50 rows); with AVX2, every product whose op(B)
// needs no padding (P·V 1.25× OpenBLAS; Q·Kᵀ over 50 keys, padded to 64 columns, 0.85×).
constexpr int64_t kSmallProductMinRows = 16;
constexpr int64_t kSmallProductMinColumns = 16;
constexpr int64_t kSmallProductMinDepth = 16;
constexpr int64_t kSmallProductMaxOperandFloats = int64_t{1} << 15;
bool small_product_apply(bool trans_b, int64_t m, int64_t n, int64_t k);
void small_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc);
// C [m, n] = op(A) [m, kd] · op(B) [kd, n] + beta·C, row-major, as sgemm's transposes say (A
// stored [kd, m] with trans_a, B stored [n, kd] with trans_b), for a depth kd of at most
// kShortDepthMax (short_depth.cpp): a convolution's weight gradient dY·colsᵀ where a chunk has
// few positions (2×2 planes of two images: 8), and a linear layer's dYᵀ·X on a few rows (a
// classifier or a squeeze-and-excitation block at batch 2), whose C is the weights' size. The
// libraries write C twice or read it before writing (Eigen zeroes it, then adds the product:
// ResNeXt-101's 1×1s on 2×2 planes, a 16 MB C, 3.4-4.7 ms backward); here each element of C is
// one sum over the kd terms in order, written once, and where beta is 0 and C has at least
// kShortDepthStreamFloats, around the caches. short_depth_apply says where it is taken.
constexpr int64_t kShortDepthMax = 16;
constexpr int64_t kShortDepthMinRows = 16;
constexpr int64_t kShortDepthMinColumns = 16;  // EfficientNet's SE expansion at batch 2: 48
constexpr int64_t kShortDepthStreamFloats = int64_t{1} << 20;
bool short_depth_apply(int64_t m, int64_t n, int64_t kd);
void short_depth_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t kd,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                         float* c, int64_t ldc);
// Deeper, with beta 0: the panel kernel (short_depth.cpp), for kd from kPanelMinDepth to
// kPanelDepthMax where C has at least kPanelMinFloats (1 MB): a linear layer's dYᵀ·X, ViT-B/32's
// weight gradients over 100 rows (a 3072 × 768 C: 5.3-5.5 ms in OpenBLAS with C cold on AVX2,
// 4.8-5.1 here). Shallower, its streamed stores bound it: at 32 rows (ConvNeXt-T's third stage
// at batch 2, a 1536 × 384 C) it took 0.41-0.45 ms where the library takes 0.26-0.29 with C in
// cache, and the step lost 1-2 ms. Deeper, the libraries' packing pays: at 256 rows OpenBLAS was
// as fast, at 512 faster. Not where B is stored [n, kd] (a convolution's dY·colsᵀ): both
// operands' packing is then a gather, and DenseNet-121's convolutions lost 0.5 ms of 14 backward
// (docs/benchmarks.md).
constexpr int64_t kPanelMinDepth = 64;
constexpr int64_t kPanelDepthMax = 128;
constexpr int64_t kPanelMinFloats = int64_t{1} << 18;
bool panel_depth_apply(bool trans_b, int64_t m, int64_t n, int64_t kd, float beta);
void panel_depth_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t kd,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                         int64_t ldc);

// C [m, n] = A [m, k] · Bᵀ + beta·C, row-major, B stored [n, k], k a whole number of 8-float
// vectors (else it throws): a linear layer's X·Wᵀ over a few rows, as dot products along the
// depth with neither operand packed and the next rows of B prefetched (row_dots.cpp).
// row_dots_apply says where it is taken, as measured against the libraries with the weights cold
// (AVX2 kernels, one thread; docs/benchmarks.md): more rows than the thin class's (kThinRows,
// engine/gemm.h) and at most kRowDotsMaxRows, a depth of kRowDotsMinDepth to kRowDotsMaxDepth in
// whole vectors, kRowDotsMinColumns columns or more; in AVX2 builds only (not with AVX-512, nor
// without AVX2 and FMA, where it was not measured).
constexpr int64_t kRowDotsMaxRows = 100;
constexpr int64_t kRowDotsMinDepth = 512;
constexpr int64_t kRowDotsMaxDepth = 1024;
constexpr int64_t kRowDotsMinColumns = 256;
bool row_dots_apply(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);
void row_dots_product(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc);

// RematLab's own GEMM (packed_product.cpp): Goto's packed blocks around a 12 × 32 AVX-512
// register tile, the "rematlab" library of engine/gemm.h. Built only with AVX-512
// (packed_product_built); elsewhere packed_product throws. m, n and k at least 1: empty products
// are settled in gemm.cpp's library_sgemm before any library runs.
bool packed_product_built();
// "RematLab's 12 × 32 AVX-512 kernels, revision N": its version among the GEMM libraries, part of
// the calibration's cache key, so that a new revision is timed again on every machine.
const char* packed_product_version();
void packed_product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                    int64_t ldc);

// Whether the product goes to one of those two written-once kernels (short_depth_apply or
// panel_depth_apply), as short_depth_or_gemm decides.
bool written_once_apply(bool trans_b, int64_t m, int64_t n, int64_t kd, float beta);
// The same product on the short-depth kernel where short_depth_apply takes it, on the panel
// kernel where panel_depth_apply does, else on sgemm.
void short_depth_or_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t kd,
                         const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                         float* c, int64_t ldc);
void matmul_forward(const ForwardCall& c);
void matmul_backward(const BackwardCall& c);

void add_forward(const ForwardCall& c);  // binary.cpp
void add_backward(const BackwardCall& c);
void relu_forward(const ForwardCall& c);
void relu_backward(const BackwardCall& c);
void gelu_forward(const ForwardCall& c);
void gelu_backward(const BackwardCall& c);
void tanh_forward(const ForwardCall& c);
void tanh_backward(const BackwardCall& c);
void sigmoid_forward(const ForwardCall& c);
void sigmoid_backward(const BackwardCall& c);
void sin_forward(const ForwardCall& c);
void sin_backward(const BackwardCall& c);
void cos_forward(const ForwardCall& c);
void cos_backward(const BackwardCall& c);

void layernorm_forward(const ForwardCall& c);
void layernorm_backward(const BackwardCall& c);
void softmax_forward(const ForwardCall& c);
void softmax_backward(const BackwardCall& c);

// One row of softmax in three passes (norm.cpp), shared with cross_entropy so that its loss and
// its gradient take one vector exp an element: the largest element; y = exp(x - m) where y is
// not null (0 where x - m < log(FLT_MIN)), returning their sum in a fixed order; y *= s.
float max_of_row(const float* x, int64_t d);
float exp_shifted_sum(const float* x, float* y, int64_t d, float m);
void scale_row(float* y, int64_t d, float s);

void reshape_forward(const ForwardCall& c);
void reshape_backward(const BackwardCall& c);
void transpose_forward(const ForwardCall& c);
void transpose_backward(const BackwardCall& c);

void sum_squares_forward(const ForwardCall& c);
void sum_squares_backward(const BackwardCall& c);
void cross_entropy_forward(const ForwardCall& c);
void cross_entropy_backward(const BackwardCall& c);

void conv2d_forward(const ForwardCall& c);  // conv.cpp
void conv2d_backward(const BackwardCall& c);
void maxpool2d_forward(const ForwardCall& c);  // pool.cpp
void maxpool2d_backward(const BackwardCall& c);
void avgpool2d_forward(const ForwardCall& c);
void avgpool2d_backward(const BackwardCall& c);
void upsample_nearest2d_forward(const ForwardCall& c);
void upsample_nearest2d_backward(const BackwardCall& c);
void batchnorm_forward(const ForwardCall& c);  // batchnorm.cpp
void batchnorm_backward(const BackwardCall& c);
void concat_forward(const ForwardCall& c);  // tensor_ops.cpp
void concat_backward(const BackwardCall& c);
void flatten_forward(const ForwardCall& c);
void flatten_backward(const BackwardCall& c);
void dropout_forward(const ForwardCall& c);
void dropout_backward(const BackwardCall& c);
void embedding_forward(const ForwardCall& c);  // indexing.cpp
void embedding_backward(const BackwardCall& c);
void slice_forward(const ForwardCall& c);
void slice_backward(const BackwardCall& c);
void causal_mask_forward(const ForwardCall& c);
void causal_mask_backward(const BackwardCall& c);
void pad_forward(const ForwardCall& c);
void pad_backward(const BackwardCall& c);

// broadcasting binary ops (binary.cpp, with add), activations
// (activations.cpp), reduce_mean (binary.cpp).
void sub_forward(const ForwardCall& c);
void sub_backward(const BackwardCall& c);
void mul_forward(const ForwardCall& c);
void mul_backward(const BackwardCall& c);
void div_forward(const ForwardCall& c);
void div_backward(const BackwardCall& c);
void clip_forward(const ForwardCall& c);
void clip_backward(const BackwardCall& c);
void hard_sigmoid_forward(const ForwardCall& c);
void hard_sigmoid_backward(const BackwardCall& c);
void hard_swish_forward(const ForwardCall& c);
void hard_swish_backward(const BackwardCall& c);
void gelu_tanh_forward(const ForwardCall& c);
void gelu_tanh_backward(const BackwardCall& c);
void reduce_mean_forward(const ForwardCall& c);
void reduce_mean_backward(const BackwardCall& c);
void dropout_mask_forward(const ForwardCall& c);
void dropout_mask_backward(const BackwardCall& c);
void collective_forward(const ForwardCall& c);
void collective_backward(const BackwardCall& c);
void exp_forward(const ForwardCall& c);  // elementwise.cpp
void exp_backward(const BackwardCall& c);
void l2_normalize_forward(const ForwardCall& c);  // norm.cpp
void l2_normalize_backward(const BackwardCall& c);
void gather_forward(const ForwardCall& c);  // indexing.cpp
void gather_backward(const BackwardCall& c);
void parameter_forward(const ForwardCall& c);  // sources.cpp
void parameter_backward(const BackwardCall& c);
void constant_forward(const ForwardCall& c);
void constant_backward(const BackwardCall& c);
// opaque (plan-only networks): no kernels; both throw rl::Error (engine/cpu/opaque.cpp).
void opaque_forward(const ForwardCall& c);
void opaque_backward(const BackwardCall& c);

}  // namespace rl::cpu
