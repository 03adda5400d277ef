#pragma once
// Chart geometry as plain functions, tested without widgets (as hotspot tests its time → x
// mapping through a plain struct):
//
//  - a linear map between a data range and a pixel range, both ways;
//  - a memory timeline as a step function (bytes hold until the next event);
//  - decimation to pixel resolution: for each pixel column keep the first, the smallest, the
//    largest and the last point, in their order. A step function with 100,000 events drawn in
//    800 columns becomes at most 3,200 points and looks the same: every peak and every trough
//    survives, because a column's extremes are kept exactly.
//
//    x: 0 1 2 3 | 4 5 6 7        (two columns of four events)
//    y: 1 5 2 3 | 3 0 4 4   →   (0,1) (1,5) (3,3) | (4,3) (5,0) (6,4) (7,4)
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rl::ui {

struct XY {
    double x = 0, y = 0;
    bool operator==(const XY&) const = default;
};

struct LinearMap {
    double d0 = 0, d1 = 1;  // data range
    double p0 = 0, p1 = 1;  // pixel range (p1 < p0 for a y axis pointing up)
    double to_pixel(double d) const;
    double to_data(double p) const;
};

// Stepped copy of a timeline: (x_i, y_{i-1}) before each (x_i, y_i), so a line through the
// points draws horizontal runs and vertical jumps. Points must be sorted by x.
std::vector<XY> stepped(const std::vector<XY>& points);

// Keeps at most four points per pixel column of [x0, x1] split into `columns`: the first, the
// minimum, the maximum and the last, in x order (duplicates dropped). Points outside [x0, x1] are
// dropped except the nearest one on each side, so lines run to the chart's edges. Input must be
// sorted by x; `columns` < 1 returns the input.
std::vector<XY> decimate_min_max(const std::vector<XY>& points, double x0, double x1, int columns);

// Index of the last point with x <= `x` (0 when `x` is before the first); points sorted by x and
// not empty.
size_t index_at(const std::vector<XY>& points, double x);

// A "nice" axis maximum above `v` (1, 2, 2.5, 5 × 10^k) so axes need not change on every tick.
double nice_ceiling(double v);

// An axis from 0 that fits `v` snugly: the smallest "nice" step (1, 2, 2.5, 5 × 10^k) that covers
// `v` in at most `max_intervals` steps, and the first multiple of it at or above `v`. 310 ms with 7
// intervals → step 50, max 350 (where nice_ceiling would give 500). v <= 0 → {1, 0.2}.
struct AxisFit {
    double max = 1, step = 0.2;
    int intervals() const;
};
AxisFit fit_axis(double v, int max_intervals = 7);

// An axis over [lo, hi] that need not start at 0: from 0 while lo is under a third of hi (0 then
// costs little room), else from the multiple of a "nice" step at or below lo, so 40 points
// between 100.0 and 100.4 MiB spread over the plot instead of filling its top 2 px.
struct AxisRange {
    double min = 0, max = 1, step = 0.2;
};
AxisRange fit_range(double lo, double hi, int max_intervals = 7);

// A printf label format that shows every multiple of `step` (a fit_axis step: 1, 2, 2.5, 5 × 10^k)
// exactly, in fixed notation: step 0.25 → "%.2f", 50 → "%.0f", 250000 → "%.0f" (1000000, never
// Qt's "%g" 1e+06). A step <= 0 gives "%.0f".
std::string label_format(double step);

// The lower-left envelope of (x, y) points — the Pareto frontier when both are costs: sorted by x,
// each kept point has a smaller y than every point at a smaller or equal x. Dominated points and
// duplicates are dropped.
std::vector<XY> lower_envelope(std::vector<XY> points);

// Byte unit for an axis whose largest value is `max_bytes`: the divisor and its name (B, KiB, MiB,
// GiB, TiB).
struct ByteUnit {
    double divisor = 1;
    const char* name = "B";
};
ByteUnit byte_unit_for(uint64_t max_bytes);

}  // namespace rl::ui
