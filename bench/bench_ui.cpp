// Chart redraw with 100,000 timeline points (results in docs/benchmarks.md): the memory chart's
// full path — decimation to the plot's pixel width, QXYSeries::replace, and painting the chart
// into an image — as the window does at most once per frame while a run streams in.
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QImage>
#include <QLineSeries>
#include <QPainter>
#include <cmath>
#include <memory>

#include "ui/chart_math.h"
#include "ui/memory_chart.h"

namespace rl::ui {
namespace {

StrategyResult synthetic(const QString& name, int points, double phase) {
    auto tl = std::make_shared<Timeline>();
    tl->points.reserve(static_cast<size_t>(points));
    for (int i = 0; i < points; ++i) {
        tl->points.push_back(
            {i * 0.01, 4e7 + 3e7 * std::sin(i * 2e-4 + phase) + 2e6 * std::sin(i * 0.37)});
        tl->instruction.push_back(i / 3);
    }
    StrategyResult r;
    r.name = r.spec = name;
    r.planned = r.executed = true;
    r.measured_timeline = tl;
    r.predicted_timeline = tl;
    return r;
}

// Decimation alone: 100,000 stepped points to 1,200 columns.
void BM_DecimateMinMax(benchmark::State& state) {
    const auto r = synthetic(QStringLiteral("none"), static_cast<int>(state.range(0)), 0);
    const auto steps = stepped(r.measured_timeline->points);
    for (auto _ : state) {
        auto out = decimate_min_max(steps, 0, steps.back().x, 1200);
        benchmark::DoNotOptimize(out.data());
    }
    state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_DecimateMinMax)->Arg(100000)->Unit(benchmark::kMicrosecond);

// One redraw of three strategies' measured and predicted lines, 100,000 points each, painted at
// 1600x900: what a frame costs.
void BM_MemoryChartRedraw(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    MemoryChart chart;
    chart.resize(1600, 900);
    chart.setAttribute(Qt::WA_DontShowOnScreen);
    chart.show();
    QCoreApplication::sendPostedEvents();
    chart.setResults({synthetic(QStringLiteral("none"), n, 0),
                      synthetic(QStringLiteral("sqrt-n"), n, 1),
                      synthetic(QStringLiteral("periodic"), n, 2)});
    QImage image(chart.size(), QImage::Format_ARGB32_Premultiplied);
    const bool paint = state.range(1) != 0;
    for (auto _ : state) {
        chart.setBudget(static_cast<uint64_t>(5e7 + static_cast<double>(state.iterations() % 7)));
        chart.flush();  // decimate + replace
        if (paint) {
            QPainter p(&image);
            chart.render(&p);
        }
    }
    state.counters["points_drawn"] = chart.measuredSeries(0)->count();
    state.SetItemsProcessed(state.iterations() * 3 * n);
}
// Args: points per series; 1 = also paint (0 = decimate and replace only).
BENCHMARK(BM_MemoryChartRedraw)
    ->Args({100000, 0})
    ->Args({100000, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace rl::ui

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
