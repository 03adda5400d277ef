// The losses: sum_squares and cross_entropy.
#include <cmath>

#include "engine/cpu/kernels.h"
#include "engine/errors.h"

namespace rl::cpu {

void sum_squares_forward(const ForwardCall& c) {
    const int64_t n = input_shape(c.graph, c.node, 0).numel();
    // One thread, in double: the loss is a single number that must not depend on the thread
    // count.
    const double s = ConstArrMap(as_f32(c.inputs[0]), n).cast<double>().square().sum();
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
        ConstArrMap xr(x + r * d.classes, d.classes);
        const float m = xr.maxCoeff();
        const float log_sum = m + std::log((xr - m).exp().sum());
        row_loss[r] = log_sum - xr[labels[r]];
    });
    double total = 0;
    for (int64_t r = 0; r < d.rows; ++r) total += row_loss[r];
    *as_f32(c.output) = static_cast<float>(total / static_cast<double>(d.rows));
}

// dlogits = (softmax(logits) - onehot(label)) · dL / N.
void cross_entropy_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Logits d = logits_dims(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    const auto* labels = static_cast<const int32_t*>(c.inputs[1]);
    const float scale = c.grad_output[0] / static_cast<float>(d.rows);
    const bool acc = c.accumulate[0];
    parallel_for(d.rows, d.classes, [&](int64_t r) {
        ConstArrMap xr(x + r * d.classes, d.classes);
        ArrMap dxr(dx + r * d.classes, d.classes);
        const float m = xr.maxCoeff();
        const float sum = (xr - m).exp().sum();
        store(dxr, (xr - m).exp() * (scale / sum), acc);
        dxr[labels[r]] -= scale;
    });
}

}  // namespace rl::cpu
