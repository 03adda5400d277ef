#pragma once
// Cancellation of long work on this thread: a flag (Ctrl-C in the CLI, a newer job in the GUI)
// that code deep inside a strategy or a solver cannot be handed through every signature.
//
// The caller that owns the flag opens a CancelScope around the work; planning code polls
// cancel_requested() / throw_if_cancelled() between its long steps (a solver's phases, a DP's
// outer loop, a portfolio's candidates). Scopes nest: the innermost flag wins, and the previous
// one is back when a scope closes. With no scope open nothing is ever cancelled.
#include <atomic>

#include "engine/errors.h"

namespace rl {

namespace detail {
inline thread_local const std::atomic<bool>* t_cancel_flag = nullptr;
}  // namespace detail

class CancelScope {
  public:
    explicit CancelScope(const std::atomic<bool>* flag) : previous_(detail::t_cancel_flag) {
        detail::t_cancel_flag = flag;
    }
    ~CancelScope() { detail::t_cancel_flag = previous_; }
    CancelScope(const CancelScope&) = delete;
    CancelScope& operator=(const CancelScope&) = delete;

  private:
    const std::atomic<bool>* previous_;
};

// Whether the flag of the innermost open scope on this thread is raised.
inline bool cancel_requested() {
    const std::atomic<bool>* f = detail::t_cancel_flag;
    return f && f->load(std::memory_order_relaxed);
}

// Throws Cancelled when cancel_requested().
inline void throw_if_cancelled() {
    if (cancel_requested()) throw Cancelled();
}

}  // namespace rl
