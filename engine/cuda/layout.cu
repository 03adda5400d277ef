// Copy-like kernels of the CUDA backend: transpose (rank ≤ 4), concat slices and nearest
// upsampling. Backwards are gathers: upsampling's sums run over each block rows-then-columns,
// the CPU kernel's order (engine/cpu/pool.cpp), so they match it bit for bit.
#include "engine/cuda/common.cuh"

namespace rl::cuda {
namespace {

struct Perm {
    int64_t out_dims[4];
    int64_t stride[4];  // src step per step along dst axis i
};

__global__ void permute_kernel(const float* src, Perm p, float* dst, bool acc, int64_t n) {
    RL_GRID_STRIDE(i, n) {
        int64_t rest = i, off = 0;
        for (int a = 3; a >= 0; --a) {
            const int64_t k = rest % p.out_dims[a];
            rest /= p.out_dims[a];
            off += k * p.stride[a];
        }
        store(dst + i, src[off], acc);
    }
}

__global__ void concat_fwd_kernel(const float* x, float* y, int64_t outer, int64_t len, int64_t row,
                                  int64_t offset) {
    RL_GRID_STRIDE(i, outer * len) y[(i / len) * row + offset + i % len] = x[i];
}

__global__ void concat_bwd_kernel(const float* dy, float* dx, bool acc, int64_t outer, int64_t len,
                                  int64_t row, int64_t offset) {
    RL_GRID_STRIDE(i, outer * len) store(dx + i, dy[(i / len) * row + offset + i % len], acc);
}

__global__ void upsample_fwd_kernel(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                                    int64_t sh, int64_t sw) {
    const int64_t oh = h * sh, ow = w * sw;
    RL_GRID_STRIDE(i, planes * oh * ow) {
        const int64_t q = i / (oh * ow), r = (i / ow) % oh, col = i % ow;
        y[i] = x[(q * h + r / sh) * w + col / sw];
    }
}

__global__ void upsample_bwd_kernel(const float* dy, float* dx, bool acc, int64_t planes, int64_t h,
                                    int64_t w, int64_t sh, int64_t sw) {
    const int64_t ow = w * sw, out_plane = h * sh * ow;
    RL_GRID_STRIDE(i, planes * h * w) {
        const int64_t q = i / (h * w), ih = (i / w) % h, iw = i % w;
        const float* dyp = dy + q * out_plane;
        float s = 0;
        for (int64_t a = 0; a < sh; ++a)
            for (int64_t b = 0; b < sw; ++b) s += dyp[(ih * sh + a) * ow + iw * sw + b];
        store(dx + i, s, acc);
    }
}

}  // namespace

void permute4(const float* src, const int64_t dims[4], const int64_t perm[4], float* dst, bool acc,
              cudaStream_t s) {
    int64_t src_stride[4];
    src_stride[3] = 1;
    for (int k = 2; k >= 0; --k) src_stride[k] = src_stride[k + 1] * dims[k + 1];
    Perm p{};
    for (int i = 0; i < 4; ++i) {
        p.out_dims[i] = dims[perm[i]];
        p.stride[i] = src_stride[perm[i]];
    }
    const int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
    if (n) permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(src, p, dst, acc, n);
}

void concat_part_forward(const float* x, float* y, int64_t outer, int64_t len, int64_t row,
                         int64_t offset, cudaStream_t s) {
    if (outer * len > 0)
        concat_fwd_kernel<<<blocks_for(outer * len), kThreads, 0, s>>>(x, y, outer, len, row,
                                                                       offset);
}

void concat_part_backward(const float* dy, float* dx, bool acc, int64_t outer, int64_t len,
                          int64_t row, int64_t offset, cudaStream_t s) {
    if (outer * len > 0)
        concat_bwd_kernel<<<blocks_for(outer * len), kThreads, 0, s>>>(dy, dx, acc, outer, len, row,
                                                                       offset);
}

void upsample_forward(const float* x, float* y, int64_t planes, int64_t h, int64_t w, int64_t sh,
                      int64_t sw, cudaStream_t s) {
    const int64_t n = planes * h * sh * w * sw;
    if (n) upsample_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, planes, h, w, sh, sw);
}

void upsample_backward(const float* dy, float* dx, bool acc, int64_t planes, int64_t h, int64_t w,
                       int64_t sh, int64_t sw, cudaStream_t s) {
    const int64_t n = planes * h * w;
    if (n)
        upsample_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, dx, acc, planes, h, w, sh, sw);
}

}  // namespace rl::cuda
