// embedding and slice.
#include <cstring>
#include <limits>

#include "engine/cpu/kernels.h"
#include "engine/errors.h"
#include "engine/ops/layout.h"

namespace rl::cpu {
namespace {

// Lookup k's row: the i32 input's index, or first + (k mod period).
struct Rows {
    const int32_t* idx;
    int64_t first, period;
    int64_t operator()(int64_t k) const { return idx ? idx[k] : first + k % period; }
};

Rows rows_of(const EmbeddingLayout& l, const void* indices) {
    return {l.first >= 0 ? nullptr : static_cast<const int32_t*>(indices), l.first, l.period};
}

// Indices are checked against the table before a run (RunData::seeded); this guards the memory
// all the same, as a clear error rather than a read out of bounds.
void check_row(const EmbeddingLayout& l, const Node& n, int64_t k, int64_t r) {
    if (r < 0 || r >= l.rows)
        throw Error("embedding '" + n.name + "': index " + std::to_string(r) + " at position " +
                    std::to_string(k) + " is out of range for its table of " +
                    std::to_string(l.rows) + " rows");
}

}  // namespace

void embedding_forward(const ForwardCall& c) {
    const EmbeddingLayout l = embedding_layout(c.graph, c.node);
    const Rows rows = rows_of(l, c.node.inputs.empty() ? nullptr : c.inputs[0]);
    for (int64_t k = 0; k < l.count; ++k) check_row(l, c.node, k, rows(k));
    const float* w = c.params[0];
    float* y = as_f32(c.output);
    parallel_for(l.count, l.dim, [&](int64_t k) {
        std::memcpy(y + k * l.dim, w + rows(k) * l.dim, static_cast<size_t>(l.dim) * sizeof(float));
    });
}

// dW = 0, then dW[row(k)] += dY[k] for k in order. Threads split the columns, so every element
// of dW sums its contributions in lookup order whatever the thread count.
void embedding_backward(const BackwardCall& c) {
    const EmbeddingLayout l = embedding_layout(c.graph, c.node);
    const Rows rows = rows_of(l, c.node.inputs.empty() ? nullptr : c.inputs[0]);
    float* dw = c.grad_params[0];
    const float* dy = c.grad_output;
    std::memset(dw, 0, static_cast<size_t>(l.rows * l.dim) * sizeof(float));
    constexpr int64_t kCols = 64;
    const int64_t blocks = (l.dim + kCols - 1) / kCols;
    parallel_for(blocks, l.count * kCols, [&](int64_t b) {
        const int64_t j0 = b * kCols, j1 = std::min(l.dim, j0 + kCols);
        for (int64_t k = 0; k < l.count; ++k) {
            float* dst = dw + rows(k) * l.dim;
            const float* src = dy + k * l.dim;
            for (int64_t j = j0; j < j1; ++j) dst[j] += src[j];
        }
    });
}

void slice_forward(const ForwardCall& c) {
    const SliceLayout l = slice_layout(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    parallel_for(l.outer, l.len, [&](int64_t o) {
        std::memcpy(y + o * l.len, x + o * l.row + l.offset,
                    static_cast<size_t>(l.len) * sizeof(float));
    });
}

// dX = 0 outside the range and dY inside it (or dX += dY inside it, when accumulating).
void slice_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const SliceLayout l = slice_layout(c.graph, c.node);
    const bool acc = c.accumulate[0];
    const float* dy = c.grad_output;
    parallel_for(l.outer, l.row, [&](int64_t o) {
        float* row = dx + o * l.row;
        if (!acc) std::memset(row, 0, static_cast<size_t>(l.row) * sizeof(float));
        store(ArrMap(row + l.offset, l.len), ConstArrMap(dy + o * l.len, l.len), true);
    });
}

// Rows × columns planes of the last two axes; element (r, c) is masked when c > r.
void causal_mask_forward(const ForwardCall& c) {
    const Shape& s = output_shape(c.graph, c.node);
    const int64_t rows = s[-2], cols = s[-1], planes = s.numel() / (rows * cols);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const float inf = std::numeric_limits<float>::infinity();
    parallel_for(planes * rows, cols, [&](int64_t pr) {
        const int64_t r = pr % rows;
        const float* src = x + pr * cols;
        float* dst = y + pr * cols;
        for (int64_t j = 0; j < cols; ++j) dst[j] = j > r ? -inf : src[j];
    });
}

void causal_mask_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const Shape& s = output_shape(c.graph, c.node);
    const int64_t rows = s[-2], cols = s[-1], planes = s.numel() / (rows * cols);
    const bool acc = c.accumulate[0];
    const float* dy = c.grad_output;
    parallel_for(planes * rows, cols, [&](int64_t pr) {
        const int64_t r = pr % rows;
        for (int64_t j = 0; j < cols; ++j) {
            const float g = j > r ? 0.0f : dy[pr * cols + j];
            dx[pr * cols + j] = acc ? dx[pr * cols + j] + g : g;
        }
    });
}

}  // namespace rl::cpu
