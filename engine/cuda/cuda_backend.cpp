// The CUDA backend: device memory from cudaMalloc (through a caching pool by default), one
// stream, one cuBLAS handle, and a kernel table indexed by OpKind like the CPU backend's
// (engine/cpu/cpu_backend.cpp). Dense products go to cuBLAS (row-major buffers seen as
// column-major transposes: C = A·B is computed as Cᵀ = Bᵀ·Aᵀ); convolutions are im2col + cuBLAS
// per image and group, in the declared workspace, as on the CPU; everything else is our own
// kernels (launch.h).
//
// Determinism: cuBLAS gives bitwise the same result for the same call on the same GPU
// (cuBLAS docs, "Results reproducibility"), with CUBLAS_DEFAULT_MATH (no TF32), one stream and a
// fixed workspace; our kernels reduce in a fixed order. So a recomputation is bitwise the first
// computation, and every strategy's gradients are bitwise those of `none`.
#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_util.h"
#include "engine/cuda/launch.h"
#include "engine/kernel_table.h"
#include "engine/ops/layout.h"
#include "engine/ops/op.h"
#include "engine/ops/window.h"
#include "engine/rng.h"

namespace rl {
namespace cuda {

void throw_cuda(cudaError_t e, const char* what) {
    std::string msg = std::string("CUDA error in ") + what + ": " + cudaGetErrorName(e) + " (" +
                      cudaGetErrorString(e) + ")";
    if (e == cudaErrorMemoryAllocation)
        msg +=
            "; the GPU is out of memory: try a smaller network or batch, or a strategy with a "
            "lower peak";
    throw Error(msg);
}

void throw_cublas(cublasStatus_t s, const char* what) {
    throw Error(std::string("cuBLAS error in ") + what + ": " + cublas().status_name(s) + " (" +
                cublas().status_string(s) + ")");
}

namespace {

struct Ctx {
    cublasHandle_t blas;
    cudaStream_t s;
};

const Shape& in_shape(const Graph& g, const Node& n, int i) {
    return g.value(n.inputs[static_cast<size_t>(i)]).shape;
}
const Shape& out_shape(const Graph& g, const Node& n) {
    return g.value(n.output).shape;
}
const float* f32(const void* p) {
    return static_cast<const float*>(p);
}
float* f32(void* p) {
    return static_cast<float*>(p);
}

int blas_dim(int64_t v, const char* what) {
    if (v > INT32_MAX)
        throw Error(std::string("a GEMM dimension (") + what + " = " + std::to_string(v) +
                    ") exceeds cuBLAS's 32-bit limit; use smaller sizes");
    return static_cast<int>(v);
}

// Column-major C[m, n] = alpha·op(A)·op(B) + beta·C (cuBLAS's convention).
void gemm(const Ctx& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* out,
          int64_t ldc) {
    if (m == 0 || n == 0) return;
    check(cublas().sgemm(c.blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                         blas_dim(m, "m"), blas_dim(n, "n"), blas_dim(k, "k"), &alpha, a,
                         blas_dim(lda, "lda"), b, blas_dim(ldb, "ldb"), &beta, out,
                         blas_dim(ldc, "ldc")),
          "cublasSgemm");
}

void gemm_batched(const Ctx& c, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb,
                  float beta, float* out, int64_t ldc, int64_t so, int64_t batch) {
    if (m == 0 || n == 0 || batch == 0) return;
    check(cublas().sgemm_strided_batched(
              c.blas, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
              blas_dim(m, "m"), blas_dim(n, "n"), blas_dim(k, "k"), &alpha, a, blas_dim(lda, "lda"),
              sa, b, blas_dim(ldb, "ldb"), sb, &beta, out, blas_dim(ldc, "ldc"), so,
              blas_dim(batch, "batch")),
          "cublasSgemmStridedBatched");
}

// --- linear and matmul ------------------------------------------------------------------------

struct LinearDims {
    int64_t rows, in, out;
    bool bias;
};
LinearDims linear_dims(const Graph& g, const Node& n) {
    const Shape& x = in_shape(g, n, 0);
    const int64_t in = x[-1];
    return {in ? x.numel() / in : 0, in, out_shape(g, n)[-1], n.params.size() > 1};
}

// y[rows, out] = x[rows, in]·Wᵀ (+ b): yᵀ = W·xᵀ.
void linear_fwd(const Ctx& c, const ForwardCall& f) {
    const LinearDims d = linear_dims(f.graph, f.node);
    float* y = f32(f.output);
    if (d.bias) fill_rows(f.params[1], y, d.rows, d.out, c.s);
    gemm(c, true, false, d.out, d.rows, d.in, 1.0f, f.params[0], d.in, f32(f.inputs[0]), d.in,
         d.bias ? 1.0f : 0.0f, y, d.out);
}

void linear_bwd(const Ctx& c, const BackwardCall& b) {
    const LinearDims d = linear_dims(b.graph, b.node);
    if (b.grad_inputs[0])  // dx = dy·W: dxᵀ = Wᵀ·dyᵀ
        gemm(c, false, false, d.in, d.rows, d.out, 1.0f, b.params[0], d.in, b.grad_output, d.out,
             b.accumulate[0] ? 1.0f : 0.0f, b.grad_inputs[0], d.in);
    if (b.grad_params[0])  // dW = dyᵀ·x: dWᵀ = xᵀ·dy
        gemm(c, false, true, d.in, d.out, d.rows, 1.0f, f32(b.inputs[0]), d.in, b.grad_output,
             d.out, 0.0f, b.grad_params[0], d.in);
    if (d.bias && b.grad_params[1])
        column_sums(b.grad_output, d.rows, d.out, b.grad_params[1], c.s);
}

struct MatMulDims {
    int64_t batch, m, k, n;
    bool tb;
    float alpha;
};
MatMulDims matmul_dims(const Graph& g, const Node& n) {
    const Shape& a = in_shape(g, n, 0);
    return {a[0],
            a[1],
            a[2],
            out_shape(g, n)[2],
            n.attrs.get_int("transpose_b", 0) != 0,
            static_cast<float>(n.attrs.get_float("alpha", 1.0))};
}

// y = α·a·op(b): yᵀ = α·op(b)ᵀ·aᵀ, per batch.
void matmul_fwd(const Ctx& c, const ForwardCall& f) {
    const MatMulDims d = matmul_dims(f.graph, f.node);
    gemm_batched(c, d.tb, false, d.n, d.m, d.k, d.alpha, f32(f.inputs[1]), d.tb ? d.k : d.n,
                 d.k * d.n, f32(f.inputs[0]), d.k, d.m * d.k, 0.0f, f32(f.output), d.n, d.m * d.n,
                 d.batch);
}

void matmul_bwd(const Ctx& c, const BackwardCall& b) {
    const MatMulDims d = matmul_dims(b.graph, b.node);
    const float* a = f32(b.inputs[0]);
    const float* bm = f32(b.inputs[1]);
    const float* dy = b.grad_output;
    // matmul(x, x) passes one buffer in both slots: dA is enqueued (and so finished) first.
    if (float* da = b.grad_inputs[0]) {
        const float beta = b.accumulate[0] ? 1.0f : 0.0f;
        if (d.tb)  // dA = α·dY·B, B [N, K]: dAᵀ = α·Bᵀ·dYᵀ
            gemm_batched(c, false, false, d.k, d.m, d.n, d.alpha, bm, d.k, d.n * d.k, dy, d.n,
                         d.m * d.n, beta, da, d.k, d.m * d.k, d.batch);
        else  // dA = α·dY·Bᵀ, B [K, N]: dAᵀ = α·B·dYᵀ
            gemm_batched(c, true, false, d.k, d.m, d.n, d.alpha, bm, d.n, d.k * d.n, dy, d.n,
                         d.m * d.n, beta, da, d.k, d.m * d.k, d.batch);
    }
    if (float* db = b.grad_inputs[1]) {
        const float beta = b.accumulate[1] ? 1.0f : 0.0f;
        if (d.tb)  // dB = α·dYᵀ·A [N, K]: dBᵀ = α·Aᵀ·dY
            gemm_batched(c, false, true, d.k, d.n, d.m, d.alpha, a, d.k, d.m * d.k, dy, d.n,
                         d.m * d.n, beta, db, d.k, d.n * d.k, d.batch);
        else  // dB = α·Aᵀ·dY [K, N]: dBᵀ = α·dYᵀ·A
            gemm_batched(c, false, true, d.n, d.k, d.m, d.alpha, dy, d.n, d.m * d.n, a, d.k,
                         d.m * d.k, beta, db, d.n, d.k * d.n, d.batch);
    }
}

// --- pointwise --------------------------------------------------------------------------------

int64_t numel_out(const Graph& g, const Node& n) {
    return out_shape(g, n).numel();
}

template <Unary F>
void unary_fwd(const Ctx& c, const ForwardCall& f) {
    unary_forward(F, f32(f.inputs[0]), f32(f.output), numel_out(f.graph, f.node), c.s);
}

// The residual: the output for relu/tanh/sigmoid, the input for gelu/sin/cos (ops/*.cpp).
template <Unary F, bool FromOutput>
void unary_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const float* r = FromOutput ? f32(b.output) : f32(b.inputs[0]);
    unary_backward(F, r, b.grad_output, b.grad_inputs[0], b.accumulate[0],
                   numel_out(b.graph, b.node), c.s);
}

// sin / cos: with a derivative input (input 1: cos x / sin x, computed in the forward), dX = dY ·
// (±input 1), as the CPU kernel; otherwise f'(x) from the input.
template <Unary F, Unary WithDerivative>
void sin_cos_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const bool derivative = b.node.inputs.size() == 2;
    unary_backward(derivative ? WithDerivative : F, f32(b.inputs[derivative ? 1 : 0]),
                   b.grad_output, b.grad_inputs[0], b.accumulate[0], numel_out(b.graph, b.node),
                   c.s);
}

void add_fwd(const Ctx& c, const ForwardCall& f) {
    add_forward(f32(f.inputs[0]), f32(f.inputs[1]), f32(f.output), numel_out(f.graph, f.node), c.s);
}

void add_bwd(const Ctx& c, const BackwardCall& b) {
    // add(x, x): slot 0 is enqueued before slot 1 adds to the same buffer.
    for (int i = 0; i < 2; ++i)
        if (b.grad_inputs[i])
            unary_backward(Unary::Copy, nullptr, b.grad_output, b.grad_inputs[i], b.accumulate[i],
                           numel_out(b.graph, b.node), c.s);
}

// reshape and flatten: a copy of the bytes; the backward passes the gradient through.
void copy_fwd(const Ctx& c, const ForwardCall& f) {
    const uint64_t bytes = f.graph.value(f.node.output).bytes;
    if (bytes && f.output != f.inputs[0])  // in place: nothing to move
        check(cudaMemcpyAsync(f.output, f.inputs[0], bytes, cudaMemcpyDeviceToDevice, c.s),
              "cudaMemcpyAsync");
}

void copy_bwd(const Ctx& c, const BackwardCall& b) {
    if (b.grad_inputs[0])
        unary_backward(Unary::Copy, nullptr, b.grad_output, b.grad_inputs[0], b.accumulate[0],
                       numel_out(b.graph, b.node), c.s);
}

// --- rows: layernorm, softmax -----------------------------------------------------------------

struct Rows {
    int64_t rows, d;
};
Rows rows_of(const Shape& s) {
    const int64_t d = s[-1];
    return {d ? s.numel() / d : 0, d};
}

void layernorm_fwd(const Ctx& c, const ForwardCall& f) {
    const Rows r = rows_of(in_shape(f.graph, f.node, 0));
    const float eps = static_cast<float>(f.node.attrs.get_float("eps", 1e-5));
    layernorm_forward(f32(f.inputs[0]), f.params[0], f.params[1], f32(f.output), r.rows, r.d, eps,
                      c.s);
}

void layernorm_bwd(const Ctx& c, const BackwardCall& b) {
    const Rows r = rows_of(in_shape(b.graph, b.node, 0));
    const float eps = static_cast<float>(b.node.attrs.get_float("eps", 1e-5));
    // The declared workspace: [rows] of (mean, rstd), as on the CPU.
    layernorm_backward(f32(b.inputs[0]), b.params[0], b.grad_output, b.grad_inputs[0],
                       b.accumulate[0], b.grad_params[0], b.grad_params[1],
                       static_cast<float2*>(b.workspace), r.rows, r.d, eps, c.s);
}

void softmax_fwd(const Ctx& c, const ForwardCall& f) {
    const Rows r = rows_of(in_shape(f.graph, f.node, 0));
    softmax_forward(f32(f.inputs[0]), f32(f.output), r.rows, r.d, c.s);
}

void softmax_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const Rows r = rows_of(out_shape(b.graph, b.node));
    softmax_backward(f32(b.output), b.grad_output, b.grad_inputs[0], b.accumulate[0], r.rows, r.d,
                     c.s);
}

