// Opens cuBLAS with dlopen (engine/cuda/cublas_api.h says why). The soname carries the major
// version the backend was compiled against (CUBLAS_VER_MAJOR): a different major version is a
// different ABI. Searched first as the dynamic loader would (the program's run path, which CMake
// sets to the toolkit's library folder because the CUDA runtime is linked from there;
// LD_LIBRARY_PATH; ld.so.conf), then in the toolkit's library folder at build time.
#include "engine/cuda/cublas_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "engine/errors.h"

namespace rl::cuda {
namespace {

struct Loaded {
    CublasApi api;
    std::string path;
    std::string error;  // empty when api is complete
};

#define RL_CUBLAS_STR2(x) #x
#define RL_CUBLAS_STR(x) RL_CUBLAS_STR2(x)  // expands cublas_v2.h's macros: cublasCreate_v2

template <class F>
void resolve(void* h, const char* name, F& f, std::string& missing) {
    f = reinterpret_cast<F>(dlsym(h, name));
    if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
}

Loaded load() {
    Loaded l;
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    std::string tried;
    void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) {
        l.path = soname;
    } else {
        const char* err = dlerror();
        tried = err ? err : soname;
#ifdef REMATLAB_CUDA_LIBDIR
        const std::string full = std::string(REMATLAB_CUDA_LIBDIR) + "/" + soname;
        h = dlopen(full.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (h) {
            l.path = full;
        } else {
            err = dlerror();
            tried += "; " + (err ? std::string(err) : full);
        }
#endif
    }
    if (!h) {
        l.error = "cuBLAS could not be opened (" + tried + "); install the CUDA toolkit's cuBLAS " +
                  std::to_string(CUBLAS_VER_MAJOR) +
                  ".x, or add its library folder to LD_LIBRARY_PATH, or run on the CPU "
                  "(--device cpu)";
        return l;
    }
    std::string missing;
    CublasApi& a = l.api;
    resolve(h, RL_CUBLAS_STR(cublasCreate), a.create, missing);
    resolve(h, RL_CUBLAS_STR(cublasDestroy), a.destroy, missing);
    resolve(h, RL_CUBLAS_STR(cublasSetStream), a.set_stream, missing);
    resolve(h, RL_CUBLAS_STR(cublasSetWorkspace), a.set_workspace, missing);
    resolve(h, RL_CUBLAS_STR(cublasSetMathMode), a.set_math_mode, missing);
    resolve(h, RL_CUBLAS_STR(cublasSetPointerMode), a.set_pointer_mode, missing);
    resolve(h, RL_CUBLAS_STR(cublasSgemm), a.sgemm, missing);
    resolve(h, RL_CUBLAS_STR(cublasSgemmStridedBatched), a.sgemm_strided_batched, missing);
    resolve(h, RL_CUBLAS_STR(cublasGetStatusName), a.status_name, missing);
    resolve(h, RL_CUBLAS_STR(cublasGetStatusString), a.status_string, missing);
    if (!missing.empty())
        l.error = l.path + " lacks " + missing + "; install cuBLAS " +
                  std::to_string(CUBLAS_VER_MAJOR) + ".x as shipped with the CUDA toolkit";
    // Kept open for the process's life: the handles made through it may outlive any owner here.
    return l;
}

const Loaded& loaded() {
    static std::once_flag once;
    static Loaded l;
    std::call_once(once, [] { l = load(); });
    return l;
}

}  // namespace

const CublasApi& cublas() {
    const Loaded& l = loaded();
    if (!l.error.empty()) throw Error(l.error);
    return l.api;
}

const char* cublas_path() {
    return loaded().path.c_str();
}

}  // namespace rl::cuda
