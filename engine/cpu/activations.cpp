// clip, hard_sigmoid, hard_swish, gelu_tanh (engine/ops/activations.cpp): plain loops over fixed
// chunks (gelu_tanh: Eigen arrays), with PyTorch's formulas and its choices at the kinks.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/cpu/kernels.h"

namespace rl::cpu {
namespace {

// y = f(x) elementwise.
template <class F>
void map_forward(const ForwardCall& c, F&& f) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        for (int64_t i = s; i < s + n; ++i) y[i] = f(x[i]);
    });
}

// dX (+)= g(dY, x) elementwise.
template <class G>
void map_backward(const BackwardCall& c, G&& g) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        if (acc)
            for (int64_t i = s; i < s + n; ++i) dx[i] += g(dy[i], x[i]);
        else
            for (int64_t i = s; i < s + n; ++i) dx[i] = g(dy[i], x[i]);
    });
}

struct ClipRange {
    float lo, hi;
};
ClipRange clip_range(const Node& n) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    return {static_cast<float>(n.attrs.get_float("min", -inf)),
            static_cast<float>(n.attrs.get_float("max", inf))};
}

// min(max(v, lo), hi) with PyTorch's NaN: a NaN stays NaN (torch.clamp, hardtanh, hardsigmoid,
// hardswish all propagate it). Written as selects, GCC vectorises it (maxps/minps with the operands
// in the order that passes a NaN through); std::fmin/fmax clamp a NaN to a bound and are libm
// calls per element, which ran clip and hardswish's forward at 4–9 % of their memory roofline
// (bench_roofline, 2026-12-03).
inline float clamp_nan(float v, float lo, float hi) {
    v = v < lo ? lo : v;
    return v > hi ? hi : v;
}

constexpr float kSqrt2OverPi = 0.79788456080286535588f;  // √(2/π)
constexpr float kKappa = 0.044715f;

}  // namespace

void clip_forward(const ForwardCall& c) {
    const ClipRange r = clip_range(c.node);
    map_forward(c, [r](float x) { return clamp_nan(x, r.lo, r.hi); });
}

// Strictly inside the range, as PyTorch's hardtanh (ReLU6) backward: 0 at the bounds.
void clip_backward(const BackwardCall& c) {
    const ClipRange r = clip_range(c.node);
    map_backward(c, [r](float dy, float x) { return x > r.lo && x < r.hi ? dy : 0.0f; });
}

void hard_sigmoid_forward(const ForwardCall& c) {
    const auto a = static_cast<float>(c.node.attrs.get_float("alpha", 1.0 / 6));
    const auto b = static_cast<float>(c.node.attrs.get_float("beta", 0.5));
    map_forward(c, [a, b](float x) { return clamp_nan(a * x + b, 0.0f, 1.0f); });
}

void hard_sigmoid_backward(const BackwardCall& c) {
    const auto a = static_cast<float>(c.node.attrs.get_float("alpha", 1.0 / 6));
    const auto b = static_cast<float>(c.node.attrs.get_float("beta", 0.5));
    map_backward(c, [a, b](float dy, float x) {
        const float v = a * x + b;
        return v > 0.0f && v < 1.0f ? dy * a : 0.0f;
    });
}

void hard_swish_forward(const ForwardCall& c) {
    map_forward(c, [](float x) { return x * clamp_nan(x + 3.0f, 0.0f, 6.0f) / 6.0f; });
}

// PyTorch's hardswish_backward: 0 below -3, dY·(x/3 + ½) up to 3, dY above.
void hard_swish_backward(const BackwardCall& c) {
    map_backward(c, [](float dy, float x) {
        if (x < -3.0f) return 0.0f;
        if (x <= 3.0f) return dy * (x / 3.0f + 0.5f);
        return dy;
    });
}

// tanh-GELU in Eigen's vectorised tanh, in blocks of 256 floats on the stack (the backward needs
// tanh twice): libm's scalar tanhf made these two ops 73 % of gpt2_tiny's step at 1–2 % of their
// roofline (bench_roofline, docs/onnx.md).
constexpr int64_t kGeluBlock = 256;

void gelu_tanh_forward(const ForwardCall& c) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        ConstArrMap xs(x + s, n);
        ArrMap(y + s, n) = 0.5f * xs * (1.0f + (kSqrt2OverPi * (xs + kKappa * xs.cube())).tanh());
    });
}

void gelu_tanh_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const float* x = as_f32(c.inputs[0]);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        alignas(64) float tb[kGeluBlock];
        for (int64_t b = s; b < s + n; b += kGeluBlock) {
            const int64_t m = std::min(kGeluBlock, s + n - b);
            ConstArrMap xs(x + b, m), g(dy + b, m);
            ArrMap t(tb, m);
            t = (kSqrt2OverPi * (xs + kKappa * xs.cube())).tanh();
            const auto d_inner = kSqrt2OverPi * (1.0f + 3.0f * kKappa * xs.square());
            const auto grad = g * (0.5f * (1.0f + t) + 0.5f * xs * (1.0f - t.square()) * d_inner);
            store(ArrMap(dx + b, m), grad, acc);
        }
    });
}

}  // namespace rl::cpu