// l2_normalize along the last axis (Swin V2's cosine attention).
void l2_normalize_fwd(const Ctx& c, const ForwardCall& f) {
    const Rows r = rows_of(in_shape(f.graph, f.node, 0));
    l2_normalize_forward(f32(f.inputs[0]), f32(f.output), r.rows, r.d,
                         f.node.attrs.get_float("eps", 1e-12), c.s);
}

void l2_normalize_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const Rows r = rows_of(in_shape(b.graph, b.node, 0));
    l2_normalize_backward(f32(b.inputs[0]), b.grad_output, b.grad_inputs[0], b.accumulate[0],
                          r.rows, r.d, b.node.attrs.get_float("eps", 1e-12), c.s);
}

// --- shape ops --------------------------------------------------------------------------------

void permute(const Ctx& c, const float* src, const Shape& shape, const std::vector<int64_t>& perm,
             float* dst, bool acc) {
    const int pad = 4 - shape.rank();
    int64_t dims[4] = {1, 1, 1, 1}, p[4] = {0, 1, 2, 3};
    for (int i = 0; i < shape.rank(); ++i) {
        dims[pad + i] = shape[i];
        p[pad + i] = pad + perm[static_cast<size_t>(i)];
    }
    permute4(src, dims, p, dst, acc, c.s);
}

