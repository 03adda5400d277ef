// Indexing kernels of the CUDA backend: embedding lookups (and the gather op, the same lookup
// of an input's rows) and slices. The embedding's backward
// gives each column of the table gradient to one thread, which clears it and adds the lookups'
// rows in lookup order (the CPU kernel's order, engine/cpu/indexing.cpp): no atomics, bitwise
// the CPU's sums.
#include "engine/cuda/common.cuh"

namespace rl::cuda {
namespace {

__device__ __forceinline__ int64_t lookup_row(const int32_t* idx, int64_t first, int64_t period,
                                              int64_t k) {
    return idx ? static_cast<int64_t>(idx[k]) : first + k % period;
}

__global__ void embedding_fwd_kernel(const int32_t* idx, int64_t first, int64_t period,
                                     const float* w, float* y, int64_t rows, int64_t dim,
                                     int64_t count) {
    RL_GRID_STRIDE(i, count * dim) {
        const int64_t r = lookup_row(idx, first, period, i / dim);
        // Indices were checked against the table before the run; never read outside it.
        y[i] = r >= 0 && r < rows ? w[r * dim + i % dim] : 0.0f;
    }
}

__global__ void embedding_bwd_kernel(const int32_t* idx, int64_t first, int64_t period,
                                     const float* dy, float* dw, bool acc, int64_t rows,
                                     int64_t dim, int64_t count) {
    RL_GRID_STRIDE(j, dim) {
        if (!acc)
            for (int64_t r = 0; r < rows; ++r) dw[r * dim + j] = 0.0f;
        for (int64_t k = 0; k < count; ++k) {
            const int64_t r = lookup_row(idx, first, period, k);
            if (r >= 0 && r < rows) dw[r * dim + j] += dy[k * dim + j];
        }
    }
}

__global__ void slice_fwd_kernel(const float* x, float* y, int64_t outer, int64_t len, int64_t row,
                                 int64_t offset) {
    RL_GRID_STRIDE(i, outer * len) y[i] = x[(i / len) * row + offset + i % len];
}

__global__ void slice_bwd_kernel(const float* dy, float* dx, bool acc, int64_t outer, int64_t len,
                                 int64_t row, int64_t offset) {
    RL_GRID_STRIDE(i, outer * row) {
        const int64_t o = i / row, c = i % row - offset;
        const float g = c >= 0 && c < len ? dy[o * len + c] : 0.0f;
        store(dx + i, g, acc);
    }
}

__global__ void causal_mask_kernel(const float* x, float* y, bool acc, int64_t n, int64_t rows,
                                   int64_t cols, bool forward) {
    RL_GRID_STRIDE(i, n) {
        const int64_t j = i % cols, r = (i / cols) % rows;
        if (forward)
            y[i] = j > r ? -INFINITY : x[i];
        else
            store(y + i, j > r ? 0.0f : x[i], acc);
    }
}

// Output element i of the padded tensor: its input element, or -1 in the padding.
__device__ __forceinline__ int64_t pad_source(const PadDims& d, int64_t i) {
    int64_t src = 0, stride = 1;
    for (int a = d.rank - 1; a >= 0; --a) {
        const int64_t c = i % d.out[a] - d.begin[a];
        i /= d.out[a];
        if (c < 0 || c >= d.in[a]) return -1;
        src += c * stride;
        stride *= d.in[a];
    }
    return src;
}

__global__ void pad_fwd_kernel(const float* x, float* y, PadDims d, int64_t n_out) {
    RL_GRID_STRIDE(i, n_out) {
        const int64_t src = pad_source(d, i);
        y[i] = src >= 0 ? x[src] : 0.0f;
    }
}

// One thread per input element: dx[j] (+)= dy at j's place in the output (a gather).
__global__ void pad_bwd_kernel(const float* dy, float* dx, bool acc, PadDims d, int64_t n_in) {
    RL_GRID_STRIDE(j, n_in) {
        int64_t rest = j, dst = 0, stride = 1;
        for (int a = d.rank - 1; a >= 0; --a) {
            dst += (rest % d.in[a] + d.begin[a]) * stride;
            rest /= d.in[a];
            stride *= d.out[a];
        }
        store(dx + j, dy[dst], acc);
    }
}

}  // namespace

void pad_forward(const float* x, float* y, const PadDims& d, int64_t n_out, cudaStream_t s) {
    if (n_out == 0) return;
    pad_fwd_kernel<<<blocks_for(n_out), kThreads, 0, s>>>(x, y, d, n_out);
}

void pad_backward(const float* dy, float* dx, bool acc, const PadDims& d, int64_t n_in,
                  cudaStream_t s) {
    if (n_in == 0) return;
    pad_bwd_kernel<<<blocks_for(n_in), kThreads, 0, s>>>(dy, dx, acc, d, n_in);
}

void causal_mask_forward(const float* x, float* y, int64_t n, int64_t rows, int64_t cols,
                         cudaStream_t s) {
    causal_mask_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, false, n, rows, cols, true);
}

void causal_mask_backward(const float* dy, float* dx, bool acc, int64_t n, int64_t rows,
                          int64_t cols, cudaStream_t s) {
    causal_mask_kernel<<<blocks_for(n), kThreads, 0, s>>>(dy, dx, acc, n, rows, cols, false);
}

void embedding_forward(const int32_t* idx, int64_t first, int64_t period, const float* w, float* y,
                       int64_t rows, int64_t dim, int64_t count, cudaStream_t s) {
    if (count * dim == 0) return;
    embedding_fwd_kernel<<<blocks_for(count * dim), kThreads, 0, s>>>(idx, first, period, w, y,
                                                                      rows, dim, count);
}

void embedding_backward(const int32_t* idx, int64_t first, int64_t period, const float* dy,
                        float* dw, bool acc, int64_t rows, int64_t dim, int64_t count,
                        cudaStream_t s) {
    if (dim == 0) return;
    embedding_bwd_kernel<<<blocks_for(dim), kThreads, 0, s>>>(idx, first, period, dy, dw, acc, rows,
                                                              dim, count);
}

void slice_forward(const float* x, float* y, int64_t outer, int64_t len, int64_t row,
                   int64_t offset, cudaStream_t s) {
    slice_fwd_kernel<<<blocks_for(outer * len), kThreads, 0, s>>>(x, y, outer, len, row, offset);
}

void slice_backward(const float* dy, float* dx, bool acc, int64_t outer, int64_t len, int64_t row,
                    int64_t offset, cudaStream_t s) {
    slice_bwd_kernel<<<blocks_for(outer * row), kThreads, 0, s>>>(dy, dx, acc, outer, len, row,
                                                                  offset);
}

}  // namespace rl::cuda
