#pragma once
#include <cstdint>

namespace rl {

// Every op RematLab knows. Names (for files and the CLI) live in ops/op.cpp.
enum class OpKind : uint8_t {
    Linear,  // y = x·Wᵀ + b over the last axis; x [..., in], W [out, in], b [out]
    MatMul,  // batched: a [B, M, K] · b [B, K, N] (or bᵀ with transpose_b=1), times alpha
    Add,     // elementwise with numpy broadcasting (see Sub); same shapes stay the fast path
    // Large-model training (gpt preset).
    Relu,
    Gelu,  // erf form: x·Φ(x)
    Tanh,
    Sigmoid,
    LayerNorm,     // over the last axis, with weight and bias; eps attr
    Softmax,       // over the last axis
    Reshape,       // copy into a new shape (attr shape, one -1 allowed)
    Transpose,     // permutation of axes (attr perm)
    SumSquares,    // loss L = ½·Σ y²  (dL/dy = y)
    CrossEntropy,  // loss: mean over rows of -log softmax(logits)[label]; inputs logits, labels
    Sin,           // elementwise sine; the backward reads the input (cos x)
    Cos,           // elementwise cosine; the backward reads the input (-sin x)

    // NCHW ops for convolutional networks; attributes follow ONNX (see ops/window.h).
    Conv2d,             // out_channels, kernel, stride, padding, dilation, groups, bias
    MaxPool2d,          // the backward re-finds each window's argmax from the input
    AvgPool2d,          // mean over windows, or over the whole plane with global=1
    BatchNorm,          // training mode: batch statistics per channel (axis 1)
    UpsampleNearest2d,  // nearest-neighbour upsampling by an integer scale
    Concat,             // 2+ inputs joined along an axis (default 1, channels)
    Flatten,            // [d0…dk-1, dk…] -> [d0·…·dk-1, dk·…] (attr axis, default 1)
    Dropout,            // mask from (graph seed, node name, element index), or a given u8 mask

    // Broadcasting binary ops (ops/binary.cpp, layout.h's BinaryForm): two tensors, or one
    // tensor and a parameter (attr param_shape) or a scalar (attr scalar); reversed=1 puts the
    // parameter or scalar first.
    Sub,
    Mul,
    Div,
    // Pointwise activations (ops/activations.cpp); each backward reads its input.
    Clip,         // min(max(x, min), max); attrs min, max (ReLU6: 0, 6)
    HardSigmoid,  // max(0, min(1, alpha·x + beta)); attrs alpha (1/6), beta (0.5)
    HardSwish,    // x · relu6(x + 3) / 6
    GeluTanh,     // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), GELU's tanh approximation
    // Mean over the axes in attr axes, keepdims (default 1) as ONNX (ops/reduce.cpp).
    ReduceMean,
    // Indexing (ops/indexing.cpp).
    Embedding,   // rows of a [num_embeddings, dim] table by i32 indices (or constant ones)
    Slice,       // [start, end) of one axis
    CausalMask,  // -inf where column > row in the last two axes (a causal attention mask)
    Pad,         // zeros around the input: attr pads [begin per axis…, end per axis…] (ONNX's)
    // Large-model training (gpt preset).
    DropoutMask,  // the u8 keep-mask of dropout, hashed like Dropout's (one byte/element)
    Collective,   // tensor-parallel communication, no FLOPs (ops/collective.cpp)
    // Plan-only networks (abstract benchmark graphs, engine/networks/abstract_network.h).
    Opaque,  // a node known by its duration and output bytes only: no kernels (ops/opaque.cpp)
    // Swin V2 (ONNX import): cosine attention and its logit scale.
    Exp,          // elementwise e^x; the backward reads the output
    L2Normalize,  // x / max(‖x‖₂, eps) over the last axis (F.normalize); the backward reads x
    Gather,       // rows of input 0 (axis 0) by constant indices (attrs indices, index_shape)
    // Values computed from parameters and constants alone (ops/sources.cpp): no inputs.
    Parameter,  // the node's parameter itself (attr shape); its backward is dParam = dY
    Constant,   // a constant tensor (attrs constant_shape, constant_bits); no gradient
    Count
};

constexpr int kNumOpKinds = static_cast<int>(OpKind::Count);

}  // namespace rl
