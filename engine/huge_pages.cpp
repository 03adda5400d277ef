#include "engine/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>
#include <utility>

namespace rl {
namespace {
size_t whole_pages(size_t bytes) {
    return (bytes + 4095) / 4096 * 4096;
}
}  // namespace

void advise_huge_pages(void* p, size_t bytes) {
    const auto begin = reinterpret_cast<uintptr_t>(p);
    const uintptr_t first = (begin + kHugePage - 1) / kHugePage * kHugePage;
    const uintptr_t last = (begin + bytes) / kHugePage * kHugePage;
    if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void* map_huge(size_t bytes) {
    const size_t span = whole_pages(bytes) + kHugePage;
    void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    const auto base = reinterpret_cast<uintptr_t>(m);
    const uintptr_t at = (base + kHugePage - 1) / kHugePage * kHugePage;
    if (at > base) munmap(m, at - base);
    const uintptr_t end = base + span, used = at + whole_pages(bytes);
    if (end > used) munmap(reinterpret_cast<void*>(used), end - used);
    auto* p = reinterpret_cast<void*>(at);
    advise_huge_pages(p, bytes);
    return p;
}

void unmap_huge(void* p, size_t bytes) {
    if (p) munmap(p, whole_pages(bytes));
}

void resize_on_huge_pages(std::vector<float>& v, size_t n) {
    if (n > v.capacity() && n * sizeof(float) >= kHugePage) {
        std::vector<float> fresh;
        fresh.reserve(n);
        advise_huge_pages(fresh.data(), n * sizeof(float));
        fresh.assign(v.begin(), v.end());
        v.swap(fresh);
    }
    v.resize(n);
}

HugeFloats::HugeFloats(size_t count) : count_(count) {
    if (count == 0) return;
    data_ = static_cast<float*>(map_huge(count * sizeof(float)));
    if (!data_) throw std::bad_alloc();
}

HugeFloats::~HugeFloats() {
    unmap_huge(data_, count_ * sizeof(float));
}

void HugeFloats::swap(HugeFloats& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
}

}  // namespace rl
