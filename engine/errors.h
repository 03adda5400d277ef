#pragma once
// Errors a user can cause (bad file, bad parameter, infeasible budget, cap exceeded) are thrown
// as rl::Error with a message that says what was wrong, where, and what to do. Front-ends catch
// rl::Error, print what() and exit non-zero. Our own bugs are assertions, not Errors.
#include <exception>
#include <stdexcept>
#include <string>

namespace rl {

class Error : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// A schedule broke a liveness rule. `index` is the instruction's position in the schedule.
class ScheduleError : public Error {
  public:
    ScheduleError(long index, const std::string& message)
        : Error("instruction " + std::to_string(index) + ": " + message), index_(index) {}
    long index() const { return index_; }

  private:
    long index_;
};

// The run would exceed the memory cap (a simulated smaller device).
class CapExceeded : public Error {
  public:
    using Error::Error;
};

// The run was cancelled between instructions (Ctrl-C, a newer job). Not an Error on purpose: the
// user asked for it, nothing was wrong, and code that reports each failure and carries on (a
// compare row, a sweep point) must stop instead, so it passes every `catch (const Error&)`.
class Cancelled : public std::exception {
  public:
    const char* what() const noexcept override { return "run cancelled"; }
};

}  // namespace rl
