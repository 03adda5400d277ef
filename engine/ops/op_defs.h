#pragma once
// Internal to engine/ops: the per-family OpDef tables (dense.cpp, elementwise.cpp, norm.cpp,
// shape_ops.cpp, losses.cpp) and the checks they share. op.cpp indexes them by OpKind.
#include <initializer_list>
#include <string>
#include <string_view>

#include "engine/errors.h"
#include "engine/ops/op.h"

namespace rl::ops {

inline const Value& input(const Graph& g, const Node& n, int i) {
    return g.value(n.inputs[static_cast<size_t>(i)]);
}
inline const Shape& in_shape(const Graph& g, const Node& n, int i) {
    return input(g, n, i).shape;
}
inline double numel_d(const Shape& s) {
    return static_cast<double>(s.numel());
}

// Throws unless input i has dtype `t`: "input 1 is f32 but cross_entropy expects i32 labels".
void require_dtype(const Graph& g, const Node& n, int i, DType t, const char* what = "");
// Every input f32.
void require_f32(const Graph& g, const Node& n);
// Throws unless input i has at least `rank` axes.
void require_rank_at_least(const Graph& g, const Node& n, int i, int rank);
// Throws for an attribute outside `known` (a typo such as ONNX's "strides" for "stride" would
// otherwise be ignored), naming it and listing the known ones.
void require_known_attrs(const Node& n, std::initializer_list<std::string_view> known);

// Rows of a tensor viewed as [rows, last axis].
inline int64_t rows_of(const Shape& s) {
    return s.rank() == 0 ? 1 : s.numel() / s[-1];
}

extern const OpDef kLinearDef, kMatMulDef;                     // dense.cpp
extern const OpDef kAddDef;                                    // binary.cpp
extern const OpDef kReluDef, kGeluDef, kTanhDef, kSigmoidDef;  // elementwise.cpp
extern const OpDef kSinDef, kCosDef;                           // elementwise.cpp
extern const OpDef kLayerNormDef, kSoftmaxDef;                 // norm.cpp
extern const OpDef kReshapeDef, kTransposeDef;                 // shape_ops.cpp
extern const OpDef kSumSquaresDef, kCrossEntropyDef;           // losses.cpp
extern const OpDef kConv2dDef;                                 // conv.cpp
extern const OpDef kMaxPool2dDef, kAvgPool2dDef;               // pool.cpp
extern const OpDef kUpsampleNearest2dDef;                      // pool.cpp
extern const OpDef kBatchNormDef;                              // batchnorm.cpp
extern const OpDef kConcatDef, kFlattenDef, kDropoutDef;       // tensor_ops.cpp
extern const OpDef kSubDef, kMulDef, kDivDef;                  // binary.cpp (+ add)
extern const OpDef kClipDef, kHardSigmoidDef, kHardSwishDef;   // activations.cpp
extern const OpDef kGeluTanhDef;                               // activations.cpp
extern const OpDef kReduceMeanDef;                             // reduce.cpp
extern const OpDef kEmbeddingDef, kSliceDef, kCausalMaskDef;   // indexing.cpp
extern const OpDef kPadDef;                                    // indexing.cpp
extern const OpDef kDropoutMaskDef;                            // tensor_ops.cpp
extern const OpDef kCollectiveDef;                             // collective.cpp
extern const OpDef kOpaqueDef;                                 // opaque.cpp
extern const OpDef kExpDef;                                    // elementwise.cpp
extern const OpDef kL2NormalizeDef;                            // norm.cpp
extern const OpDef kGatherDef;                                 // indexing.cpp
extern const OpDef kParameterDef, kConstantDef;                // sources.cpp

}  // namespace rl::ops
