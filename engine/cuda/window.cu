// Windowed kernels of the CUDA backend on NCHW: pools, im2col/col2im for convolution through
// cuBLAS, conv bias gradients, and a direct depthwise convolution. Each backward is a gather
// (one thread per input element sums the windows that cover it, in the CPU kernel's window
// order), never a scatter with atomics, so results are deterministic; maxpool's and avgpool's
// match the CPU's (engine/cpu/pool.cpp) bit for bit.
#include "engine/cuda/common.cuh"

namespace rl::cuda {
namespace {

// The output position along one axis whose window tap `tap` lands on input index `in`, or -1.
__device__ __forceinline__ int64_t covering(int64_t in, int64_t tap, int64_t stride,
                                            int64_t dilation, int64_t pad, int64_t out) {
    const int64_t t = in + pad - tap * dilation;
    if (t < 0 || t % stride) return -1;
    const int64_t o = t / stride;
    return o < out ? o : -1;
}

// The first maximum of window (oh, ow) in scan order within plane xp, or -1 (padding only).
__device__ int64_t window_argmax(const float* xp, const PoolDims& d, int64_t oh, int64_t ow) {
    const Win& w = d.win;
    const int64_t h0 = oh * w.sh - w.pt, w0 = ow * w.sw - w.pl;
    int64_t best = -1;
    for (int64_t i = 0; i < w.kh; ++i) {
        const int64_t ih = h0 + i * w.dh;
        if (ih < 0 || ih >= d.h) continue;
        for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t iw = w0 + j * w.dw;
            if (iw < 0 || iw >= d.w) continue;
            const int64_t k = ih * d.w + iw;
            if (best < 0 || xp[k] > xp[best]) best = k;
        }
    }
    return best;
}

__device__ float window_divisor(const PoolDims& d, int64_t oh, int64_t ow) {
    const Win& w = d.win;
    const int64_t lo_h = d.count_include_pad ? -w.pt : 0;
    const int64_t hi_h = d.count_include_pad ? d.h + w.pb : d.h;
    const int64_t lo_w = d.count_include_pad ? -w.pl : 0;
    const int64_t hi_w = d.count_include_pad ? d.w + w.pr : d.w;
    int64_t rows = 0, cols = 0;
    for (int64_t i = 0; i < w.kh; ++i) {
        const int64_t ih = oh * w.sh - w.pt + i * w.dh;
        rows += ih >= lo_h && ih < hi_h;
    }
    for (int64_t j = 0; j < w.kw; ++j) {
        const int64_t iw = ow * w.sw - w.pl + j * w.dw;
        cols += iw >= lo_w && iw < hi_w;
    }
    return static_cast<float>(rows * cols);
}

__global__ void maxpool_fwd_kernel(const float* x, float* y, PoolDims d) {
    const int64_t out_plane = d.oh * d.ow;
    RL_GRID_STRIDE(i, d.planes * out_plane) {
        const int64_t q = i / out_plane, oh = (i / d.ow) % d.oh, ow = i % d.ow;
        const float* xp = x + q * d.h * d.w;
        const int64_t k = window_argmax(xp, d, oh, ow);
        y[i] = k < 0 ? 0.0f : xp[k];
    }
}

// Calls f(oh, ow) for each output window covering input (ih, iw), oh then ow ascending.
template <class F>
__device__ void for_covering(const PoolDims& d, int64_t ih, int64_t iw, F&& f) {
    const Win& w = d.win;
    for (int64_t i = w.kh - 1; i >= 0; --i) {
        const int64_t oh = covering(ih, i, w.sh, w.dh, w.pt, d.oh);
        if (oh < 0) continue;
        for (int64_t j = w.kw - 1; j >= 0; --j) {
            const int64_t ow = covering(iw, j, w.sw, w.dw, w.pl, d.ow);
            if (ow >= 0) f(oh, ow);
        }
    }
}

__global__ void maxpool_bwd_kernel(const float* x, const float* dy, float* dx, bool acc,
                                   PoolDims d) {
    const int64_t in_plane = d.h * d.w;
    RL_GRID_STRIDE(i, d.planes * in_plane) {
        const int64_t q = i / in_plane, k = i % in_plane, ih = k / d.w, iw = k % d.w;
        const float* xp = x + q * in_plane;
        const float* dyp = dy + q * d.oh * d.ow;
        float s = acc ? dx[i] : 0.0f;
        for_covering(d, ih, iw, [&](int64_t oh, int64_t ow) {
            if (window_argmax(xp, d, oh, ow) == k) s += dyp[oh * d.ow + ow];
        });
        dx[i] = s;
    }
}

__global__ void avgpool_fwd_kernel(const float* x, float* y, PoolDims d) {
    const int64_t out_plane = d.oh * d.ow;
    const Win& w = d.win;
    RL_GRID_STRIDE(i, d.planes * out_plane) {
        const int64_t q = i / out_plane, oh = (i / d.ow) % d.oh, ow = i % d.ow;
        const float* xp = x + q * d.h * d.w;
        const int64_t h0 = oh * w.sh - w.pt, w0 = ow * w.sw - w.pl;
        float s = 0;
        for (int64_t a = 0; a < w.kh; ++a) {
            const int64_t ih = h0 + a * w.dh;
            if (ih < 0 || ih >= d.h) continue;
            for (int64_t b = 0; b < w.kw; ++b) {
                const int64_t iw = w0 + b * w.dw;
                if (iw >= 0 && iw < d.w) s += xp[ih * d.w + iw];
            }
        }
        const float div = window_divisor(d, oh, ow);
        y[i] = div > 0 ? s / div : 0.0f;
    }
}

__global__ void avgpool_bwd_kernel(const float* dy, float* dx, bool acc, PoolDims d) {
    const int64_t in_plane = d.h * d.w;
    RL_GRID_STRIDE(i, d.planes * in_plane) {
        const int64_t q = i / in_plane, k = i % in_plane;
        const float* dyp = dy + q * d.oh * d.ow;
        float s = acc ? dx[i] : 0.0f;
        for_covering(d, k / d.w, k % d.w, [&](int64_t oh, int64_t ow) {
            const float div = window_divisor(d, oh, ow);
            if (div > 0) s += dyp[oh * d.ow + ow] / div;
        });
        dx[i] = s;
    }
}

__global__ void global_avg_fwd_kernel(const float* x, float* y, int64_t plane) {
    __shared__ float scratch[32];
    const float* xp = x + static_cast<int64_t>(blockIdx.x) * plane;
    float s = 0;
    for (int64_t k = threadIdx.x; k < plane; k += blockDim.x) s += xp[k];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) y[blockIdx.x] = s * (1.0f / static_cast<float>(plane));
}