void transpose_fwd(const Ctx& c, const ForwardCall& f) {
    permute(c, f32(f.inputs[0]), in_shape(f.graph, f.node, 0), f.node.attrs.get_ints("perm"),
            f32(f.output), false);
}

void transpose_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const std::vector<int64_t> perm = b.node.attrs.get_ints("perm");
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
        inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    permute(c, b.grad_output, out_shape(b.graph, b.node), inverse, b.grad_inputs[0],
            b.accumulate[0]);
}

void concat_fwd(const Ctx& c, const ForwardCall& f) {
    const ConcatLayout l = concat_layout(f.graph, f.node);
    int64_t offset = 0;
    for (size_t k = 0; k < f.node.inputs.size(); ++k) {
        const int64_t len = l.chunk(f.graph, f.node, k);
        concat_part_forward(f32(f.inputs[k]), f32(f.output), l.outer, len, l.row, offset, c.s);
        offset += len;
    }
}

void concat_bwd(const Ctx& c, const BackwardCall& b) {
    const ConcatLayout l = concat_layout(b.graph, b.node);
    int64_t offset = 0;
    for (size_t k = 0; k < b.node.inputs.size(); ++k) {
        const int64_t len = l.chunk(b.graph, b.node, k);
        if (b.grad_inputs[k])
            concat_part_backward(b.grad_output, b.grad_inputs[k], b.accumulate[k], l.outer, len,
                                 l.row, offset, c.s);
        offset += len;
    }
}

struct DropoutMask {
    uint64_t key;
    uint32_t threshold;
    float scale;
};
DropoutMask dropout_mask(const Graph& g, const Node& n) {
    const double p = n.attrs.get_float("p", 0.5);
    return {dropout_key(g.seed(), n.name), dropout_threshold(p), static_cast<float>(1.0 / (1 - p))};
}

void dropout_fwd(const Ctx& c, const ForwardCall& f) {
    const DropoutMask m = dropout_mask(f.graph, f.node);
    if (f.node.inputs.size() == 2)
        return dropout_masked_forward(f32(f.inputs[0]), static_cast<const uint8_t*>(f.inputs[1]),
                                      f32(f.output), numel_out(f.graph, f.node), m.scale, c.s);
    dropout_forward(f32(f.inputs[0]), f32(f.output), numel_out(f.graph, f.node), m.key, m.threshold,
                    m.scale, c.s);
}

void dropout_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const DropoutMask m = dropout_mask(b.graph, b.node);
    if (b.node.inputs.size() == 2)
        return dropout_masked_backward(b.grad_output, static_cast<const uint8_t*>(b.inputs[1]),
                                       b.grad_inputs[0], b.accumulate[0],
                                       numel_out(b.graph, b.node), m.scale, c.s);
    dropout_backward(b.grad_output, b.grad_inputs[0], b.accumulate[0], numel_out(b.graph, b.node),
                     m.key, m.threshold, m.scale, c.s);
}

// --- indexing ---------------------------------------------------------------------------------

// The i32 indices on the device: the node's input, or attr indices uploaded into the workspace
// (from pageable memory: the call returns once the host buffer has been read). Gather passes no
// inputs here: its input is the table, its indices always the attribute.
const int32_t* embedding_indices(const Ctx& c, const Node& n, const void* const* inputs,
                                 void* workspace) {
    if (inputs && !n.inputs.empty()) return static_cast<const int32_t*>(inputs[0]);
    if (!n.attrs.has("indices")) return nullptr;
    const auto ind = n.attrs.get_ints("indices");
    std::vector<int32_t> host(ind.begin(), ind.end());
    check(cudaMemcpyAsync(workspace, host.data(), host.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice, c.s),
          "copying constant embedding indices");
    return static_cast<const int32_t*>(workspace);
}

void embedding_fwd(const Ctx& c, const ForwardCall& f) {
    const EmbeddingLayout l = embedding_layout(f.graph, f.node);
    embedding_forward(embedding_indices(c, f.node, f.inputs, f.workspace), l.first, l.period,
                      f.params[0], f32(f.output), l.rows, l.dim, l.count, c.s);
}

void embedding_bwd(const Ctx& c, const BackwardCall& b) {
    const EmbeddingLayout l = embedding_layout(b.graph, b.node);
    embedding_backward(embedding_indices(c, b.node, b.inputs, b.workspace), l.first, l.period,
                       b.grad_output, b.grad_params[0], false, l.rows, l.dim, l.count, c.s);
}

// gather: output row k is input row indices[k] (a row being everything past axis 0), the
// embedding lookup with the input as its table; the indices (checked when the graph was built)
// go to the workspace as i32, as the embedding's constant ones do.
struct GatherDims {
    int64_t count, rows, row;
};

GatherDims gather_dims(const Graph& g, const Node& n) {
    const Shape& x = in_shape(g, n, 0);
    const int64_t rows = x[0];
    return {static_cast<int64_t>(n.attrs.get_ints("indices").size()), rows,
            rows ? x.numel() / rows : 0};
}

void gather_fwd(const Ctx& c, const ForwardCall& f) {
    const GatherDims d = gather_dims(f.graph, f.node);
    embedding_forward(embedding_indices(c, f.node, {}, f.workspace), 0, 1, f32(f.inputs[0]),
                      f32(f.output), d.rows, d.row, d.count, c.s);
}

// dX (cleared unless accumulating) gets dY's rows added in index order: one thread per column,
// the CPU kernel's order (engine/cpu/indexing.cpp).
void gather_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const GatherDims d = gather_dims(b.graph, b.node);
    embedding_backward(embedding_indices(c, b.node, {}, b.workspace), 0, 1, b.grad_output,
                       b.grad_inputs[0], b.accumulate[0], d.rows, d.row, d.count, c.s);
}

void slice_fwd(const Ctx& c, const ForwardCall& f) {
    const SliceLayout l = slice_layout(f.graph, f.node);
    slice_forward(f32(f.inputs[0]), f32(f.output), l.outer, l.len, l.row, l.offset, c.s);
}

void slice_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const SliceLayout l = slice_layout(b.graph, b.node);
    slice_backward(b.grad_output, b.grad_inputs[0], b.accumulate[0], l.outer, l.len, l.row,
                   l.offset, c.s);
}

PadDims pad_dims(const Graph& g, const Node& n) {
    const PadLayout l = pad_layout(g, n);
    PadDims d{};
    d.rank = l.rank;
    for (int a = 0; a < l.rank; ++a) {
        d.in[a] = l.in[a];
        d.out[a] = l.out[a];
        d.begin[a] = l.begin[a];
    }
    return d;
}

void pad_fwd(const Ctx& c, const ForwardCall& f) {
    pad_forward(f32(f.inputs[0]), f32(f.output), pad_dims(f.graph, f.node),
                out_shape(f.graph, f.node).numel(), c.s);
}

