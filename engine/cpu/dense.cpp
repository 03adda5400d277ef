// linear and matmul: Eigen GEMMs straight on the caller's buffers.
#include "engine/cpu/kernels.h"

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

}  // namespace

void linear_forward(const ForwardCall& c) {
    const LinearDims d = linear_dims(c.graph, c.node);
    ConstMatMap x(as_f32(c.inputs[0]), d.rows, d.in);
    ConstMatMap w(c.params[0], d.out, d.in);
    MatMap y(as_f32(c.output), d.rows, d.out);
    if (!d.bias) {
        y.noalias() = x * w.transpose();
        return;
    }
    // Seed Y with the bias and let the GEMM add into it: the same one pass over Y that a plain
    // `Y = X·Wᵀ` spends on zeroing it.
    const float* b = c.params[1];
    parallel_for(d.rows, d.out,
                 [&](int64_t r) { ArrMap(y.data() + r * d.out, d.out) = ConstArrMap(b, d.out); });
    y.noalias() += x * w.transpose();
}

void linear_backward(const BackwardCall& c) {
    const LinearDims d = linear_dims(c.graph, c.node);
    ConstMatMap dy(c.grad_output, d.rows, d.out);
    ConstMatMap w(c.params[0], d.out, d.in);
    if (c.grad_inputs[0]) gemm(MatMap(c.grad_inputs[0], d.rows, d.in), dy * w, c.accumulate[0]);
    if (c.grad_params[0]) {
        ConstMatMap x(as_f32(c.inputs[0]), d.rows, d.in);
        MatMap(c.grad_params[0], d.out, d.in).noalias() = dy.transpose() * x;
    }
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

// Runs body(batch) over the batch. Many small products run one per thread (Eigen then stays
// single-threaded inside each); large ones run in order, each using Eigen's own threads.
template <class F>
void for_batches(const MatMulDims& d, F&& body) {
    const int threads = cpu_threads();
    const bool small = d.m * d.n * d.k < (int64_t{1} << 21);
    const bool across = threads > 1 && (d.batch >= 4 * threads || (small && d.batch >= threads));
#pragma omp parallel for schedule(static) num_threads(threads) if (across)
    for (int64_t i = 0; i < d.batch; ++i) body(i);
}

}  // namespace

void matmul_forward(const ForwardCall& c) {
    const MatMulDims d = matmul_dims(c.graph, c.node);
    const float* a = as_f32(c.inputs[0]);
    const float* b = as_f32(c.inputs[1]);
    float* y = as_f32(c.output);
    for_batches(d, [&](int64_t i) {
        ConstMatMap ai(a + i * d.m * d.k, d.m, d.k);
        MatMap yi(y + i * d.m * d.n, d.m, d.n);
        if (d.transpose_b)
            yi.noalias() = d.alpha * ai * ConstMatMap(b + i * d.n * d.k, d.n, d.k).transpose();
        else
            yi.noalias() = d.alpha * ai * ConstMatMap(b + i * d.k * d.n, d.k, d.n);
    });
}

void matmul_backward(const BackwardCall& c) {
    const MatMulDims d = matmul_dims(c.graph, c.node);
    const float* a = as_f32(c.inputs[0]);
    const float* b = as_f32(c.inputs[1]);
    const float* dy = c.grad_output;
    auto a_at = [&](int64_t i) { return ConstMatMap(a + i * d.m * d.k, d.m, d.k); };
    auto dy_at = [&](int64_t i) { return ConstMatMap(dy + i * d.m * d.n, d.m, d.n); };
    // matmul(x, x) passes one buffer in both slots: all of dA is written before dB accumulates.
    if (float* da = c.grad_inputs[0]) {
        for_batches(d, [&](int64_t i) {
            MatMap dai(da + i * d.m * d.k, d.m, d.k);
            if (d.transpose_b)  // dA = α·dY·B, B [N, K]
                gemm(dai, d.alpha * dy_at(i) * ConstMatMap(b + i * d.n * d.k, d.n, d.k),
                     c.accumulate[0]);
            else  // dA = α·dY·Bᵀ, B [K, N]
                gemm(dai, d.alpha * dy_at(i) * ConstMatMap(b + i * d.k * d.n, d.k, d.n).transpose(),
                     c.accumulate[0]);
        });
    }
    if (float* db = c.grad_inputs[1]) {
        for_batches(d, [&](int64_t i) {
            if (d.transpose_b)  // dB = α·dYᵀ·A, [N, K]
                gemm(MatMap(db + i * d.n * d.k, d.n, d.k), d.alpha * dy_at(i).transpose() * a_at(i),
                     c.accumulate[1]);
            else  // dB = α·Aᵀ·dY, [K, N]
                gemm(MatMap(db + i * d.k * d.n, d.k, d.n), d.alpha * a_at(i).transpose() * dy_at(i),
                     c.accumulate[1]);
        });
    }
}

}  // namespace rl::cpu