__global__ void global_avg_bwd_kernel(const float* dy, float* dx, bool acc, int64_t planes,
                                      int64_t plane) {
    const float scale = 1.0f / static_cast<float>(plane);
    RL_GRID_STRIDE(i, planes * plane) store(dx + i, dy[i / plane] * scale, acc);
}

__global__ void im2col_kernel(const float* x, ConvDims d, float* col) {
    const Win& w = d.win;
    const int64_t plane = d.oh * d.ow, cg = d.c / d.groups, taps = w.kh * w.kw;
    RL_GRID_STRIDE(e, cg * taps * plane) {
        const int64_t r = e / plane, p = e % plane;
        const int64_t c = r / taps, i = (r / w.kw) % w.kh, j = r % w.kw;
        const int64_t ih = (p / d.ow) * w.sh - w.pt + i * w.dh;
        const int64_t iw = (p % d.ow) * w.sw - w.pl + j * w.dw;
        col[e] = ih >= 0 && ih < d.h && iw >= 0 && iw < d.w ? x[(c * d.h + ih) * d.w + iw] : 0.0f;
    }
}

__global__ void col2im_kernel(const float* col, ConvDims d, float* dx, bool acc) {
    const Win& w = d.win;
    const int64_t plane = d.oh * d.ow, cg = d.c / d.groups, in_plane = d.h * d.w;
    RL_GRID_STRIDE(e, cg * in_plane) {
        const int64_t c = e / in_plane, ih = (e / d.w) % d.h, iw = e % d.w;
        float s = acc ? dx[e] : 0.0f;
        for (int64_t i = 0; i < w.kh; ++i) {
            const int64_t oh = covering(ih, i, w.sh, w.dh, w.pt, d.oh);
            if (oh < 0) continue;
            for (int64_t j = 0; j < w.kw; ++j) {
                const int64_t ow = covering(iw, j, w.sw, w.dw, w.pl, d.ow);
                if (ow >= 0) s += col[((c * w.kh + i) * w.kw + j) * plane + oh * d.ow + ow];
            }
        }
        dx[e] = s;
    }
}

