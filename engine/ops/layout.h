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
struct SliceLayout {
    int64_t outer = 1, inner = 1, row = 0, offset = 0, len = 0;
};
SliceLayout slice_layout(const Graph& g, const Node& n);

// embedding: `count` lookups of rows of `dim` floats in a [rows, dim] table; the indices are the
// i32 input, or, when `first` >= 0 (no input), first + (k mod period) for lookup k.
struct EmbeddingLayout {
    int64_t rows = 0, dim = 0, count = 0, first = -1, period = 0;
};
EmbeddingLayout embedding_layout(const Graph& g, const Node& n);

}  // namespace rl
