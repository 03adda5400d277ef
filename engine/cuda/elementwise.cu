// Pointwise kernels of the CUDA backend: activations, add, scaling, bias seeding and dropout.
// The formulas are the CPU kernels' (engine/cpu/elementwise.cpp); dropout hashes its mask with
// the same counter-based function (engine/rng.h), so the GPU draws the CPU's mask bit for bit.
// nvcc contracts a·b + c into an FMA (--fmad=true), and so does GCC in C++ (its default
// -ffp-contract=fast, whatever -std says), each where its optimiser chooses; the kernels that must
// match the CPU bitwise (relu, add, copies, dropout) have no such pattern, or spell the rounding
// out (__fmul_rn, fmaf) as the CPU does (std::fma).
#include "engine/cuda/common.cuh"
#include "engine/rng.h"

namespace rl::cuda {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

template <Unary F>
__device__ __forceinline__ float apply(float x) {
    if constexpr (F == Unary::Relu) return fmaxf(x, 0.0f);
    if constexpr (F == Unary::Gelu) return x * 0.5f * (1.0f + erff(x * kInvSqrt2));
    if constexpr (F == Unary::Tanh) return tanhf(x);
    if constexpr (F == Unary::Sigmoid) return 1.0f / (1.0f + expf(-x));
    if constexpr (F == Unary::Sin) return sinf(x);
    if constexpr (F == Unary::Cos) return cosf(x);
    if constexpr (F == Unary::Exp) return expf(x);
    return x;
}

// f'(·) from the residual r (output for relu/tanh/sigmoid, input for gelu/sin/cos).
template <Unary F>
__device__ __forceinline__ float derivative(float r) {
    if constexpr (F == Unary::Relu) return r > 0.0f ? 1.0f : 0.0f;
    if constexpr (F == Unary::Gelu)
        return 0.5f * (1.0f + erff(r * kInvSqrt2)) + r * expf(-0.5f * r * r) * kInvSqrt2Pi;
    if constexpr (F == Unary::Tanh) return 1.0f - r * r;
    if constexpr (F == Unary::Sigmoid) return r * (1.0f - r);
    if constexpr (F == Unary::Sin) return cosf(r);
    if constexpr (F == Unary::Cos) return -sinf(r);
    if constexpr (F == Unary::Times) return r;
    if constexpr (F == Unary::NegTimes) return -r;
    if constexpr (F == Unary::Exp) return r;
    return 1.0f;
}

template <Unary F>
__global__ void unary_fwd_kernel(const float* x, float* y, int64_t n) {
    RL_GRID_STRIDE(i, n) y[i] = apply<F>(x[i]);
}

template <Unary F>
__global__ void unary_bwd_kernel(const float* r, const float* dy, float* dx, bool acc, int64_t n) {
    RL_GRID_STRIDE(i, n) {
        float g;
        if constexpr (F == Unary::Relu)
            g = r[i] > 0.0f ? dy[i] : 0.0f;  // as the CPU: a select, not a product
        else if constexpr (F == Unary::Copy)
            g = dy[i];
        else
            g = dy[i] * derivative<F>(r[i]);
        store(dx + i, g, acc);
    }
}

template <Unary F>
void launch_fwd(const float* x, float* y, int64_t n, cudaStream_t s) {
    unary_fwd_kernel<F><<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
}
template <Unary F>
void launch_bwd(const float* r, const float* dy, float* dx, bool acc, int64_t n, cudaStream_t s) {
    unary_bwd_kernel<F><<<blocks_for(n), kThreads, 0, s>>>(r, dy, dx, acc, n);
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
    RL_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

__global__ void scale_kernel(const float* dy, float k, float* dx, bool acc, int64_t n) {
    RL_GRID_STRIDE(i, n) store(dx + i, dy[i] * k, acc);
}

__global__ void scale_dev_kernel(const float* x, const float* g, float* dx, bool acc, int64_t n) {
    const float k = g[0];
    RL_GRID_STRIDE(i, n) store(dx + i, x[i] * k, acc);
}

__global__ void fill_rows_kernel(const float* b, float* y, int64_t rows, int64_t cols) {
    RL_GRID_STRIDE(i, rows * cols) y[i] = b[i % cols];
}

__global__ void fill_planes_kernel(const float* b, float* y, int64_t channels, int64_t plane) {
    RL_GRID_STRIDE(i, channels * plane) y[i] = b[i / plane];
}

__global__ void dropout_fwd_kernel(const float* x, float* y, int64_t n, uint64_t key,
                                   uint32_t threshold, float scale) {
    RL_GRID_STRIDE(i, n)
    y[i] = dropout_keeps(key, static_cast<uint64_t>(i), threshold) ? __fmul_rn(x[i], scale) : 0.0f;
}

// The CPU's dropout_grad (engine/cpu/tensor_ops.cpp): accumulating, one fused multiply-add where
// kept; overwriting, __fmul_rn (never contracted).
__device__ __forceinline__ float dropout_grad(bool kept, float dy, float scale, float dx,
                                              bool acc) {
    if (acc) return kept ? fmaf(dy, scale, dx) : dx;
    return kept ? __fmul_rn(dy, scale) : 0.0f;
}

__global__ void dropout_bwd_kernel(const float* dy, float* dx, bool acc, int64_t n, uint64_t key,
                                   uint32_t threshold, float scale) {
    RL_GRID_STRIDE(i, n) {
        const bool kept = dropout_keeps(key, static_cast<uint64_t>(i), threshold);
        dx[i] = dropout_grad(kept, dy[i], scale, acc ? dx[i] : 0.0f, acc);
    }
}

__global__ void dropout_mask_kernel(uint8_t* keep, int64_t n, uint64_t key, uint32_t threshold) {
    RL_GRID_STRIDE(i, n) keep[i] = dropout_keeps(key, static_cast<uint64_t>(i), threshold) ? 1 : 0;
}

__global__ void dropout_masked_fwd_kernel(const float* x, const uint8_t* keep, float* y, int64_t n,
                                          float scale) {
    RL_GRID_STRIDE(i, n) y[i] = keep[i] ? __fmul_rn(x[i], scale) : 0.0f;
}

__global__ void dropout_masked_bwd_kernel(const float* dy, const uint8_t* keep, float* dx, bool acc,
                                          int64_t n, float scale) {
    RL_GRID_STRIDE(i, n) dx[i] = dropout_grad(keep[i] != 0, dy[i], scale, acc ? dx[i] : 0.0f, acc);
}

}  // namespace

void unary_forward(Unary f, const float* x, float* y, int64_t n, cudaStream_t s) {
    if (n == 0) return;
    switch (f) {
        case Unary::Relu:
            launch_fwd<Unary::Relu>(x, y, n, s);
            break;
        case Unary::Gelu:
            launch_fwd<Unary::Gelu>(x, y, n, s);
            break;
        case Unary::Tanh:
            launch_fwd<Unary::Tanh>(x, y, n, s);
            break;
        case Unary::Sigmoid:
            launch_fwd<Unary::Sigmoid>(x, y, n, s);
            break;
        case Unary::Sin:
            launch_fwd<Unary::Sin>(x, y, n, s);
            break;
        case Unary::Cos:
            launch_fwd<Unary::Cos>(x, y, n, s);
            break;
        case Unary::Exp:
            launch_fwd<Unary::Exp>(x, y, n, s);
            break;
        case Unary::Copy:
        case Unary::Times:  // backward-only: a forward of either is a copy
        case Unary::NegTimes:
            launch_fwd<Unary::Copy>(x, y, n, s);
            break;
    }
}

void unary_backward(Unary f, const float* r, const float* dy, float* dx, bool acc, int64_t n,
                    cudaStream_t s) {
    if (n == 0) return;
    switch (f) {
        case Unary::Relu:
            launch_bwd<Unary::Relu>(r, dy, dx, acc, n, s);
            break;
        case Unary::Gelu:
            launch_bwd<Unary::Gelu>(r, dy, dx, acc, n, s);
            break;
        case Unary::Tanh:
            launch_bwd<Unary::Tanh>(r, dy, dx, acc, n, s);
            break;
        case Unary::Sigmoid:
            launch_bwd<Unary::Sigmoid>(r, dy, dx, acc, n, s);
            break;
        case Unary::Sin:
            launch_bwd<Unary::Sin>(r, dy, dx, acc, n, s);
            break;
        case Unary::Cos:
            launch_bwd<Unary::Cos>(r, dy, dx, acc, n, s);
            break;
        case Unary::Exp:
            launch_bwd<Unary::Exp>(r, dy, dx, acc, n, s);
            break;
        case Unary::Copy:
            launch_bwd<Unary::Copy>(r, dy, dx, acc, n, s);
            break;
        case Unary::Times:
            launch_bwd<Unary::Times>(r, dy, dx, acc, n, s);
            break;
        case Unary::NegTimes:
            launch_bwd<Unary::NegTimes>(r, dy, dx, acc, n, s);
            break;
    }
}

void add_forward(const float* a, const float* b, float* y, int64_t n, cudaStream_t s) {
    if (n) add_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, b, y, n);
}

