// Chart geometry as plain functions: no widgets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ui/chart_math.h"
#include "ui/evaluation.h"

namespace rl::ui {
namespace {

TEST(UiChartMath, LinearMapRoundTripsAndFlipsForYAxes) {
    const LinearMap x{0, 100, 50, 850};
    EXPECT_DOUBLE_EQ(x.to_pixel(0), 50);
    EXPECT_DOUBLE_EQ(x.to_pixel(100), 850);
    EXPECT_DOUBLE_EQ(x.to_pixel(25), 250);
    EXPECT_DOUBLE_EQ(x.to_data(x.to_pixel(37.5)), 37.5);
    const LinearMap y{0, 10, 400, 0};  // y grows upwards
    EXPECT_DOUBLE_EQ(y.to_pixel(10), 0);
    EXPECT_DOUBLE_EQ(y.to_pixel(2.5), 300);
    EXPECT_DOUBLE_EQ(y.to_data(100), 7.5);
    const LinearMap flat{3, 3, 0, 100};
    EXPECT_DOUBLE_EQ(flat.to_pixel(3), 0);
}

TEST(UiChartMath, SteppedHoldsEachValueUntilTheNextEvent) {
    const std::vector<XY> in{{0, 1}, {1, 3}, {2, 3}, {4, 0}};
    const std::vector<XY> want{{0, 1}, {1, 1}, {1, 3}, {2, 3}, {4, 3}, {4, 0}};
    EXPECT_EQ(stepped(in), want);
    EXPECT_TRUE(stepped({}).empty());
}

TEST(UiChartMath, DecimationKeepsFirstMinMaxLastPerColumn) {
    // The worked example of chart_math.h.
    const std::vector<XY> in{{0, 1}, {1, 5}, {2, 2}, {3, 3}, {4, 3}, {5, 0}, {6, 4}, {7, 4}};
    const std::vector<XY> want{{0, 1}, {1, 5}, {3, 3}, {4, 3}, {5, 0}, {6, 4}, {7, 4}};
    EXPECT_EQ(decimate_min_max(in, 0, 8, 2), want);
}

TEST(UiChartMath, DecimationBoundsPointsAndKeepsEveryExtreme) {
    std::vector<XY> in;
    for (int i = 0; i < 100000; ++i)
        in.push_back({i * 0.01, 1000 + 900 * std::sin(i * 0.0137) + (i % 97 == 0 ? 5000 : 0)});
    const int columns = 800;
    const auto out = decimate_min_max(in, in.front().x, in.back().x, columns);
    EXPECT_LE(out.size(), static_cast<size_t>(4 * columns + 2));
    EXPECT_GT(out.size(), static_cast<size_t>(columns));
    auto by_y = [](const XY& a, const XY& b) { return a.y < b.y; };
    EXPECT_EQ(std::max_element(out.begin(), out.end(), by_y)->y,
              std::max_element(in.begin(), in.end(), by_y)->y);
    EXPECT_EQ(std::min_element(out.begin(), out.end(), by_y)->y,
              std::min_element(in.begin(), in.end(), by_y)->y);
    EXPECT_TRUE(
        std::is_sorted(out.begin(), out.end(), [](const XY& a, const XY& b) { return a.x < b.x; }));
    EXPECT_EQ(out.front(), in.front());
    EXPECT_EQ(out.back(), in.back());
}

TEST(UiChartMath, DecimationOfAVisibleRangeKeepsOneNeighbourEachSide) {
    std::vector<XY> in;
    for (int i = 0; i < 100; ++i) in.push_back({double(i), double(i % 7)});
    const auto out = decimate_min_max(in, 40, 60, 400);  // more columns than points
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out.front(), in[39]);
    EXPECT_EQ(out.back(), in[61]);
    EXPECT_EQ(out.size(), 23u);  // every point in range, plus the two neighbours
}

TEST(UiChartMath, IndexAtFindsTheEventInForce) {
    const std::vector<XY> pts{{0, 1}, {2, 2}, {2, 3}, {5, 4}};
    EXPECT_EQ(index_at(pts, -1), 0u);
    EXPECT_EQ(index_at(pts, 1.9), 0u);
    EXPECT_EQ(index_at(pts, 2), 2u);
    EXPECT_EQ(index_at(pts, 4.9), 2u);
    EXPECT_EQ(index_at(pts, 99), 3u);
}

TEST(UiChartMath, NiceCeilingAndByteUnits) {
    EXPECT_DOUBLE_EQ(nice_ceiling(0.7), 1);
    EXPECT_DOUBLE_EQ(nice_ceiling(1.3), 2);
    EXPECT_DOUBLE_EQ(nice_ceiling(2.2), 2.5);
    EXPECT_DOUBLE_EQ(nice_ceiling(43), 50);
    EXPECT_DOUBLE_EQ(nice_ceiling(100), 100);
    EXPECT_DOUBLE_EQ(nice_ceiling(0), 1);
    EXPECT_STREQ(byte_unit_for(1000).name, "B");
    EXPECT_STREQ(byte_unit_for(43u << 20).name, "MiB");
    EXPECT_DOUBLE_EQ(byte_unit_for(3ull << 30).divisor, 1024.0 * 1024 * 1024);
}

TEST(UiStrategyList, SplitsLikeTheCli) {
    EXPECT_EQ(split_strategy_list("none,sqrt-n:segments=3,budget=1MiB,periodic:k=2"),
              (QStringList{"none", "sqrt-n:segments=3,budget=1MiB", "periodic:k=2"}));
    EXPECT_EQ(split_strategy_list("none; periodic:k=2"), (QStringList{"none", "periodic:k=2"}));
    EXPECT_TRUE(split_strategy_list(" , ;").isEmpty());
}

TEST(UiChartMath, AxisLabelsAreFixedNotationWithTheDecimalsTheStepNeeds) {
    EXPECT_EQ(label_format(250000), "%.0f");  // %g wrote 1e+06 for the axis' 1000000
    EXPECT_EQ(label_format(50), "%.0f");
    EXPECT_EQ(label_format(25), "%.0f");
    EXPECT_EQ(label_format(2.5), "%.1f");
    EXPECT_EQ(label_format(1), "%.0f");
    EXPECT_EQ(label_format(0.5), "%.1f");
    EXPECT_EQ(label_format(0.25), "%.2f");
    EXPECT_EQ(label_format(0.002), "%.3f");
    EXPECT_EQ(label_format(0), "%.0f");
    // Every fit_axis step from 1e-4 to 1e7 prints each of its ticks exactly, never in e-notation.
    for (double v = 1e-3; v < 1e8; v *= 1.7) {
        const AxisFit fit = fit_axis(v);
        const std::string f = label_format(fit.step);
        for (int i = 0; i <= fit.intervals(); ++i) {
            const double tick = fit.step * i;
            char buf[64];
            std::snprintf(buf, sizeof buf, f.c_str(), tick);
            EXPECT_EQ(std::string(buf).find('e'), std::string::npos) << buf;
            EXPECT_NEAR(std::strtod(buf, nullptr), tick, fit.step * 1e-6) << buf << " for " << v;
        }
    }
}

TEST(UiChartMath, FitRangeSpreadsCloseValuesAndKeepsZeroWhenCheap) {
    // Close values: the axis hugs them (the unet sweep: 40 points within 0.4 %).
    const AxisRange r = fit_range(100.0, 100.4);
    EXPECT_LE(r.min, 100.0);
    EXPECT_GE(r.max, 100.4);
    EXPECT_GT((100.4 - 100.0) / (r.max - r.min), 0.3) << r.min << " " << r.max;
    // Ticks from r.min land on multiples of the step.
    EXPECT_NEAR(std::remainder(r.min, r.step), 0.0, 1e-9);
    EXPECT_NEAR(std::remainder(r.max, r.step), 0.0, 1e-9);
    EXPECT_LE((r.max - r.min) / r.step, 8.0 + 1e-9);
    // Spread from near 0: the axis starts at 0, as fit_axis.
    const AxisRange z = fit_range(10, 310);
    EXPECT_EQ(z.min, 0.0);
    EXPECT_EQ(z.max, fit_axis(310).max);
    // Equal ends still give a range around them.
    const AxisRange e = fit_range(50, 50);
    EXPECT_LT(e.min, e.max);
    EXPECT_LE(e.min, 50.0);
    EXPECT_GE(e.max, 50.0);
}

}  // namespace
}  // namespace rl::ui
