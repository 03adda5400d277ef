// Sweeps on the Pareto chart, several instances of one strategy, axis fitting and hover: plain
// functions first, then the window through the real worker, offscreen.
#include <gtest/gtest.h>

#include <QApplication>
#include <QHeaderView>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QToolButton>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "engine/networks/presets.h"
#include "ui/chart_math.h"
#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/palette.h"
#include "ui/pareto_chart.h"
#include "ui/results_model.h"
#include "ui/sweeps.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

// Activations dominate: budget sweeps have room between the smallest budget and none's peak.
const QString kSweep = QStringLiteral("mlp:depth=8,width=32,batch=256");

bool waitNetwork(MainWindow& w) {
    if (w.isNetworkReady()) return true;
    QSignalSpy spy(&w, &MainWindow::networkReady);
    return spy.wait(kWaitMs);
}

bool drain(QObject* o, const char* signal) {
    QSignalSpy spy(o, signal);
    return spy.wait(kWaitMs);
}

TEST(UiChartMath, FitAxisIsSnugWithRoundSteps) {
    // The screenshot review: data ending at 310 ms drew an axis to 500.
    EXPECT_DOUBLE_EQ(fit_axis(310).max, 350);
    EXPECT_DOUBLE_EQ(fit_axis(310).step, 50);
    EXPECT_DOUBLE_EQ(fit_axis(186).max, 200);
    EXPECT_DOUBLE_EQ(fit_axis(46.4).max, 50);
    EXPECT_DOUBLE_EQ(fit_axis(46.4).step, 10);
    EXPECT_DOUBLE_EQ(fit_axis(7).max, 7);
    EXPECT_DOUBLE_EQ(fit_axis(7).step, 1);
    EXPECT_DOUBLE_EQ(fit_axis(0).max, 1);
    EXPECT_DOUBLE_EQ(fit_axis(-3).max, 1);
    const double nice[] = {1, 2, 2.5, 5};
    for (double v = 0.0013; v < 1e7; v *= 1.37) {
        const AxisFit f = fit_axis(v);
        EXPECT_GE(f.max, v * (1 - 1e-12)) << v;
        EXPECT_LT(f.max - v, f.step * (1 + 1e-9)) << v;  // no empty interval at the top
        EXPECT_LE(f.intervals(), 7) << v;
        EXPECT_GE(f.intervals(), 1) << v;
        const double mantissa = f.step / std::pow(10.0, std::floor(std::log10(f.step)));
        EXPECT_TRUE(std::any_of(std::begin(nice), std::end(nice),
                                [&](double m) { return std::abs(m - mantissa) < 1e-9; }))
            << v << " step " << f.step;
    }
}

TEST(UiChartMath, LowerEnvelopeKeepsTheParetoFrontier) {
    const std::vector<XY> in{{5, 10}, {0, 40}, {2, 30}, {3, 35}, {2, 25}, {9, 10}, {7, 12}, {8, 4}};
    const std::vector<XY> want{{0, 40}, {2, 25}, {5, 10}, {8, 4}};
    EXPECT_EQ(lower_envelope(in), want);
    EXPECT_TRUE(lower_envelope({}).empty());
}

TEST(UiChartMath, InstancesGetShadesOfTheirStrategyColour) {
    EXPECT_EQ(instance_numbers({"none", "periodic", "periodic", "none", "periodic"}),
              (std::vector<int>{0, 0, 1, 1, 2}));
}

