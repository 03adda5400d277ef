// embedding, slice and gather: reading rows of a table by integer index, a range of one axis,
// and rows of a computed tensor by constant indices.
#include "engine/ops/layout.h"
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

// The index tensor's shape: the input's, or attr index_shape for the constant indices
// first + (k mod period) of lookup k (PyTorch's position embeddings: wpe(arange(T)), period T
// by default; arange(T).expand(B, T), period T over index_shape [B, T]).
Shape index_shape(const Graph& g, const Node& n) {
    if (!n.inputs.empty()) return in_shape(g, n, 0);
    return Shape(n.attrs.get_ints("index_shape"));
}

Inferred embedding_infer(const Graph& g, const Node& n) {
    require_known_attrs(
        n, {"num_embeddings", "dim", "first", "period", "index_shape", "table_shape", "indices"});
    const int64_t rows = n.attrs.get_int("num_embeddings");
    const int64_t dim = n.attrs.get_int("dim");
    if (rows <= 0 || dim <= 0)
        throw Error("attributes num_embeddings (" + std::to_string(rows) + ") and dim (" +
                    std::to_string(dim) + ") must be positive");
    Shape out;
    if (!n.inputs.empty()) {
        require_dtype(g, n, 0, DType::I32, "indices");
        const Value& idx = input(g, n, 0);
        if (idx.is_input() && idx.label_classes > rows)
            throw Error("input 0 ('" + idx.name + "') holds indices in [0, " +
                        std::to_string(idx.label_classes) + ") but the table has " +
                        std::to_string(rows) + " rows");
        if (n.attrs.has("first") || n.attrs.has("period") || n.attrs.has("index_shape") ||
            n.attrs.has("indices"))
            throw Error(
                "attributes first, period, indices and index_shape are for an embedding without "
                "inputs");
        out = idx.shape;
    } else if (n.attrs.has("indices")) {
        // Any constant indices (Swin's relative position index into its bias table).
        const Shape s = index_shape(g, n);
        const int64_t count = checked_numel(s, "attribute 'index_shape'");
        if (n.attrs.has("first") || n.attrs.has("period"))
            throw Error("attributes first and period do not go with indices");
        const auto ind = n.attrs.get_ints("indices");
        if (static_cast<int64_t>(ind.size()) != count)
            throw Error("attribute 'indices' holds " + std::to_string(ind.size()) +
                        " values but index_shape " + format_dims(s) + " has " +
                        std::to_string(count) + " lookups");
        for (size_t k = 0; k < ind.size(); ++k)
            if (ind[k] < 0 || ind[k] >= rows)
                throw Error("attribute 'indices': index " + std::to_string(ind[k]) +
                            " at position " + std::to_string(k) +
                            " is out of range for a table of " + std::to_string(rows) + " rows");
        out = s;
    } else {
        const Shape s = index_shape(g, n);
        const int64_t count = checked_numel(s, "attribute 'index_shape'");
        const int64_t first = n.attrs.get_int("first", 0);
        const int64_t period = n.attrs.get_int("period", count);
        if (period <= 0 || count % period != 0)
            throw Error("attribute 'period' is " + std::to_string(period) +
                        "; it must be positive and divide the " + std::to_string(count) +
                        " lookups of index_shape " + format_dims(s));
        if (first < 0 || first > rows - period)
            throw Error("the constant indices [" + std::to_string(first) + ", " +
                        std::to_string(first + period) + ") are out of range for a table of " +
                        std::to_string(rows) + " rows");
        out = s;
    }
    out.dims.push_back(dim);
    // The table's own shape, when it is not [rows, dim] but holds the same rows (a class token
    // parameter [1, 1, dim] read as a table of one row keeps its shape, and its gradient too).
    Shape table{rows, dim};
    if (n.attrs.has("table_shape")) {
        table = Shape(n.attrs.get_ints("table_shape"));
        if (table.rank() < 2 || table[-1] != dim ||
            checked_numel(table, "attribute 'table_shape'") != rows * dim)
            throw Error("attribute 'table_shape' " + format_dims(table) + " must be [..., " +
                        std::to_string(dim) + "] with " + std::to_string(rows) + " rows");
    }
    return {DType::F32, out, {ParamDecl{"weight", table, ParamInit::FanInUniform, 1}}};
}

// Constant indices (attr indices) are copied into the workspace as i32 by each forward and
// backward, where the kernels read them as they read an index input (a device buffer on a GPU).
uint64_t embedding_workspace(const Graph& g, const Node& n) {
    (void)g;
    if (!n.inputs.empty() || !n.attrs.has("indices")) return 0;
    return 4 * static_cast<uint64_t>(n.attrs.get_ints("indices").size());
}

Residuals embedding_residuals(const Graph& g, const Node& n) {
    (void)g;
    return {n.inputs.empty() ? 0u : 0b1u, false};  // the backward scatters by the indices
}