__global__ void conv_bias_grad_kernel(const float* dy, ConvDims d, float* db) {
    __shared__ float scratch[32];
    const int64_t o = blockIdx.x, plane = d.oh * d.ow;
    float s = 0;
    for (int64_t e = threadIdx.x; e < d.n * plane; e += blockDim.x)
        s += dy[((e / plane) * d.out_c + o) * plane + e % plane];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) db[o] = s;
}

__global__ void depthwise_fwd_kernel(const float* x, const float* wt, const float* b, float* y,
                                     ConvDims d) {
    const Win& w = d.win;
    const int64_t plane = d.oh * d.ow, mult = d.out_c / d.groups;
    RL_GRID_STRIDE(e, d.n * d.out_c * plane) {
        const int64_t q = e / plane, n = q / d.out_c, oc = q % d.out_c, ic = oc / mult;
        const int64_t oh = (e % plane) / d.ow, ow = e % d.ow;
        const float* xc = x + (n * d.c + ic) * d.h * d.w;
        float s = b ? b[oc] : 0.0f;
        for (int64_t i = 0; i < w.kh; ++i) {
            const int64_t ih = oh * w.sh - w.pt + i * w.dh;
            if (ih < 0 || ih >= d.h) continue;
            for (int64_t j = 0; j < w.kw; ++j) {
                const int64_t iw = ow * w.sw - w.pl + j * w.dw;
                if (iw >= 0 && iw < d.w) s += wt[(oc * w.kh + i) * w.kw + j] * xc[ih * d.w + iw];
            }
        }
        y[e] = s;
    }
}

__global__ void depthwise_bwd_input_kernel(const float* dy, const float* wt, float* dx, bool acc,
                                           ConvDims d) {
    const Win& w = d.win;
    const int64_t plane = d.oh * d.ow, mult = d.out_c / d.groups, in_plane = d.h * d.w;
    RL_GRID_STRIDE(e, d.n * d.c * in_plane) {
        const int64_t q = e / in_plane, n = q / d.c, ic = q % d.c;
        const int64_t ih = (e % in_plane) / d.w, iw = e % d.w;
        float s = acc ? dx[e] : 0.0f;
        for (int64_t m = 0; m < mult; ++m) {
            const int64_t oc = ic * mult + m;
            const float* dyp = dy + (n * d.out_c + oc) * plane;
            for (int64_t i = 0; i < w.kh; ++i) {
                const int64_t oh = covering(ih, i, w.sh, w.dh, w.pt, d.oh);
                if (oh < 0) continue;
                for (int64_t j = 0; j < w.kw; ++j) {
                    const int64_t ow = covering(iw, j, w.sw, w.dw, w.pl, d.ow);
                    if (ow >= 0) s += wt[(oc * w.kh + i) * w.kw + j] * dyp[oh * d.ow + ow];
                }
            }
        }
        dx[e] = s;
    }
}

