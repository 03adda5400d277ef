#include "analysis/measure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace rl {

Spread spread_of(std::vector<double> samples) {
    Spread s;
    if (samples.empty()) return s;
    std::sort(samples.begin(), samples.end());
    const size_t m = samples.size() / 2;
    s.median = samples.size() % 2 ? samples[m] : 0.5 * (samples[m - 1] + samples[m]);
    s.min = samples.front();
    s.max = samples.back();
    s.samples = static_cast<int>(samples.size());
    return s;
}

Overhead overhead_against(const Spread& s, const Spread& baseline) {
    Overhead o;
    if (baseline.median > 0) o.percent = (s.median / baseline.median - 1.0) * 100.0;
    o.within_noise =
        s.samples > 1 && baseline.samples > 1 && s.min <= baseline.max && baseline.min <= s.max;
    return o;
}

std::string format_overhead(const Overhead& o) {
    if (o.within_noise) return "within noise";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.1f %%", o.percent);
    return buf;
}

namespace {
std::string ms_text(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, ms < 10 ? "%.3f" : ms < 1000 ? "%.2f" : "%.0f", ms);
    return buf;
}
}  // namespace

std::string format_spread_ms(const Spread& s) {
    if (s.samples < 2) return ms_text(s.median) + " ms";
    return ms_text(s.median) + " ms (" + ms_text(s.min) + "\u2013" + ms_text(s.max) + ")";
}

}  // namespace rl
