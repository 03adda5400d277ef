#pragma once
// The copy stream of a host backend (offload, engine/schedule.h): one worker thread that does
// the copies submitted to it with memcpy, one at a time in submission order, while the calling
// thread goes on with kernels, as a GPU's copy engine does beside its compute stream. Each copy
// gets a ticket; wait() blocks until that copy has completed, and ms() is how long it took.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace rl {

class HostCopyEngine {
  public:
    HostCopyEngine() = default;
    ~HostCopyEngine();  // finishes the queued copies, then stops the worker
    HostCopyEngine(const HostCopyEngine&) = delete;
    HostCopyEngine& operator=(const HostCopyEngine&) = delete;

    // Queues a copy of `bytes` from src to dst; returns its ticket (never 0).
    uint64_t submit(void* dst, const void* src, uint64_t bytes);
    // Returns once the copy with this ticket (and every earlier one) has completed.
    void wait(uint64_t ticket);
    // The duration of a completed copy in milliseconds (0 for one not known); forgets it.
    double take_ms(uint64_t ticket);

  private:
    struct Job {
        uint64_t ticket;
        void* dst;
        const void* src;
        uint64_t bytes;
    };
    void run();

    std::mutex mu_;
    std::condition_variable work_, done_;
    std::deque<Job> queue_;
    std::unordered_map<uint64_t, double> ms_;
    uint64_t submitted_ = 0, completed_ = 0;
    bool stop_ = false;
    std::thread worker_;  // started by the first submit
};

}  // namespace rl
