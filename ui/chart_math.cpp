#include "ui/chart_math.h"

#include <algorithm>
#include <cmath>

namespace rl::ui {

double LinearMap::to_pixel(double d) const {
    if (d1 == d0) return p0;
    return p0 + (d - d0) * (p1 - p0) / (d1 - d0);
}

double LinearMap::to_data(double p) const {
    if (p1 == p0) return d0;
    return d0 + (p - p0) * (d1 - d0) / (p1 - p0);
}

std::vector<XY> stepped(const std::vector<XY>& points) {
    std::vector<XY> out;
    out.reserve(points.size() * 2);
    for (size_t i = 0; i < points.size(); ++i) {
        if (i > 0 && points[i].y != points[i - 1].y) out.push_back({points[i].x, points[i - 1].y});
        out.push_back(points[i]);
    }
    return out;
}

std::vector<XY> decimate_min_max(const std::vector<XY>& points, double x0, double x1, int columns) {
    if (columns < 1 || points.empty() || !(x1 > x0)) return points;
    auto first = std::lower_bound(points.begin(), points.end(), x0,
                                  [](const XY& p, double x) { return p.x < x; });
    auto last = std::upper_bound(points.begin(), points.end(), x1,
                                 [](double x, const XY& p) { return x < p.x; });
    std::vector<XY> out;
    out.reserve(static_cast<size_t>(columns) * 4 + 2);
    if (first != points.begin()) out.push_back(*(first - 1));
    const double width = (x1 - x0) / columns;
    auto it = first;
    while (it != last) {
        const long col = std::min<long>(columns - 1, static_cast<long>((it->x - x0) / width));
        const double col_end = x0 + static_cast<double>(col + 1) * width;
        auto begin = it, lo = it, hi = it;
        ++it;  // a column always takes its first point, whatever the rounding of col_end
        while (it != last && (it->x < col_end || col == columns - 1)) {
            if (it->y < lo->y) lo = it;
            if (it->y > hi->y) hi = it;
            ++it;
        }
        auto end = it - 1;
        auto keep = [&](decltype(it) p) {
            if (out.empty() || !(out.back() == *p)) out.push_back(*p);
        };
        keep(begin);
        if (lo < hi) {
            keep(lo);
            keep(hi);
        } else {
            keep(hi);
            keep(lo);
        }
        keep(end);
    }
    if (last != points.end()) out.push_back(*last);
    return out;
}

size_t index_at(const std::vector<XY>& points, double x) {
    auto it = std::upper_bound(points.begin(), points.end(), x,
                               [](double v, const XY& p) { return v < p.x; });
    return it == points.begin() ? 0 : static_cast<size_t>(it - points.begin()) - 1;
}

double nice_ceiling(double v) {
    if (!(v > 0) || !std::isfinite(v)) return 1;
    const double p = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
        if (m * p >= v * (1 - 1e-12)) return m * p;
    return 10 * p;
}

int AxisFit::intervals() const {
    return step > 0 ? static_cast<int>(std::lround(max / step)) : 0;
}

AxisFit fit_axis(double v, int max_intervals) {
    if (!(v > 0) || !std::isfinite(v)) return {};
    max_intervals = std::max(1, max_intervals);
    double p = std::pow(10.0, std::floor(std::log10(v / max_intervals)) - 1);
    for (;; p *= 10) {
        for (double m : {1.0, 2.0, 2.5, 5.0}) {
            const double step = m * p;
            const double n = std::ceil(v / step * (1 - 1e-12));
            if (n <= max_intervals) return {std::max(n, 1.0) * step, step};
        }
    }
}

std::vector<XY> lower_envelope(std::vector<XY> points) {
    std::sort(points.begin(), points.end(),
              [](const XY& a, const XY& b) { return a.x < b.x || (a.x == b.x && a.y < b.y); });
    std::vector<XY> out;
    for (const XY& p : points)
        if (out.empty() || p.y < out.back().y) out.push_back(p);
    return out;
}

ByteUnit byte_unit_for(uint64_t max_bytes) {
    static const char* const names[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = 1;
    int i = 0;
    while (i < 4 && static_cast<double>(max_bytes) >= 1024 * d) {
        d *= 1024;
        ++i;
    }
    return {d, names[i]};
}

std::string label_format(double step) {
    if (!(step > 0) || !std::isfinite(step)) return "%.0f";
    const int k = static_cast<int>(std::floor(std::log10(step) + 1e-9));
    const double mantissa = step / std::pow(10.0, k);
    const bool half = std::fabs(mantissa - std::round(mantissa)) > 1e-6;  // 2.5
    const int decimals = std::max(0, -k + (half ? 1 : 0));
    return "%." + std::to_string(decimals) + "f";
}

AxisRange fit_range(double lo, double hi, int max_intervals) {
    if (hi < lo) std::swap(lo, hi);
    if (!(hi > 0) || lo <= hi / 3) {
        const AxisFit f = fit_axis(hi, max_intervals);
        return {0, f.max, f.step};
    }
    double span = hi - lo;
    if (!(span > 0)) span = hi * 0.1;
    const double step = fit_axis(span, std::max(1, max_intervals - 1)).step;
    AxisRange r;
    r.step = step;
    r.min = std::floor(lo / step) * step;
    r.max = std::ceil(hi / step) * step;
    if (r.max <= r.min) r.max = r.min + step;
    return r;
}

}  // namespace rl::ui