void pad_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    pad_backward(b.grad_output, b.grad_inputs[0], b.accumulate[0], pad_dims(b.graph, b.node),
                 b.graph.value(b.node.inputs[0]).shape.numel(), c.s);
}

void causal_mask_fwd(const Ctx& c, const ForwardCall& f) {
    const Shape& s = out_shape(f.graph, f.node);
    causal_mask_forward(f32(f.inputs[0]), f32(f.output), s.numel(), s[-2], s[-1], c.s);
}

void causal_mask_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const Shape& s = out_shape(b.graph, b.node);
    causal_mask_backward(b.grad_output, b.grad_inputs[0], b.accumulate[0], s.numel(), s[-2], s[-1],
                         c.s);
}

// --- large-model training: dropout masks and collectives ----------------------------------------

void dropout_mask_fwd(const Ctx& c, const ForwardCall& f) {
    const DropoutMask m = dropout_mask(f.graph, f.node);
    dropout_mask_forward(static_cast<uint8_t*>(f.output), numel_out(f.graph, f.node), m.key,
                         m.threshold, c.s);
}

void dropout_mask_bwd(const Ctx&, const BackwardCall&) {}  // its output passes no gradient

// The collectives of one tensor-parallel rank, this process standing in for every rank (the
// functions and their adjoints of engine/ops/collective.cpp and engine/cpu/collective.cpp).
void collective_fwd(const Ctx& c, const ForwardCall& f) {
    const int64_t n_in = f.graph.value(f.node.inputs[0]).shape.numel();
    const int64_t n_out = numel_out(f.graph, f.node);
    const int64_t copies = collective_kind(f.node) == CollectiveKind::AllGather ? n_out / n_in : 1;
    const int64_t n = std::min(n_in, n_out);
    for (int64_t k = 0; k < copies; ++k)
        check(cudaMemcpyAsync(f32(f.output) + k * n, f.inputs[0], static_cast<size_t>(n) * 4,
                              cudaMemcpyDeviceToDevice, c.s),
              "cudaMemcpyAsync (collective)");
}

void collective_bwd(const Ctx& c, const BackwardCall& b) {
    float* dx = b.grad_inputs[0];
    if (!dx) return;
    const int64_t n_in = b.graph.value(b.node.inputs[0]).shape.numel();
    const int64_t n_out = numel_out(b.graph, b.node);
    const bool acc = b.accumulate[0];
    switch (collective_kind(b.node)) {
        case CollectiveKind::AllReduceGrad:
        case CollectiveKind::AllReduce:
            unary_backward(Unary::Copy, nullptr, b.grad_output, dx, acc, n_in, c.s);
            break;
        case CollectiveKind::AllGather:
            for (int64_t k = 0; k < n_out / n_in; ++k)
                unary_backward(Unary::Copy, nullptr, b.grad_output + k * n_in, dx, acc || k > 0,
                               n_in, c.s);
            break;
        case CollectiveKind::ReduceScatter:
            unary_backward(Unary::Copy, nullptr, b.grad_output, dx, acc, n_out, c.s);
            if (!acc)
                check(cudaMemsetAsync(dx + n_out, 0, static_cast<size_t>(n_in - n_out) * 4, c.s),
                      "cudaMemsetAsync (collective)");
            break;
    }
}

// opaque (engine/ops/opaque.cpp): plan-only networks have no kernels; the Evaluator refuses to
// execute one first, and these say so if one ever reaches the device.
void opaque_fwd(const Ctx&, const ForwardCall& f) {
    throw Error("node '" + f.node.name + "': " + kPlanOnlyNoKernels);
}

void opaque_bwd(const Ctx&, const BackwardCall& b) {
    throw Error("node '" + b.node.name + "': " + kPlanOnlyNoKernels);
}

// --- nodes without inputs: parameter, constant (ops/sources.cpp) ----------------------------

void parameter_fwd(const Ctx& c, const ForwardCall& f) {
    const uint64_t bytes = f.graph.value(f.node.output).bytes;
    check(cudaMemcpyAsync(f.output, f.params[0], bytes, cudaMemcpyDeviceToDevice, c.s),
          "cudaMemcpyAsync");
}

void parameter_bwd(const Ctx& c, const BackwardCall& b) {
    unary_backward(Unary::Copy, nullptr, b.grad_output, b.grad_params[0], false,
                   numel_out(b.graph, b.node), c.s);
}

// From pageable memory: the call returns once the host buffer has been read.
void constant_fwd(const Ctx& c, const ForwardCall& f) {
    std::vector<float> host(static_cast<size_t>(numel_out(f.graph, f.node)));
    binary_constant_values(f.node, host.data());
    check(cudaMemcpyAsync(f.output, host.data(), host.size() * sizeof(float),
                          cudaMemcpyHostToDevice, c.s),
          "copying a constant");
}

void constant_bwd(const Ctx&, const BackwardCall&) {}  // no gradient: never scheduled

// --- losses -----------------------------------------------------------------------------------

void sum_squares_fwd(const Ctx& c, const ForwardCall& f) {
    sum_squares_forward(f32(f.inputs[0]), f32(f.output), in_shape(f.graph, f.node, 0).numel(), c.s);
}

void sum_squares_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    scale_by_device_scalar(f32(b.inputs[0]), b.grad_output, b.grad_inputs[0], b.accumulate[0],
                           in_shape(b.graph, b.node, 0).numel(), c.s);
}

void cross_entropy_fwd(const Ctx& c, const ForwardCall& f) {
    const Shape& s = in_shape(f.graph, f.node, 0);
    const int64_t rows = s[0], classes = s[1];
    const auto* labels = static_cast<const int32_t*>(f.inputs[1]);
    // Labels are user data: check them on the host (one small copy), as the CPU kernel does.
    std::vector<int32_t> host(static_cast<size_t>(rows));
    if (rows) {
        check(cudaMemcpyAsync(host.data(), labels, host.size() * sizeof(int32_t),
                              cudaMemcpyDeviceToHost, c.s),
              "cudaMemcpyAsync (labels)");
        check(cudaStreamSynchronize(c.s), "cudaStreamSynchronize");
    }
    for (int64_t r = 0; r < rows; ++r)
        if (host[static_cast<size_t>(r)] < 0 || host[static_cast<size_t>(r)] >= classes)
            throw Error("cross_entropy '" + f.node.name + "': row " + std::to_string(r) +
                        " has label " + std::to_string(host[static_cast<size_t>(r)]) +
                        ", outside [0, " + std::to_string(classes) +
                        "); labels must be class indices below the number of logit columns");
    cross_entropy_forward(f32(f.inputs[0]), labels, f32(f.workspace), f32(f.output), rows, classes,
                          c.s);
}

void cross_entropy_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const Shape& s = in_shape(b.graph, b.node, 0);
    cross_entropy_backward(f32(b.inputs[0]), static_cast<const int32_t*>(b.inputs[1]),
                           b.grad_output, b.grad_inputs[0], b.accumulate[0], s[0], s[1], c.s);
}

