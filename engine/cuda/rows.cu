// Row-wise and per-channel kernels of the CUDA backend: column sums, layernorm, softmax,
// l2_normalize, the losses and batchnorm. One block per row (or channel); every reduction is a
// fixed-order block sum (common.cuh), so forward and backward compute bitwise the same statistics.
// The formulas are the CPU kernels' (engine/cpu/norm.cpp, losses.cpp, batchnorm.cpp).
#include "engine/cuda/common.cuh"

namespace rl::cuda {
namespace {

constexpr int kColTile = 32;   // columns per block in column sums
constexpr int kRowLanes = 32;  // row lanes per block in column sums

// Each column tile sums its rows lane by lane (lane l: rows l, l + 32, …) and then the lanes in
// a fixed tree. value(r, j) gives the summand.
template <class F>
__device__ float column_tile_sum(int64_t rows, int64_t j, F value, float (*tile)[kColTile + 1]) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    float acc = 0.0f;
    for (int64_t r = ty; r < rows; r += kRowLanes) acc += value(r, j);
    tile[ty][tx] = acc;
    __syncthreads();
    for (int stride = kRowLanes / 2; stride > 0; stride >>= 1) {
        if (ty < stride) tile[ty][tx] += tile[ty + stride][tx];
        __syncthreads();
    }
    const float out = tile[0][tx];
    __syncthreads();
    return out;
}

__global__ void column_sums_kernel(const float* src, int64_t rows, int64_t cols, float* dst) {
    __shared__ float tile[kRowLanes][kColTile + 1];
    const int64_t j = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
    const bool in = j < cols;
    const float s = column_tile_sum(
        rows, j, [&](int64_t r, int64_t c) { return in ? src[r * cols + c] : 0.0f; }, tile);
    if (in && threadIdx.y == 0) dst[j] = s;
}

// (mean, rstd) of one row, as the CPU: two passes, 1 / sqrt(var + eps).
__device__ float2 row_stats(const float* x, int64_t d, float eps, float* scratch) {
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += x[j];
    const float mean = block_sum(s, scratch) / static_cast<float>(d);
    float q = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        const float t = x[j] - mean;
        q += t * t;
    }
    const float var = block_sum(q, scratch) / static_cast<float>(d);
    return make_float2(mean, 1.0f / sqrtf(var + eps));
}

__global__ void layernorm_fwd_kernel(const float* x, const float* w, const float* b, float* y,
                                     int64_t d, float eps) {
    __shared__ float scratch[32];
    const int64_t off = static_cast<int64_t>(blockIdx.x) * d;
    const float2 st = row_stats(x + off, d, eps, scratch);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        y[off + j] = (x[off + j] - st.x) * st.y * w[j] + b[j];
}

__global__ void layernorm_bwd_kernel(const float* x, const float* w, const float* dy, float* dx,
                                     bool acc, float2* ws, int64_t d, float eps) {
    __shared__ float scratch[32];
    const int64_t r = blockIdx.x, off = r * d;
    const float2 st = row_stats(x + off, d, eps, scratch);
    if (threadIdx.x == 0) ws[r] = st;
    if (!dx) return;
    float gs = 0.0f, gxs = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        const float g = dy[off + j] * w[j];
        gs += g;
        gxs += g * ((x[off + j] - st.x) * st.y);
    }
    const float g_mean = block_sum(gs, scratch) / static_cast<float>(d);
    const float gx_mean = block_sum(gxs, scratch) / static_cast<float>(d);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
        const float xhat = (x[off + j] - st.x) * st.y;
        const float g = dy[off + j] * w[j];
        store(dx + off + j, st.y * (g - g_mean - xhat * gx_mean), acc);
    }
}

