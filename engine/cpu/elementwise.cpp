// The pointwise activations, over fixed chunks split across threads (add, sub, mul, div:
// binary.cpp).
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <cmath>

#include "engine/cpu/kernels.h"
#include "engine/cpu/packet_exp.h"

namespace rl::cpu {
namespace {

int64_t numel_out(const ForwardCall& c) {
    return output_shape(c.graph, c.node).numel();
}
int64_t numel_out(const BackwardCall& c) {
    return output_shape(c.graph, c.node).numel();
}

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

// Applies dX (+)= f(dY, residual) chunk by chunk; f receives Eigen array maps.
template <class F>
void unary_backward(const BackwardCall& c, const float* residual, F&& f) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const bool acc = c.accumulate[0];
    for_chunks(numel_out(c), [&](int64_t b, int64_t n) {
        store(ArrMap(dx + b, n), f(ConstArrMap(c.grad_output + b, n), ConstArrMap(residual + b, n)),
              acc);
    });
}

}  // namespace

void relu_forward(const ForwardCall& c) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(numel_out(c),
               [&](int64_t s, int64_t n) { ArrMap(y + s, n) = ConstArrMap(x + s, n).max(0.0f); });
}

void relu_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const float* y = as_f32(c.output);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    for_chunks(numel_out(c), [&](int64_t s, int64_t n) {
        // dY is loaded whatever the sign: written `y > 0 ? dy[i] : 0`, the load is conditional,
        // GCC keeps a branch per element (taken half the time on random signs) and the loop ran
        // at 2.4 GB/s against the forward's 70 (bench_roofline). Loaded first, it becomes a
        // vector blend. A select, not dy·(y > 0): an infinite or NaN dY stays out where y ≤ 0,
        // as in PyTorch's threshold_backward.
        if (acc)
            for (int64_t i = s; i < s + n; ++i) {
                const float g = dy[i];
                dx[i] += y[i] > 0.0f ? g : 0.0f;
            }
        else
            for (int64_t i = s; i < s + n; ++i) {
                const float g = dy[i];
                dx[i] = y[i] > 0.0f ? g : 0.0f;
            }
    });
}

void gelu_forward(const ForwardCall& c) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(numel_out(c), [&](int64_t s, int64_t n) {
        ConstArrMap xs(x + s, n);
        ArrMap(y + s, n) = xs * 0.5f * (1.0f + (xs * kInvSqrt2).erf());
    });
}

// dX = dY·(Φ(x) + x·φ(x)): Φ by Eigen's erf (the forward's), φ(x) = exp(-x²/2)/√(2π) by the
// lean exp of packet_exp.h, whose argument is never positive. With Eigen's exp it ran at 0.43
// of its memory roofline on AVX2 (bench_roofline, transformer preset, 2026-12-07), bound by the
// arithmetic of its two transcendental functions. A chunk's last partial packet goes through a
// zero-padded packet, so every element takes the same arithmetic wherever it lies.
#if defined(EIGEN_VECTORIZE_AVX)
void gelu_backward(const BackwardCall& c) {
    namespace ei = Eigen::internal;
    using packet_exp::Packet;
    constexpr int64_t L = packet_exp::kLanes;
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    const auto grad = [](const Packet& xv, const Packet& g) {
        const Packet cdf = ei::pmul(
            ei::pset1<Packet>(0.5f),
            ei::padd(ei::pset1<Packet>(1.0f),
                     ei::generic_fast_erf_float(ei::pmul(xv, ei::pset1<Packet>(kInvSqrt2)))));
        const Packet pdf =
            ei::pmul(packet_exp::exp_or_zero(ei::pmul(ei::pset1<Packet>(-0.5f), ei::pmul(xv, xv))),
                     ei::pset1<Packet>(kInvSqrt2Pi));
        return ei::pmul(g, ei::padd(cdf, ei::pmul(xv, pdf)));
    };
    for_chunks(numel_out(c), [&](int64_t s, int64_t n) {
        const int64_t body = s + (n - n % L);
        for (int64_t i = s; i < body; i += L) {
            Packet v = grad(ei::ploadu<Packet>(x + i), ei::ploadu<Packet>(dy + i));
            if (acc) v = ei::padd(ei::ploadu<Packet>(dx + i), v);
            ei::pstoreu(dx + i, v);
        }
        if (body < s + n) {
            const int64_t t = s + n - body;
            alignas(64) float xb[L] = {}, gb[L] = {}, out[L];
            std::copy(x + body, x + body + t, xb);
            std::copy(dy + body, dy + body + t, gb);
            ei::pstore(out, grad(ei::pload<Packet>(xb), ei::pload<Packet>(gb)));
            for (int64_t k = 0; k < t; ++k) dx[body + k] = acc ? dx[body + k] + out[k] : out[k];
        }
    });
}
#else
void gelu_backward(const BackwardCall& c) {
    unary_backward(c, as_f32(c.inputs[0]), [](const auto& dy, const auto& x) {
        return dy * (0.5f * (1.0f + (x * kInvSqrt2).erf()) +
                     x * (-0.5f * x.square()).exp() * kInvSqrt2Pi);
    });
}
#endif

