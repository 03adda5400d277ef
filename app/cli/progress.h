#pragma once
// A one-line progress bar on stderr, fed by the executor's observer. It redraws at most ~20
// times a second, waits a quarter second before drawing at all (short runs stay quiet), and
// erases itself when done. Only used when stderr is a terminal and --json is off.
#include <chrono>
#include <cstdint>
#include <string>

#include "engine/executor.h"

namespace rl::cli {

class ProgressBar : public ExecutionObserver {
  public:
    ProgressBar();
    ~ProgressBar() override;
    ProgressBar(const ProgressBar&) = delete;
    ProgressBar& operator=(const ProgressBar&) = delete;

    // What runs next (a strategy name), how many times (--repeat), and its schedule length when
    // known (0: learnt from the first run).
    void begin(const std::string& label, int runs, long expected_instructions = 0);
    void on_instruction(long index, uint64_t live_bytes, double elapsed_ms) override;
    // A line with no bar, drawn at once, for work without instructions to count (planning).
    void status(const std::string& text);
    // Erases the bar.
    void clear();

    // Whether a bar makes sense: stderr is a terminal.
    static bool wanted();

  private:
    void draw(long index, uint64_t live_bytes);

    std::string label_;
    long expected_ = 0;
    long last_index_ = -1;
    long longest_run_ = 0;
    int run_ = 0, runs_ = 1;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace rl::cli
