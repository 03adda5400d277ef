// concat, flatten and dropout: copies and a recomputable mask.
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

#include "engine/cpu/kernels.h"
#include "engine/ops/layout.h"
#include "engine/rng.h"

namespace rl::cpu {
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

// keep[i] for i in [0, n): 1 where the hash keeps element s + i. A function of its own, its key and
// threshold passed by value: written in dropout_mask_forward's lambda, where they and the mask's
// pointer were captures, every store through the uint8_t* (which may alias any object) made the
// compiler reload them, and the loop stayed scalar, at 0.85 ns an element, 9 % of a GPT step at seq
// 1024 (bench_roofline, 2026-12-07; 0.14 ns vectorised). The counter advances by γ an element
// (dropout_keeps_counter): computed as (i + 1)·γ, each element cost a third 64-bit product, three
// vpmuludq on AVX2, where the GPT preset's masks ran at 0.7 ns an element.
void draw_mask(uint8_t* keep, int64_t s, int64_t n, uint64_t key, uint32_t threshold) {
    uint64_t counter = splitmix_counter(key, static_cast<uint64_t>(s));
    for (int64_t i = 0; i < n; ++i, counter += kSplitMixGamma)
        keep[i] = dropout_keeps_counter(counter, threshold) ? 1 : 0;
}

// The masked kernels in the build's widest vectors. Written out: from `keep[i] ? x[i]·scale : 0`
// over a byte mask GCC made a vector blend under AVX-512's mask registers but a scalar loop with a
// branch per element on AVX2 (6.5× slower there: 0.12 against 0.019 ms on the GPT preset's
// [1024, 256] dropouts, bench_roofline, 2026-12-07), the branch mispredicted at random.
#if defined(__AVX512F__)
constexpr int kW = kVec16Lanes;
using VW = V16;
using IW = int32_t __attribute__((vector_size(kW * sizeof(int32_t))));
inline VW fused(VW a, VW b, VW c) {
    return _mm512_fmadd_ps(a, b, c);
}
// Lanes of -1 where keep[i] is not 0, of 0 where it is. The widening by intrinsic: GCC's
// __builtin_convertvector from 16 bytes took each byte apart in general registers (3× slower
// than the scalar loop it replaced).
inline IW kept_lanes(const uint8_t* keep) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(keep));
    return IW(_mm512_cvtepu8_epi32(b)) != 0;
}
#elif defined(__FMA__)
constexpr int kW = kVec8Lanes;
using VW = V8;
using IW = V8i;
inline VW fused(VW a, VW b, VW c) {
    return _mm256_fmadd_ps(a, b, c);
}
inline IW kept_lanes(const uint8_t* keep) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(keep));
    return IW(_mm256_cvtepu8_epi32(b)) != 0;
}
#endif

// y = x·scale where kept, +0 where dropped, over n elements.
void masked_scale(const float* x, const uint8_t* keep, float* y, int64_t n, float scale) {
    int64_t i = 0;
#if defined(__AVX512F__) || defined(__FMA__)
    const VW sv = VW{} + scale;
    for (; i + kW <= n; i += kW) {
        VW v;
        std::memcpy(&v, x + i, sizeof v);
        v = kept_lanes(keep + i) ? v * sv : VW{};
        std::memcpy(y + i, &v, sizeof v);
    }
#endif
    for (; i < n; ++i) {  // x loaded unconditionally: a blend
        const float v = x[i] * scale;
        y[i] = keep[i] ? v : 0.0f;
    }
}

// dX = dY·scale where kept, 0 where dropped; accumulating, dX + dY·scale as one fused multiply-add
// where kept (std::fma, and fmaf in the CUDA kernel), dX where dropped. Written out rather than
// left to the compiler: GCC contracts a·b + c in C++ at its default -ffp-contract=fast, and nvcc
// too, each where it chooses, so the two backends' bits would hang on their optimisers.
inline float dropout_grad(bool kept, float dy, float scale, float dx, bool acc) {
    if (acc) return kept ? std::fma(dy, scale, dx) : dx;
    return kept ? dy * scale : 0.0f;
}

void masked_grad(const float* dy, const uint8_t* keep, float* dx, int64_t n, float scale,
                 bool acc) {
    int64_t i = 0;
#if defined(__AVX512F__) || defined(__FMA__)
    const VW sv = VW{} + scale;
    for (; i + kW <= n; i += kW) {
        VW g, d;
        std::memcpy(&g, dy + i, sizeof g);
        const IW k = kept_lanes(keep + i);
        if (acc) {
            std::memcpy(&d, dx + i, sizeof d);
            d = k ? fused(g, sv, d) : d;
        } else {
            d = k ? g * sv : VW{};
        }
        std::memcpy(dx + i, &d, sizeof d);
    }
#endif
    for (; i < n; ++i) dx[i] = dropout_grad(keep[i] != 0, dy[i], scale, dx[i], acc);
}

// Without a mask node, the mask of [s, s + n) drawn a block at a time into the stack, then
// apply(mask, first element, length) with the same kernels.
template <class F>
void with_drawn_mask(const DropoutMask& m, int64_t s, int64_t n, F&& apply) {
    constexpr int64_t kBlock = 1024;
    alignas(64) uint8_t keep[kBlock];
    for (int64_t b = s; b < s + n; b += kBlock) {
        const int64_t len = std::min(kBlock, s + n - b);
        draw_mask(keep, b, len, m.key, m.threshold);
        apply(keep, b, len);
    }
}

}  // namespace

// The mask is hashed from (graph seed, node name, element index): a recomputation, or the
// backward, draws exactly the same mask without storing it; or a dropout_mask node drew it (the
// second input, one byte an element).
void dropout_forward(const ForwardCall& c) {
    const DropoutMask m = dropout_mask(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const auto* keep =
        c.node.inputs.size() == 2 ? static_cast<const uint8_t*>(c.inputs[1]) : nullptr;
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        if (keep)
            masked_scale(x + s, keep + s, y + s, n, m.scale);
        else
            with_drawn_mask(m, s, n, [&](const uint8_t* k, int64_t b, int64_t len) {
                masked_scale(x + b, k, y + b, len, m.scale);
            });
    });
}

void dropout_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const DropoutMask m = dropout_mask(c.graph, c.node);
    const float* dy = c.grad_output;
    const bool acc = c.accumulate[0];
    const auto* keep =
        c.node.inputs.size() == 2 ? static_cast<const uint8_t*>(c.inputs[1]) : nullptr;
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        if (keep)
            masked_grad(dy + s, keep + s, dx + s, n, m.scale, acc);
        else
            with_drawn_mask(m, s, n, [&](const uint8_t* k, int64_t b, int64_t len) {
                masked_grad(dy + b, k, dx + b, len, m.scale, acc);
            });
    });
}

// One byte per element, drawn as dropout draws its own mask (keyed by this node's name).
void dropout_mask_forward(const ForwardCall& c) {
    const DropoutMask m = dropout_mask(c.graph, c.node);
    auto* keep = static_cast<uint8_t*>(c.output);
    for_chunks(output_shape(c.graph, c.node).numel(),
               [&](int64_t s, int64_t n) { draw_mask(keep + s, s, n, m.key, m.threshold); });
}

void dropout_mask_backward(const BackwardCall&) {}  // its output passes no gradient

}  // namespace rl::cpu
