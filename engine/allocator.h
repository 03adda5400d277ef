#pragma once
// Every tensor byte of a run comes from the tracking allocator. It counts live bytes by category,
// records a timeline of (time, bytes, instruction) and the high-water mark, and can enforce a cap
// (a simulated smaller device): an allocation over the cap throws rl::CapExceeded naming the
// instruction instead of allocating.
#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/liveness.h"
#include "engine/timeline_point.h"

namespace rl {

class Backend;

class TrackingAllocator {
  public:
    // `host`: the host pool of offloaded values (Backend::allocate_host) instead of the device.
    explicit TrackingAllocator(Backend& backend, uint64_t cap = 0, bool host = false);
    ~TrackingAllocator();
    TrackingAllocator(const TrackingAllocator&) = delete;
    TrackingAllocator& operator=(const TrackingAllocator&) = delete;

    // `what` names the buffer in the error when the cap is exceeded.
    void* allocate(uint64_t bytes, Category c, int32_t instruction, const std::string& what);
    void release(void* p, uint64_t bytes, Category c, int32_t instruction);
    // A timeline event without a change of bytes: an in-place Compute (engine/liveness.h), so
    // that every Compute has an event at the time it ran.
    void mark(int32_t instruction) { record(instruction); }

    // Time 0 is `at`; events recorded so far (set-up) move to time 0.
    void reset_epoch(std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now());
    // Events recorded from now on (tear-down: the step's buffers released after it, the
    // gradients copied out first) sit at `ms`, the step's end, as set-up's sit at 0.
    void stop_clock_at(double ms) { stopped_ms_ = ms; }
    void set_record_timeline(bool on) { record_ = on; }
    uint64_t live_bytes() const { return live_; }
    uint64_t live_bytes(Category c) const { return by_category_[static_cast<size_t>(c)]; }
    uint64_t peak_bytes() const { return peak_; }
    uint64_t peak_bytes(Category c) const { return peak_by_category_[static_cast<size_t>(c)]; }
    int32_t peak_instruction() const { return peak_instruction_; }
    uint64_t cap() const { return cap_; }
    const std::vector<TimelinePoint>& timeline() const { return timeline_; }
    // Allocations still outstanding (0 after a clean run).
    size_t outstanding() const { return outstanding_; }

  private:
    void record(int32_t instruction);

    Backend& backend_;
    uint64_t cap_;
    bool host_;
    uint64_t live_ = 0, peak_ = 0;
    int32_t peak_instruction_ = -1;
    std::array<uint64_t, kNumCategories> by_category_{}, peak_by_category_{};
    std::vector<TimelinePoint> timeline_;
    bool record_ = true;
    size_t outstanding_ = 0;
    std::chrono::steady_clock::time_point epoch_;
    double stopped_ms_ = -1;  // < 0: the clock runs
};

}  // namespace rl
