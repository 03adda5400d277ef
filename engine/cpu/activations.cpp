// clip, hard_sigmoid, hard_swish, gelu_tanh (engine/ops/activations.cpp): plain loops over fixed
// chunks, with PyTorch's formulas and its choices at the kinks.
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

constexpr float kSqrt2OverPi = 0.79788456080286535588f;  // √(2/π)
constexpr float kKappa = 0.044715f;

}  // namespace

void clip_forward(const ForwardCall& c) {
    const ClipRange r = clip_range(c.node);
    map_forward(c, [r](float x) { return std::fmin(std::fmax(x, r.lo), r.hi); });
}

// Strictly inside the range, as PyTorch's hardtanh (ReLU6) backward: 0 at the bounds.
void clip_backward(const BackwardCall& c) {
    const ClipRange r = clip_range(c.node);
    map_backward(c, [r](float dy, float x) { return x > r.lo && x < r.hi ? dy : 0.0f; });
}

void hard_sigmoid_forward(const ForwardCall& c) {
    const auto a = static_cast<float>(c.node.attrs.get_float("alpha", 1.0 / 6));
    const auto b = static_cast<float>(c.node.attrs.get_float("beta", 0.5));
    map_forward(c, [a, b](float x) { return std::fmin(std::fmax(a * x + b, 0.0f), 1.0f); });
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
    map_forward(c, [](float x) { return x * std::fmin(std::fmax(x + 3.0f, 0.0f), 6.0f) / 6.0f; });
}

// PyTorch's hardswish_backward: 0 below -3, dY·(x/3 + ½) up to 3, dY above.
void hard_swish_backward(const BackwardCall& c) {
    map_backward(c, [](float dy, float x) {
        if (x < -3.0f) return 0.0f;
        if (x <= 3.0f) return dy * (x / 3.0f + 0.5f);
        return dy;
    });
}

void gelu_tanh_forward(const ForwardCall& c) {
    map_forward(c, [](float x) {
        const float inner = kSqrt2OverPi * (x + kKappa * x * x * x);
        return 0.5f * x * (1.0f + std::tanh(inner));
    });
}

void gelu_tanh_backward(const BackwardCall& c) {
    map_backward(c, [](float dy, float x) {
        const float x2 = x * x;
        const float t = std::tanh(kSqrt2OverPi * (x + kKappa * x2 * x));
        const float d_inner = kSqrt2OverPi * (1.0f + 3.0f * kKappa * x2);
        return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * d_inner);
    });
}

}  // namespace rl::cpu
