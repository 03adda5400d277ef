#pragma once
#include <cstdint>

namespace rl {

// Every op RematLab knows. Names (for files and the CLI) live in ops/op.cpp.
enum class OpKind : uint8_t {
    Linear,        // y = x·Wᵀ + b over the last axis; x [..., in], W [out, in], b [out]
    MatMul,        // batched: a [B, M, K] · b [B, K, N] (or bᵀ with transpose_b=1), times alpha
    Add,           // elementwise, same shapes
    Relu,
    Gelu,          // erf form: x·Φ(x)
    Tanh,
    Sigmoid,
    LayerNorm,     // over the last axis, with weight and bias; eps attr
    Softmax,       // over the last axis
    Reshape,       // copy into a new shape (attr shape, one -1 allowed)
    Transpose,     // permutation of axes (attr perm)
    SumSquares,    // loss L = ½·Σ y²  (dL/dy = y)
    CrossEntropy,  // loss: mean over rows of -log softmax(logits)[label]; inputs logits, labels
    Count
};

constexpr int kNumOpKinds = static_cast<int>(OpKind::Count);

}  // namespace rl