void scale_into(const float* dy, float k, float* dx, bool acc, int64_t n, cudaStream_t s) {
    if (n) scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, k, dx, acc, n);
}

void scale_by_device_scalar(const float* x, const float* g, float* dx, bool acc, int64_t n,
                            cudaStream_t s) {
    if (n) scale_dev_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, g, dx, acc, n);
}

void fill_rows(const float* b, float* y, int64_t rows, int64_t cols, cudaStream_t s) {
    if (rows * cols > 0)
        fill_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(b, y, rows, cols);
}

void fill_planes(const float* b, float* y, int64_t channels, int64_t plane, cudaStream_t s) {
    const int64_t n = channels * plane;
    if (n) fill_planes_kernel<<<blocks_for(n), kThreads, 0, s>>>(b, y, channels, plane);
}

void dropout_forward(const float* x, float* y, int64_t n, uint64_t key, uint32_t threshold,
                     float scale, cudaStream_t s) {
    if (n) dropout_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n, key, threshold, scale);
}

void dropout_backward(const float* dy, float* dx, bool acc, int64_t n, uint64_t key,
                      uint32_t threshold, float scale, cudaStream_t s) {
    if (n)
        dropout_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, dx, acc, n, key, threshold,
                                                              scale);
}

void dropout_mask_forward(uint8_t* keep, int64_t n, uint64_t key, uint32_t threshold,
                          cudaStream_t s) {
    if (n) dropout_mask_kernel<<<blocks_for(n), kThreads, 0, s>>>(keep, n, key, threshold);
}

void dropout_masked_forward(const float* x, const uint8_t* keep, float* y, int64_t n, float scale,
                            cudaStream_t s) {
    if (n) dropout_masked_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, keep, y, n, scale);
}

void dropout_masked_backward(const float* dy, const uint8_t* keep, float* dx, bool acc, int64_t n,
                             float scale, cudaStream_t s) {
    if (n)
        dropout_masked_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, keep, dx, acc, n, scale);
}

}  // namespace rl::cuda
