#pragma once
// Transparent huge pages for large host buffers. A first touch of fresh memory faults once per
// page; on the pool's virtual machines a 4 KiB fault costs about 13 us (347 MB, ResNeXt-101's
// weights: 1.1 s), a 2 MiB one about the same for 512 times the bytes (docs/benchmarks.md).
// Where the kernel's THP mode is "madvise" (Debian's default), memory gets huge pages only when
// asked for them.
#include <cstddef>
#include <vector>

namespace rl {

inline constexpr size_t kHugePage = size_t{2} << 20;

// Asks for huge pages on the whole 2 MiB pages inside [p, p + bytes), before anything touches
// them (pages already touched keep their 4 KiB ones). Advice: a no-op where THP is off.
void advise_huge_pages(void* p, size_t bytes);

// `bytes` on a mapping of their own at a 2 MiB boundary, huge pages asked for on the whole
// 2 MiB pages (the tail past the last stays in 4 KiB pages: nothing is resident beyond the
// request); nullptr when the kernel has no memory. Given back with unmap_huge(p, bytes).
void* map_huge(size_t bytes);
void unmap_huge(void* p, size_t bytes);

// v resized to n floats; where that takes a fresh allocation of at least a huge page, huge pages
// are asked for on it before the zeros are written (only its whole 2 MiB pages get them).
void resize_on_huge_pages(std::vector<float>& v, size_t n);

// A block of floats on a mapping of its own (map_huge), zero-filled as mapped.
class HugeFloats {
  public:
    HugeFloats() = default;
    explicit HugeFloats(size_t count);
    HugeFloats(const HugeFloats&) = delete;
    HugeFloats& operator=(const HugeFloats&) = delete;
    HugeFloats(HugeFloats&& o) noexcept { swap(o); }
    HugeFloats& operator=(HugeFloats&& o) noexcept {
        swap(o);
        return *this;
    }
    ~HugeFloats();
    float* data() { return data_; }
    const float* data() const { return data_; }
    size_t size() const { return count_; }

  private:
    void swap(HugeFloats& o) noexcept;
    float* data_ = nullptr;
    size_t count_ = 0;
};

}  // namespace rl
