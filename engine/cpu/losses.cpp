// The losses: sum_squares and cross_entropy.
#include <algorithm>
#include <cmath>

#include "engine/cpu/kernels.h"
#include "engine/errors.h"

namespace rl::cpu {

void sum_squares_forward(const ForwardCall& c) {
    const int64_t n = input_shape(c.graph, c.node, 0).numel();
    // One thread, in double: the loss is a single number that must not depend on the thread
    // count. Eight partial sums (dot_double), not Eigen's cast-and-sum, which its packets do not
    // cover (float to double) and which ran at 0.09 of the memory roofline on U-Net's output map
    // (bench_roofline, 2026-12-07).
    const float* x = as_f32(c.inputs[0]);
    const double s = dot_double(x, x, n);
    *as_f32(c.output) = static_cast<float>(0.5 * s);
}

void sum_squares_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const float* x = as_f32(c.inputs[0]);
    const float g = c.grad_output[0];
    const bool acc = c.accumulate[0];
    for_chunks(input_shape(c.graph, c.node, 0).numel(), [&](int64_t s, int64_t n) {
        store(ArrMap(dx + s, n), ConstArrMap(x + s, n) * g, acc);
    });
}

namespace {

struct Logits {
    int64_t rows, classes;
};

Logits logits_dims(const Graph& g, const Node& n) {
    const Shape& s = input_shape(g, n, 0);
    return {s[0], s[1]};
}

}  // namespace

void cross_entropy_forward(const ForwardCall& c) {
    const Logits d = logits_dims(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    const auto* labels = static_cast<const int32_t*>(c.inputs[1]);
    // Labels are user data: refuse a bad one here, before any parallel region.
    for (int64_t r = 0; r < d.rows; ++r)
        if (labels[r] < 0 || labels[r] >= d.classes)
            throw Error("cross_entropy '" + c.node.name + "': row " + std::to_string(r) +
                        " has label " + std::to_string(labels[r]) + ", outside [0, " +
                        std::to_string(d.classes) +
                        "); labels must be class indices below the number of logit columns");
    auto* row_loss = static_cast<float*>(c.workspace);  // [rows]
    parallel_for(d.rows, d.classes, [&](int64_t r) {
        const float* xr = x + r * d.classes;
        const float m = max_of_row(xr, d.classes);
        const float log_sum = m + std::log(exp_shifted_sum(xr, nullptr, d.classes, m));
        row_loss[r] = log_sum - xr[labels[r]];
    });
    double total = 0;
    for (int64_t r = 0; r < d.rows; ++r) total += row_loss[r];
    *as_f32(c.output) = static_cast<float>(total / static_cast<double>(d.rows));
}

// dlogits = (softmax(logits) - onehot(label)) · dL / N: exp(x - max) into dX and scaled there,
// one exp an element (through a block on the stack, exp'd again, where dX accumulates). Eigen's
// `(x - m).exp()` taken twice, for the sum and for dX, ran the backward at 0.22 of its memory
// roofline (bench_roofline, transformer preset, 2026-12-07).
void cross_entropy_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Logits d = logits_dims(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    const auto* labels = static_cast<const int32_t*>(c.inputs[1]);
    const float scale = c.grad_output[0] / static_cast<float>(d.rows);
    const bool acc = c.accumulate[0];
    parallel_for(d.rows, d.classes, [&](int64_t r) {
        const float* xr = x + r * d.classes;
        float* dxr = dx + r * d.classes;
        const float m = max_of_row(xr, d.classes);
        if (!acc) {
            scale_row(dxr, d.classes, scale / exp_shifted_sum(xr, dxr, d.classes, m));
        } else {
            const float s = scale / exp_shifted_sum(xr, nullptr, d.classes, m);
            constexpr int64_t kBlock = 256;
            alignas(64) float e[kBlock];
            for (int64_t j = 0; j < d.classes; j += kBlock) {
                const int64_t n = std::min(kBlock, d.classes - j);
                exp_shifted_sum(xr + j, e, n, m);
                ArrMap(dxr + j, n) += ConstArrMap(e, n) * s;
            }
        }
        dxr[labels[r]] -= scale;
    });
}

}  // namespace rl::cpu