OpCost embedding_cost(const Graph& g, const Node& n) {
    const double e = numel_d(g.value(n.output).shape);
    const double table = numel_d(Shape{n.attrs.get_int("num_embeddings"), n.attrs.get_int("dim")});
    // fwd: read the rows and the indices, write the output; bwd: clear the table gradient, then
    // read dY and add it into the rows.
    return {0, e, 8 * e, 4 * table + 12 * e};
}

// gather: rows of a computed tensor by constant indices (Swin V2's continuous position bias,
// the MLP's output indexed by the relative position index). Output index_shape ++ x.shape[1:].
Inferred gather_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_rank_at_least(g, n, 0, 1);
    require_known_attrs(n, {"indices", "index_shape"});
    const Shape& x = in_shape(g, n, 0);
    if (!n.attrs.has("indices") || !n.attrs.has("index_shape"))
        throw Error("gather needs attributes indices and index_shape");
    const Shape s(n.attrs.get_ints("index_shape"));
    const int64_t count = checked_numel(s, "attribute 'index_shape'");
    const auto* ind = std::get_if<std::vector<int64_t>>(n.attrs.find("indices"));
    if (!ind) throw Error("attribute 'indices' must be a list of integers");
    if (static_cast<int64_t>(ind->size()) != count)
        throw Error("attribute 'indices' holds " + std::to_string(ind->size()) +
                    " values but index_shape " + format_dims(s) + " has " + std::to_string(count) +
                    " lookups");
    for (size_t k = 0; k < ind->size(); ++k)
        if ((*ind)[k] < 0 || (*ind)[k] >= x[0])
            throw Error("attribute 'indices': index " + std::to_string((*ind)[k]) +
                        " at position " + std::to_string(k) + " is out of range for axis 0 of " +
                        "input 0 " + format_dims(x));
    Shape out = s;
    for (int d = 1; d < x.rank(); ++d) out.dims.push_back(x[d]);
    return {DType::F32, out, {}};
}

// The indices as i32 for the CUDA kernels, which read them from device memory (the embedding's
// constant indices, above, the same way); the CPU kernel reads the attribute and leaves it unused.
uint64_t gather_workspace(const Graph&, const Node& n) {
    return 4 * static_cast<uint64_t>(n.attrs.get_ints("indices").size());
}

OpCost gather_cost(const Graph& g, const Node& n) {
    const double e = numel_d(g.value(n.output).shape), in = numel_d(in_shape(g, n, 0));
    return {0, e, 8 * e, 4 * in + 12 * e};  // bwd: clear dX, then add dY into its rows
}

Inferred slice_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"axis", "start", "end"});
    const Shape& x = in_shape(g, n, 0);
    if (x.rank() == 0) throw Error("input 0 is a scalar; slice needs at least one axis");
    const int64_t a = n.attrs.get_int("axis");
    const int64_t axis = a < 0 ? a + x.rank() : a;
    if (axis < 0 || axis >= x.rank())
        throw Error("attribute 'axis' is " + std::to_string(a) + " but input 0 has rank " +
                    std::to_string(x.rank()));
    const int64_t start = n.attrs.get_int("start"), end = n.attrs.get_int("end");
    if (!(0 <= start && start < end && end <= x[static_cast<int>(axis)]))
        throw Error(
            "the range [" + std::to_string(start) + ", " + std::to_string(end) +
            ") is not a non-empty part of axis " + std::to_string(axis) + " of " + format_dims(x) +
            "; it must satisfy 0 <= start < end <= " + std::to_string(x[static_cast<int>(axis)]));
    Shape out = x;
    out.dims[static_cast<size_t>(axis)] = end - start;
    return {DType::F32, out, {}};
}

Residuals no_residuals(const Graph&, const Node&) {
    return {};
}

OpCost slice_cost(const Graph& g, const Node& n) {
    const double out = numel_d(g.value(n.output).shape);
    const double in = numel_d(in_shape(g, n, 0));
    return {0, 0, 8 * out, 4 * in + 4 * out};  // bwd: clear dX, add dY into its part
}

Inferred causal_mask_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {});
    const Shape& x = in_shape(g, n, 0);
    if (x.rank() < 2)
        throw Error("input 0 has shape " + format_dims(x) +
                    " but causal_mask needs at least 2 axes [..., rows, columns]");
    return {DType::F32, x, {}};
}

OpCost causal_mask_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    return {e, e, 8 * e, 8 * e};
}

