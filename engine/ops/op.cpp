#include "engine/ops/op.h"

#include <array>

#include "engine/ops/op_defs.h"

namespace rl {

namespace ops {

void require_dtype(const Graph& g, const Node& n, int i, DType t, const char* what) {
    const Value& v = input(g, n, i);
    if (v.dtype == t) return;
    throw Error("input " + std::to_string(i) + " ('" + v.name + "') is " +
                std::string(dtype_name(v.dtype)) + " but " + std::string(op_name(n.op)) +
                " expects " + std::string(dtype_name(t)) + (*what ? " " : "") + what);
}

void require_f32(const Graph& g, const Node& n) {
    // Floating: f32, or bf16/f16 (planned in that dtype, executed in f32; Graph::with_float_dtype).
    for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
        const Value& v = input(g, n, i);
        if (!is_floating(v.dtype))
            throw Error("input " + std::to_string(i) + " ('" + v.name + "') is " +
                        std::string(dtype_name(v.dtype)) + " but " + std::string(op_name(n.op)) +
                        " expects a floating tensor (f32, bf16 or f16)");
    }
}

void require_rank_at_least(const Graph& g, const Node& n, int i, int rank) {
    const Shape& s = in_shape(g, n, i);
    if (s.rank() < rank)
        throw Error("input " + std::to_string(i) + " has shape " + format_dims(s) + " but " +
                    std::string(op_name(n.op)) + " expects at least " + std::to_string(rank) +
                    (rank == 1 ? " axis" : " axes"));
}

void require_known_attrs(const Node& n, std::initializer_list<std::string_view> known) {
    for (const auto& [key, value] : n.attrs.items()) {
        bool ok = false;
        for (std::string_view k : known) ok = ok || k == key;
        if (ok) continue;
        std::string list;
        for (std::string_view k : known) {
            if (!list.empty()) list += ", ";
            list += k;
        }
        throw Error("unknown attribute '" + key + "' for " + std::string(op_name(n.op)) +
                    "; its attributes are " + (list.empty() ? std::string("none") : list));
    }
}

}  // namespace ops

namespace {

// Indexed by OpKind; the static_assert below keeps it in step with the enum.
const std::array<const OpDef*, kNumOpKinds>& table() {
    static const std::array<const OpDef*, kNumOpKinds> t = {
        &ops::kLinearDef,
        &ops::kMatMulDef,
        &ops::kAddDef,
        &ops::kReluDef,
        &ops::kGeluDef,
        &ops::kTanhDef,
        &ops::kSigmoidDef,
        &ops::kLayerNormDef,
        &ops::kSoftmaxDef,
        &ops::kReshapeDef,
        &ops::kTransposeDef,
        &ops::kSumSquaresDef,
        &ops::kCrossEntropyDef,
        &ops::kSinDef,
        &ops::kCosDef,
        &ops::kConv2dDef,
        &ops::kMaxPool2dDef,
        &ops::kAvgPool2dDef,
        &ops::kBatchNormDef,
        &ops::kUpsampleNearest2dDef,
        &ops::kConcatDef,
        &ops::kFlattenDef,
        &ops::kDropoutDef,
        // broadcasting binary ops, activations, reduce_mean
        &ops::kSubDef,
        &ops::kMulDef,
        &ops::kDivDef,
        &ops::kClipDef,
        &ops::kHardSigmoidDef,
        &ops::kHardSwishDef,
        &ops::kGeluTanhDef,
        &ops::kReduceMeanDef,
        // indexing.cpp
        &ops::kEmbeddingDef,
        &ops::kSliceDef,
        &ops::kCausalMaskDef,
        &ops::kPadDef,
        // gpt preset: dropout masks and tensor-parallel collectives
        &ops::kDropoutMaskDef,
        &ops::kCollectiveDef,
        // plan-only networks: abstract benchmark graphs
        &ops::kOpaqueDef,
        // Swin V2: cosine attention, the logit scale, the continuous position bias
        &ops::kExpDef,
        &ops::kL2NormalizeDef,
        &ops::kGatherDef,
        &ops::kParameterDef,
        &ops::kConstantDef,
    };
    return t;
}
static_assert(kNumOpKinds == 43, "add the new op's OpDef to table() in op.cpp");

}  // namespace

const OpDef& op_def(OpKind k) {
    return *table()[static_cast<size_t>(k)];
}

std::string_view op_name(OpKind k) {
    return op_def(k).name;
}

std::optional<OpKind> op_from_name(std::string_view name) {
    for (int i = 0; i < kNumOpKinds; ++i)
        if (table()[static_cast<size_t>(i)]->name == name) return static_cast<OpKind>(i);
    return std::nullopt;
}

std::string op_names_joined() {
    std::string out;
    for (const OpDef* d : table()) {
        if (!out.empty()) out += ", ";
        out += d->name;
    }
    return out;
}

}  // namespace rl
