// The losses: scalar outputs, the last node of every network.
#include "engine/ops/op_defs.h"

namespace rl::ops {
namespace {

Inferred sum_squares_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    return {DType::F32, Shape{}, {}};
}

Residuals input_residual(const Graph&, const Node&) {
    return {0b1u, false};
}

OpCost sum_squares_cost(const Graph& g, const Node& n) {
    const double e = numel_d(in_shape(g, n, 0));
    return {2 * e, e, 4 * e, 8 * e};
}

Inferred cross_entropy_infer(const Graph& g, const Node& n) {
    if (!is_floating(input(g, n, 0).dtype)) require_dtype(g, n, 0, DType::F32, "logits");
    require_dtype(g, n, 1, DType::I32, "labels");
    const Shape& logits = in_shape(g, n, 0);
    const Shape& labels = in_shape(g, n, 1);
    if (logits.rank() != 2)
        throw Error("input 0 (logits) has shape " + format_dims(logits) +
                    " but cross_entropy expects [N, classes]; reshape it first");
    if (labels.rank() != 1 || labels[0] != logits[0])
        throw Error("input 1 (labels) has shape " + format_dims(labels) +
                    " but cross_entropy expects [" + std::to_string(logits[0]) +
                    "], one label per row of the logits " + format_dims(logits));
    const int64_t classes = input(g, n, 1).label_classes;
    if (classes > logits[1])
        throw Error("input 1 (labels) draws labels from [0, " + std::to_string(classes) +
                    ") but the logits " + format_dims(logits) + " have only " +
                    std::to_string(logits[1]) + " classes");
    return {DType::F32, Shape{}, {}};
}

Residuals logits_and_labels(const Graph&, const Node&) {
    return {0b11u, false};
}

// Forward scratch: each row's loss (one float per row), so that rows run in parallel and are
// then summed in a fixed order.
uint64_t cross_entropy_fwd_workspace(const Graph& g, const Node& n) {
    return sizeof(float) * static_cast<uint64_t>(in_shape(g, n, 0)[0]);
}

OpCost cross_entropy_cost(const Graph& g, const Node& n) {
    const Shape& logits = in_shape(g, n, 0);
    const double e = numel_d(logits), rows = static_cast<double>(logits[0]);
    return {4 * e, 5 * e, 4 * e + 8 * rows, 8 * e + 4 * rows};
}

}  // namespace

const OpDef kSumSquaresDef{
    .name = "sum_squares",
    .about = "loss ½·Σ y² (a scalar)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = true,
    .is_dot = false,
    .infer = sum_squares_infer,
    .residuals = input_residual,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = sum_squares_cost,
};

const OpDef kCrossEntropyDef{
    .name = "cross_entropy",
    .about = "loss: mean over rows of -log softmax(logits)[label]; inputs logits [N,C], labels [N]",
    .min_inputs = 2,
    .max_inputs = 2,
    .is_loss = true,
    .is_dot = false,
    .infer = cross_entropy_infer,
    .residuals = logits_and_labels,
    .fwd_workspace = cross_entropy_fwd_workspace,
    .bwd_workspace = nullptr,
    .cost = cross_entropy_cost,
};

}  // namespace rl::ops
