// Choosing a backend by name (`--device cpu|cuda`). Always part of the engine; the CUDA
// backend itself is engine/cuda/cuda_backend.cpp, or unavailable.cpp in a build without CUDA.
#include "engine/backend.h"
#include "engine/errors.h"

namespace rl {

std::unique_ptr<Backend> make_backend(const std::string& device, int threads) {
    if (device == "cpu") return make_cpu_backend(threads);
    if (device == "cuda") return make_cuda_backend();
    throw Error("unknown device '" + device + "'; use cpu or cuda");
}

}  // namespace rl
