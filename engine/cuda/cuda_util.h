#pragma once
// Internal to the CUDA backend: error checks that throw rl::Error naming the call, and RAII
// owners for the stream, the cuBLAS handle and events. Plain C++ (compiled by the host
// compiler); the CUDA runtime and cuBLAS headers are C APIs.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "engine/cuda/cublas_api.h"
#include "engine/errors.h"

namespace rl::cuda {

[[noreturn]] void throw_cuda(cudaError_t e, const char* what);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* what);

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw_cuda(e, what);
}
inline void check(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw_cublas(s, what);
}

// A kernel launch's configuration error shows at cudaGetLastError.
inline void check_launch(const char* kernel) {
    check(cudaGetLastError(), kernel);
}

class Stream {
  public:
    Stream() { check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate"); }
    ~Stream() { cudaStreamDestroy(s_); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    cudaStream_t get() const { return s_; }
    void synchronize() const { check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

  private:
    cudaStream_t s_ = nullptr;
};

class Event {
  public:
    Event() { check(cudaEventCreate(&e_), "cudaEventCreate"); }
    ~Event() { cudaEventDestroy(e_); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    cudaEvent_t get() const { return e_; }
    void record(cudaStream_t s) { check(cudaEventRecord(e_, s), "cudaEventRecord"); }
    void synchronize() const { check(cudaEventSynchronize(e_), "cudaEventSynchronize"); }
    // Milliseconds from `start` to this event (both recorded and complete).
    float since(const Event& start) const {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start.e_, e_), "cudaEventElapsedTime");
        return ms;
    }

  private:
    cudaEvent_t e_ = nullptr;
};

class CublasHandle {
  public:
    CublasHandle() { check(cublas().create(&h_), "cublasCreate"); }
    ~CublasHandle() { cublas().destroy(h_); }
    CublasHandle(const CublasHandle&) = delete;
    CublasHandle& operator=(const CublasHandle&) = delete;
    cublasHandle_t get() const { return h_; }

  private:
    cublasHandle_t h_ = nullptr;
};

// Owns one cudaMalloc block (the backend's fixed cuBLAS workspace).
class DeviceBlock {
  public:
    DeviceBlock() = default;
    explicit DeviceBlock(size_t bytes) : bytes_(bytes) {
        if (bytes) check(cudaMalloc(&p_, bytes), "cudaMalloc (cuBLAS workspace)");
    }
    ~DeviceBlock() {
        if (p_) cudaFree(p_);
    }
    DeviceBlock(const DeviceBlock&) = delete;
    DeviceBlock& operator=(const DeviceBlock&) = delete;
    void* get() const { return p_; }
    size_t bytes() const { return bytes_; }

  private:
    void* p_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace rl::cuda