// --- convolution and pools --------------------------------------------------------------------

Win win_of(const Window2d& w) {
    return {w.kh, w.kw, w.sh, w.sw, w.dh, w.dw, w.pad_top, w.pad_left, w.pad_bottom, w.pad_right};
}

ConvDims conv_dims(const Conv2dGeometry& g) {
    return {g.n, g.c, g.h, g.w, g.out_c, g.oh, g.ow, g.groups, win_of(g.win)};
}

// Per image n and group gi (K = patch, P = oh·ow), as the CPU kernel (engine/cpu/conv.cpp):
//   y_g [og, P] = W_g [og, K]·col [K, P]:  y_gᵀ = colᵀ·W_gᵀ.
void conv2d_fwd(const Ctx& c, const ForwardCall& f) {
    const Conv2dGeometry g = conv2d_geometry(f.graph, f.node);
    const ConvDims d = conv_dims(g);
    const float* x = f32(f.inputs[0]);
    const float* wt = f.params[0];
    const float* bias = g.bias ? f.params[1] : nullptr;
    float* y = f32(f.output);
    if (g.depthwise()) {
        depthwise_forward(x, wt, bias, y, d, c.s);
        return;
    }
    const int64_t plane = g.oh * g.ow, cg = g.c_per_group(), og = g.out_per_group(), k = g.patch();
    float* col = f32(f.workspace);
    for (int64_t n = 0; n < g.n; ++n) {
        if (bias) fill_planes(bias, y + n * g.out_c * plane, g.out_c, plane, c.s);
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            const float* xg = x + (n * g.c + gi * cg) * g.h * g.w;
            const float* cols = xg;
            if (!g.pointwise()) {
                im2col(xg, d, col, c.s);
                cols = col;
            }
            gemm(c, false, false, plane, og, k, 1.0f, cols, plane, wt + gi * og * k, k,
                 bias ? 1.0f : 0.0f, y + (n * g.out_c + gi * og) * plane, plane);
        }
    }
}

void conv2d_bwd(const Ctx& c, const BackwardCall& b) {
    const Conv2dGeometry g = conv2d_geometry(b.graph, b.node);
    const ConvDims d = conv_dims(g);
    const float* x = f32(b.inputs[0]);
    const float* wt = b.params[0];
    const float* dy = b.grad_output;
    float* dx = b.grad_inputs[0];
    const bool acc = b.accumulate[0];
    float* dw = b.grad_params[0];
    float* db = g.bias ? b.grad_params[1] : nullptr;
    if (db) conv_bias_grad(dy, d, db, c.s);
    if (g.depthwise()) {
        if (dw) depthwise_backward_weight(x, dy, dw, d, c.s);
        if (dx) depthwise_backward_input(dy, wt, dx, acc, d, c.s);
        return;
    }
    const int64_t plane = g.oh * g.ow, cg = g.c_per_group(), og = g.out_per_group(), k = g.patch();
    float* col = f32(b.workspace);
    for (int64_t n = 0; n < g.n; ++n)
        for (int64_t gi = 0; gi < g.groups; ++gi) {
            const float* xg = x + (n * g.c + gi * cg) * g.h * g.w;
            const float* dyg = dy + (n * g.out_c + gi * og) * plane;
            const float* wg = wt + gi * og * k;
            if (dw) {  // dW_g (+)= dY_g·colᵀ: dW_gᵀ = col·dY_gᵀ; images summed in order
                const float* cols = xg;
                if (!g.pointwise()) {
                    im2col(xg, d, col, c.s);
                    cols = col;
                }
                gemm(c, true, false, k, og, plane, 1.0f, cols, plane, dyg, plane,
                     n > 0 ? 1.0f : 0.0f, dw + gi * og * k, k);
            }
            if (!dx) continue;
            float* dxg = dx + (n * g.c + gi * cg) * g.h * g.w;
            // col [K, P] = W_gᵀ·dY_g: colᵀ = dY_gᵀ·W_g
            if (g.pointwise()) {
                gemm(c, false, true, plane, cg, og, 1.0f, dyg, plane, wg, k, acc ? 1.0f : 0.0f, dxg,
                     plane);
            } else {
                gemm(c, false, true, plane, k, og, 1.0f, dyg, plane, wg, k, 0.0f, col, plane);
                col2im(col, d, dxg, acc, c.s);
            }
        }
}

bool is_global(const Pool2dGeometry& g) {
    return g.oh == 1 && g.ow == 1 && g.win.kh == g.h && g.win.kw == g.w && g.win.pad_top == 0 &&
           g.win.pad_left == 0 && g.win.pad_bottom == 0 && g.win.pad_right == 0 && g.win.dh == 1 &&
           g.win.dw == 1;
}

PoolDims pool_dims(const Graph& graph, const Node& n) {
    const Pool2dGeometry g = pool2d_geometry(graph, n);
    return {g.n * g.c, g.h, g.w, g.oh, g.ow, win_of(g.win), g.count_include_pad, is_global(g)};
}

void maxpool_fwd(const Ctx& c, const ForwardCall& f) {
    maxpool_forward(f32(f.inputs[0]), f32(f.output), pool_dims(f.graph, f.node), c.s);
}

void maxpool_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    maxpool_backward(f32(b.inputs[0]), b.grad_output, b.grad_inputs[0], b.accumulate[0],
                     pool_dims(b.graph, b.node), c.s);
}

void avgpool_fwd(const Ctx& c, const ForwardCall& f) {
    avgpool_forward(f32(f.inputs[0]), f32(f.output), pool_dims(f.graph, f.node), c.s);
}

void avgpool_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    avgpool_backward(b.grad_output, b.grad_inputs[0], b.accumulate[0], pool_dims(b.graph, b.node),
                     c.s);
}

struct Upsample {
    int64_t planes, h, w, sh, sw;
};
Upsample upsample_dims(const Graph& graph, const Node& n) {
    const Shape& x = in_shape(graph, n, 0);
    const Shape& y = out_shape(graph, n);
    return {x[0] * x[1], x[2], x[3], y[2] / x[2], y[3] / x[3]};
}

void upsample_fwd(const Ctx& c, const ForwardCall& f) {
    const Upsample u = upsample_dims(f.graph, f.node);
    upsample_forward(f32(f.inputs[0]), f32(f.output), u.planes, u.h, u.w, u.sh, u.sw, c.s);
}

void upsample_bwd(const Ctx& c, const BackwardCall& b) {
    if (!b.grad_inputs[0]) return;
    const Upsample u = upsample_dims(b.graph, b.node);
    upsample_backward(b.grad_output, b.grad_inputs[0], b.accumulate[0], u.planes, u.h, u.w, u.sh,
                      u.sw, c.s);
}

void batchnorm_fwd(const Ctx& c, const ForwardCall& f) {
    const Shape& s = in_shape(f.graph, f.node, 0);
    int64_t inner = 1;
    for (int a = 2; a < s.rank(); ++a) inner *= s[a];
    batchnorm_forward(f32(f.inputs[0]), f.params[0], f.params[1], f32(f.output), s[0], s[1], inner,
                      f.node.attrs.get_float("eps", 1e-5), c.s);
}

