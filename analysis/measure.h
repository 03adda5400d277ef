#pragma once
// Timings with their noise, shared by `rematlab-cli compare` and the GUI's results table.
//
// A step's time is the median of N timed repeats (after one untimed warm-up step), and its spread
// is the min–max range of those repeats: with the few repeats a user waits for (3 by default), an
// interquartile range would be the full range anyway, and min–max hides nothing. An overhead
// against `none` is "within noise" when the two ranges overlap: then some repeat of the strategy
// was as fast as some repeat of `none`, and the sign of the difference of medians says nothing.
//
// Example: none took {10.1, 10.4, 10.2} ms, periodic:k=2 {10.3, 10.9, 10.6} ms. Medians 10.2 and
// 10.6, ranges [10.1, 10.4] and [10.3, 10.9] overlap: "within noise", not "+3.9 %".
#include <string>
#include <vector>

namespace rl {

// Repeats per step when the user does not say (`--repeat`, the GUI's Repeats box).
constexpr int kDefaultRepeats = 3;

struct Spread {
    double median = 0, min = 0, max = 0;
    int samples = 0;
};
// The median and min–max range of `samples` (all zero when there are none).
Spread spread_of(std::vector<double> samples);

// One strategy's measured times over its timed repeats.
struct MeasuredTimes {
    Spread forward, recompute, backward, total, cpu;
};

struct Overhead {
    double percent = 0;         // (median / baseline median - 1) * 100
    bool within_noise = false;  // the two min–max ranges overlap
};
// The overhead of `s` against `baseline` (none's), from total times. A single sample on either
// side has no range to compare, so it is never "within noise" (its percentage stands alone).
Overhead overhead_against(const Spread& s, const Spread& baseline);
// "within noise", or a signed percentage with one decimal ("+12.3 %", "-4.0 %").
std::string format_overhead(const Overhead& o);
// "12.3 ms (11.9–13.0)": the median and the range; just the median for a single sample.
std::string format_spread_ms(const Spread& s);

}  // namespace rl
