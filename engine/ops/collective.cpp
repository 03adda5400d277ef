// collective: the communication of one tensor-parallel rank (Megatron-LM, Shoeybi et al. 2019;
// sequence parallelism from Korthikanti et al., MLSys 2023, arXiv 2205.05198). A graph built for
// one rank holds these nodes where the ranks talk; they cost no FLOPs, only bytes on the wire,
// so schedules that recompute around them stay valid and priced.
//
// kind             forward                         backward (of the gradient)
// all_reduce_grad  identity (Megatron's f)          all-reduce
// all_reduce       all-reduce (Megatron's g)        identity
// all_gather       gather the rows of t ranks       reduce-scatter
// reduce_scatter   reduce, keep this rank's rows    all-gather
//
// Executed on one process, the other ranks are stand-ins: an all-reduce keeps this rank's value,
// an all-gather tiles this rank's rows t times, a reduce-scatter keeps the first 1/t of the rows;
// the backwards are the exact adjoints of those functions, so gradients stay checkable.
#include "engine/ops/op_defs.h"

namespace rl::ops {

namespace {

Inferred collective_infer(const Graph& g, const Node& n) {
    require_f32(g, n);
    require_known_attrs(n, {"kind", "ranks"});
    const int64_t t = n.attrs.get_int("ranks", 1);
    if (t < 1) throw Error("attribute 'ranks' is " + std::to_string(t) + "; it must be >= 1");
    const CollectiveKind k = collective_kind(n);
    Shape s = in_shape(g, n, 0);
    if (s.rank() < 1) throw Error("input 0 is a scalar; a collective needs at least one axis");
    if (k == CollectiveKind::AllGather) s.dims[0] *= t;
    if (k == CollectiveKind::ReduceScatter) {
        if (s.dims[0] % t != 0)
            throw Error("reduce_scatter over " + std::to_string(t) +
                        " ranks needs rows divisible "
                        "by " +
                        std::to_string(t) + ", but input 0 has " + format_dims(s));
        s.dims[0] /= t;
    }
    return {DType::F32, s, {}};
}

Residuals no_residuals(const Graph&, const Node&) {
    return {};
}

OpCost collective_cost(const Graph& g, const Node& n) {
    // Bytes on the wire per rank (ring algorithms): 2(t-1)/t of the tensor for an all-reduce,
    // (t-1)/t of the larger side for all-gather and reduce-scatter. No FLOPs.
    const double t = static_cast<double>(n.attrs.get_int("ranks", 1));
    const double in = static_cast<double>(input(g, n, 0).bytes);
    const double big = collective_kind(n) == CollectiveKind::AllGather ? in * t : in;
    const double ring = (t - 1) / t;
    switch (collective_kind(n)) {
        case CollectiveKind::AllReduceGrad:
            return {0, 0, 0, 2 * ring * in};
        case CollectiveKind::AllReduce:
            return {0, 0, 2 * ring * in, 0};
        case CollectiveKind::AllGather:
        case CollectiveKind::ReduceScatter:
            break;
    }
    return {0, 0, ring * big, ring * big};
}

}  // namespace

const OpDef kCollectiveDef{
    .name = "collective",
    .about =
        "communication of one tensor-parallel rank, no FLOPs (attrs: kind = all_reduce_grad, "
        "all_reduce, all_gather or reduce_scatter over the rows; ranks)",
    .min_inputs = 1,
    .max_inputs = 1,
    .is_loss = false,
    .is_dot = false,
    .infer = collective_infer,
    .residuals = no_residuals,
    .fwd_workspace = nullptr,
    .bwd_workspace = nullptr,
    .cost = collective_cost,
};

}  // namespace rl::ops

namespace rl {

CollectiveKind collective_kind(const Node& n) {
    const std::string k = n.attrs.get_string("kind", "");
    if (k == "all_reduce_grad") return CollectiveKind::AllReduceGrad;
    if (k == "all_reduce") return CollectiveKind::AllReduce;
    if (k == "all_gather") return CollectiveKind::AllGather;
    if (k == "reduce_scatter") return CollectiveKind::ReduceScatter;
    throw Error("attribute 'kind' is \"" + k +
                "\"; it must be all_reduce_grad, all_reduce, all_gather or reduce_scatter");
}

}  // namespace rl