__global__ void layernorm_params_kernel(const float* x, const float* dy, const float2* ws,
                                        float* dw, float* db, int64_t rows, int64_t d) {
    __shared__ float tile[kRowLanes][kColTile + 1];
    const int64_t j = static_cast<int64_t>(blockIdx.x) * kColTile + threadIdx.x;
    const bool in = j < d;
    if (dw) {
        const float s = column_tile_sum(
            rows, j,
            [&](int64_t r, int64_t c) {
                return in ? dy[r * d + c] * ((x[r * d + c] - ws[r].x) * ws[r].y) : 0.0f;
            },
            tile);
        if (in && threadIdx.y == 0) dw[j] = s;
    }
    if (db) {
        const float s = column_tile_sum(
            rows, j, [&](int64_t r, int64_t c) { return in ? dy[r * d + c] : 0.0f; }, tile);
        if (in && threadIdx.y == 0) db[j] = s;
    }
}

__global__ void softmax_fwd_kernel(const float* x, float* y, int64_t d) {
    __shared__ float scratch[32];
    const int64_t off = static_cast<int64_t>(blockIdx.x) * d;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) m = fmaxf(m, x[off + j]);
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += expf(x[off + j] - m);
    const float inv = 1.0f / block_sum(s, scratch);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) y[off + j] = expf(x[off + j] - m) * inv;
}

__global__ void softmax_bwd_kernel(const float* y, const float* dy, float* dx, bool acc,
                                   int64_t d) {
    __shared__ float scratch[32];
    const int64_t off = static_cast<int64_t>(blockIdx.x) * d;
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) s += dy[off + j] * y[off + j];
    const float dot = block_sum(s, scratch);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        store(dx + off + j, y[off + j] * (dy[off + j] - dot), acc);
}

// ‖x‖ of one row, the squares summed in double in the block's fixed order.
__device__ double row_norm(const float* x, int64_t d, double* scratch) {
    double s = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        s += static_cast<double>(x[j]) * static_cast<double>(x[j]);
    return sqrt(block_sum(s, scratch));
}

__global__ void l2_normalize_fwd_kernel(const float* x, float* y, int64_t d, double eps) {
    __shared__ double scratch[32];
    const int64_t off = static_cast<int64_t>(blockIdx.x) * d;
    const auto denom = static_cast<float>(fmax(row_norm(x + off, d, scratch), eps));
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) y[off + j] = x[off + j] / denom;
}

// As the CPU (engine/cpu/norm.cpp): with n = ‖x‖ >= eps, dX = (dY - x·(Σ dY·x)/n²)/n; below eps
// the denominator is the constant eps, so dX = dY/eps.
__global__ void l2_normalize_bwd_kernel(const float* x, const float* dy, float* dx, bool acc,
                                        int64_t d, double eps) {
    __shared__ double scratch[32];
    const int64_t off = static_cast<int64_t>(blockIdx.x) * d;
    const double n = row_norm(x + off, d, scratch);
    if (n < eps) {
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
            store(dx + off + j, static_cast<float>(dy[off + j] / eps), acc);
        return;
    }
    double s = 0;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        s += static_cast<double>(dy[off + j]) * static_cast<double>(x[off + j]);
    const double k = block_sum(s, scratch) / (n * n);
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        store(dx + off + j, static_cast<float>((dy[off + j] - x[off + j] * k) / n), acc);
}

__global__ void sum_squares_kernel(const float* x, float* y, int64_t n) {
    __shared__ double scratch[32];
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const double v = x[i];
        s += v * v;
    }
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) y[0] = static_cast<float>(0.5 * s);
}

// (max, Σ exp(x - max)) of one row of logits.
__device__ float2 logit_stats(const float* x, int64_t classes, float* scratch) {
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) m = fmaxf(m, x[j]);
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) s += expf(x[j] - m);
    return make_float2(m, block_sum(s, scratch));
}

__global__ void ce_rows_kernel(const float* x, const int32_t* labels, float* row_loss,
                               int64_t classes) {
    __shared__ float scratch[32];
    const int64_t r = blockIdx.x;
    const float* xr = x + r * classes;
    const float2 st = logit_stats(xr, classes, scratch);
    if (threadIdx.x == 0) row_loss[r] = st.x + logf(st.y) - xr[labels[r]];
}

