// The CUDA entry points in a build without the CUDA backend (no CUDA compiler was found when
// CMake configured, or -DREMATLAB_CUDA=OFF): a clear error instead of a missing symbol.
#include "engine/backend.h"
#include "engine/errors.h"

namespace rl {

namespace {
const char* const kReason =
    "this build has no CUDA backend: CMake found no CUDA compiler when it configured (or "
    "REMATLAB_CUDA was OFF); install the CUDA toolkit (nvcc) and reconfigure, e.g. "
    "-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc";
}

bool cuda_available(std::string* why) {
    if (why) *why = kReason;
    return false;
}

std::unique_ptr<Backend> make_cuda_backend(bool) {
    throw Error(std::string(kReason) + "; use the CPU backend (--device cpu)");
}

}  // namespace rl
