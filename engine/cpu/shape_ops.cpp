// reshape and transpose: copies.
#include <array>
#include <cstring>

#include "engine/cpu/kernels.h"

namespace rl::cpu {
namespace {

// dst (+)= src with its axes permuted: axis i of dst is axis perm[i] of src (rank up to 4).
void permute(const float* src, const Shape& src_shape, const std::vector<int64_t>& perm, float* dst,
             bool accumulate) {
    // Pad to rank 4 with leading axes of size 1, which the permutation leaves in place.
    const int pad = 4 - src_shape.rank();
    std::array<int64_t, 4> dims{1, 1, 1, 1}, p{0, 1, 2, 3};
    for (int i = 0; i < src_shape.rank(); ++i) {
        dims[static_cast<size_t>(pad + i)] = src_shape[i];
        p[static_cast<size_t>(pad + i)] = pad + perm[static_cast<size_t>(i)];
    }
    std::array<int64_t, 4> src_stride{};
    src_stride[3] = 1;
    for (int k = 2; k >= 0; --k) src_stride[k] = src_stride[k + 1] * dims[k + 1];
    std::array<int64_t, 4> out_dims{}, stride{};  // stride: src step per step along dst axis i
    for (size_t i = 0; i < 4; ++i) {
        out_dims[i] = dims[static_cast<size_t>(p[i])];
        stride[i] = src_stride[static_cast<size_t>(p[i])];
    }
    const int64_t inner = out_dims[2] * out_dims[3];
    parallel_for(out_dims[0] * out_dims[1], inner, [&](int64_t o) {
        const float* base = src + (o / out_dims[1]) * stride[0] + (o % out_dims[1]) * stride[1];
        float* out = dst + o * inner;
        for (int64_t i2 = 0; i2 < out_dims[2]; ++i2) {
            const float* s = base + i2 * stride[2];
            float* d = out + i2 * out_dims[3];
            if (accumulate)
                for (int64_t i3 = 0; i3 < out_dims[3]; ++i3) d[i3] += s[i3 * stride[3]];
            else
                for (int64_t i3 = 0; i3 < out_dims[3]; ++i3) d[i3] = s[i3 * stride[3]];
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
