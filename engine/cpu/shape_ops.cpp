// reshape and transpose: copies.
#include <array>
#include <cstring>

#include "engine/cpu/kernels.h"

namespace rl::cpu {
namespace {

// dst (+)= src with its axes permuted: axis i of dst is axis perm[i] of src (rank up to 4).
// The permutation is first reduced to its essentials: axes of size 1 dropped, and neighbouring
// dst axes merged where src walks them contiguously too. What is left is then either a copy
// whose innermost axis is contiguous in both (rows of floats), a batch of 2-D transposes (NCHW
// to NHWC and back: [n, c, h·w] → [n, h·w, c], through the 8 × 8 register blocks of
// transpose()), or, rarely, a general strided copy. Each element is copied, or added once, so
// the path taken changes no bits.
void permute(const float* src, const Shape& src_shape, const std::vector<int64_t>& perm, float* dst,
             bool accumulate) {
    const int rank = src_shape.rank();
    std::array<int64_t, 4> src_stride{};
    int64_t st = 1;
    for (int k = rank - 1; k >= 0; --k) {
        src_stride[static_cast<size_t>(k)] = st;
        st *= src_shape[k];
    }
    // dst axes in order: (size, src stride), size-1 axes dropped, contiguous runs merged.
    int n = 0;
    std::array<int64_t, 4> dims{}, stride{};
    for (int i = 0; i < rank; ++i) {
        const auto a = static_cast<size_t>(perm[static_cast<size_t>(i)]);
        const int64_t d = src_shape[static_cast<int>(a)];
        if (d == 1) continue;
        if (n > 0 && stride[static_cast<size_t>(n - 1)] == src_stride[a] * d) {
            dims[static_cast<size_t>(n - 1)] *= d;
            stride[static_cast<size_t>(n - 1)] = src_stride[a];
            continue;
        }
        dims[static_cast<size_t>(n)] = d;
        stride[static_cast<size_t>(n)] = src_stride[a];
        ++n;
    }
    // [batch, Y, X] from src [batch, X, Y]: a transpose of X × Y per batch (batch may be absent).
    if (n >= 2 && n <= 3 && stride[static_cast<size_t>(n - 2)] == 1) {
        const int64_t ys = dims[static_cast<size_t>(n - 2)], xs = dims[static_cast<size_t>(n - 1)];
        const int64_t batch = n == 3 ? dims[0] : 1;
        if (stride[static_cast<size_t>(n - 1)] == ys && (n == 2 || stride[0] == xs * ys)) {
            parallel_for(batch, xs * ys, [&](int64_t b) {
                transpose(src + b * xs * ys, ys, xs, ys, dst + b * xs * ys, xs, accumulate);
            });
            return;
        }
    }
    // Otherwise rank 4 with leading axes of size 1; the innermost axis is walked by the loop.
    std::array<int64_t, 4> out_dims{1, 1, 1, 1}, st4{0, 0, 0, 0};
    for (int i = 0; i < n; ++i) {
        out_dims[static_cast<size_t>(4 - n + i)] = dims[static_cast<size_t>(i)];
        st4[static_cast<size_t>(4 - n + i)] = stride[static_cast<size_t>(i)];
    }
    const int64_t inner = out_dims[2] * out_dims[3];
    parallel_for(out_dims[0] * out_dims[1], inner, [&](int64_t o) {
        const float* base = src + (o / out_dims[1]) * st4[0] + (o % out_dims[1]) * st4[1];
        float* out = dst + o * inner;
        for (int64_t i2 = 0; i2 < out_dims[2]; ++i2) {
            const float* s = base + i2 * st4[2];
            float* d = out + i2 * out_dims[3];
            if (st4[3] == 1) {
                if (accumulate)
                    for (int64_t i3 = 0; i3 < out_dims[3]; ++i3) d[i3] += s[i3];
                else
                    for (int64_t i3 = 0; i3 < out_dims[3]; ++i3) d[i3] = s[i3];
            } else if (accumulate) {
                for (int64_t i3 = 0; i3 < out_dims[3]; ++i3) d[i3] += s[i3 * st4[3]];
            } else {
                for (int64_t i3 = 0; i3 < out_dims[3]; ++i3) d[i3] = s[i3 * st4[3]];
            }
        }
    });
}

}  // namespace

void reshape_forward(const ForwardCall& c) {
    const float* x = as_f32(c.inputs[0]);
    float* y = as_f32(c.output);
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        std::memcpy(y + s, x + s, static_cast<size_t>(n) * sizeof(float));
    });
}

void reshape_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const bool acc = c.accumulate[0];
    for_chunks(output_shape(c.graph, c.node).numel(), [&](int64_t s, int64_t n) {
        store(ArrMap(dx + s, n), ConstArrMap(c.grad_output + s, n), acc);
    });
}

void transpose_forward(const ForwardCall& c) {
    permute(as_f32(c.inputs[0]), input_shape(c.graph, c.node, 0), c.node.attrs.get_ints("perm"),
            as_f32(c.output), false);
}

void transpose_backward(const BackwardCall& c) {
    float* dx = c.grad_inputs[0];
    if (!dx) return;
    const std::vector<int64_t> perm = c.node.attrs.get_ints("perm");
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
        inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    permute(c.grad_output, output_shape(c.graph, c.node), inverse, dx, c.accumulate[0]);
}

}  // namespace rl::cpu
