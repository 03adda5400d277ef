// The memory-breakdown page: stacked layers against the total line, the instruction axis shared
// by predicted and measured, the live-set panel and the peak diff, on real plans and a real run.
#include <gtest/gtest.h>

#include <QApplication>
#include <QAreaSeries>
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTest>
#include <QTextDocument>
#include <QTreeWidget>
#include <QValueAxis>
#include <map>

#include "analysis/evaluate.h"
#include "engine/networks/presets.h"
#include "ui/evaluation.h"
#include "ui/graph_view.h"
#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/memory_profiler.h"
#include "ui/message_widget.h"
#include "ui/node_selection.h"
#include "ui/palette.h"
#include "ui/pareto_chart.h"
#include "ui/residuals_panel.h"
#include "ui/results_area.h"
#include "ui/results_model.h"
#include "ui/run_controller.h"
#include "ui/schedule_matrix.h"
#include "ui/schedule_trace.h"
#include "ui/schedule_views.h"
#include "ui/setup_panel.h"
#include "ui/sweeps.h"
#include "ui/teach_panel.h"

namespace rl::ui {
namespace {

std::vector<StrategyResult> run_results(const std::string& net,
                                        const std::vector<std::string>& specs) {
    auto g = std::make_shared<const Graph>(load_network(net));
    EvaluateOptions eo;
    eo.execute = true;
    Evaluator ev(*g, net, eo);
    std::vector<StrategyResult> out;
    for (const std::string& s : specs)
        out.push_back(to_result(*g, ev.costs(), ev.evaluate(parse_spec(s)), g));
    return out;
}

TEST(UiMemoryProfiler, TopLayerIsTheTotalLineAtEveryEvent) {
    const auto results = run_results("mlp:depth=6,width=8,batch=4", {"sqrt-n"});
    const ScheduleTrace& t = *results[0].trace;
    const MemoryReplay r = replay_memory(*t.graph, t.plan.schedule);
    const Timeline& timeline = *results[0].predicted_timeline;
    ASSERT_EQ(timeline.points.size(), r.stacks.size());
    std::vector<double> x;
    for (const XY& p : timeline.points) x.push_back(p.x);
    const StackedLayers layers = stacked_layers(r.stacks, x, 1.0);
    ASSERT_FALSE(layers.upper.empty());
    // sqrt-n recomputes: the recomputed layer is drawn; workspace-free mlp: none of it.
    EXPECT_NE(std::find(layers.kinds.begin(), layers.kinds.end(), MemoryKind::Recomputed),
              layers.kinds.end());
    // The top edge is the total line: at each event, the timeline's bytes.
    const std::vector<XY>& top = layers.upper.back();
    ASSERT_EQ(top.size(), 2 * timeline.points.size() - 1);
    for (size_t e = 0; e < timeline.points.size(); ++e) {
        ASSERT_EQ(top[2 * e].x, timeline.points[e].x);
        ASSERT_EQ(top[2 * e].y, timeline.points[e].y) << "event " << e;
    }
    // Each layer lies on or above the one below it.
    for (size_t k = 1; k < layers.upper.size(); ++k)
        for (size_t i = 0; i < layers.upper[k].size(); ++i)
            ASSERT_GE(layers.upper[k][i].y, layers.upper[k - 1][i].y);
}

TEST(UiMemoryProfiler, InstructionAxisPutsPredictedAndMeasuredEventsOnTheSameX) {
    const auto results = run_results("mlp:depth=6,width=8,batch=4", {"periodic:k=2"});
    const StrategyResult& res = results[0];
    ASSERT_TRUE(res.measured_timeline);
    const long n = res.instructions;
    const auto xp = instruction_axis(res.predicted_timeline->instruction, n);
    const auto xm = instruction_axis(res.measured_timeline->instruction, n);
    EXPECT_EQ(xp, xm);
    EXPECT_EQ(xp.front(), -1.0);
    EXPECT_EQ(xp.back(), static_cast<double>(n));
    // The times differ (measured ≠ predicted ms), the instruction x does not.
    EXPECT_NE(res.predicted_timeline->points.back().x, res.measured_timeline->points.back().x);
}

TEST(UiMemoryProfiler, PageDrawsLayersTogglesToTotalAndFillsTheLiveSetPanel) {
    const auto results = run_results("mlp:depth=8,width=32,batch=64", {"none", "sqrt-n"});
    MemoryProfilerPage page;
    page.resize(1000, 500);
    page.setResults(results);
    page.setCurrent(1);
    EXPECT_EQ(page.current(), 1);
    QChart* c = page.chart()->chart();
    ASSERT_GE(c->series().size(), 4);  // parameters, grads, saved, recomputed, …
    EXPECT_EQ(page.chart()->layerCount(), c->series().size());
    for (QAbstractSeries* s : c->series()) EXPECT_NE(qobject_cast<QAreaSeries*>(s), nullptr);
    page.stackedToggle()->setChecked(false);
    ASSERT_EQ(c->series().size(), 1);
    EXPECT_NE(qobject_cast<QLineSeries*>(c->series().front()), nullptr);
    page.stackedToggle()->setChecked(true);

    // Measured and by instruction: the axis spans the schedule.
    page.sourceBox()->setCurrentIndex(1);
    page.axisBox()->setCurrentIndex(1);
    EXPECT_DOUBLE_EQ(page.chart()->xAxis()->min(), -1.0);
    EXPECT_DOUBLE_EQ(page.chart()->xAxis()->max(), static_cast<double>(results[1].instructions));
    EXPECT_EQ(page.chart()->instructionAtX(3.0), 3);

    // The live set at sqrt-n's peak: one row per tensor, bytes adding up to the peak.
    const ScheduleTrace& t = *results[1].trace;
    const long peak = t.sim.peak_instruction;
    page.showLiveSet(peak);
    const MemoryReplay r = replay_memory(*t.graph, t.plan.schedule);
    const LiveSet set = live_set_at(*t.graph, t.plan.schedule, r, peak);
    ASSERT_EQ(page.liveSetPanel()->topLevelItemCount(), static_cast<int>(set.tensors.size()));
    EXPECT_EQ(set.bytes, t.sim.peak_bytes);
    EXPECT_TRUE(page.panelTitle()->text().contains(bytes_text(t.sim.peak_bytes)))
        << page.panelTitle()->text().toStdString();
    EXPECT_EQ(page.liveSetPanel()->topLevelItem(0)->text(1).toStdString(), set.tensors[0].name);
    EXPECT_EQ(page.liveSetPanel()->topLevelItem(0)->text(2).toStdString(),
              set.tensors[0].fate_text());

    // The same results again (another row's figures changed): the panel keeps what it shows.
    page.showLiveSet(0);
    const int rows_at_0 = page.liveSetPanel()->topLevelItemCount();
    page.setResults(results);
    EXPECT_EQ(page.liveSetPanel()->topLevelItemCount(), rows_at_0);
    EXPECT_TRUE(page.panelTitle()->text().contains(QStringLiteral("at #0 ")))
        << page.panelTitle()->text().toStdString();

    // Why is none higher than sqrt-n at its peak: rows only in one or the other.
    page.setCurrent(0);
    page.showPeakDiff(1);
    const ScheduleTrace& tn = *results[0].trace;
    const MemoryReplay rn = replay_memory(*tn.graph, tn.plan.schedule);
    const LiveSetDiff d = diff_live_sets(live_set_at_peak(*tn.graph, tn.plan.schedule, rn),
                                         live_set_at_peak(*t.graph, t.plan.schedule, r));
    ASSERT_GT(d.only_a.size() + d.only_b.size(), 0u);
    EXPECT_EQ(page.liveSetPanel()->topLevelItemCount(),
              static_cast<int>(d.only_a.size() + d.only_b.size()));
    EXPECT_TRUE(page.panelTitle()->text().contains(d.delta >= 0 ? QStringLiteral("higher")
                                                                : QStringLiteral("lower")))
        << page.panelTitle()->text().toStdString();
}

TEST(UiMemoryProfiler, ZoomFitsTheYAxisToTheVisibleRangeAndDoubleClickResets) {
    const auto results = run_results("mlp:depth=6,width=8,batch=4", {"none"});
    MemoryProfilerPage page;
    page.setResults(results);
    page.axisBox()->setCurrentIndex(1);
    const double full = page.chart()->yAxis()->max();
    // Only the set-up events: parameters and inputs, far below the peak.
    page.chart()->xAxis()->setRange(-1.0, -0.5);
    EXPECT_LT(page.chart()->yAxis()->max(), full);
    page.chart()->resetZoom();
    EXPECT_DOUBLE_EQ(page.chart()->yAxis()->max(), full);
}

// During a run on the instruction-index axis, the points streamed so far are drawn at the
// instruction each one ended, with the bytes live then: the same place and height as the measured
// timeline's last event of that instruction once the run is over.
TEST(UiMemoryChart, PointsStreamedMidRunLandAtTheirInstructionIndex) {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.setupPanel()->setRepeats(1);
    // A step of well over the observer's 33 ms snapshot interval (about 0.1-0.2 s here) on any
    // machine, so that snapshots arrive mid-run: at width 256, batch 512 a fast idle machine ran
    // the whole step within one interval.
    w.setNetworkSpec(QStringLiteral("mlp:depth=8,width=512,batch=2048"));
    w.setStrategies({QStringLiteral("none"), QStringLiteral("sqrt-n")});
    w.setBudget(std::nullopt);
    QSignalSpy plan(&w, &MainWindow::planReady);
    ASSERT_TRUE(plan.wait(120000));
    w.resultsArea()->memoryAxisBox()->setCurrentIndex(1);
    ASSERT_TRUE(w.memoryChart()->instructionAxis());
    const int track = 1;  // sqrt-n
    const long instructions = w.resultsModel()->result(track).instructions;
    ASSERT_GT(instructions, 20);
    std::vector<XY> streamed;  // what the window received for the track, on the index axis
    int checked_mid_run = 0;
    QObject::connect(w.controller(), &RunController::progress, &w,
                     [&](quint64, const ProgressSnapshot& p) {
                         if (p.strategy_index != track || p.new_points.empty()) return;
                         ASSERT_EQ(p.new_instructions.size(), p.new_points.size());
                         // The window has drawn this snapshot (its slot ran first).
                         const std::vector<XY>& live = w.memoryChart()->livePoints(track);
                         ASSERT_GE(live.size(), p.new_points.size());
                         const size_t at = live.size() - p.new_points.size();
                         for (size_t k = 0; k < p.new_points.size(); ++k) {
                             EXPECT_EQ(live[at + k].x, double(p.new_instructions[k]));
                             EXPECT_EQ(live[at + k].y, p.new_points[k].y);
                             EXPECT_GE(p.new_instructions[k], 0);
                             EXPECT_LT(p.new_instructions[k], instructions);
                         }
                         if (p.round == 1) {  // the timed round: the one the table keeps
                             if (p.instruction < instructions) {
                                 // Mid-run: drawn now, not only when the run ends.
                                 w.memoryChart()->flush();
                                 EXPECT_GT(w.memoryChart()->measuredSeries(track)->count(), 0);
                                 ++checked_mid_run;
                             }
                             streamed.insert(streamed.end(), live.begin() + long(at), live.end());
                         }
                     });
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.wait(120000));
    EXPECT_GT(checked_mid_run, 0) << "no snapshot arrived before the step ended";
    ASSERT_FALSE(streamed.empty());
    const StrategyResult& r = w.resultsModel()->result(track);
    ASSERT_TRUE(r.executed && r.measured_timeline);
    // The measured timeline's bytes after each instruction's last event.
    std::map<int32_t, double> after;
    for (size_t e = 0; e < r.measured_timeline->points.size(); ++e)
        if (r.measured_timeline->instruction[e] >= 0)
            after[r.measured_timeline->instruction[e]] = r.measured_timeline->points[e].y;
    int compared = 0;
    for (const XY& p : streamed) {
        const auto it = after.find(int32_t(p.x));
        if (it == after.end()) continue;  // an instruction with no allocation event
        EXPECT_EQ(p.y, it->second) << "instruction " << p.x;
        ++compared;
    }
    EXPECT_GT(compared, 10);
}

}  // namespace
}  // namespace rl::ui