TEST(UiSweep, CurvesHaveThePointsOfTheLibrarySweepAndTheFrontierIsAnEnvelope) {
    const Graph g = load_network(kSweep.toStdString());
    EvaluateOptions eo;
    eo.execute = false;
    Evaluator ev(g, kSweep.toStdString(), eo);
    SweepRequest r;
    r.network = kSweep;
    r.strategies = {QStringLiteral("none"), QStringLiteral("sqrt-n"), QStringLiteral("periodic")};
    r.points = 5;
    int calls = 0;
    const SweepSummary s = run_sweeps(g, ev, r, [&](int, int, const QString&) { ++calls; });
    ASSERT_EQ(s.curves.size(), frontier_strategy() ? 4u : 3u);
    int total = 0;
    for (const SweepCurve& c : s.curves) {
        const auto specs = sweep_points(g, ev.costs(), parse_spec(c.spec.toStdString()), 5);
        total += static_cast<int>(specs.size());
        if (c.frontier) continue;
        EXPECT_TRUE(c.message.isEmpty()) << c.message.toStdString();
        EXPECT_EQ(c.samples.size(), specs.size()) << c.spec.toStdString();
        for (const SweepSample& p : c.samples) EXPECT_FALSE(p.measured.has_value());
    }
    EXPECT_EQ(calls, total);
    EXPECT_EQ(s.curves[0].samples.size(), 1u);  // none: one point
    EXPECT_EQ(s.curves[1].samples.size(), 5u);  // sqrt-n: budgeted, five budgets
    EXPECT_EQ(s.curves[2].samples.size(), find_strategy("periodic").sweep_range(g).size());
    if (frontier_strategy()) {
        const SweepCurve& f = s.curves.back();
        EXPECT_TRUE(f.frontier);
        ASSERT_GE(f.samples.size(), 2u);
        for (size_t i = 1; i < f.samples.size(); ++i) {
            EXPECT_GT(f.samples[i].predicted.x, f.samples[i - 1].predicted.x);
            EXPECT_LT(f.samples[i].predicted.y, f.samples[i - 1].predicted.y);
        }
    }
}

TEST(UiSweep, SweepFillsTheParetoChartWithCurvesAndTheFrontier) {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.setNetworkSpec(kSweep);
    w.setStrategies({QStringLiteral("none"), QStringLiteral("sqrt-n"), QStringLiteral("periodic")});
    w.setSweepPoints(4);
    ASSERT_TRUE(waitNetwork(w));
    QSignalSpy done(&w, &MainWindow::sweepCompleted);
    w.startSweep();
    EXPECT_TRUE(w.running());  // off the GUI thread, with progress and Cancel
    ASSERT_TRUE(done.wait(kWaitMs));
    EXPECT_TRUE(w.messageText().isEmpty()) << w.messageText().toStdString();
    ParetoChart* p = w.paretoChart();
    p->flush();
    const Graph g = load_network(kSweep.toStdString());
    EXPECT_EQ(p->curveCount(), 3);
    EXPECT_EQ(p->curvePointCount(QStringLiteral("none")), 1);
    EXPECT_EQ(p->curvePointCount(QStringLiteral("sqrt-n")), 4);
    EXPECT_EQ(p->curvePointCount(QStringLiteral("periodic")),
              static_cast<int>(find_strategy("periodic").sweep_range(g).size()));
    EXPECT_EQ(p->curvePointCount(QStringLiteral("sqrt-n"), true), 0);  // predicted only
    if (frontier_strategy()) {
        EXPECT_TRUE(p->hasFrontier());
        EXPECT_GE(p->frontierPointCount(), 2);
        EXPECT_TRUE(p->seriesNames().contains(QStringLiteral("optimal frontier")));
    }
    EXPECT_TRUE(p->seriesNames().contains(QStringLiteral("sqrt-n sweep")));

    // Measured: every point runs too.
    w.setStrategies({QStringLiteral("periodic:k=2"), QStringLiteral("sqrt-n")});
    w.setSweepPoints(3);
    w.setSweepExecutes(true);
    ASSERT_TRUE(drain(&w, SIGNAL(planReady())));
    w.startSweep();
    ASSERT_TRUE(done.wait(kWaitMs));
    p->flush();
    EXPECT_EQ(p->curveCount(), 2);
    EXPECT_EQ(p->curvePointCount(QStringLiteral("periodic:k=2"), true), 1);
    EXPECT_EQ(p->curvePointCount(QStringLiteral("sqrt-n")), 3);
    EXPECT_EQ(p->curvePointCount(QStringLiteral("sqrt-n"), true), 3);
    EXPECT_EQ(p->curvePointCount(QStringLiteral("periodic")), -1);  // not swept this time
}

