// embedding, slice and gather.
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

// The i32 indices: the node's input, or attr indices copied into the workspace.
const void* embedding_indices(const Node& n, const void* const* inputs, void* workspace) {
    if (!n.inputs.empty()) return inputs[0];
    if (!n.attrs.has("indices")) return nullptr;
    auto* w = static_cast<int32_t*>(workspace);
    const auto ind = n.attrs.get_ints("indices");
    for (size_t k = 0; k < ind.size(); ++k) w[k] = static_cast<int32_t>(ind[k]);
    return w;
}

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
    const Rows rows = rows_of(l, embedding_indices(c.node, c.inputs, c.workspace));
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
    const Rows rows = rows_of(l, embedding_indices(c.node, c.inputs, c.workspace));
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

// gather: output row k is input row indices[k] (a row being everything past axis 0).
namespace {

struct GatherLayout {
    const std::vector<int64_t>* indices;
    int64_t rows, row;  // input rows (axis 0) and elements per row
};

GatherLayout gather_layout(const Graph& g, const Node& n) {
    const Shape& x = input_shape(g, n, 0);
    const auto* ind = std::get_if<std::vector<int64_t>>(n.attrs.find("indices"));
    if (!ind) throw Error("gather '" + n.name + "' has no attribute indices");
    for (size_t k = 0; k < ind->size(); ++k)  // checked when the graph was built; guards memory
        if ((*ind)[k] < 0 || (*ind)[k] >= x[0])
            throw Error("gather '" + n.name + "': index " + std::to_string((*ind)[k]) +
                        " is out of range for its input's " + std::to_string(x[0]) + " rows");
    return {ind, x[0], x.numel() / x[0]};
}

}  // namespace

void gather_forward(const ForwardCall& c) {
    const GatherLayout l = gather_layout(c.graph, c.node);
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    const auto count = static_cast<int64_t>(l.indices->size());
    parallel_for(count, l.row, [&](int64_t k) {
        std::memcpy(y + k * l.row, x + (*l.indices)[static_cast<size_t>(k)] * l.row,
                    static_cast<size_t>(l.row) * sizeof(float));
    });
}

// dX (cleared unless accumulating) gets dY's rows added in index order, parallel over blocks of
// columns: each element's sum has one order, whatever the thread count.
void gather_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const GatherLayout l = gather_layout(c.graph, c.node);
    const float* dy = c.grad_output;
    const auto count = static_cast<int64_t>(l.indices->size());
    if (!c.accumulate[0]) std::memset(dx, 0, static_cast<size_t>(l.rows * l.row) * sizeof(float));
    constexpr int64_t kCols = 64;
    const int64_t blocks = (l.row + kCols - 1) / kCols;
    parallel_for(blocks, count * kCols, [&](int64_t b) {
        const int64_t j0 = b * kCols, j1 = std::min(l.row, j0 + kCols);
        for (int64_t k = 0; k < count; ++k) {
            float* dst = dx + (*l.indices)[static_cast<size_t>(k)] * l.row;
            const float* src = dy + k * l.row;
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

// Rows of the last axis. Output row o (all axes but the last) reads input row i when each of its
// coordinates minus the axis's begin lies inside the input, else it is all zeros; a read row
// lands at offset begin[last] of its output row.
namespace {

// The input row under output row `o`, or -1 when the row lies in the padding.
int64_t pad_source_row(const PadLayout& l, int64_t o) {
    int64_t in_row = 0, stride = 1;
    for (int a = l.rank - 2; a >= 0; --a) {
        const int64_t c = o % l.out[a] - l.begin[a];
        o /= l.out[a];
        if (c < 0 || c >= l.in[a]) return -1;
        in_row += c * stride;
        stride *= l.in[a];
    }
    return in_row;
}

}  // namespace

void pad_forward(const ForwardCall& c) {
    const PadLayout l = pad_layout(c.graph, c.node);
    const int64_t w_in = l.in[l.rank - 1], w_out = l.out[l.rank - 1], b = l.begin[l.rank - 1];
    const int64_t rows = output_shape(c.graph, c.node).numel() / w_out;
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    parallel_for(rows, w_out, [&](int64_t o) {
        float* dst = y + o * w_out;
        const int64_t i = pad_source_row(l, o);
        if (i < 0) {
            std::memset(dst, 0, static_cast<size_t>(w_out) * sizeof(float));
            return;
        }
        std::memset(dst, 0, static_cast<size_t>(b) * sizeof(float));
        std::memcpy(dst + b, x + i * w_in, static_cast<size_t>(w_in) * sizeof(float));
        std::memset(dst + b + w_in, 0, static_cast<size_t>(w_out - b - w_in) * sizeof(float));
    });
}

// dX (+)= the part of dY over the input: a gather, no sums.
void pad_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const PadLayout l = pad_layout(c.graph, c.node);
    const int64_t w_in = l.in[l.rank - 1], w_out = l.out[l.rank - 1], b = l.begin[l.rank - 1];
    const int64_t rows = output_shape(c.graph, c.node).numel() / w_out;
    const bool acc = c.accumulate[0];
    const float* dy = c.grad_output;
    parallel_for(rows, w_in, [&](int64_t o) {
        const int64_t i = pad_source_row(l, o);
        if (i < 0) return;
        store(ArrMap(dx + i * w_in, w_in), ConstArrMap(dy + o * w_out + b, w_in), acc);
    });
}

}  // namespace rl::cpu