void batchnorm_bwd(const Ctx& c, const BackwardCall& b) {
    const Shape& s = in_shape(b.graph, b.node, 0);
    int64_t inner = 1;
    for (int a = 2; a < s.rank(); ++a) inner *= s[a];
    batchnorm_backward(f32(b.inputs[0]), b.params[0], b.grad_output, b.grad_inputs[0],
                       b.accumulate[0], b.grad_params[0], b.grad_params[1], s[0], s[1], inner,
                       b.node.attrs.get_float("eps", 1e-5), c.s);
}

// --- broadcasting binary ops, reduce_mean, activations -------------------------

bool same_shape_add(const Graph& g, const Node& n) {
    return n.inputs.size() == 2 && in_shape(g, n, 0) == in_shape(g, n, 1);
}

// The operands of a binary node on the device: inputs, the parameter, or the scalar.
// A constant operand is decoded on the host and uploaded into the declared workspace.
std::array<BinaryOperand, 2> binary_operands(const Ctx& c, const Node& n, const void* const* inputs,
                                             float* const* params, void* workspace,
                                             const BinaryForm& form) {
    std::array<BinaryOperand, 2> o{};
    for (int k = 0; k < 2; ++k) {
        switch (form.source[k]) {
            case BinaryForm::Source::Input:
                o[k] = {static_cast<const float*>(inputs[form.input[k]]), 0.0f};
                break;
            case BinaryForm::Source::Param:
                o[k] = {params[0], 0.0f};
                break;
            case BinaryForm::Source::Scalar:
                o[k] = {nullptr, form.scalar};
                break;
            case BinaryForm::Source::Constant: {
                std::vector<float> host(n.attrs.get_ints("constant_bits").size());
                binary_constant_values(n, host.data());
                check(cudaMemcpyAsync(workspace, host.data(), host.size() * sizeof(float),
                                      cudaMemcpyHostToDevice, c.s),
                      "copying a constant operand");
                o[k] = {static_cast<const float*>(workspace), 0.0f};
                break;
            }
        }
    }
    return o;
}

template <BinaryOp Op>
void binary_fwd(const Ctx& c, const ForwardCall& f) {
    if (Op == BinaryOp::Add && same_shape_add(f.graph, f.node)) return add_fwd(c, f);
    const BinaryForm form = binary_form(f.node);
    const auto o = binary_operands(c, f.node, f.inputs, f.params, f.workspace, form);
    binary_forward(Op, binary_plan(f.graph, f.node), o[0], o[1], f32(f.output), c.s);
}

template <BinaryOp Op>
void binary_bwd(const Ctx& c, const BackwardCall& b) {
    if (Op == BinaryOp::Add && same_shape_add(b.graph, b.node)) return add_bwd(c, b);
    const BinaryForm form = binary_form(b.node);
    const auto o = binary_operands(c, b.node, b.inputs, b.params, b.workspace, form);
    const BroadcastPlan p = binary_plan(b.graph, b.node);
    // Operand 0 first: x - x passes one buffer in both slots and slot 1 accumulates.
    for (int k = 0; k < 2; ++k) {
        float* dst = nullptr;
        bool acc = false;
        if (form.source[k] == BinaryForm::Source::Input) {
            dst = b.grad_inputs[form.input[k]];
            acc = b.accumulate[form.input[k]];
        } else if (form.source[k] == BinaryForm::Source::Param) {
            dst = b.grad_params[0];
        }
        if (dst) binary_backward(Op, k, p, o[0], o[1], b.grad_output, dst, acc, c.s);
    }
}

void reduce_mean_fwd(const Ctx& c, const ForwardCall& f) {
    reduce_mean_forward(reduce_mean_plan(f.graph, f.node), f32(f.inputs[0]), f32(f.output), c.s);
}

void reduce_mean_bwd(const Ctx& c, const BackwardCall& b) {
    if (b.grad_inputs[0])
        reduce_mean_backward(reduce_mean_plan(b.graph, b.node), b.grad_output, b.grad_inputs[0],
                             b.accumulate[0], c.s);
}

Activation activation_of(const Node& n) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    switch (n.op) {
        case OpKind::Clip:
            return {Activation::Kind::Clip, static_cast<float>(n.attrs.get_float("min", -inf)),
                    static_cast<float>(n.attrs.get_float("max", inf))};
        case OpKind::HardSigmoid:
            return {Activation::Kind::HardSigmoid,
                    static_cast<float>(n.attrs.get_float("alpha", 1.0 / 6)),
                    static_cast<float>(n.attrs.get_float("beta", 0.5))};
        case OpKind::HardSwish:
            return {Activation::Kind::HardSwish, 0, 0};
        default:
            return {Activation::Kind::GeluTanh, 0, 0};
    }
}

void activation_fwd(const Ctx& c, const ForwardCall& f) {
    activation_forward(activation_of(f.node), f32(f.inputs[0]), f32(f.output),
                       numel_out(f.graph, f.node), c.s);
}

void activation_bwd(const Ctx& c, const BackwardCall& b) {
    if (b.grad_inputs[0])
        activation_backward(activation_of(b.node), f32(b.inputs[0]), b.grad_output,
                            b.grad_inputs[0], b.accumulate[0], numel_out(b.graph, b.node), c.s);
}

// --- the table --------------------------------------------------------------------------------

using ForwardKernel = void (*)(const Ctx&, const ForwardCall&);
using BackwardKernel = void (*)(const Ctx&, const BackwardCall&);

