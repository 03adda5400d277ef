// The CPU backend keeps released buffers for reuse by size (engine/cpu/cpu_backend.cpp), so a
// step does not fault its pages in again every run.
#include <gtest/gtest.h>

#include <cstdint>

#include "engine/backend.h"

namespace rl {
namespace {

TEST(HostBuffers, AReleasedBufferIsReusedForTheSameSizeOnly) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "the cache is off under AddressSanitizer, which should see every free";
#endif
    auto backend = make_cpu_backend(1);
    void* a = backend->allocate(300000);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
    backend->release(a);
    void* other = backend->allocate(600000);  // another size: not the cached one
    EXPECT_NE(other, a);
    void* again = backend->allocate(300000);
    EXPECT_EQ(again, a);
    // Rounded to the 64-byte alignment: 299 999 bytes is the same buffer size.
    backend->release(again);
    void* close = backend->allocate(299999);
    EXPECT_EQ(close, a);
    backend->release(close);
    backend->release(other);
}

}  // namespace
}  // namespace rl
