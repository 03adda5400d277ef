// The CPU backend keeps released buffers for reuse by size (engine/cpu/cpu_backend.cpp), so a
// step does not fault its pages in again every run.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/backend.h"
#include "engine/huge_pages.h"

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

// Buffers of 2 MiB and more have mappings of their own at a 2 MiB boundary (huge pages asked
// for). Every byte of each is writable, none overlaps another, and each is kept for its size.
TEST(HostBuffers, LargeBuffersStartAtAHugePageBoundaryAndHoldEveryByte) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "under AddressSanitizer every buffer comes from the heap";
#endif
    constexpr uint64_t kHuge = uint64_t{2} << 20;
    const std::vector<uint64_t> sizes = {kHuge, kHuge + 1, 5 * kHuge + 100, 3 * kHuge - 64};
    auto backend = make_cpu_backend(1);
    std::vector<unsigned char*> bufs;
    for (size_t i = 0; i < sizes.size(); ++i) {
        auto* p = static_cast<unsigned char*>(backend->allocate(sizes[i]));
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHuge, 0u) << sizes[i];
        std::memset(p, static_cast<int>(i + 1), sizes[i]);
        bufs.push_back(p);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
        const unsigned char want = static_cast<unsigned char>(i + 1);
        EXPECT_EQ(bufs[i][0], want);
        EXPECT_EQ(bufs[i][sizes[i] / 2], want);
        EXPECT_EQ(bufs[i][sizes[i] - 1], want) << sizes[i];
    }
    for (unsigned char* p : bufs) backend->release(p);
    // Kept by size, the last released first: the same buffers, their bytes as left.
    for (size_t i = sizes.size(); i-- > 0;) {
        auto* again = static_cast<unsigned char*>(backend->allocate(sizes[i]));
        EXPECT_EQ(again, bufs[i]) << sizes[i];
        EXPECT_EQ(again[sizes[i] - 1], static_cast<unsigned char>(i + 1));
        backend->release(again);
    }
}

// A block of floats on a mapping of its own starts zeroed at a 2 MiB boundary, holds every
// value written, and moves with its floats; a vector resized past a huge page keeps its values
// and reads zeros after them.
TEST(HostBuffers, HugeBlocksAndResizedVectorsKeepTheirValues) {
    const size_t n = 3 * kHugePage / sizeof(float) + 17;
    HugeFloats block(n);
    ASSERT_EQ(block.size(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block.data()) % kHugePage, 0u);
    int nonzero = 0;
    for (size_t i = 0; i < n; ++i) nonzero += block.data()[i] != 0.0f;
    EXPECT_EQ(nonzero, 0);
    for (size_t i = 0; i < n; ++i) block.data()[i] = static_cast<float>(i % 1000);
    const float* at = block.data();
    HugeFloats moved = std::move(block);
    EXPECT_EQ(moved.data(), at);
    EXPECT_EQ(moved.size(), n);
    EXPECT_EQ(block.size(), 0u);
    EXPECT_EQ(moved.data()[n - 1], static_cast<float>((n - 1) % 1000));

    std::vector<float> v = {1.5f, -2.0f, 3.25f};
    resize_on_huge_pages(v, n);
    ASSERT_EQ(v.size(), n);
    EXPECT_EQ(v[0], 1.5f);
    EXPECT_EQ(v[1], -2.0f);
    EXPECT_EQ(v[2], 3.25f);
    EXPECT_EQ(v[3], 0.0f);
    EXPECT_EQ(v[n - 1], 0.0f);
    resize_on_huge_pages(v, 2);  // shrinking keeps the first values
    EXPECT_EQ(v, (std::vector<float>{1.5f, -2.0f}));
}

// More than the fixed 1 GiB floor live at once (two 640 MiB buffers, as a large model's weight
// gradients and workspaces are): both are kept when released, since the bound is twice the most
// ever live, because a step that needed them together will need them again. A buffer handed back to
// glibc at that size is unmapped, and a fresh mapping reads zeros, so the marker written before the
// release tells which came back.
TEST(HostBuffers, KeepsBeyondTheFloorUpToTwiceTheMostEverLive) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "the cache is off under AddressSanitizer, which should see every free";
#endif
    constexpr uint64_t kBytes = uint64_t{640} << 20;
    auto backend = make_cpu_backend(1);
    auto* a = static_cast<unsigned char*>(backend->allocate(kBytes));
    auto* b = static_cast<unsigned char*>(backend->allocate(kBytes));
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    // One byte per end of each buffer: two pages touched, not 640 MiB.
    a[0] = a[kBytes - 1] = 0xA5;
    b[0] = b[kBytes - 1] = 0x5A;
    backend->release(a);
    backend->release(b);  // 1.25 GiB cached: above the floor, within twice the most ever live
    // The cache hands out the last released buffer of a size first.
    auto* again_b = static_cast<unsigned char*>(backend->allocate(kBytes));
    auto* again_a = static_cast<unsigned char*>(backend->allocate(kBytes));
    const bool kept_b = again_b == b && again_b[0] == 0x5A && again_b[kBytes - 1] == 0x5A;
    const bool kept_a = again_a == a && again_a[0] == 0xA5 && again_a[kBytes - 1] == 0xA5;
    EXPECT_TRUE(kept_a && kept_b) << "one of the two was handed back to the system: kept_a="
                                  << kept_a << ", kept_b=" << kept_b;
    backend->release(again_a);
    backend->release(again_b);
}

}  // namespace
}  // namespace rl