__global__ void ce_mean_kernel(const float* row_loss, float* y, int64_t rows) {
    __shared__ double scratch[32];
    double s = 0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += row_loss[r];
    s = block_sum(s, scratch);
    if (threadIdx.x == 0) y[0] = static_cast<float>(s / static_cast<double>(rows));
}

__global__ void ce_bwd_kernel(const float* x, const int32_t* labels, const float* g, float* dx,
                              bool acc, int64_t rows, int64_t classes) {
    __shared__ float scratch[32];
    const int64_t r = blockIdx.x;
    const float* xr = x + r * classes;
    float* dxr = dx + r * classes;
    const float scale = g[0] / static_cast<float>(rows);
    const float2 st = logit_stats(xr, classes, scratch);
    const float k = scale / st.y;
    const int32_t label = labels[r];
    for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
        float v = expf(xr[j] - st.x) * k;
        if (acc) v = dxr[j] + v;
        if (j == label) v -= scale;
        dxr[j] = v;
    }
}

struct ChannelStats {
    float mean, rstd;
};

// Batch statistics of channel `ch` over its n segments of `inner` elements, in double.
__device__ ChannelStats channel_stats(const float* x, int64_t n, int64_t c, int64_t inner,
                                      int64_t ch, double eps, double* scratch) {
    const int64_t count = n * inner;
    double s = 0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x)
        s += x[((e / inner) * c + ch) * inner + e % inner];
    const double mean = block_sum(s, scratch) / static_cast<double>(count);
    double q = 0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
        const double t = x[((e / inner) * c + ch) * inner + e % inner] - mean;
        q += t * t;
    }
    const double var = block_sum(q, scratch) / static_cast<double>(count);
    return {static_cast<float>(mean), static_cast<float>(1.0 / sqrt(var + eps))};
}

__global__ void batchnorm_fwd_kernel(const float* x, const float* w, const float* b, float* y,
                                     int64_t n, int64_t c, int64_t inner, double eps) {
    __shared__ double scratch[32];
    const int64_t ch = blockIdx.x;
    const ChannelStats st = channel_stats(x, n, c, inner, ch, eps, scratch);
    const float scale = st.rstd * w[ch], shift = b[ch] - st.mean * scale;
    for (int64_t e = threadIdx.x; e < n * inner; e += blockDim.x) {
        const int64_t i = ((e / inner) * c + ch) * inner + e % inner;
        y[i] = x[i] * scale + shift;
    }
}

__global__ void batchnorm_bwd_kernel(const float* x, const float* w, const float* dy, float* dx,
                                     bool acc, float* dw, float* db, int64_t n, int64_t c,
                                     int64_t inner, double eps) {
    __shared__ double scratch[32];
    const int64_t ch = blockIdx.x, count = n * inner;
    const ChannelStats st = channel_stats(x, n, c, inner, ch, eps, scratch);
    double s_dy = 0, s_dyx = 0;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
        const int64_t i = ((e / inner) * c + ch) * inner + e % inner;
        s_dy += dy[i];
        s_dyx += dy[i] * ((x[i] - st.mean) * st.rstd);
    }
    const double sum_dy = block_sum(s_dy, scratch);
    const double sum_dyx = block_sum(s_dyx, scratch);
    if (threadIdx.x == 0) {
        if (dw) dw[ch] = static_cast<float>(sum_dyx);
        if (db) db[ch] = static_cast<float>(sum_dy);
    }
    if (!dx) return;
    const double m = static_cast<double>(count);
    const float mean_dy = static_cast<float>(sum_dy / m);
    const float mean_dyx = static_cast<float>(sum_dyx / m);
    const float k = w[ch] * st.rstd;
    for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
        const int64_t i = ((e / inner) * c + ch) * inner + e % inner;
        const float xhat = (x[i] - st.mean) * st.rstd;
        store(dx + i, k * (dy[i] - mean_dy - xhat * mean_dyx), acc);
    }
}

unsigned col_blocks(int64_t cols) {
    return static_cast<unsigned>((cols + kColTile - 1) / kColTile);
}

// Rows are one block each (grid x allows 2^31 - 1).
unsigned row_blocks(int64_t rows) {
    return static_cast<unsigned>(rows);
}

}  // namespace

