// linear and matmul: GEMMs straight on the caller's buffers, through the one entry point
// (engine/gemm.h) and whichever library serves it.
#include "engine/cpu/kernels.h"
#include "engine/gemm.h"

namespace rl::cpu {
namespace {

struct LinearDims {
    int64_t rows, in, out;
    bool bias;
};

LinearDims linear_dims(const Graph& g, const Node& n) {
    const Shape& x = input_shape(g, n, 0);
    const int64_t in = x[-1];
    return {x.numel() / in, in, output_shape(g, n)[-1], n.params.size() > 1};
}

// Whether a linear layer's dX and dW run side by side (kernels.h). With AVX-512, not where dW
// goes to the short-depth or panel kernel, whose C is written once around the caches: ViT-B/32's
// weight gradients (3072 × 768 over 100 rows, 9.4 MB each) stream slower from one core than
// from two, and its backward at two threads went 177-187 → 188-203 ms side by side; with AVX2,
// where the products themselves take longer, it went 236-239 → 212-215 (docs/benchmarks.md).
bool gradients_side_by_side(int64_t rows, int64_t in, int64_t out) {
    if (!side_by_side_pays(rows * in * out)) return false;
#if defined(__AVX512F__)
    return !written_once_apply(false, out, in, rows, 0.f);
#else
    return true;
#endif
}

}  // namespace

void linear_products_forward(const float* x, const float* w, const float* b, int64_t rows,
                             int64_t in, int64_t out, float* y) {
    if (b)  // Seed Y with the bias and let the GEMM add into it: the same one pass over Y that a
            // plain `Y = X·Wᵀ` spends on zeroing it.
        parallel_for(rows, out, [&](int64_t r) { ArrMap(y + r * out, out) = ConstArrMap(b, out); });
    const float beta = b ? 1.f : 0.f;
    if (row_dots_apply(false, true, rows, out, in))
        row_dots_product(rows, out, in, x, in, w, in, beta, y, out);
    else
        sgemm(false, true, rows, out, in, 1.f, x, in, w, in, beta, y, out);
}

void linear_products_backward(const float* x, const float* w, const float* dy, int64_t rows,
                              int64_t in, int64_t out, float* dx, bool accumulate, float* dw) {
    auto input_gradient = [&] {  // dX = dY·W
        sgemm(false, false, rows, in, out, 1.f, dy, out, w, in, accumulate ? 1.f : 0.f, dx, in);
    };
    auto weight_gradient = [&] {  // dW = dYᵀ·X (on a few rows, written once)
        short_depth_or_gemm(true, false, out, in, rows, dy, out, x, in, 0.f, dw, in);
    };
    if (dx && dw && gradients_side_by_side(rows, in, out)) {
        side_by_side(input_gradient, weight_gradient);
        return;
    }
    if (dx) input_gradient();
    if (dw) weight_gradient();
}

void linear_forward(const ForwardCall& c) {
    const LinearDims d = linear_dims(c.graph, c.node);
    linear_products_forward(as_f32(c.inputs[0]), c.params[0], d.bias ? c.params[1] : nullptr,
                            d.rows, d.in, d.out, as_f32(c.output));
}

void linear_backward(const BackwardCall& c) {
    const LinearDims d = linear_dims(c.graph, c.node);
    linear_products_backward(as_f32(c.inputs[0]), c.params[0], c.grad_output, d.rows, d.in, d.out,
                             c.grad_inputs[0], c.accumulate[0], c.grad_params[0]);
    if (d.bias && c.grad_params[1]) column_sums(c.grad_output, d.rows, d.out, c.grad_params[1]);
}

namespace {

struct MatMulDims {
    int64_t batch, m, k, n;
    bool transpose_b;
    float alpha;
};

MatMulDims matmul_dims(const Graph& g, const Node& n) {
    const Shape& a = input_shape(g, n, 0);
    const Shape& y = output_shape(g, n);
    return {a[0],
            a[1],
            a[2],
            y[2],
            n.attrs.get_int("transpose_b", 0) != 0,
            static_cast<float>(n.attrs.get_float("alpha", 1.0))};
}

// Runs body(batch) over the batch. Many small products run one per thread (the GEMM library
// then stays single-threaded inside each); large ones run in order, each on all the threads.
template <class F>
void for_batches(const MatMulDims& d, F&& body) {
    const int threads = cpu_threads();
    const bool small = d.m * d.n * d.k < (int64_t{1} << 21);
    const bool across = threads > 1 && (d.batch >= 4 * threads || (small && d.batch >= threads));
#pragma omp parallel for schedule(static) num_threads(threads) if (across)
    for (int64_t i = 0; i < d.batch; ++i) body(i);
}

// C = alpha·op(A)·op(B) + beta·C on small_product where it applies, else on the GEMM library.
void matmul_product(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    if (small_product_apply(tb, m, n, k))
        small_product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace

void matmul_forward(const ForwardCall& c) {
    const MatMulDims d = matmul_dims(c.graph, c.node);
    const float* a = as_f32(c.inputs[0]);
    const float* b = as_f32(c.inputs[1]);
    float* y = as_f32(c.output);
    for_batches(d, [&](int64_t i) {  // Y = α·A·B, or α·A·Bᵀ with B [N, K]
        matmul_product(false, d.transpose_b, d.m, d.n, d.k, d.alpha, a + i * d.m * d.k, d.k,
                       b + i * d.k * d.n, d.transpose_b ? d.k : d.n, 0.f, y + i * d.m * d.n, d.n);
    });
}

void matmul_backward(const BackwardCall& c) {
    const MatMulDims d = matmul_dims(c.graph, c.node);
    const float* a = as_f32(c.inputs[0]);
    const float* b = as_f32(c.inputs[1]);
    const float* dy = c.grad_output;
    const int64_t sa = d.m * d.k, sb = d.k * d.n, sy = d.m * d.n;  // per-batch strides
    // matmul(x, x) passes one buffer in both slots: all of dA is written before dB accumulates.
    if (float* da = c.grad_inputs[0]) {
        const float beta = c.accumulate[0] ? 1.f : 0.f;
        for_batches(d, [&](int64_t i) {
            if (d.transpose_b)  // dA = α·dY·B, B [N, K]
                matmul_product(false, false, d.m, d.k, d.n, d.alpha, dy + i * sy, d.n, b + i * sb,
                               d.k, beta, da + i * sa, d.k);
            else  // dA = α·dY·Bᵀ, B [K, N]
                matmul_product(false, true, d.m, d.k, d.n, d.alpha, dy + i * sy, d.n, b + i * sb,
                               d.n, beta, da + i * sa, d.k);
        });
    }
    if (float* db = c.grad_inputs[1]) {
        const float beta = c.accumulate[1] ? 1.f : 0.f;
        for_batches(d, [&](int64_t i) {
            if (d.transpose_b)  // dB = α·dYᵀ·A, [N, K]
                matmul_product(true, false, d.n, d.k, d.m, d.alpha, dy + i * sy, d.n, a + i * sa,
                               d.k, beta, db + i * sb, d.k);
            else  // dB = α·Aᵀ·dY, [K, N]
                matmul_product(true, false, d.k, d.n, d.m, d.alpha, a + i * sa, d.k, dy + i * sy,
                               d.n, beta, db + i * sb, d.n);
        });
    }
}

}  // namespace rl::cpu
