// Broadcasting binary ops, reduce_mean and the hard / tanh activations on the GPU, with the CPU
// kernels' formulas (engine/cpu/binary.cpp, engine/cpu/activations.cpp). A repeated operand's
// gradient and reduce_mean's forward are gathers: one thread per element of the smaller tensor
// sums its repeats in row-major order (BroadcastPlan::for_each_repeat), in double; no atomics, so
// the result is the same bits on every run (the CPU's four interleaved partial sums round
// differently: the two backends agree to rounding, not bitwise).
#include "engine/cuda/common.cuh"

namespace rl::cuda {
namespace {

__device__ __forceinline__ float operand_at(const BinaryOperand& o, int64_t off) {
    return o.data ? o.data[off] : o.scalar;
}

__device__ __forceinline__ float apply_binary(BinaryOp op, float a, float b) {
    switch (op) {
        case BinaryOp::Add:
            return a + b;
        case BinaryOp::Sub:
            return a - b;
        case BinaryOp::Mul:
            return a * b;
        case BinaryOp::Div:
            break;
    }
    return a / b;
}

__device__ __forceinline__ float partial(BinaryOp op, int k, float dy, float a, float b) {
    switch (op) {
        case BinaryOp::Add:
            return dy;
        case BinaryOp::Sub:
            return k == 0 ? dy : -dy;
        case BinaryOp::Mul:
            return k == 0 ? dy * b : dy * a;
        case BinaryOp::Div:
            break;
    }
    return k == 0 ? dy / b : -dy * a / (b * b);
}

__global__ void binary_fwd_kernel(BinaryOp op, BroadcastPlan p, BinaryOperand a, BinaryOperand b,
                                  float* y, int64_t n) {
    RL_GRID_STRIDE(j, n) {
        int64_t off[3];
        p.offsets(j, off);
        y[j] = apply_binary(op, operand_at(a, off[1]), operand_at(b, off[2]));
    }
}

// Operand k has the output's size: one gradient element per output element.
__global__ void binary_bwd_full_kernel(BinaryOp op, int k, BroadcastPlan p, BinaryOperand a,
                                       BinaryOperand b, const float* dy, float* dst, bool acc,
                                       int64_t n) {
    RL_GRID_STRIDE(j, n) {
        int64_t off[3];
        p.offsets(j, off);
        store(dst + j, partial(op, k, dy[j], operand_at(a, off[1]), operand_at(b, off[2])), acc);
    }
}

__global__ void binary_bwd_reduce_kernel(BinaryOp op, int k, BroadcastPlan p, BinaryOperand a,
                                         BinaryOperand b, const float* dy, float* dst, bool acc,
                                         int64_t n) {
    RL_GRID_STRIDE(i, n) {
        double s = 0;
        p.for_each_repeat(k + 1, i, [&](int64_t j, int64_t ia, int64_t ib) {
            s += partial(op, k, dy[j], operand_at(a, ia), operand_at(b, ib));
        });
        store(dst + i, static_cast<float>(s), acc);
    }
}

__global__ void reduce_mean_fwd_kernel(BroadcastPlan p, const float* x, float* y, int64_t n) {
    const double count = static_cast<double>(p.repeats(1));
    RL_GRID_STRIDE(i, n) {
        double s = 0;
        p.for_each_repeat(1, i, [&](int64_t j, int64_t, int64_t) { s += x[j]; });
        y[i] = static_cast<float>(s / count);
    }
}

__global__ void reduce_mean_bwd_kernel(BroadcastPlan p, const float* dy, float* dx, bool acc,
                                       int64_t n) {
    const auto count = static_cast<float>(p.repeats(1));
    RL_GRID_STRIDE(j, n) {
        int64_t off[3];
        p.offsets(j, off);
        store(dx + j, dy[off[1]] / count, acc);
    }
}

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kKappa = 0.044715f;

// min(max(v, lo), hi) that keeps a NaN, as PyTorch and the CPU kernels (engine/cpu/activations.cpp).
__device__ __forceinline__ float clamp_nan(float v, float lo, float hi) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

__device__ __forceinline__ float activation(const Activation& f, float x) {
    switch (f.kind) {
        case Activation::Kind::Clip:
            return clamp_nan(x, f.a, f.b);
        case Activation::Kind::HardSigmoid:
            return clamp_nan(f.a * x + f.b, 0.0f, 1.0f);
        case Activation::Kind::HardSwish:
            return x * clamp_nan(x + 3.0f, 0.0f, 6.0f) / 6.0f;
        case Activation::Kind::GeluTanh:
            break;
    }
    return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kKappa * x * x * x)));
}

__device__ __forceinline__ float activation_grad(const Activation& f, float dy, float x) {
    switch (f.kind) {
        case Activation::Kind::Clip:
            return x > f.a && x < f.b ? dy : 0.0f;
        case Activation::Kind::HardSigmoid: {
            const float v = f.a * x + f.b;
            return v > 0.0f && v < 1.0f ? dy * f.a : 0.0f;
        }
        case Activation::Kind::HardSwish:
            if (x < -3.0f) return 0.0f;
            if (x <= 3.0f) return dy * (x / 3.0f + 0.5f);
            return dy;
        case Activation::Kind::GeluTanh:
            break;
    }
    const float x2 = x * x;
    const float t = tanhf(kSqrt2OverPi * (x + kKappa * x2 * x));
    const float d_inner = kSqrt2OverPi * (1.0f + 3.0f * kKappa * x2);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner);
}

__global__ void activation_fwd_kernel(Activation f, const float* x, float* y, int64_t n) {
    RL_GRID_STRIDE(i, n) y[i] = activation(f, x[i]);
}

__global__ void activation_bwd_kernel(Activation f, const float* x, const float* dy, float* dx,
                                      bool acc, int64_t n) {
    RL_GRID_STRIDE(i, n) store(dx + i, activation_grad(f, dy[i], x[i]), acc);
}

}  // namespace

void binary_forward(BinaryOp op, const BroadcastPlan& p, BinaryOperand a, BinaryOperand b, float* y,
                    cudaStream_t s) {
    const int64_t n = p.numel();
    if (n) binary_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, p, a, b, y, n);
}

void binary_backward(BinaryOp op, int k, const BroadcastPlan& p, BinaryOperand a, BinaryOperand b,
                     const float* dy, float* dst, bool acc, cudaStream_t s) {
    const int64_t n = p.operand_numel(k + 1);
    if (!n) return;
    if (n == p.numel())
        binary_bwd_full_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, k, p, a, b, dy, dst, acc, n);
    else
        binary_bwd_reduce_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, k, p, a, b, dy, dst, acc,
                                                                    n);
}

void reduce_mean_forward(const BroadcastPlan& p, const float* x, float* y, cudaStream_t s) {
    const int64_t n = p.operand_numel(1);
    if (n && p.numel()) reduce_mean_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, x, y, n);
}

void reduce_mean_backward(const BroadcastPlan& p, const float* dy, float* dx, bool acc,
                          cudaStream_t s) {
    const int64_t n = p.numel();
    if (n) reduce_mean_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, dy, dx, acc, n);
}

void activation_forward(const Activation& f, const float* x, float* y, int64_t n, cudaStream_t s) {
    if (n) activation_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(f, x, y, n);
}

void activation_backward(const Activation& f, const float* x, const float* dy, float* dx, bool acc,
                         int64_t n, cudaStream_t s) {
    if (n) activation_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(f, x, dy, dx, acc, n);
}

}  // namespace rl::cuda
