// The window through the real worker thread, offscreen: open, load, run, compare with the
// engine, cancel, stay responsive, report bad files.
#include <gtest/gtest.h>

#include <QFile>
#include <QLineSeries>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include "analysis/evaluate.h"
#include "engine/networks/network_json.h"
#include "engine/networks/presets.h"
#include "engine/units.h"
#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/pareto_chart.h"
#include "ui/results_model.h"
#include "ui/run_controller.h"
#include "ui/teach_panel.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

// Long enough to cancel and to watch the GUI thread tick; small in memory.
const QString kLong = QStringLiteral("mlp:depth=48,width=256,batch=1024");

bool waitNetwork(MainWindow& w) {
    if (w.isNetworkReady()) return true;
    QSignalSpy spy(&w, &MainWindow::networkReady);
    return spy.wait(kWaitMs);
}

TEST(UiMainWindow, OpensWithPanelsChartsAndTable) {
    MainWindow w(false);
    w.show();
    EXPECT_TRUE(w.windowTitle().contains(QStringLiteral("RematLab")));
    ASSERT_TRUE(waitNetwork(w));
    EXPECT_NE(w.memoryChart(), nullptr);
    EXPECT_NE(w.paretoChart(), nullptr);
    EXPECT_EQ(w.resultsTable()->model()->columnCount(), ResultsModel::ColumnCount);
    // Every registered strategy has a box, built from its schema.
    for (const Strategy* s : strategies())
        EXPECT_NE(
            w.findChild<QWidget*>(QStringLiteral("strategy:") +
                                  QString::fromUtf8(s->name().data(), qsizetype(s->name().size()))),
            nullptr)
            << s->name();
    EXPECT_FALSE(w.strategySpecs().isEmpty());
}

TEST(UiMainWindow, PresetLoadsWithItsSummary) {
    MainWindow w(false);
    w.setNetworkSpec(kSmall);
    ASSERT_TRUE(waitNetwork(w));
    QSignalSpy plan(&w, &MainWindow::planReady);
    const Graph g = load_network(kSmall.toStdString());
    EXPECT_EQ(w.network().nodes, g.num_nodes());
    EXPECT_EQ(w.network().param_bytes, g.param_bytes());
    EXPECT_EQ(w.networkSpec(), kSmall);
    // The plan of the ticked strategies follows by itself.
    ASSERT_TRUE(plan.wait(kWaitMs));
    EXPECT_EQ(w.resultsModel()->rowCount(), w.strategySpecs().size());
}

TEST(UiRun, TwoStrategiesRunAndTheTableMatchesTheEngine) {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.setNetworkSpec(kSmall);
    w.setStrategies({QStringLiteral("none"), QStringLiteral("periodic:k=2")});
    ASSERT_TRUE(waitNetwork(w));
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    ASSERT_EQ(w.resultsModel()->rowCount(), 2);

    const Graph g = load_network(kSmall.toStdString());
    EvaluateOptions eo;
    Evaluator ev(g, kSmall.toStdString(), eo);
    const char* specs[] = {"none", "periodic:k=2"};
    for (int i = 0; i < 2; ++i) {
        const StrategyResult& r = w.resultsModel()->result(i);
        const Evaluation e = ev.evaluate(parse_spec(specs[i]));
        ASSERT_TRUE(r.executed) << r.message.toStdString();
        EXPECT_EQ(r.spec.toStdString(), specs[i]);
        EXPECT_EQ(r.predicted_peak, e.predicted.peak_bytes);
        EXPECT_EQ(r.measured_peak, e.measured->peak_bytes);
        EXPECT_EQ(r.measured_peak, r.predicted_peak);
        EXPECT_EQ(r.recomputes, e.predicted.recomputes);
        EXPECT_EQ(r.measured_activation_peak, e.measured->activation_peak_bytes());
        EXPECT_TRUE(r.grads_equal);
        // What the table shows is what the engine reports.
        auto* m = w.resultsModel();
        EXPECT_EQ(m->data(m->index(i, ResultsModel::MeasuredPeak)).toString().toStdString(),
                  format_bytes(e.measured->peak_bytes));
        EXPECT_EQ(m->data(m->index(i, ResultsModel::Recomputes)).toString().toLong(),
                  e.predicted.recomputes);
        EXPECT_EQ(m->data(m->index(i, ResultsModel::GradsEqual)).toString(), QStringLiteral("✓"));
    }
    EXPECT_EQ(w.resultsModel()->data(w.resultsModel()->index(0, ResultsModel::Overhead)).toString(),
              QStringLiteral("baseline"));

    // Charts: one measured and one predicted line per strategy; one point of each kind on the
    // Pareto chart.
    MemoryChart* mem = w.memoryChart();
    mem->flush();
    ASSERT_EQ(mem->strategyCount(), 2);
    for (int i = 0; i < 2; ++i) {
        const auto& r = w.resultsModel()->result(i);
        EXPECT_GT(mem->measuredSeries(i)->count(), 2);
        EXPECT_GT(mem->predictedSeries(i)->count(), 2);
        // Small timelines are drawn whole (stepped): 2 points per event at most.
        EXPECT_LE(mem->measuredSeries(i)->count(),
                  static_cast<int>(2 * r.measured_timeline->points.size() + 2));
        double top = 0;
        for (const QPointF& p : mem->measuredSeries(i)->points()) top = std::max(top, p.y());
        const double divisor = r.measured_peak >= (1u << 20) ? 1024.0 * 1024 : 1024.0;
        EXPECT_NEAR(top, r.measured_peak / divisor, 1e-9);
    }
    w.paretoChart()->flush();
    EXPECT_EQ(w.paretoChart()->pointSeriesCount(), 4);
    EXPECT_EQ(w.paretoChart()->pointCount(), 4);
}

