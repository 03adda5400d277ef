#pragma once
// Numpy broadcasting as plain data, shared by the CPU kernels and the CUDA ones (so it includes
// nothing from the engine; layout.h builds plans from a graph node).
//
// A plan describes a "full" tensor of shape `dims` (the broadcast output of a binary op, or the
// input of reduce_mean) and up to two operands laid over it: operand k's element for full index
// (i0, …, ir-1) lies at Σ i_d · stride[k][d], with stride 0 along the axes where the operand has
// size 1 (numpy's rule: shapes are aligned at their last axes, a missing or size-1 axis
// repeats). Slot 0 is the full tensor itself (contiguous strides).
//
// Worked example, squeeze-excitation scaling x [2,3,4,4] · s [2,3,1,1]:
//   dims = [2,3,4,4], stride[0] = [48,16,4,1], stride[1] (x) = [48,16,4,1], stride[2] (s) =
//   [3,1,0,0]. The gradient of s sums, for each of its 6 elements, the 16 full elements over the
//   axes where its stride is 0 (2 and 3), in an order fixed by the shapes alone, so the sum is
//   the same bits on every run and under every strategy. broadcast_plan() then coalesces the
//   plan (coalesce() below) to dims [6,16], strides [16,1] / [16,1] / [1,0].
#include <cstdint>

#if defined(__CUDACC__)
#define RL_HOST_DEVICE __host__ __device__
#else
#define RL_HOST_DEVICE
#endif

namespace rl {

constexpr int kMaxBroadcastRank = 8;

struct BroadcastPlan {
    int rank = 0;
    int64_t dims[kMaxBroadcastRank] = {};
    int64_t stride[3][kMaxBroadcastRank] = {};  // [0] the full tensor, [1] and [2] the operands

    RL_HOST_DEVICE int64_t numel() const {
        int64_t n = 1;
        for (int d = 0; d < rank; ++d) n *= dims[d];
        return n;
    }
    // The element count of operand k (1 or 2): the product of the axes it does not repeat.
    RL_HOST_DEVICE int64_t operand_numel(int k) const {
        int64_t n = 1;
        for (int d = 0; d < rank; ++d)
            if (stride[k][d] != 0) n *= dims[d];
        return n;
    }
    // How many full elements each element of operand k stands for.
    RL_HOST_DEVICE int64_t repeats(int k) const { return numel() / operand_numel(k); }
    // The offsets in slots 0, 1 and 2 of full element `index`.
    RL_HOST_DEVICE void offsets(int64_t index, int64_t out[3]) const {
        out[0] = out[1] = out[2] = 0;
        for (int d = rank - 1; d >= 0; --d) {
            const int64_t c = index % dims[d];
            index /= dims[d];
            for (int k = 0; k < 3; ++k) out[k] += c * stride[k][d];
        }
    }
    // For element `index` of operand k (row-major over the axes it does not repeat): the
    // offsets in slots 0, 1 and 2 of its first full element (all repeated axes at 0).
    RL_HOST_DEVICE void operand_base(int k, int64_t index, int64_t out[3]) const {
        out[0] = out[1] = out[2] = 0;
        for (int d = rank - 1; d >= 0; --d) {
            if (stride[k][d] == 0) continue;
            const int64_t c = index % dims[d];
            index /= dims[d];
            for (int s = 0; s < 3; ++s) out[s] += c * stride[s][d];
        }
    }
    // Calls f(o0, o1, o2) for every full element that element `index` of operand k stands for,
    // in row-major order over the repeated axes.
    template <class F>
    RL_HOST_DEVICE void for_each_repeat(int k, int64_t index, F&& f) const {
        for_each_repeat_run(k, index,
                            [&](int64_t o0, int64_t o1, int64_t o2, int64_t len, int64_t s0,
                                int64_t s1, int64_t s2) {
                                for (int64_t t = 0; t < len; ++t)
                                    f(o0 + t * s0, o1 + t * s1, o2 + t * s2);
                            });
    }
    // The same elements as runs along the innermost repeated axis: run(o0, o1, o2, len, s0, s1,
    // s2) covers offsets o + t·s for t < len, the runs in row-major order of the other repeated
    // axes.
    template <class F>
    RL_HOST_DEVICE void for_each_repeat_run(int k, int64_t index, F&& run) const {
        int64_t off[3];
        operand_base(k, index, off);
        int axes[kMaxBroadcastRank];
        int n = 0;
        for (int d = 0; d < rank; ++d)
            if (stride[k][d] == 0 && dims[d] > 1) axes[n++] = d;
        if (n == 0) {
            run(off[0], off[1], off[2], int64_t{1}, int64_t{0}, int64_t{0}, int64_t{0});
            return;
        }
        const int inner = axes[--n];
        int64_t count[kMaxBroadcastRank] = {};
        while (true) {
            run(off[0], off[1], off[2], dims[inner], stride[0][inner], stride[1][inner],
                stride[2][inner]);
            int j = n - 1;
            for (; j >= 0; --j) {
                const int d = axes[j];
                if (++count[j] < dims[d]) {
                    for (int s = 0; s < 3; ++s) off[s] += stride[s][d];
                    break;
                }
                for (int s = 0; s < 3; ++s) off[s] -= (dims[d] - 1) * stride[s][d];
                count[j] = 0;
            }
            if (j < 0) return;
        }
    }
    // Drops axes of size 1 and merges neighbouring axes that every slot walks contiguously
    // (squeeze-excitation's [8,64,56,56] · [8,64,1,1] becomes [512, 3136] · [512, 1]): the same
    // elements in the same order, with longer inner runs.
    RL_HOST_DEVICE void coalesce() {
        int out = 0;
        for (int d = 0; d < rank; ++d) {
            if (dims[d] == 1) continue;
            bool merge = out > 0;
            for (int s = 0; merge && s < 3; ++s)
                merge = stride[s][out - 1] == stride[s][d] * dims[d];
            if (merge) {
                dims[out - 1] *= dims[d];
                for (int s = 0; s < 3; ++s) stride[s][out - 1] = stride[s][d];
                continue;
            }
            dims[out] = dims[d];
            for (int s = 0; s < 3; ++s) stride[s][out] = stride[s][d];
            ++out;
        }
        rank = out;
    }
};

}  // namespace rl
