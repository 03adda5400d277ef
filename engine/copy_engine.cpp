#include "engine/copy_engine.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/units.h"

namespace rl {

HostCopyEngine::~HostCopyEngine() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    work_.notify_all();
    if (worker_.joinable()) worker_.join();
}

uint64_t HostCopyEngine::submit(void* dst, const void* src, uint64_t bytes) {
    uint64_t ticket = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        ticket = ++submitted_;
        queue_.push_back({ticket, dst, src, bytes});
        if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    }
    work_.notify_one();
    return ticket;
}

void HostCopyEngine::wait(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return completed_ >= ticket; });
}

double HostCopyEngine::take_ms(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ms_.find(ticket);
    if (it == ms_.end()) return 0;
    const double ms = it->second;
    ms_.erase(it);
    return ms;
}

void HostCopyEngine::run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        work_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and nothing left to copy
        const Job job = queue_.front();
        queue_.pop_front();
        lock.unlock();
        const auto t0 = std::chrono::steady_clock::now();
        if (job.bytes) std::memcpy(job.dst, job.src, job.bytes);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        lock.lock();
        ms_[job.ticket] = ms;
        completed_ = job.ticket;
        done_.notify_all();
    }
}

// --- Backend's host defaults -------------------------------------------------------------

Backend::Backend() = default;
Backend::~Backend() {
    copies_.reset();  // no copy in flight into a buffer freed below
    for (auto& [size, p] : host_cache_) std::free(p);
}

// Released host buffers are kept for reuse by exact size, as the CPU backend keeps its device
// ones (cpu_backend.cpp): a step offloads the same sizes every time, and a fresh buffer's first
// touch (page faults) would otherwise be timed as part of its copy.
void* Backend::allocate_host(uint64_t bytes) {
    constexpr uint64_t kAlign = 64;
    const uint64_t size = std::max<uint64_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (auto it = host_cache_.find(size); it != host_cache_.end()) {
        void* p = it->second;
        host_cache_.erase(it);
        host_sizes_[p] = size;
        return p;
    }
    void* p = size >= bytes ? std::aligned_alloc(kAlign, size) : nullptr;
    if (!p)
        throw Error("out of host memory: could not allocate " + format_bytes(bytes) +
                    " for an offloaded value");
    host_sizes_[p] = size;
    return p;
}

void Backend::release_host(void* p) {
    auto it = host_sizes_.find(p);
    if (it == host_sizes_.end()) return;
    host_cache_.emplace(it->second, p);
    host_sizes_.erase(it);
}

uint64_t Backend::copy_async(void* dst, const void* src, uint64_t bytes, bool /*to_host*/) {
    if (!copies_) copies_ = std::make_unique<HostCopyEngine>();
    return copies_->submit(dst, src, bytes);
}

void Backend::wait_copy(uint64_t ticket) {
    if (copies_) copies_->wait(ticket);
}

double Backend::take_copy_ms(uint64_t ticket) {
    return copies_ ? copies_->take_ms(ticket) : 0.0;
}

}  // namespace rl
