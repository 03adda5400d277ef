// concat, flatten and dropout: copies and a recomputable mask.
#include <cmath>
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/ops/layout.h"
#include "engine/rng.h"

namespace rl::cpu {
namespace {}  // namespace

void concat_forward(const ForwardCall& c) {
    const ConcatLayout l = concat_layout(c.graph, c.node);
    float* y = as_f32(c.output);
    parallel_for(l.outer, l.row, [&](int64_t o) {
        float* dst = y + o * l.row;
        for (size_t k = 0; k < c.node.inputs.size(); ++k) {
            const int64_t len = l.chunk(c.graph, c.node, k);
            std::memcpy(dst, as_f32(c.inputs[k]) + o * len,
                        static_cast<size_t>(len) * sizeof(float));
            dst += len;
        }
    });
}

// Inputs in index order: a value in two slots gets its second share added after the first.
void concat_backward(const BackwardCall& c) {
    const ConcatLayout l = concat_layout(c.graph, c.node);
    const float* dy = c.grad_output;
    int64_t offset = 0;
    for (size_t k = 0; k < c.node.inputs.size(); ++k) {
        const int64_t len = l.chunk(c.graph, c.node, k);
        if (float* dx = c.grad_inputs[k]) {
            const bool acc = c.accumulate[k];
            parallel_for(l.outer, len, [&](int64_t o) {
                store(ArrMap(dx + o * len, len), ConstArrMap(dy + o * l.row + offset, len), acc);
            });
        }
        offset += len;
    }
}

void flatten_forward(const ForwardCall& c) {
    reshape_forward(c);
}

void flatten_backward(const BackwardCall& c) {
    reshape_backward(c);
}

namespace {

struct DropoutMask {
    uint64_t key;
    uint32_t threshold;
    float scale;
};

DropoutMask dropout_mask(const Graph& g, const Node& n) {
    const double p = n.attrs.get_float("p", 0.5);
    return {dropout_key(g.seed(), n.name), dropout_threshold(p), static_cast<float>(1.0 / (1 - p))};
}

}  // namespace

// The mask is hashed from (graph seed, node name, element index): a recomputation, or the
// backward, draws exactly the same mask without storing it.
void dropout_forward(const ForwardCall& c) {
    const DropoutMask m = dropout_mask(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    if (c.node.inputs.size() == 2) {  // the mask a dropout_mask node drew
        const auto* keep = static_cast<const uint8_t*>(c.inputs[1]);
        for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
            for (int64_t i = s; i < s + n; ++i) {  // x loaded unconditionally: a blend
                const float v = x[i] * m.scale;
                y[i] = keep[i] ? v : 0.0f;
            }
        });
        return;
    }
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        for (int64_t i = s; i < s + n; ++i) {  // x loaded unconditionally: a blend
            const float v = x[i] * m.scale;
            y[i] = dropout_keeps(m.key, static_cast<uint64_t>(i), m.threshold) ? v : 0.0f;
        }
    });
}

// dX = dY·scale where kept, 0 where dropped; accumulating, dX + dY·scale as one fused multiply-add
// where kept (std::fma, and fmaf in the CUDA kernel), dX where dropped. Written out rather than
// left to the compiler: GCC contracts a·b + c in C++ at its default -ffp-contract=fast, and nvcc
// too, each where it chooses, so the two backends' bits would hang on their optimisers.
inline float dropout_grad(bool kept, float dy, float scale, float dx, bool acc) {
    if (acc) return kept ? std::fma(dy, scale, dx) : dx;
    return kept ? dy * scale : 0.0f;
}

void dropout_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const DropoutMask m = dropout_mask(c.graph, c.node);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    if (c.node.inputs.size() == 2) {
        const auto* keep = static_cast<const uint8_t*>(c.inputs[1]);
        for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
            for (int64_t i = s; i < s + n; ++i)
                dx[i] = dropout_grad(keep[i] != 0, dy[i], m.scale, acc ? dx[i] : 0.0f, acc);
        });
        return;
    }
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        for (int64_t i = s; i < s + n; ++i)
            dx[i] = dropout_grad(dropout_keeps(m.key, static_cast<uint64_t>(i), m.threshold), dy[i],
                                 m.scale, acc ? dx[i] : 0.0f, acc);
    });
}

namespace {

// keep[i] for i in [s, s + n), 1 where the hash keeps element i. A function of its own, its key
// and threshold passed by value: written in dropout_mask_forward's lambda, where they and the
// mask's pointer were captures, every store through the uint8_t* (which may alias any object)
// made the compiler reload them, and the loop stayed scalar, at 0.85 ns an element, 9 % of a
// GPT step at seq 1024 (bench_roofline, 2026-12-07; 0.14 ns vectorised).
void draw_mask(uint8_t* keep, int64_t s, int64_t n, uint64_t key, uint32_t threshold) {
    for (int64_t i = s; i < s + n; ++i)
        keep[i] = dropout_keeps(key, static_cast<uint64_t>(i), threshold) ? 1 : 0;
}

}  // namespace

// One byte per element, drawn as dropout draws its own mask (keyed by this node's name).
void dropout_mask_forward(const ForwardCall& c) {
    const DropoutMask m = dropout_mask(c.graph, c.node);
    auto* keep = static_cast<uint8_t*>(c.output);
    for_chunks(output_shape(c.graph, c.node).numel(),
               [&](int64_t s, int64_t n) { draw_mask(keep, s, n, m.key, m.threshold); });
}

void dropout_mask_backward(const BackwardCall&) {}  // its output passes no gradient

}  // namespace rl::cpu
