#pragma once
// Internal to the CUDA backend: the kernel launchers, with plain-data arguments so that the .cu
// files include no engine headers beyond rng.h (graph parsing stays in cuda_backend.cpp, compiled
// by the host compiler). Every launcher enqueues on `s` and returns at once.
//
// Determinism: no float atomics anywhere. Reductions run in a fixed order (per-thread strided
// sums, then warp shuffles and a fixed tree over warps), scatters are written as gathers (each
// output element sums its contributions in the CPU kernel's order), so a recomputed value is
// bitwise the first one and every strategy's gradients are bitwise those of `none`.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/ops/broadcast.h"  // plain data, no engine types

namespace rl::cuda {

// --- pointwise (elementwise.cu) ---------------------------------------------------------------
// Times / NegTimes: dX = dY · (±r), for sin / cos with a derivative input (r = cos x / sin x).
enum class Unary : int { Relu, Gelu, Tanh, Sigmoid, Sin, Cos, Copy, Times, NegTimes, Exp };
// y = f(x)
void unary_forward(Unary f, const float* x, float* y, int64_t n, cudaStream_t s);
// dx (+)= dy · f'(r), r the residual: relu/tanh/sigmoid/exp read the output, gelu/sin/cos the
// input, Copy ignores it (dx (+)= dy).
void unary_backward(Unary f, const float* r, const float* dy, float* dx, bool acc, int64_t n,
                    cudaStream_t s);
void add_forward(const float* a, const float* b, float* y, int64_t n, cudaStream_t s);
// dx (+)= dy · k
void scale_into(const float* dy, float k, float* dx, bool acc, int64_t n, cudaStream_t s);
// dx (+)= x · g[0] (g on the device: the loss's incoming gradient)
void scale_by_device_scalar(const float* x, const float* g, float* dx, bool acc, int64_t n,
                            cudaStream_t s);
// y[r, :] = b for r < rows (bias seeding before a GEMM with beta = 1)
void fill_rows(const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t s);
// y[(o·planes + c)·plane + p] = b[c] (conv bias seeding), for one image's `channels` planes
void fill_planes(const float* b, float* y, int64_t channels, int64_t plane, cudaStream_t s);
void dropout_forward(const float* x, float* y, int64_t n, uint64_t key, uint32_t threshold,
                     float scale, cudaStream_t s);
// Dropout with a u8 keep-mask (dropout_mask): the mask drawn like dropout_forward's, and the
// forward and backward that read it.
void dropout_mask_forward(uint8_t* keep, int64_t n, uint64_t key, uint32_t threshold,
                          cudaStream_t s);
void dropout_masked_forward(const float* x, const uint8_t* keep, float* y, int64_t n, float scale,
                            cudaStream_t s);
void dropout_masked_backward(const float* dy, const uint8_t* keep, float* dx, bool acc, int64_t n,
                             float scale, cudaStream_t s);
void dropout_backward(const float* dy, float* dx, bool acc, int64_t n, uint64_t key,
                      uint32_t threshold, float scale, cudaStream_t s);

// --- reductions and rows (rows.cu) ------------------------------------------------------------
// dst[j] = Σ_r src[r, j] over a row-major [rows, cols] matrix.
void column_sums(const float* src, int64_t rows, int64_t cols, float* dst, cudaStream_t s);
// ws: [rows] pairs (mean, rstd), written by layernorm_backward
void layernorm_forward(const float* x, const float* w, const float* b, float* y, int64_t rows,
                       int64_t d, float eps, cudaStream_t s);
void layernorm_backward(const float* x, const float* w, const float* dy, float* dx, bool acc,
                        float* dw, float* db, float2* ws, int64_t rows, int64_t d, float eps,
                        cudaStream_t s);
void softmax_forward(const float* x, float* y, int64_t rows, int64_t d, cudaStream_t s);
void softmax_backward(const float* y, const float* dy, float* dx, bool acc, int64_t rows, int64_t d,
                      cudaStream_t s);
// y = x / max(‖x‖, eps) per row of d, the norm summed in double (F.normalize); the backward
// recomputes the norm by the same code, so it is bitwise the forward's.
void l2_normalize_forward(const float* x, float* y, int64_t rows, int64_t d, double eps,
                          cudaStream_t s);
void l2_normalize_backward(const float* x, const float* dy, float* dx, bool acc, int64_t rows,
                           int64_t d, double eps, cudaStream_t s);
// y[0] = ½ Σ x² (in double, one block)
void sum_squares_forward(const float* x, float* y, int64_t n, cudaStream_t s);
// row_loss: [rows] scratch (the op's declared workspace)
void cross_entropy_forward(const float* x, const int32_t* labels, float* row_loss, float* y,
                           int64_t rows, int64_t classes, cudaStream_t s);
void cross_entropy_backward(const float* x, const int32_t* labels, const float* g, float* dx,
                            bool acc, int64_t rows, int64_t classes, cudaStream_t s);
// Training-mode batchnorm over [n, c, inner].
void batchnorm_forward(const float* x, const float* w, const float* b, float* y, int64_t n,
                       int64_t c, int64_t inner, double eps, cudaStream_t s);
void batchnorm_backward(const float* x, const float* w, const float* dy, float* dx, bool acc,
                        float* dw, float* db, int64_t n, int64_t c, int64_t inner, double eps,
                        cudaStream_t s);

// --- layout (layout.cu) -----------------------------------------------------------------------
// dst (+)= src permuted: dst axis i is src axis perm[i]; dims/perm padded to rank 4.
void permute4(const float* src, const int64_t dims[4], const int64_t perm[4], float* dst, bool acc,
              cudaStream_t s);
// Copies a [outer, len] block into / out of a [outer, row] matrix at column `offset`.
void concat_part_forward(const float* x, float* y, int64_t outer, int64_t len, int64_t row,
                         int64_t offset, cudaStream_t s);
void concat_part_backward(const float* dy, float* dx, bool acc, int64_t outer, int64_t len,
                          int64_t row, int64_t offset, cudaStream_t s);
void upsample_forward(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t sh,
                      int64_t sw, cudaStream_t s);
void upsample_backward(const float* dy, float* dx, bool acc, int64_t planes, int64_t h, int64_t w,
                       int64_t sh, int64_t sw, cudaStream_t s);

// --- windows (window.cu) ----------------------------------------------------------------------
struct Win {
    int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};
struct PoolDims {
    int64_t planes, h, w, oh, ow;
    Win win;
    bool count_include_pad, global;
};
void maxpool_forward(const float* x, float* y, const PoolDims& d, cudaStream_t s);
void maxpool_backward(const float* x, const float* dy, float* dx, bool acc, const PoolDims& d,
                      cudaStream_t s);
void avgpool_forward(const float* x, float* y, const PoolDims& d, cudaStream_t s);
void avgpool_backward(const float* dy, float* dx, bool acc, const PoolDims& d, cudaStream_t s);

struct ConvDims {
    int64_t n, c, h, w, out_c, oh, ow, groups;
    Win win;
};
// One group of one image: col [cg·kh·kw, oh·ow] from x (the group's first channel plane).
void im2col(const float* x, const ConvDims& d, float* col, cudaStream_t s);
// dx (+)= col2im(col) for one group of one image.
void col2im(const float* col, const ConvDims& d, float* dx, bool acc, cudaStream_t s);
// db[o] = Σ_n Σ_p dy[n, o, p]
void conv_bias_grad(const float* dy, const ConvDims& d, float* db, cudaStream_t s);
// Depthwise (one input channel per group), all images at once.
void depthwise_forward(const float* x, const float* wt, const float* b, float* y, const ConvDims& d,
                       cudaStream_t s);
void depthwise_backward_input(const float* dy, const float* wt, float* dx, bool acc,
                              const ConvDims& d, cudaStream_t s);
void depthwise_backward_weight(const float* x, const float* dy, float* dw, const ConvDims& d,
                               cudaStream_t s);

// --- broadcasting binary ops, reduce_mean, hard / tanh activations (binary.cu) -----------------
enum class BinaryOp : int { Add, Sub, Mul, Div };
// An operand: device data laid over the plan, or (data null) a scalar.
struct BinaryOperand {
    const float* data;
    float scalar;
};
// y = a op b over the plan (slot 1: a, slot 2: b).
void binary_forward(BinaryOp op, const BroadcastPlan& p, BinaryOperand a, BinaryOperand b, float* y,
                    cudaStream_t s);
// dst (+)= d(a op b)/d(operand k) · dy, summed over the axes operand k repeats.
void binary_backward(BinaryOp op, int k, const BroadcastPlan& p, BinaryOperand a, BinaryOperand b,
                     const float* dy, float* dst, bool acc, cudaStream_t s);
// The plan's full tensor is x, slot 1 the mean (ops/layout.h, reduce_mean_plan).
void reduce_mean_forward(const BroadcastPlan& p, const float* x, float* y, cudaStream_t s);
void reduce_mean_backward(const BroadcastPlan& p, const float* dy, float* dx, bool acc,
                          cudaStream_t s);
// clip (a = min, b = max), hard_sigmoid (a = alpha, b = beta), hard_swish, gelu_tanh.
struct Activation {
    enum class Kind : int { Clip, HardSigmoid, HardSwish, GeluTanh } kind;
    float a, b;
};
void activation_forward(const Activation& f, const float* x, float* y, int64_t n, cudaStream_t s);
// dx (+)= f'(x) · dy
void activation_backward(const Activation& f, const float* x, const float* dy, float* dx, bool acc,
                         int64_t n, cudaStream_t s);

// --- indexing (indexing.cu) -------------------------------------------------------------------
// y[k, :] = w[row(k), :] for `count` lookups, row(k) = idx[k], or first + (k mod period) when
// idx is null.
void embedding_forward(const int32_t* idx, int64_t first, int64_t period, const float* w, float* y,
                       int64_t rows, int64_t dim, int64_t count, cudaStream_t s);
// dw = 0 (unless acc), then dw[row(k), :] += dy[k, :] in lookup order. The gather op's backward
// is the same scatter with its input's gradient as dw.
void embedding_backward(const int32_t* idx, int64_t first, int64_t period, const float* dy,
                        float* dw, bool acc, int64_t rows, int64_t dim, int64_t count,
                        cudaStream_t s);
// y[o, :] = x[o, offset : offset + len] over a row-major [outer, row] x.
void slice_forward(const float* x, float* y, int64_t outer, int64_t len, int64_t row,
                   int64_t offset, cudaStream_t s);
// y = -inf where column > row of each [rows, cols] plane, x elsewhere (n elements in all).
void causal_mask_forward(const float* x, float* y, int64_t n, int64_t rows, int64_t cols,
                         cudaStream_t s);
// dx (+)= dy where column <= row, 0 where masked.
void causal_mask_backward(const float* dy, float* dx, bool acc, int64_t n, int64_t rows,
                          int64_t cols, cudaStream_t s);
// Zero padding (pad): y of dims `out` holds x of dims `in` at offset `begin` on each axis, zeros
// elsewhere; the backward is dx (+)= that part of dy. rank ≤ 8.
struct PadDims {
    int rank;
    int64_t in[8], out[8], begin[8];
};
void pad_forward(const float* x, float* y, const PadDims& d, int64_t n_out, cudaStream_t s);
void pad_backward(const float* dy, float* dx, bool acc, const PadDims& d, int64_t n_in,
                  cudaStream_t s);
// dx (+)= dy placed at [offset, offset + len) of each row, zeros elsewhere.
void slice_backward(const float* dy, float* dx, bool acc, int64_t outer, int64_t len, int64_t row,
                    int64_t offset, cudaStream_t s);

}  // namespace rl::cuda
