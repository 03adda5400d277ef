// cuBLAS is opened when the CUDA backend first needs it (engine/cuda/cublas_api.h), not linked:
// linked, its 650 MB of libraries were mapped at the start of every program of a CUDA build,
// 0.45 s before main() of each CLI call, app start and test process. The first test runs in
// every build (in one without CUDA it holds trivially); the second where CUDA was built.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <string>

#include "cuda/gpu_util.h"
#include "engine/test_util.h"

#if REMATLAB_TEST_CUBLAS_LOADER
#include "engine/cuda/cublas_api.h"
#endif

namespace rl {
namespace {

using testing::run_cli;

// The dynamic loader's own account (LD_DEBUG=libs, glibc) of every library a CPU run opened.
TEST(CublasLoading, ACpuRunOfTheCliNeverOpensCublas) {
    int status = 0;
    const std::string out =
        run_cli("run --network mlp:depth=2,width=8,batch=2 --strategy none --device cpu", &status,
                "LD_DEBUG=libs");
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    // The loader did report: it names the libraries it did open (the C library at least).
    ASSERT_NE(out.find("libc.so"), std::string::npos) << "no LD_DEBUG output:\n" << out;
    EXPECT_EQ(out.find("libcublas"), std::string::npos)
        << "a CPU run opened cuBLAS:\n"
        << out.substr(out.find("libcublas") > 400 ? out.find("libcublas") - 400 : 0, 800);
}

#if REMATLAB_TEST_CUBLAS_LOADER
bool mapped(const std::string& name) {
    return testing::read_bytes("/proc/self/maps").find(name) != std::string::npos;
}

// No GPU needed: opening the library and resolving its symbols does not touch a device.
TEST(CublasLoading, FirstUseOpensCublasAndResolvesEveryEntryPoint) {
    const cuda::CublasApi& api = cuda::cublas();
    EXPECT_TRUE(api.create && api.destroy && api.set_stream && api.set_workspace &&
                api.set_math_mode && api.set_pointer_mode && api.sgemm &&
                api.sgemm_strided_batched && api.status_name && api.status_string);
    EXPECT_TRUE(mapped("libcublas.so")) << cuda::cublas_path();
    EXPECT_NE(std::string(cuda::cublas_path()).find("libcublas.so"), std::string::npos);
    // The resolved functions are cuBLAS's own: they name their statuses.
    EXPECT_STREQ(api.status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
    EXPECT_STREQ(api.status_name(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
    // A second call returns the same table, opened once.
    EXPECT_EQ(&cuda::cublas(), &api);
}
#endif

}  // namespace
}  // namespace rl