TEST(UiRun, CancelStopsALongRun) {
    MainWindow w(false);
    w.setNetworkSpec(kLong);
    w.setStrategies({QStringLiteral("none"), QStringLiteral("sqrt-n"), QStringLiteral("periodic"),
                     QStringLiteral("periodic:k=2")});
    w.setBudget(std::nullopt);
    ASSERT_TRUE(waitNetwork(w));
    QSignalSpy progress(w.controller(), &RunController::progress);
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(progress.wait(kWaitMs));  // the worker is executing
    EXPECT_TRUE(w.running());
    w.cancelRun();
    ASSERT_TRUE(done.count() > 0 || done.wait(kWaitMs));
    EXPECT_FALSE(w.running());
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("cancelled")))
        << w.messageText().toStdString();
    int executed = 0;
    for (const auto& r : w.resultsModel()->results()) executed += r.executed;
    EXPECT_LT(executed, 4);
    // The window works on: the next run completes.
    w.setNetworkSpec(kSmall);
    w.setStrategies({QStringLiteral("none")});
    ASSERT_TRUE(waitNetwork(w));
    QSignalSpy again(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(again.wait(kWaitMs));
    ASSERT_EQ(w.resultsModel()->rowCount(), 1);
    EXPECT_TRUE(w.resultsModel()->result(0).executed);
}

TEST(UiRun, GuiThreadStaysResponsiveDuringALongRun) {
    MainWindow w(false);
    w.setNetworkSpec(kLong);
    w.setStrategies({QStringLiteral("none"), QStringLiteral("sqrt-n")});
    w.setBudget(std::nullopt);
    ASSERT_TRUE(waitNetwork(w));
    int ticks_while_running = 0;
    QTimer ticker;
    ticker.setInterval(10);
    QObject::connect(&ticker, &QTimer::timeout, [&] { ticks_while_running += w.running(); });
    ticker.start();
    QSignalSpy done(&w, &MainWindow::runCompleted);
    QSignalSpy progress(w.controller(), &RunController::progress);
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    ticker.stop();
    // The GUI thread kept handling its events while the worker ran the engine: a blocked GUI
    // thread would tick once at most, after the run.
    EXPECT_GE(ticks_while_running, 5);
    EXPECT_GE(progress.count(), 2);
    ASSERT_EQ(w.resultsModel()->rowCount(), 2);
    EXPECT_TRUE(w.resultsModel()->result(1).executed);
}

TEST(UiMainWindow, BadFileShowsAnErrorWithoutCrashing) {
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("broken.json"));
    {
        QFile f(path);
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write("{ \"format\": \"rematlab-network\", \"nodes\": [ oops ] }");
    }
    MainWindow w(false);
    w.show();
    QSignalSpy failed(&w, &MainWindow::networkFailed);
    w.openFile(path);
    ASSERT_TRUE(failed.wait(kWaitMs));
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("Cannot load network")));
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("broken.json")));
    EXPECT_EQ(w.messageKind(), MessageWidget::Kind::Error);
    // Running now reports the same failure instead of hanging.
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.count() > 0 || done.wait(kWaitMs));
    // A missing file too; then a good network clears the error.
    w.openFile(dir.filePath(QStringLiteral("missing.json")));
    ASSERT_TRUE(failed.wait(kWaitMs));
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("missing.json")));
    w.setNetworkSpec(kSmall);
    ASSERT_TRUE(waitNetwork(w));
    EXPECT_TRUE(w.messageText().isEmpty());
}