TEST(UiSweep, CancelStopsASweep) {
    MainWindow w(false);
    w.setNetworkSpec(QStringLiteral("mlp:depth=24,width=128,batch=256"));
    w.setStrategies({QStringLiteral("sqrt-n"), QStringLiteral("periodic")});
    w.setSweepPoints(40);
    w.setSweepExecutes(true);
    ASSERT_TRUE(waitNetwork(w));
    QSignalSpy progress(w.controller(), &RunController::sweepProgress);
    QSignalSpy done(&w, &MainWindow::sweepCompleted);
    w.startSweep();
    ASSERT_TRUE(progress.wait(kWaitMs));
    w.cancelRun();
    ASSERT_TRUE(done.count() > 0 || done.wait(kWaitMs));
    EXPECT_FALSE(w.running());
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("cancelled")))
        << w.messageText().toStdString();
}

TEST(UiInstances, TwoInstancesOfAStrategyRunAsSeparateRowsAndSeries) {
    MainWindow w(false);
    w.resize(1480, 920);
    w.show();
    w.setNetworkSpec(kSmall);
    w.setStrategies({QStringLiteral("none"), QStringLiteral("periodic:k=2"),
                     QStringLiteral("periodic:k=3"), QStringLiteral("sqrt-n")});
    w.setBudget(std::nullopt);
    EXPECT_EQ(w.strategyBoxCount(QStringLiteral("periodic")), 2);
    // Instances follow their strategy in the registry's order.
    EXPECT_EQ(w.strategySpecs(), (QStringList{"none", "sqrt-n", "periodic:k=2", "periodic:k=3"}));
    ASSERT_TRUE(waitNetwork(w));
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    ResultsModel* m = w.resultsModel();
    ASSERT_EQ(m->rowCount(), 4);
    EXPECT_EQ(m->result(2).spec, QStringLiteral("periodic:k=2"));
    EXPECT_EQ(m->result(3).spec, QStringLiteral("periodic:k=3"));
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(m->result(i).executed) << i;
    // Different shades of periodic's colour in the table.
    EXPECT_NE(m->data(m->index(2, ResultsModel::Strategy), Qt::DecorationRole),
              m->data(m->index(3, ResultsModel::Strategy), Qt::DecorationRole));

    MemoryChart* mem = w.memoryChart();
    mem->flush();
    ASSERT_EQ(mem->strategyCount(), 4);
    EXPECT_EQ(mem->measuredSeries(2)->name(), QStringLiteral("periodic:k=2"));
    EXPECT_EQ(mem->measuredSeries(3)->name(), QStringLiteral("periodic:k=3"));
    EXPECT_NE(mem->measuredSeries(2)->pen().color(), mem->measuredSeries(3)->pen().color());
    ParetoChart* p = w.paretoChart();
    p->flush();
    EXPECT_EQ(p->pointSeriesCount(), 8);
    EXPECT_TRUE(p->seriesNames().contains(QStringLiteral("periodic:k=2")));
    EXPECT_TRUE(p->seriesNames().contains(QStringLiteral("periodic:k=3")));

    // The memory axis fits the data: no empty interval at the end.
    double end = 0;
    for (const auto& r : m->results()) {
        end = std::max(end, r.measured_timeline->points.back().x);
        end = std::max(end, r.predicted_timeline->points.back().x);
    }
    QValueAxis* x = mem->timeAxis();
    EXPECT_GE(x->max(), end);
    EXPECT_LT(x->max() - end, x->tickInterval() + 1e-9);

    // Hover names both the measured and the predicted instruction of each instance.
    const StrategyResult& k3 = m->result(3);
    const QString hover = mem->hoverText(
        std::min(k3.measured_timeline->points.back().x, k3.predicted_timeline->points.back().x) /
        2);
    EXPECT_TRUE(hover.contains(QStringLiteral("periodic:k=3 (predicted)"))) << hover.toStdString();
    EXPECT_TRUE(hover.contains(QStringLiteral("periodic:k=3:"))) << hover.toStdString();
    // And on the Pareto chart, a point under the cursor.
    w.findChild<QTabWidget*>()->setCurrentIndex(1);
    QApplication::processEvents();
    p->flush();
    // Every strategy is named at its own point, also where points coincide (sqrt-n and
    // periodic:k=3 can share a peak and a recompute time within a pixel on this network).
    for (int i = 0; i < m->rowCount(); ++i) {
        const StrategyResult& r = m->result(i);
        const double div = r.measured_peak >= (1u << 20) ? 1024.0 * 1024 : 1024.0;
        const QPointF at =
            p->chart()->mapToPosition(QPointF(r.recompute_ms, r.measured_peak / div));
        const QPoint view = p->mapFromScene(p->chart()->mapToScene(at));
        EXPECT_TRUE(p->hoverText(view).contains(r.spec + QStringLiteral(" (measured)")))
            << r.spec.toStdString() << ": " << p->hoverText(view).toStdString();
    }

    // The table fits its columns: "Grads = none" is in view at the default window size.
    QApplication::processEvents();
    QTableView* t = w.resultsTable();
    const int grads = t->horizontalHeader()->visualIndex(ResultsModel::GradsEqual);
    EXPECT_LE(t->columnViewportPosition(grads) + t->columnWidth(grads), t->viewport()->width());

    // "+" adds another instance; "×" removes it again.
    auto* plus = w.findChild<QToolButton*>(QStringLiteral("duplicate:sqrt-n"));
    ASSERT_NE(plus, nullptr);
    plus->click();
    EXPECT_EQ(w.strategyBoxCount(QStringLiteral("sqrt-n")), 2);
    auto* remove = w.findChild<QToolButton*>(QStringLiteral("remove:sqrt-n"));
    ASSERT_NE(remove, nullptr);
    remove->click();
    EXPECT_EQ(w.strategyBoxCount(QStringLiteral("sqrt-n")), 1);
}