constexpr KernelTable<ForwardKernel, BackwardKernel> kTable = [] {
    KernelTable<ForwardKernel, BackwardKernel> t{};
    t[op_index(OpKind::Linear)] = {linear_fwd, linear_bwd};
    t[op_index(OpKind::MatMul)] = {matmul_fwd, matmul_bwd};
    t[op_index(OpKind::Add)] = {binary_fwd<BinaryOp::Add>, binary_bwd<BinaryOp::Add>};
    t[op_index(OpKind::Relu)] = {unary_fwd<Unary::Relu>, unary_bwd<Unary::Relu, true>};
    t[op_index(OpKind::Gelu)] = {unary_fwd<Unary::Gelu>, unary_bwd<Unary::Gelu, false>};
    t[op_index(OpKind::Tanh)] = {unary_fwd<Unary::Tanh>, unary_bwd<Unary::Tanh, true>};
    t[op_index(OpKind::Sigmoid)] = {unary_fwd<Unary::Sigmoid>, unary_bwd<Unary::Sigmoid, true>};
    t[op_index(OpKind::LayerNorm)] = {layernorm_fwd, layernorm_bwd};
    t[op_index(OpKind::Softmax)] = {softmax_fwd, softmax_bwd};
    t[op_index(OpKind::Reshape)] = {copy_fwd, copy_bwd};
    t[op_index(OpKind::Transpose)] = {transpose_fwd, transpose_bwd};
    t[op_index(OpKind::SumSquares)] = {sum_squares_fwd, sum_squares_bwd};
    t[op_index(OpKind::CrossEntropy)] = {cross_entropy_fwd, cross_entropy_bwd};
    t[op_index(OpKind::Sin)] = {unary_fwd<Unary::Sin>, sin_cos_bwd<Unary::Sin, Unary::Times>};
    t[op_index(OpKind::Cos)] = {unary_fwd<Unary::Cos>, sin_cos_bwd<Unary::Cos, Unary::NegTimes>};
    t[op_index(OpKind::Conv2d)] = {conv2d_fwd, conv2d_bwd};
    t[op_index(OpKind::MaxPool2d)] = {maxpool_fwd, maxpool_bwd};
    t[op_index(OpKind::AvgPool2d)] = {avgpool_fwd, avgpool_bwd};
    t[op_index(OpKind::BatchNorm)] = {batchnorm_fwd, batchnorm_bwd};
    t[op_index(OpKind::UpsampleNearest2d)] = {upsample_fwd, upsample_bwd};
    t[op_index(OpKind::Concat)] = {concat_fwd, concat_bwd};
    t[op_index(OpKind::Flatten)] = {copy_fwd, copy_bwd};
    t[op_index(OpKind::Dropout)] = {dropout_fwd, dropout_bwd};
    // broadcasting binary ops, activations, reduce_mean
    t[op_index(OpKind::Sub)] = {binary_fwd<BinaryOp::Sub>, binary_bwd<BinaryOp::Sub>};
    t[op_index(OpKind::Mul)] = {binary_fwd<BinaryOp::Mul>, binary_bwd<BinaryOp::Mul>};
    t[op_index(OpKind::Div)] = {binary_fwd<BinaryOp::Div>, binary_bwd<BinaryOp::Div>};
    t[op_index(OpKind::Clip)] = {activation_fwd, activation_bwd};
    t[op_index(OpKind::HardSigmoid)] = {activation_fwd, activation_bwd};
    t[op_index(OpKind::HardSwish)] = {activation_fwd, activation_bwd};
    t[op_index(OpKind::GeluTanh)] = {activation_fwd, activation_bwd};
    t[op_index(OpKind::ReduceMean)] = {reduce_mean_fwd, reduce_mean_bwd};
    // indexing
    t[op_index(OpKind::Embedding)] = {embedding_fwd, embedding_bwd};
    t[op_index(OpKind::Slice)] = {slice_fwd, slice_bwd};
    t[op_index(OpKind::CausalMask)] = {causal_mask_fwd, causal_mask_bwd};
    t[op_index(OpKind::Pad)] = {pad_fwd, pad_bwd};
    // large-model training: dropout masks, tensor-parallel collectives
    t[op_index(OpKind::DropoutMask)] = {dropout_mask_fwd, dropout_mask_bwd};
    t[op_index(OpKind::Collective)] = {collective_fwd, collective_bwd};
    t[op_index(OpKind::Opaque)] = {opaque_fwd, opaque_bwd};  // plan-only: both throw
    // Swin V2 (ONNX import)
    t[op_index(OpKind::Exp)] = {unary_fwd<Unary::Exp>, unary_bwd<Unary::Exp, true>};
    t[op_index(OpKind::L2Normalize)] = {l2_normalize_fwd, l2_normalize_bwd};
    t[op_index(OpKind::Gather)] = {gather_fwd, gather_bwd};
    t[op_index(OpKind::Parameter)] = {parameter_fwd, parameter_bwd};
    t[op_index(OpKind::Constant)] = {constant_fwd, constant_bwd};
    return t;
}();

static_assert(table_complete(kTable), "every OpKind needs a CUDA forward and backward kernel");

// --- the backend ------------------------------------------------------------------------------

// cuBLAS gets a fixed workspace of its own (as PyTorch's default CUBLAS_WORKSPACE_CONFIG), so
// its choice of algorithm, and so its results, do not depend on what else is allocated; it is
// reported as DeviceMemory::overhead, outside the tracking allocator's tensor bytes.
constexpr size_t kCublasWorkspace = size_t{32} << 20;
// Pool blocks are rounded to this granule (cudaMalloc aligns to 256 bytes anyway).
constexpr uint64_t kGranule = 512;

std::string describe_device(int dev) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, dev) != cudaSuccess)
        return "CUDA device " + std::to_string(dev);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(p.totalGlobalMem) / (1 << 30));
    return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) +
           ", " + buf + ")";
}