void column_sums(const float* src, int64_t rows, int64_t cols, float* dst, cudaStream_t s) {
    if (cols == 0) return;
    column_sums_kernel<<<col_blocks(cols), dim3(kColTile, kRowLanes), 0, s>>>(src, rows, cols, dst);
}

void layernorm_forward(const float* x, const float* w, const float* b, float* y, int64_t rows,
                       int64_t d, float eps, cudaStream_t s) {
    if (rows) layernorm_fwd_kernel<<<row_blocks(rows), kThreads, 0, s>>>(x, w, b, y, d, eps);
}

void layernorm_backward(const float* x, const float* w, const float* dy, float* dx, bool acc,
                        float* dw, float* db, float2* ws, int64_t rows, int64_t d, float eps,
                        cudaStream_t s) {
    if (rows == 0) return;
    layernorm_bwd_kernel<<<row_blocks(rows), kThreads, 0, s>>>(x, w, dy, dx, acc, ws, d, eps);
    if (dw || db)
        layernorm_params_kernel<<<col_blocks(d), dim3(kColTile, kRowLanes), 0, s>>>(x, dy, ws, dw,
                                                                                    db, rows, d);
}

void softmax_forward(const float* x, float* y, int64_t rows, int64_t d, cudaStream_t s) {
    if (rows) softmax_fwd_kernel<<<row_blocks(rows), kThreads, 0, s>>>(x, y, d);
}

void softmax_backward(const float* y, const float* dy, float* dx, bool acc, int64_t rows, int64_t d,
                      cudaStream_t s) {
    if (rows) softmax_bwd_kernel<<<row_blocks(rows), kThreads, 0, s>>>(y, dy, dx, acc, d);
}

void l2_normalize_forward(const float* x, float* y, int64_t rows, int64_t d, double eps,
                          cudaStream_t s) {
    if (rows) l2_normalize_fwd_kernel<<<row_blocks(rows), kThreads, 0, s>>>(x, y, d, eps);
}

void l2_normalize_backward(const float* x, const float* dy, float* dx, bool acc, int64_t rows,
                           int64_t d, double eps, cudaStream_t s) {
    if (rows) l2_normalize_bwd_kernel<<<row_blocks(rows), kThreads, 0, s>>>(x, dy, dx, acc, d, eps);
}

void sum_squares_forward(const float* x, float* y, int64_t n, cudaStream_t s) {
    sum_squares_kernel<<<1, 1024, 0, s>>>(x, y, n);
}

void cross_entropy_forward(const float* x, const int32_t* labels, float* row_loss, float* y,
                           int64_t rows, int64_t classes, cudaStream_t s) {
    if (rows) ce_rows_kernel<<<row_blocks(rows), kThreads, 0, s>>>(x, labels, row_loss, classes);
    ce_mean_kernel<<<1, 1024, 0, s>>>(row_loss, y, rows);
}

void cross_entropy_backward(const float* x, const int32_t* labels, const float* g, float* dx,
                            bool acc, int64_t rows, int64_t classes, cudaStream_t s) {
    if (rows)
        ce_bwd_kernel<<<row_blocks(rows), kThreads, 0, s>>>(x, labels, g, dx, acc, rows, classes);
}

void batchnorm_forward(const float* x, const float* w, const float* b, float* y, int64_t n,
                       int64_t c, int64_t inner, double eps, cudaStream_t s) {
    if (c)
        batchnorm_fwd_kernel<<<static_cast<unsigned>(c), kThreads, 0, s>>>(x, w, b, y, n, c, inner,
                                                                           eps);
}

void batchnorm_backward(const float* x, const float* w, const float* dy, float* dx, bool acc,
                        float* dw, float* db, int64_t n, int64_t c, int64_t inner, double eps,
                        cudaStream_t s) {
    if (c)
        batchnorm_bwd_kernel<<<static_cast<unsigned>(c), kThreads, 0, s>>>(x, w, dy, dx, acc, dw,
                                                                           db, n, c, inner, eps);
}

}  // namespace rl::cuda