TEST(UiModels, StatusShowsTheSolverGapAndMethod) {
    StrategyResult r;
    r.name = QStringLiteral("optimal");
    r.spec = QStringLiteral("optimal:budget=1MiB");
    r.planned = true;
    r.status = QStringLiteral("feasible");
    r.method = QStringLiteral("milp");
    r.gap = 0.032;
    r.lower_bound_ms = 12.5;
    EXPECT_EQ(status_text(r), QStringLiteral("gap 3.2 % · milp"));
    r.status = QStringLiteral("optimal");
    r.gap = 0;
    EXPECT_EQ(status_text(r), QStringLiteral("optimal · milp"));
    r.status = QStringLiteral("heuristic");
    r.method.clear();
    r.gap.reset();
    EXPECT_EQ(status_text(r), QStringLiteral("heuristic"));
    ResultsModel m;
    r.status = QStringLiteral("feasible");
    r.method = QStringLiteral("milp");
    r.gap = 0.5;
    m.setResults({r});
    EXPECT_EQ(m.data(m.index(0, ResultsModel::Status)).toString(),
              QStringLiteral("gap 50.0 % · milp"));
    EXPECT_TRUE(m.data(m.index(0, ResultsModel::Status), Qt::ToolTipRole)
                    .toString()
                    .contains(QStringLiteral("lower bound")));
    // The Budget column holds the budget; the strategy column leaves it out.
    EXPECT_EQ(m.data(m.index(0, ResultsModel::Strategy)).toString(),
              QStringLiteral("optimal:budget=1MiB"));
    EXPECT_EQ(spec_without_budget(QStringLiteral("sqrt-n:segments=3,budget=1MiB")),
              QStringLiteral("sqrt-n:segments=3"));
    EXPECT_TRUE(m.toCsv().contains(QStringLiteral(",milp,0.5,12.5,")));
}

}  // namespace
}  // namespace rl::ui
