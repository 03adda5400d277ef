#include "engine/allocator.h"

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/units.h"

namespace rl {

TrackingAllocator::TrackingAllocator(Backend& backend, uint64_t cap, bool host)
    : backend_(backend), cap_(cap), host_(host), epoch_(std::chrono::steady_clock::now()) {}

TrackingAllocator::~TrackingAllocator() = default;

void TrackingAllocator::reset_epoch(std::chrono::steady_clock::time_point at) {
    for (auto& p : timeline_) p.time_ms = 0;
    epoch_ = at;
    stopped_ms_ = -1;
}

void* TrackingAllocator::allocate(uint64_t bytes, Category c, int32_t instruction,
                                  const std::string& what) {
    if (cap_ && live_ + bytes > cap_)
        throw CapExceeded("allocating " + format_bytes(bytes) + " for " + what + " (" +
                              category_name(c) + ") would bring live memory to " +
                              format_bytes(live_ + bytes) + ", over the cap of " +
                              format_bytes(cap_) + " (" + std::to_string(cap_) + " bytes)",
                          CapExceeded::Details{instruction, bytes, live_, cap_, what, {}});
    void* p = host_ ? backend_.allocate_host(bytes) : backend_.allocate(bytes);
    if (!p)
        throw Error("out of memory: the " + backend_.name() + " backend could not allocate " +
                    format_bytes(bytes) + " for " + what);
    ++outstanding_;
    live_ += bytes;
    by_category_[static_cast<size_t>(c)] += bytes;
    auto& cp = peak_by_category_[static_cast<size_t>(c)];
    if (by_category_[static_cast<size_t>(c)] > cp) cp = by_category_[static_cast<size_t>(c)];
    if (live_ > peak_) {
        peak_ = live_;
        peak_instruction_ = instruction;
    }
    record(instruction);
    return p;
}

void TrackingAllocator::release(void* p, uint64_t bytes, Category c, int32_t instruction) {
    if (host_)
        backend_.release_host(p);
    else
        backend_.release(p);
    --outstanding_;
    live_ -= bytes;
    by_category_[static_cast<size_t>(c)] -= bytes;
    record(instruction);
}

void TrackingAllocator::record(int32_t instruction) {
    if (!record_) return;
    const double t =
        stopped_ms_ >= 0
            ? stopped_ms_
            : std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - epoch_)
                  .count();
    timeline_.push_back({t, live_, instruction});
}

}  // namespace rl
