#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "engine/units.h"

namespace rl::cli {

namespace {
constexpr auto kFirstDrawDelay = std::chrono::milliseconds(250);
constexpr auto kRedrawInterval = std::chrono::milliseconds(50);  // ~20 redraws a second
constexpr int kBarWidth = 28;
}  // namespace

ProgressBar::ProgressBar()
    : start_(std::chrono::steady_clock::now()), last_draw_(start_ - kRedrawInterval) {}

ProgressBar::~ProgressBar() {
    clear();
}

bool ProgressBar::wanted() {
    return isatty(STDERR_FILENO) == 1;
}

void ProgressBar::begin(const std::string& label, int runs, long expected_instructions) {
    label_ = label;
    runs_ = runs;
    expected_ = expected_instructions;
    last_index_ = -1;
    longest_run_ = 0;
    run_ = 0;
}

void ProgressBar::on_instruction(long index, uint64_t live_bytes, double /*elapsed_ms*/) {
    if (index <= last_index_ || run_ == 0) {
        // A new execution began (the next repeat).
        longest_run_ = std::max(longest_run_, last_index_ + 1);
        ++run_;
    }
    last_index_ = index;
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < kFirstDrawDelay || now - last_draw_ < kRedrawInterval) return;
    last_draw_ = now;
    draw(index, live_bytes);
}

void ProgressBar::draw(long index, uint64_t live_bytes) {
    const long total = std::max({expected_, longest_run_, index + 1});
    const int filled =
        static_cast<int>(static_cast<double>(index + 1) / static_cast<double>(total) * kBarWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kBarWidth, '.');
    std::fprintf(stderr, "\r\033[K%s  run %d/%d  [%s] %ld/%ld  live %s", label_.c_str(), run_,
                 std::max(run_, runs_), bar.c_str(), index + 1, total,
                 format_bytes(live_bytes).c_str());
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::status(const std::string& text) {
    std::fprintf(stderr, "\r\033[K%s...", text.c_str());
    std::fflush(stderr);
    drawn_ = true;
}

void ProgressBar::clear() {
    if (!drawn_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
    drawn_ = false;
}

}  // namespace rl::cli