// Run is disabled while no network is loaded (nor on its way); the setup panel's Reload loads a
// fixed file again, and Run comes back with the network.
TEST(UiMainWindow, RunIsDisabledWithoutANetworkAndReloadBringsItBack) {
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("net.json"));
    {
        QFile f(path);
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write("{ \"format\": \"rematlab-network\", \"nodes\": [ oops ] }");
    }
    MainWindow w(false);
    w.show();
    ASSERT_TRUE(waitNetwork(w));
    auto* run_button = w.findChild<QPushButton*>(QStringLiteral("runButton"));
    auto* reload = w.findChild<QPushButton*>(QStringLiteral("reloadNetwork"));
    ASSERT_NE(run_button, nullptr);
    ASSERT_NE(reload, nullptr);
    EXPECT_TRUE(w.isRunEnabled());
    EXPECT_TRUE(run_button->isEnabled());
    EXPECT_FALSE(reload->isVisible());

    QSignalSpy failed(&w, &MainWindow::networkFailed);
    w.openFile(path);
    ASSERT_TRUE(failed.wait(kWaitMs));
    EXPECT_FALSE(w.isRunEnabled());
    EXPECT_FALSE(run_button->isEnabled());
    EXPECT_TRUE(reload->isVisible());

    // Fix the file and reload it through the panel's button.
    const std::string good = network_to_json(load_network(kSmall.toStdString()));
    {
        QFile f(path);
        ASSERT_TRUE(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(good.data(), qint64(good.size()));
    }
    QSignalSpy ready(&w, &MainWindow::networkReady);
    QTest::mouseClick(reload, Qt::LeftButton);
    ASSERT_TRUE(ready.count() > 0 || ready.wait(kWaitMs));
    EXPECT_TRUE(w.isRunEnabled());
    EXPECT_TRUE(run_button->isEnabled());
    EXPECT_FALSE(reload->isVisible());
}

// Teach mode (a dock across the bottom) does not force the window wider: its line listing the
// selected node's instructions (up to 8 marks) wraps instead of setting the window's minimum width
// (it made it 1128 px).
TEST(UiMainWindow, TeachModeDoesNotWidenTheWindow) {
    MainWindow w(false);
    // One slot: revolve recomputes the first blocks many times (8 marks listed).
    w.setNetworkSpec(QStringLiteral("mlp:depth=16,width=8,batch=4"));
    w.setStrategies({QStringLiteral("revolve:slots=1"), QStringLiteral("sqrt-n")});
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.resize(1000, 760);
    w.show();
    ASSERT_TRUE(waitNetwork(w));
    ASSERT_TRUE(plan.count() > 0 || plan.wait(kWaitMs));
    QCoreApplication::processEvents();
    const int before = w.minimumSizeHint().width();
    const int width_before = w.width();
    w.showTeachMode(true);
    TeachPanel* teach = w.teachPanel();
    ASSERT_TRUE(teach->isVisible());
    // Step into the schedule and select each node in turn: some have many marks to list.
    for (int i = 0; i < 40; ++i) QTest::keyClick(teach, Qt::Key_Right);
    QCoreApplication::processEvents();
    const int unselected = teach->minimumSizeHint().width();
    int widest = 0;
    const int nodes = w.network().nodes;
    ASSERT_GT(nodes, 10);
    for (int n = 0; n < nodes; ++n) {
        teach->setSelectedNode(n);
        QCoreApplication::processEvents();  // the layout takes the label's new size
        widest = std::max(widest, teach->minimumSizeHint().width());
    }
    QCoreApplication::processEvents();
    EXPECT_LE(widest, unselected) << "a selected node's marks widen the teach panel";
    EXPECT_LE(widest, 1000);
    EXPECT_LE(w.minimumSizeHint().width(), before);
    EXPECT_LE(w.width(), width_before) << "teach mode widened the window";
}

TEST(UiMainWindow, InfeasibleBudgetShowsTheSmallestFeasibleOne) {
    MainWindow w(false);
    w.setNetworkSpec(kSmall);
    w.setStrategies({QStringLiteral("sqrt-n")});
    ASSERT_TRUE(waitNetwork(w));
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.setBudget(w.network().floor_bytes);  // only parameters and inputs: nothing else fits
    ASSERT_TRUE(plan.wait(kWaitMs));
    while (plan.wait(500)) {
    }
    ASSERT_EQ(w.resultsModel()->rowCount(), 1);
    const StrategyResult& r = w.resultsModel()->result(0);
    EXPECT_EQ(r.status, QStringLiteral("infeasible")) << r.message.toStdString();
    EXPECT_TRUE(r.min_feasible_budget.has_value());
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("sqrt-n")))
        << w.messageText().toStdString();
}

TEST(UiRunController, NewestPlanWinsAndStaleOnesAreDropped) {
    RunController c;
    QSignalSpy plans(&c, &RunController::planAvailable);
    RunRequest r;
    r.network = kSmall;
    quint64 last = 0;
    for (int k = 1; k <= 6; ++k) {
        r.strategies = {QStringLiteral("periodic:k=%1").arg(k)};
        last = c.plan(r);
    }
    ASSERT_TRUE(plans.wait(kWaitMs));
    while (plans.wait(300)) {
    }
    ASSERT_EQ(plans.count(), 1);
    EXPECT_EQ(plans.at(0).at(0).value<quint64>(), last);
    const auto summary = plans.at(0).at(1).value<RunSummary>();
    ASSERT_EQ(summary.results.size(), 1u);
    EXPECT_EQ(summary.results[0].spec, QStringLiteral("periodic:k=6"));
}

}  // namespace
}  // namespace rl::ui