void tanh_forward(const ForwardCall& c) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(numel_out(c),
               [&](int64_t s, int64_t n) { ArrMap(y + s, n) = ConstArrMap(x + s, n).tanh(); });
}

void tanh_backward(const BackwardCall& c) {
    unary_backward(c, as_f32(c.output),
                   [](const auto& dy, const auto& y) { return dy * (1.0f - y.square()); });
}

void sigmoid_forward(const ForwardCall& c) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(numel_out(c), [&](int64_t s, int64_t n) {
        ArrMap(y + s, n) = (1.0f + (-ConstArrMap(x + s, n)).exp()).inverse();
    });
}

void sigmoid_backward(const BackwardCall& c) {
    unary_backward(c, as_f32(c.output),
                   [](const auto& dy, const auto& y) { return dy * y * (1.0f - y); });
}

void exp_forward(const ForwardCall& c) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(numel_out(c),
               [&](int64_t s, int64_t n) { ArrMap(y + s, n) = ConstArrMap(x + s, n).exp(); });
}

void exp_backward(const BackwardCall& c) {
    unary_backward(c, as_f32(c.output), [](const auto& dy, const auto& y) { return dy * y; });
}

// sin and cos as plain std:: loops: Eigen's AVX-512 sin/cos packets trip a false GCC 12
// -Wuninitialized inside <avx512fintrin.h>, and these ops are not on any hot path.
template <class F>
void pointwise_forward(const ForwardCall& c, F&& f) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(numel_out(c), [&](int64_t s, int64_t n) {
        for (int64_t i = s; i < s + n; ++i) y[i] = f(x[i]);
    });
}

// dX (+)= dY · f'(x), with f' computed from the input.
template <class D>
void pointwise_backward(const BackwardCall& c, D&& derivative) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    for_chunks(numel_out(c), [&](int64_t s, int64_t n) {
        if (acc)
            for (int64_t i = s; i < s + n; ++i) dx[i] += dy[i] * derivative(x[i]);
        else
            for (int64_t i = s; i < s + n; ++i) dx[i] = dy[i] * derivative(x[i]);
    });
}

void sin_forward(const ForwardCall& c) {
    pointwise_forward(c, [](float x) { return std::sin(x); });
}

// dX (+)= dY · sign · d, with d the derivative input (input 1) computed in the forward.
void derivative_backward(const BackwardCall& c, float sign) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const float* d = as_f32(c.inputs[1]);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    for_chunks(numel_out(c), [&](int64_t s, int64_t n) {
        if (acc)
            for (int64_t i = s; i < s + n; ++i) dx[i] += dy[i] * (sign * d[i]);
        else
            for (int64_t i = s; i < s + n; ++i) dx[i] = dy[i] * (sign * d[i]);
    });
}

void sin_backward(const BackwardCall& c) {
    if (c.node.inputs.size() == 2) return derivative_backward(c, 1.0f);
    pointwise_backward(c, [](float x) { return std::cos(x); });
}

void cos_forward(const ForwardCall& c) {
    pointwise_forward(c, [](float x) { return std::cos(x); });
}

void cos_backward(const BackwardCall& c) {
    if (c.node.inputs.size() == 2) return derivative_backward(c, -1.0f);
    pointwise_backward(c, [](float x) { return -std::sin(x); });
}

}  // namespace rl::cpu
