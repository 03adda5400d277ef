#pragma once
#include <cstdint>

namespace rl {

// Every op RematLab knows. Names (for files and the CLI) live in ops/op.cpp.
enum class OpKind : uint8_t {
    Linear,  // y = x·Wᵀ + b over the last axis; x [..., in], W [out, in], b [out]
    MatMul,  // batched: a [B, M, K] · b [B, K, N] (or bᵀ with transpose_b=1), times alpha
    Add,     // elementwise, same shapes
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
    DropoutMask,        // the u8 keep-mask of dropout, hashed like Dropout's (one byte/element)
    Collective,         // tensor-parallel communication, no FLOPs (ops/collective.cpp)
    Count
};

constexpr int kNumOpKinds = static_cast<int>(OpKind::Count);

}  // namespace rl
