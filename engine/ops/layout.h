#pragma once
// Memory layouts of ops that move data, shared by every backend's kernels (as window.h is for
// the sliding-window ops).
#include <cstdint>

#include "engine/graph.h"

namespace rl {

// concat along `axis`, seen as [outer, chunk(i)] per input and [outer, row] for the output:
// input i's elements are the slices [offset(i), offset(i) + chunk(i)) of every output row.
struct ConcatLayout {
    int64_t axis = 0, outer = 1, inner = 1, row = 0;
    int64_t chunk(const Graph& g, const Node& n, size_t input) const {
        return g.value(n.inputs[input]).shape[static_cast<int>(axis)] * inner;
    }
};

ConcatLayout concat_layout(const Graph& g, const Node& n);

// slice along `axis`, the input seen as [outer, row] and the output as [outer, len]: output row o
// is input row o's elements [offset, offset + len).
// pad: the input's and the output's dims and each axis's leading zeros (rank ≤ kMaxPadRank).
constexpr int kMaxPadRank = 8;
struct PadLayout {
    int rank = 0;
    int64_t in[kMaxPadRank] = {}, out[kMaxPadRank] = {}, begin[kMaxPadRank] = {};
};
PadLayout pad_layout(const Graph& g, const Node& n);

struct SliceLayout {
    int64_t outer = 1, inner = 1, row = 0, offset = 0, len = 0;
};
SliceLayout slice_layout(const Graph& g, const Node& n);

// embedding: `count` lookups of rows of `dim` floats in a [rows, dim] table; the indices are the
// i32 input, or, when `first` >= 0 (no input), first + (k mod period) for lookup k.
// first = -1: the rows come from i32 indices (an input, or attr indices copied to the
// workspace); else row(k) = first + k mod period.
struct EmbeddingLayout {
    int64_t rows = 0, dim = 0, count = 0, first = -1, period = 0;
};
EmbeddingLayout embedding_layout(const Graph& g, const Node& n);

}  // namespace rl

// --- broadcasting binary ops and reduce_mean (ops/binary.cpp, ops/reduce.cpp) -----------------
#include "engine/ops/broadcast.h"

namespace rl {

// Where the two operands of add / sub / mul / div come from: node inputs, the node's parameter
// (attr param_shape), a scalar (attr scalar) or a constant tensor (attrs constant_shape and
// constant_bits: the float32 values' bit patterns, row-major; no gradient, e.g. Swin's
// shifted-window attention mask). Two inputs: operands 0 and 1 are inputs 0 and 1; one input: it
// is operand 0, the other operand 1, swapped when reversed=1.
struct BinaryForm {
    enum class Source : uint8_t { Input, Param, Scalar, Constant };
    Source source[2] = {Source::Input, Source::Input};
    int input[2] = {0, 1};  // the node input slot of an Input operand
    float scalar = 0;
};
BinaryForm binary_form(const Node& n);
// A constant operand's values into `dst` (constant_shape's element count of them): what the
// kernels do in the declared workspace before reading it.
void binary_constant_values(const Node& n, float* dst);

// Numpy's broadcast of two shapes; throws rl::Error naming both when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// The plan over `full` of operands a and b, each broadcastable to it (rank ≤ kMaxBroadcastRank).
BroadcastPlan broadcast_plan(const Shape& full, const Shape& a, const Shape& b);
// A binary op node's plan: slot 0 its output, slots 1 and 2 its operands 0 and 1.
BroadcastPlan binary_plan(const Graph& g, const Node& n);
// reduce_mean's plan: the full tensor is its input, slots 1 and 2 both its output (laid out as
// with keepdims: the reduced axes have stride 0).
BroadcastPlan reduce_mean_plan(const Graph& g, const Node& n);

}  // namespace rl
