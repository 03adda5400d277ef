#pragma once
// cuBLAS, opened with dlopen when the CUDA backend first needs it instead of linked. Linked, its
// libraries (libcublas and libcublasLt, 650 MB with CUDA 13) were mapped and relocated at the
// start of every program built with the CUDA backend, used or not: 0.45 s before main() for
// `rematlab-cli --version`, for the app, and for each of the test suite's processes. Only the
// CUDA runtime (under 1 MB) stays linked. Internal to the CUDA backend.
#include <cublas_v2.h>

namespace rl::cuda {

// The cuBLAS entry points the backend calls. cublas_v2.h maps some names to their _v2 symbols
// (cublasCreate to cublasCreate_v2, …); the loader resolves those.
struct CublasApi {
    decltype(&cublasCreate) create = nullptr;
    decltype(&cublasDestroy) destroy = nullptr;
    decltype(&cublasSetStream) set_stream = nullptr;
    decltype(&cublasSetWorkspace) set_workspace = nullptr;
    decltype(&cublasSetMathMode) set_math_mode = nullptr;
    decltype(&cublasSetPointerMode) set_pointer_mode = nullptr;
    decltype(&cublasSgemm) sgemm = nullptr;
    decltype(&cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
    decltype(&cublasGetStatusName) status_name = nullptr;
    decltype(&cublasGetStatusString) status_string = nullptr;
};

// Opens cuBLAS on the first call (thread-safe) and returns its entry points; throws rl::Error
// saying which library could not be opened or lacked which symbol, and what to do, on that call
// and every later one.
const CublasApi& cublas();

// The file cuBLAS was opened from, after a successful cublas().
const char* cublas_path();

}  // namespace rl::cuda
