#pragma once
// ONNX import: a model file (its graph and its weights) as a RematLab Graph. The only code that
// includes ONNX or protobuf headers (engine/networks/onnx_import.cpp).
//
// Each ONNX op maps onto our ops; the patterns exporters emit for ops ONNX lacked are fused back:
//   Gemm / MatMul by a weight (+ Add of a bias)   -> linear   (weight [out, in], named after the
//                                                              initializer; a MatMul weight that
//                                                              is not Transpose(W) is transposed)
//   MatMul of two computed tensors (· or / by a scalar after it) -> matmul (alpha)
//   Div(x, √2) → Erf → Add 1 → Mul x → Mul 0.5     -> gelu     (PyTorch ≤ 1.13's exact GELU)
//   ReduceMean → Sub → Pow 2 → ReduceMean → Add ε → Sqrt → Div → Mul w → Add b -> layernorm
//   ReduceL2 (last axis) → Clip(min ε) → Expand → Div(x, ·)     -> l2_normalize (F.normalize)
//   Gather of a computed tensor by constant indices (axis 0)  -> gather
//   a constant read where an op takes a tensor                -> a node without inputs:
//                                                   `parameter` for a float initializer (its
//                                                   gradient flows back into it: Swin V2's
//                                                   logit_scale under Clip → Exp), `constant` for
//                                                   a folded tensor (no gradient)
//   Conv, MaxPool, AveragePool, GlobalAveragePool, BatchNormalization, Concat, Flatten, Reshape,
//   Transpose, Resize/Upsample (nearest, integer scales), Softmax (last axis), Relu, Tanh,
//   Sigmoid, Exp, Gelu, LayerNormalization, Dropout, Identity
// Shape arithmetic on constants (Constant, Shape, Gather, Unsqueeze, Squeeze, Concat, Cast, and
// elementwise ops on constants) is evaluated at import time, except a Slice of a float
// initializer that a gradient flows through (Swin V2's qkv bias with its key part zeroed), which
// is imported as ops on the parameter. ONNX does not mark which initializers are trained: one
// read as a weight, an operand or a tensor is a parameter (a PyTorch buffer read so, Swin V2's
// relative_coords_table, too). Parameters keep their initializer names and values
// (ParamInit::Given). The network's first output gets the loss (sum_squares by default).
// BatchNormalization is always imported in training mode (batch statistics): RematLab runs
// training steps, and the running statistics in the file affect no gradient.
//
// Everything is checked before anything is allocated: the file size, protobuf's limits, every
// dimension (positive, product within 2^62), each tensor against `max_tensor_bytes`, dangling
// inputs, cycles, duplicate names, attribute types. Unsupported ops are reported all at once, with
// their names, types and positions and the list of supported ops.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"

namespace rl {

enum class ImportLoss : uint8_t {
    SumSquares,    // ½·Σ y² on the output
    CrossEntropy,  // on a [rows, classes] output, with an i32 input "labels" [rows]
};

struct OnnxImportOptions {
    // What protobuf reads in one message (2 GiB - 1): ViT-L's 1.2 GB file loads; a larger model
    // must be saved with external data, which is read (below).
    uint64_t max_file_bytes = (uint64_t{1} << 31) - 1;
    // The folder that initializers stored as external data (data_location EXTERNAL) are found
    // in, by their `location` relative to it; load_onnx_file sets it to the file's folder. Empty
    // (a model given as bytes): external data is refused by name. A location that is absolute
    // or leads outside this folder ('..') is always refused.
    std::string model_dir;
    uint64_t max_tensor_bytes = uint64_t{4} << 30;  // any one initializer, input or activation
    ImportLoss loss = ImportLoss::SumSquares;
    // Move slices up the graph (slice_narrowing.h): a classifier reading the class token leaves
    // its last block computing that token only. The nodes changed carry the tag "narrowed".
    bool narrow_slices = true;
};

// `bytes` is the serialized ModelProto; `origin` names it in messages. Throws rl::Error.
Graph network_from_onnx(const std::string& bytes, const std::string& origin = "<onnx>",
                        const OnnxImportOptions& opt = {});
Graph load_onnx_file(const std::string& path, const OnnxImportOptions& opt = {});
// "Add, AveragePool, BatchNormalization, …": the ONNX ops the importer accepts.
std::string onnx_supported_ops();
// Whether this build can read ONNX files (the REMATLAB_ONNX option).
bool onnx_import_available();

}  // namespace rl