// One block per (out channel, tap): Σ over images and output positions of x·dy.
__global__ void depthwise_bwd_weight_kernel(const float* x, const float* dy, float* dw,
                                            ConvDims d) {
    __shared__ float scratch[32];
    const Win& w = d.win;
    const int64_t taps = w.kh * w.kw, oc = blockIdx.x / taps, t = blockIdx.x % taps;
    const int64_t i = t / w.kw, j = t % w.kw, mult = d.out_c / d.groups, ic = oc / mult;
    const int64_t plane = d.oh * d.ow;
    float s = 0;
    for (int64_t e = threadIdx.x; e < d.n * plane; e += blockDim.x) {
        const int64_t n = e / plane, p = e % plane;
        const int64_t ih = (p / d.ow) * w.sh - w.pt + i * w.dh;
        const int64_t iw = (p % d.ow) * w.sw - w.pl + j * w.dw;
        if (ih >= 0 && ih < d.h && iw >= 0 && iw < d.w)
            s += x[((n * d.c + ic) * d.h + ih) * d.w + iw] * dy[(n * d.out_c + oc) * plane + p];
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) dw[blockIdx.x] = s;
}

}  // namespace

void maxpool_forward(const float* x, float* y, const PoolDims& d, cudaStream_t s) {
    const int64_t n = d.planes * d.oh * d.ow;
    if (n) maxpool_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, d);
}

void maxpool_backward(const float* x, const float* dy, float* dx, bool acc, const PoolDims& d,
                      cudaStream_t s) {
    const int64_t n = d.planes * d.h * d.w;
    if (n) maxpool_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, dy, dx, acc, d);
}

void avgpool_forward(const float* x, float* y, const PoolDims& d, cudaStream_t s) {
    if (d.planes == 0) return;
    if (d.global) {
        global_avg_fwd_kernel<<<static_cast<unsigned>(d.planes), kThreads, 0, s>>>(x, y, d.h * d.w);
        return;
    }
    const int64_t n = d.planes * d.oh * d.ow;
    if (n) avgpool_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, d);
}

void avgpool_backward(const float* dy, float* dx, bool acc, const PoolDims& d, cudaStream_t s) {
    const int64_t n = d.planes * d.h * d.w;
    if (n == 0) return;
    if (d.global)
        global_avg_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, dx, acc, d.planes, d.h * d.w);
    else
        avgpool_bwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, dx, acc, d);
}

void im2col(const float* x, const ConvDims& d, float* col, cudaStream_t s) {
    const int64_t n = (d.c / d.groups) * d.win.kh * d.win.kw * d.oh * d.ow;
    if (n) im2col_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, d, col);
}

void col2im(const float* col, const ConvDims& d, float* dx, bool acc, cudaStream_t s) {
    const int64_t n = (d.c / d.groups) * d.h * d.w;
    if (n) col2im_kernel<<<blocks_for(n), kThreads, 0, s>>>(col, d, dx, acc);
}

void conv_bias_grad(const float* dy, const ConvDims& d, float* db, cudaStream_t s) {
    if (d.out_c)
        conv_bias_grad_kernel<<<static_cast<unsigned>(d.out_c), kThreads, 0, s>>>(dy, d, db);
}

void depthwise_forward(const float* x, const float* wt, const float* b, float* y, const ConvDims& d,
                       cudaStream_t s) {
    const int64_t n = d.n * d.out_c * d.oh * d.ow;
    if (n) depthwise_fwd_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, wt, b, y, d);
}

void depthwise_backward_input(const float* dy, const float* wt, float* dx, bool acc,
                              const ConvDims& d, cudaStream_t s) {
    const int64_t n = d.n * d.c * d.h * d.w;
    if (n) depthwise_bwd_input_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, wt, dx, acc, d);
}

void depthwise_backward_weight(const float* x, const float* dy, float* dw, const ConvDims& d,
                               cudaStream_t s) {
    const int64_t blocks = d.out_c * d.win.kh * d.win.kw;
    if (blocks)
        depthwise_bwd_weight_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(x, dy, dw,
                                                                                       d);
}

}  // namespace rl::cuda