// ONNX's pads: the zeros before each axis, then the zeros after each axis.
Inferred pad_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"pads"});
    const Shape& x = in_shape(g, n, 0);
    const auto pads = n.attrs.get_ints("pads");
    if (x.rank() == 0 || x.rank() > kMaxPadRank)
        throw Error("input 0 has shape " + format_dims(x) + "; pad takes 1 to " +
                    std::to_string(kMaxPadRank) + " axes");
    if (static_cast<int64_t>(pads.size()) != 2 * x.rank())
        throw Error("attribute 'pads' has " + std::to_string(pads.size()) +
                    " values; it needs 2 per axis of " + format_dims(x) +
                    " (the begins of every axis, then the ends)");
    Shape out = x;
    for (int a = 0; a < x.rank(); ++a) {
        const int64_t b = pads[static_cast<size_t>(a)], e = pads[static_cast<size_t>(a + x.rank())];
        if (b < 0 || e < 0)
            throw Error("attribute 'pads' " + format_dims(Shape(pads)) +
                        " holds a negative value; pad adds zeros (a negative pad is a slice)");
        constexpr int64_t kMaxPad = int64_t{1} << 40;  // keeps the sum below from overflowing
        if (b > kMaxPad || e > kMaxPad)
            throw Error("attribute 'pads' " + format_dims(Shape(pads)) + " pads axis " +
                        std::to_string(a) + " by more than 2^40");
        out.dims[static_cast<size_t>(a)] = x[a] + b + e;
    }
    (void)checked_numel(out, "the padded output");
    return {DType::F32, out, {}};
}

OpCost pad_cost(const Graph& g, const Node& n) {
    const double in = numel_d(in_shape(g, n, 0)), out = numel_d(g.value(n.output).shape);
    return {0, 0, 4 * in + 4 * out, 4 * out + 4 * in};  // copies: fwd writes zeros around x
}

}  // namespace

const OpDef kPadDef{
    .name = "pad",
    .about =
        "zeros around the input (attr pads: the zeros before each axis, then after each axis, as "
        "ONNX's Pad in constant mode); the backward is the slice of the gradient",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = pad_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = pad_cost,
};

const OpDef kCausalMaskDef{
    .name = "causal_mask",
    .about =
        "-inf above the diagonal of the last two axes (column > row), the input elsewhere: "
        "masked_fill with a causal tril mask, before a softmax",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = causal_mask_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = causal_mask_cost,
    .in_place_inputs = 0b1u,  // y[i] reads x[i] only
};

const OpDef kEmbeddingDef{
    .name = "embedding",
    .about =
        "rows of a table [num_embeddings, dim] picked by integer indices, an i32 input (attrs: "
        "num_embeddings, dim; without an input, rows first + (k mod period) for the lookups k of "
        "index_shape, or the constant rows of attr indices)",
    .min_inputs = 0,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = embedding_infer,
    .residuals = embedding_residuals,
    .fwd_workspace = embedding_workspace,
    .bwd_workspace = embedding_workspace,
    .cost = embedding_cost,
};

const OpDef kSliceDef{
    .name = "slice",
    .about = "the range [start, end) of one axis (attrs: axis, start, end)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = slice_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = slice_cost,
};

// The indices are attributes, so the backward reads nothing of the forward.
const OpDef kGatherDef{
    .name = "gather",
    .about = "rows of input 0 (axis 0) by constant indices (attrs: indices, index_shape)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = gather_infer,
    .residuals = no_residuals,
    .fwd_workspace = gather_workspace,
    .bwd_workspace = gather_workspace,
    .cost = gather_cost,
};

}  // namespace rl::ops

namespace rl {

SliceLayout slice_layout(const Graph& g, const Node& n) {
    const Shape& x = g.value(n.inputs[0]).shape;
    int64_t axis = n.attrs.get_int("axis");
    if (axis < 0) axis += x.rank();
    SliceLayout l;
    for (int a = 0; a < x.rank(); ++a) {
        if (a < axis) l.outer *= x[a];
        if (a > axis) l.inner *= x[a];
    }
    l.row = x[static_cast<int>(axis)] * l.inner;
    l.offset = n.attrs.get_int("start") * l.inner;
    l.len = (n.attrs.get_int("end") - n.attrs.get_int("start")) * l.inner;
    return l;
}

PadLayout pad_layout(const Graph& g, const Node& n) {
    const Shape& x = g.value(n.inputs[0]).shape;
    const Shape& y = g.value(n.output).shape;
    const auto pads = n.attrs.get_ints("pads");
    PadLayout l;
    l.rank = x.rank();
    for (int a = 0; a < l.rank; ++a) {
        l.in[a] = x[a];
        l.out[a] = y[a];
        l.begin[a] = pads[static_cast<size_t>(a)];
    }
    return l;
}

EmbeddingLayout embedding_layout(const Graph& g, const Node& n) {
    EmbeddingLayout l;
    l.rows = n.attrs.get_int("num_embeddings");
    l.dim = n.attrs.get_int("dim");
    l.count = g.value(n.output).shape.numel() / l.dim;
    const bool computed_rows = n.inputs.empty() && !n.attrs.has("indices");
    l.first = computed_rows ? n.attrs.get_int("first", 0) : -1;
    l.period = computed_rows ? n.attrs.get_int("period", l.count) : 0;
    return l;
}

}  // namespace rl
