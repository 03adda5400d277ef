#pragma once
// Errors a user can cause (bad file, bad parameter, infeasible budget, cap exceeded) are thrown
// as rl::Error with a message that says what was wrong, where, and what to do. Front-ends catch
// rl::Error, print what() and exit non-zero. Our own bugs are assertions, not Errors.
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/timeline_point.h"

namespace rl {

class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// A strategy that does not apply to a network (one that needs the forward/backward structure,
// asked to plan a plan-only abstract graph). compare shows it as "not applicable", not a failure.
class NotApplicable : public Error {
  public:
    using Error::Error;
};

// Why a plan-only network (Graph::plan_only: an abstract benchmark graph) cannot be executed;
// every front-end that refuses to run one says this.
inline constexpr const char* kPlanOnlyNoKernels =
    "an abstract benchmark graph has no kernels, so it cannot be run; use plan, compare "
    "(predicted figures only) or solve";

// A schedule broke a liveness rule. `index` is the instruction's position in the schedule.
class ScheduleError : public Error {
  public:
    ScheduleError(long index, const std::string& message)
        : Error("instruction " + std::to_string(index) + ": " + message), index_(index) {}
    long index() const { return index_; }

  private:
    long index_;
};

// The run would exceed the memory cap (a simulated smaller device). What the run did up to there
// comes with it (details()), so a front-end can draw the measured curve up to the failure, the cap
// and the allocation that failed beside the plan's prediction.
class CapExceeded : public Error {
  public:
    struct Details {
        long instruction = -1;   // the failing instruction (-1: set-up, before the first one)
        uint64_t requested = 0;  // bytes of the allocation that failed
        uint64_t live = 0;       // live bytes when it was asked for
        uint64_t cap = 0;
        std::string what;  // the buffer it was for
        // The events measured before the failing allocation (empty when the run recorded no
        // timeline); their bytes are those the simulator predicts for the same events.
        std::vector<TimelinePoint> timeline;
    };
    using Error::Error;
    CapExceeded(const std::string& message, Details details)
        : Error(message), details_(std::make_shared<const Details>(std::move(details))) {}
    // Null only for a CapExceeded built from a message alone.
    const Details* details() const { return details_.get(); }

  private:
    std::shared_ptr<const Details> details_;
};

// The run was cancelled between instructions (Ctrl-C, a newer job). Not an Error on purpose: the
// user asked for it, nothing was wrong, and code that reports each failure and carries on (a
// compare row, a sweep point) must stop instead, so it passes every `catch (const Error&)`.
class Cancelled : public std::exception {
  public:
    const char* what() const noexcept override { return "run cancelled"; }
};

}  // namespace rl