class CudaBackend final : public Backend {
  public:
    explicit CudaBackend(bool pool) : pool_(pool) {
        check(cudaSetDevice(0), "cudaSetDevice");
        device_ = describe_device(0);
        stream_ = std::make_unique<Stream>();
        blas_ = std::make_unique<CublasHandle>();
        blas_workspace_ = std::make_unique<DeviceBlock>(kCublasWorkspace);
        check(cublas().set_stream(blas_->get(), stream_->get()), "cublasSetStream");
        check(cublas().set_workspace(blas_->get(), blas_workspace_->get(), kCublasWorkspace),
              "cublasSetWorkspace");
        check(cublas().set_math_mode(blas_->get(), CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
        check(cublas().set_pointer_mode(blas_->get(), CUBLAS_POINTER_MODE_HOST),
              "cublasSetPointerMode");
        start_ = std::make_unique<Event>();
        stop_ = std::make_unique<Event>();
        size_t free = 0, total = 0;
        check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
        total_ = total;
        free_at_start_ = min_free_ = free;
    }

    ~CudaBackend() override {
        cudaStreamSynchronize(stream_->get());
        if (copy_stream_) cudaStreamSynchronize(copy_stream_->get());
        for (auto& [size, p] : cache_) cudaFree(p);
        for (auto& [p, size] : live_) cudaFree(p);
    }

    std::string name() const override { return "cuda"; }

    void* allocate(uint64_t bytes) override {
        // A zero-byte request still gets a distinct pointer.
        const uint64_t size =
            std::max<uint64_t>(kGranule, (bytes + kGranule - 1) / kGranule * kGranule);
        if (size < bytes) throw Error("cannot allocate " + std::to_string(bytes) + " bytes");
        if (pool_) {
            if (auto it = cache_.find(size); it != cache_.end()) {
                void* p = it->second;
                cache_.erase(it);
                live_.emplace(p, size);
                return p;
            }
        }
        void* p = nullptr;
        cudaError_t e = cudaMalloc(&p, size);
        if (e == cudaErrorMemoryAllocation && !cache_.empty()) {
            (void)cudaGetLastError();  // clear it, give the cache back and retry once
            trim();
            e = cudaMalloc(&p, size);
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            size_t free = 0, total = 0;
            cudaMemGetInfo(&free, &total);
            throw Error("the GPU is out of memory: allocating " + std::to_string(bytes) +
                        " bytes failed (" + cudaGetErrorName(e) + "; " + std::to_string(free) +
                        " of " + std::to_string(total) +
                        " bytes free); try a smaller network or batch, a strategy with a lower "
                        "peak, or a memory cap");
        }
        live_.emplace(p, size);
        reserved_ += size;
        reserved_peak_ = std::max(reserved_peak_, reserved_);
        note_free();
        return p;
    }

    void release(void* p) override {
        auto it = live_.find(p);
        if (it == live_.end()) return;
        const uint64_t size = it->second;
        live_.erase(it);
        if (pool_) {
            // Later work on this stream that reuses the block runs after earlier work on it.
            cache_.emplace(size, p);
            return;
        }
        cudaFree(p);  // synchronises the device
        reserved_ -= size;
    }

    void forward(const ForwardCall& call) override {
        kTable[op_index(call.node.op)].forward(ctx(), call);
        check_launch(op_label(call.node));
    }
    void backward(const BackwardCall& call) override {
        kTable[op_index(call.node.op)].backward(ctx(), call);
        check_launch(op_label(call.node));
    }

    void copy_to_host(void* dst, const void* src, uint64_t bytes) override {
        if (!bytes) return;
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_->get()),
              "cudaMemcpyAsync (to host)");
        stream_->synchronize();
    }
    void copy_from_host(void* dst, const void* src, uint64_t bytes) override {
        if (!bytes) return;
        check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_->get()),
              "cudaMemcpyAsync (from host)");
        stream_->synchronize();  // the host buffer may go away after this returns
    }
    void synchronize() override { stream_->synchronize(); }
    void add_into(float* dst, const float* src, int64_t n) override {
        scale_into(src, 1.0f, dst, true, n, stream_->get());  // dst + src·1: dst + src exactly
        check_launch("add_into");
    }

    void begin_instruction() override { start_->record(stream_->get()); }
    double end_instruction() override {
        stop_->record(stream_->get());
        stop_->synchronize();
        return stop_->since(*start_);
    }

    std::optional<DeviceMemory> device_memory() const override {
        DeviceMemory m;
        m.device = device_;
        m.total = total_;
        m.free_at_start = free_at_start_;
        m.min_free = std::min(min_free_, free_at_start_);
        m.reserved = reserved_;
        m.reserved_peak = reserved_peak_;
        m.overhead = kCublasWorkspace;
        return m;
    }

    void reset_device_memory_peak() override {
        size_t free = 0, total = 0;
        check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
        free_at_start_ = min_free_ = free;
        reserved_peak_ = reserved_;
    }

    // Offload: pinned host memory, and cudaMemcpyAsync on a second stream ordered after the
    // compute stream's work so far by an event; each copy is bracketed by two events, which
    // time it and tell when it completed.
    void* allocate_host(uint64_t bytes) override {
        void* p = nullptr;
        const cudaError_t e = cudaMallocHost(&p, std::max<uint64_t>(bytes, 1));
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            throw Error("out of pinned host memory: cudaMallocHost of " + std::to_string(bytes) +
                        " bytes for an offloaded value failed (" + cudaGetErrorName(e) +
                        "); offload less, or raise the device budget");
        }
        return p;
    }
    void release_host(void* p) override { cudaFreeHost(p); }
    uint64_t copy_async(void* dst, const void* src, uint64_t bytes, bool to_host) override {
        if (!copy_stream_) copy_stream_ = std::make_unique<Stream>();
        const uint64_t ticket = ++tickets_;
        CopyEvents& c = copies_[ticket];
        c.start = std::make_unique<Event>();
        c.stop = std::make_unique<Event>();
        Event ready;
        ready.record(stream_->get());  // the value's producer has run
        check(cudaStreamWaitEvent(copy_stream_->get(), ready.get(), 0), "cudaStreamWaitEvent");
        c.start->record(copy_stream_->get());
        if (bytes)
            check(cudaMemcpyAsync(dst, src, bytes,
                                  to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                                  copy_stream_->get()),
                  to_host ? "cudaMemcpyAsync (offload)" : "cudaMemcpyAsync (prefetch)");
        c.stop->record(copy_stream_->get());
        return ticket;
    }
    void wait_copy(uint64_t ticket) override {
        auto it = copies_.find(ticket);
        if (it == copies_.end()) return;
        // Later kernels on the compute stream run after the copy; the host learns it is done.
        check(cudaStreamWaitEvent(stream_->get(), it->second.stop->get(), 0),
              "cudaStreamWaitEvent");
        it->second.stop->synchronize();
    }
    double take_copy_ms(uint64_t ticket) override {
        auto it = copies_.find(ticket);
        if (it == copies_.end()) return 0;
        const double ms = it->second.stop->since(*it->second.start);
        copies_.erase(it);
        return ms;
    }

  private:
    Ctx ctx() const { return {blas_->get(), stream_->get()}; }

    static const char* op_label(const Node& n) { return n.name.c_str(); }

    void note_free() {
        size_t free = 0, total = 0;
        if (cudaMemGetInfo(&free, &total) == cudaSuccess)
            min_free_ = std::min<uint64_t>(min_free_, free);
    }

    void trim() {
        cudaStreamSynchronize(stream_->get());
        for (auto& [size, p] : cache_) {
            cudaFree(p);
            reserved_ -= size;
        }
        cache_.clear();
    }

    bool pool_;
    std::string device_;
    // Declared in this order so that the handle goes before its workspace, both before the
    // stream.
    std::unique_ptr<Stream> stream_;
    std::unique_ptr<DeviceBlock> blas_workspace_;
    std::unique_ptr<CublasHandle> blas_;
    std::unique_ptr<Event> start_, stop_;
    struct CopyEvents {
        std::unique_ptr<Event> start, stop;
    };
    std::unique_ptr<Stream> copy_stream_;  // offload copies (made at the first)
    std::unordered_map<uint64_t, CopyEvents> copies_;
    uint64_t tickets_ = 0;
    std::multimap<uint64_t, void*> cache_;      // free blocks by size
    std::unordered_map<void*, uint64_t> live_;  // handed out, with their rounded size
    uint64_t reserved_ = 0, reserved_peak_ = 0;
    uint64_t total_ = 0, free_at_start_ = 0, min_free_ = 0;
};

}  // namespace
}  // namespace cuda

bool cuda_available(std::string* why) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (why) {
            *why = "no CUDA device: cudaGetDeviceCount returned " +
                   std::to_string(static_cast<int>(e)) + " (" + cudaGetErrorName(e) + ": " +
                   cudaGetErrorString(e) + ")";
            if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
                *why +=
                    "; no NVIDIA GPU or driver is usable on this machine (the driver must "
                    "support CUDA " +
                    std::to_string(CUDART_VERSION / 1000) + ")";
        }
        return false;
    }
    if (count == 0) {
        if (why) *why = "no CUDA device: cudaGetDeviceCount found no GPU";
        return false;
    }
    if (why) why->clear();
    return true;
}

std::unique_ptr<Backend> make_cuda_backend(bool pool) {
    std::string why;
    if (!cuda_available(&why)) throw Error(why + "; use the CPU backend (--device cpu)");
    return std::make_unique<cuda::CudaBackend>(pool);
}

}  // namespace rl
