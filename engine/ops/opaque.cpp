// opaque: a node of an abstract benchmark graph (Checkmate's, Moccasin's;
// engine/networks/abstract_network.h), known only by its duration and the bytes of its output.
// It has no kernels, no parameters and no residuals: a network of such nodes is plan-only
// (Graph::plan_only), its backward nodes are ordinary nodes, and its schedules are Computes and
// Frees. The output is `bytes` bytes of u8, so the liveness rules charge exactly the file's
// output size; `duration` is the node's forward cost in the file's own units (CostModel).
#include "engine/ops/op_defs.h"

namespace rl::ops {

namespace {

Inferred opaque_infer(const Graph&, const Node& n) {
    require_known_attrs(n, {"bytes", "duration"});
    const int64_t bytes = n.attrs.get_int("bytes", 0);
    if (bytes < 0)
        throw Error("attribute 'bytes' is " + std::to_string(bytes) + "; it must be >= 0");
    const double d = n.attrs.get_float("duration", 0);
    if (!(d >= 0))
        throw Error("attribute 'duration' is " + std::to_string(d) + "; it must be a number >= 0");
    return {DType::U8, Shape{bytes}, {}};
}

Residuals opaque_residuals(const Graph&, const Node&) {
    return {};
}

OpCost opaque_cost(const Graph&, const Node&) {
    return {};  // its cost is its duration, which CostModel reads directly
}

}  // namespace

const OpDef kOpaqueDef{
    .name = "opaque",
    .about =
        "a node of an abstract benchmark graph: its output bytes and duration only, no "
        "kernels (plan-only networks; attrs: bytes, duration)",
    .min_inputs = 0,
    .max_inputs = 1 << 30,
    .is_loss = false,
    .is_dot = false,
    .infer = opaque_infer,
    .residuals = opaque_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = opaque_cost,
};

}  // namespace rl::ops
