// Nothing lost (issue 15): a change keeps measured results, greyed and marked stale, until the
// next run; planning while a run is in progress waits for it instead of dropping it.
#include <gtest/gtest.h>

#include <QBrush>
#include <QLineSeries>
#include <QPushButton>
#include <QScatterSeries>
#include <QSignalSpy>
#include <random>

#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/palette.h"
#include "ui/results_model.h"
#include "ui/run_controller.h"
#include "ui/setup_panel.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

const QString kLong = QStringLiteral("mlp:depth=48,width=256,batch=1024");
// Activations dominate: sqrt-n's peak is well below none's.
const QString kActs = QStringLiteral("mlp:depth=8,width=64,batch=256");

void loadAndPlan(MainWindow& w, const QString& spec, const QStringList& strategies) {
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.setNetworkSpec(spec);
    w.setStrategies(strategies);
    if (!w.isNetworkReady()) {
        QSignalSpy ready(&w, &MainWindow::networkReady);
        ASSERT_TRUE(ready.wait(kWaitMs));
    }
    ASSERT_TRUE(plan.count() > 0 || plan.wait(kWaitMs));
    while (plan.wait(500)) {  // the plans a burst of changes started
    }
}

// Sets a budget the slider does not show yet (a budget it already shows plans nothing).
void changeBudget(MainWindow& w, uint64_t bytes) {
    const auto to = w.setupPanel()->budgetFor(bytes);
    ASSERT_TRUE(to);
    ASSERT_NE(to, w.budget()) << "the test wants a change";
    w.setBudget(bytes);
    settle(w);
}

TEST(UiNothingLost, ABudgetChangeKeepsMeasuredFiguresStaleAndUnbudgetedRowsAsTheyWere) {
    MainWindow w(false);
    w.setupPanel()->setRepeats(2);
    loadAndPlan(w, kActs, {QStringLiteral("none"), QStringLiteral("sqrt-n")});
    ResultsModel* m = w.resultsModel();
    ASSERT_EQ(m->rowCount(), 2);
    const uint64_t none_peak = m->result(0).predicted_peak;
    if (w.budget() != w.setupPanel()->budgetFor(none_peak / 20 * 19))
        changeBudget(w, none_peak / 20 * 19);
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    const StrategyResult none = m->result(0), sqrt_n = m->result(1);
    ASSERT_TRUE(none.executed && sqrt_n.executed) << sqrt_n.message.toStdString();
    EXPECT_FALSE(none.stale() || sqrt_n.stale());

    // A lower budget: sqrt-n is planned anew, none (no budget) is not touched.
    const uint64_t lower = none_peak / 20 * 17;  // sqrt-n's own plan needs ~77 % of none's
    ASSERT_LT(lower, none_peak);
    changeBudget(w, lower);
    ASSERT_EQ(m->rowCount(), 2);
    const StrategyResult& n2 = m->result(0);
    EXPECT_TRUE(n2.executed) << "a run no longer wipes the figures of a strategy with no budget";
    EXPECT_FALSE(n2.stale());
    EXPECT_EQ(n2.total_ms, none.total_ms);
    EXPECT_EQ(n2.measured_peak, none.measured_peak);

    const StrategyResult& s2 = m->result(1);
    ASSERT_TRUE(s2.planned) << s2.message.toStdString();
    EXPECT_NE(s2.spec, sqrt_n.spec) << "the new budget is in the spec";
    ASSERT_TRUE(s2.stale()) << "kept, not deleted";
    EXPECT_EQ(s2.stale_measured_as, sqrt_n.spec);
    EXPECT_TRUE(s2.executed);
    EXPECT_EQ(s2.total_ms, sqrt_n.total_ms);
    EXPECT_EQ(s2.measured_peak, sqrt_n.measured_peak);
    EXPECT_TRUE(
        m->data(m->index(1, ResultsModel::Status)).toString().contains(QStringLiteral("stale")));
    const QBrush grey =
        m->data(m->index(1, ResultsModel::TotalMs), Qt::ForegroundRole).value<QBrush>();
    EXPECT_EQ(grey.color(), QColor(0x9e, 0x9e, 0x9e));
    EXPECT_TRUE(m->data(m->index(1, ResultsModel::TotalMs), Qt::ToolTipRole)
                    .toString()
                    .contains(sqrt_n.spec))
        << "says what it was measured as";

    // Another budget change: still measured as the original spec.
    changeBudget(w, none_peak / 5 * 4);
    EXPECT_EQ(m->result(1).stale_measured_as, sqrt_n.spec);

    // A budget sqrt-n cannot meet: the row says so, and still keeps the figures, stale.
    changeBudget(w, w.network().floor_bytes);
    EXPECT_EQ(m->result(1).status, QStringLiteral("infeasible"));
    EXPECT_TRUE(m->result(1).executed);
    EXPECT_EQ(m->result(1).stale_measured_as, sqrt_n.spec);
    EXPECT_EQ(m->result(1).total_ms, sqrt_n.total_ms);
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("infeasible")))
        << w.messageText().toStdString();
    changeBudget(w, none_peak / 5 * 4);

    // A run measures again: nothing stale any more.
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    for (int row = 0; row < 2; ++row) {
        EXPECT_TRUE(m->result(row).executed);
        EXPECT_FALSE(m->result(row).stale()) << row;
    }
}

TEST(UiNothingLost, MovingTheBudgetDuringARunQueuesThePlanAndKeepsTheRun) {
    MainWindow w(false);
    w.setupPanel()->setRepeats(1);
    loadAndPlan(w, kLong, {QStringLiteral("none"), QStringLiteral("sqrt-n")});
    const uint64_t none_peak = w.resultsModel()->result(0).predicted_peak;
    if (w.budget() != w.setupPanel()->budgetFor(none_peak / 20 * 19))
        changeBudget(w, none_peak / 20 * 19);
    QSignalSpy progress(w.controller(), &RunController::progress);
    QSignalSpy done(&w, &MainWindow::runCompleted);
    QSignalSpy plans(&w, &MainWindow::planReady);
    w.startRun();
    ASSERT_TRUE(progress.wait(kWaitMs));
    ASSERT_TRUE(w.running());
    // Drag the budget while it runs: every step of the drag asks for a plan.
    for (int i = 1; i <= 5; ++i) {
        w.setBudget(none_peak - none_peak / 20 * static_cast<uint64_t>(i));
        QCoreApplication::processEvents();
    }
    EXPECT_TRUE(w.running()) << "the run goes on";
    EXPECT_EQ(plans.count(), 0) << "no plan while the run is in progress";
    ASSERT_TRUE(done.count() > 0 || done.wait(kWaitMs));
    ResultsModel* m = w.resultsModel();
    ASSERT_EQ(m->rowCount(), 2);
    for (int row = 0; row < 2; ++row)
        EXPECT_TRUE(m->result(row).executed) << m->result(row).message.toStdString();
    EXPECT_FALSE(w.messageText().contains(QStringLiteral("cancelled")))
        << w.messageText().toStdString();
    // Then the queued plan comes, and keeps what the run measured.
    ASSERT_TRUE(plans.count() > 0 || plans.wait(kWaitMs));
    while (plans.wait(500)) {
    }
    EXPECT_TRUE(m->result(0).executed);
    EXPECT_FALSE(m->result(0).stale());
    EXPECT_TRUE(m->result(1).executed);
    EXPECT_TRUE(m->result(1).stale()) << m->result(1).spec.toStdString();
}

// The slider never rounds a budget asked for below it: it lands on the smallest step at or
// above (a budget of the smallest feasible size stays feasible).
TEST(UiNothingLost, SetBudgetNeverLandsBelowTheBudgetAskedFor) {
    SetupPanel panel;
    NetworkSummary n;
    n.spec = QStringLiteral("mlp");
    n.floor_bytes = 1234567;
    n.none_peak_bytes = 987654321;
    panel.setNetwork(n);
    std::mt19937_64 rng(3);
    std::uniform_int_distribution<uint64_t> d(n.floor_bytes, n.none_peak_bytes);
    for (int i = 0; i < 2000; ++i) {
        const uint64_t want = d(rng);
        panel.setBudget(want);
        const auto got = panel.budget();
        ASSERT_TRUE(got);
        EXPECT_GE(*got, want) << "asked " << want;
        EXPECT_EQ(panel.budgetFor(want), got);
    }
}

// "Use X" for an infeasible budget sets a budget that planning finds feasible, and says which.
TEST(UiNothingLost, UseXSetsABudgetThatPlanningFindsFeasible) {
    for (const QString& net : {kActs, QStringLiteral("mlp:depth=12,width=64,batch=32"),
                               QStringLiteral("resmlp:depth=8,width=64,batch=32")}) {
        SCOPED_TRACE(net.toStdString());
        MainWindow w(false);
        loadAndPlan(w, net, {QStringLiteral("none"), QStringLiteral("sqrt-n")});
        changeBudget(w, w.network().floor_bytes);  // nothing but parameters and inputs fits
        ResultsModel* m = w.resultsModel();
        ASSERT_EQ(m->result(1).status, QStringLiteral("infeasible"));
        ASSERT_TRUE(m->result(1).min_feasible_budget);
        const uint64_t smallest = *m->result(1).min_feasible_budget;
        if (smallest > w.network().none_peak_bytes) {
            // Above the slider's top: no budget it can show works, so no button offers one.
            for (QPushButton* b : w.findChildren<QPushButton*>())
                EXPECT_FALSE(b->text().startsWith(QStringLiteral("Use ")) && b->isVisibleTo(&w))
                    << b->text().toStdString();
            continue;
        }
        QPushButton* use = nullptr;
        for (QPushButton* b : w.findChildren<QPushButton*>())
            if (b->text().startsWith(QStringLiteral("Use ")) && b->isVisibleTo(&w)) use = b;
        ASSERT_NE(use, nullptr) << w.messageText().toStdString();
        const QString said = use->text();
        use->click();
        settle(w);
        ASSERT_TRUE(w.budget());
        EXPECT_GE(*w.budget(), smallest);
        EXPECT_EQ(said, QStringLiteral("Use %1").arg(bytes_text(*w.budget())))
            << "the button says the budget it sets";
        for (int row = 0; row < m->rowCount(); ++row)
            EXPECT_TRUE(m->result(row).planned) << m->result(row).status.toStdString() << ": "
                                                << m->result(row).message.toStdString();
    }
}

// On a first start the slider's default budget is one the ticked strategies can meet.
TEST(UiNothingLost, TheDefaultBudgetAtStartUpIsFeasible) {
    MainWindow w(false);
    QSignalSpy plan(&w, &MainWindow::planReady);
    if (!w.isNetworkReady()) {
        QSignalSpy ready(&w, &MainWindow::networkReady);
        ASSERT_TRUE(ready.wait(kWaitMs));
    }
    ASSERT_TRUE(plan.count() > 0 || plan.wait(kWaitMs));
    while (plan.wait(500)) {
    }
    ResultsModel* m = w.resultsModel();
    ASSERT_GT(m->rowCount(), 0);
    for (int row = 0; row < m->rowCount(); ++row)
        EXPECT_NE(m->result(row).status, QStringLiteral("infeasible"))
            << m->result(row).spec.toStdString() << ": " << m->result(row).message.toStdString();
    EXPECT_FALSE(w.messageText().contains(QStringLiteral("infeasible")))
        << w.messageText().toStdString();
    EXPECT_TRUE(w.budget().has_value()) << "the budget box stays ticked";
}

// Start-up with --network and --strategies (what `rematlab -n … -s …` does): the default budget
// is made one the strategies given can meet, not only the default ones.
TEST(UiNothingLost, TheDefaultBudgetIsFeasibleForTheStrategiesGivenAtStartUp) {
    for (const QStringList& given :
         {QStringList{QStringLiteral("none"), QStringLiteral("sqrt-n")},
          QStringList{QStringLiteral("sqrt-n"), QStringLiteral("periodic:k=2"),
                      QStringLiteral("optimal")},
          QStringList{QStringLiteral("dtr")}}) {
        SCOPED_TRACE(given.join(QLatin1Char(';')).toStdString());
        MainWindow w(false);
        QSignalSpy plan(&w, &MainWindow::planReady);
        w.setNetworkSpec(QStringLiteral("resmlp:depth=4,width=64,batch=32"));
        w.setStrategies(given);
        w.show();
        ASSERT_TRUE(plan.wait(kWaitMs));
        while (plan.wait(500)) {
        }
        ResultsModel* m = w.resultsModel();
        ASSERT_EQ(m->rowCount(), given.size());
        for (int row = 0; row < m->rowCount(); ++row)
            EXPECT_NE(m->result(row).status, QStringLiteral("infeasible"))
                << m->result(row).spec.toStdString() << ": "
                << m->result(row).message.toStdString();
        EXPECT_FALSE(w.messageText().contains(QStringLiteral("infeasible")))
            << w.messageText().toStdString();
        EXPECT_TRUE(w.budget().has_value()) << "the budget box stays ticked";
    }
}

// The same when a run is asked for at once, before the network has loaded (`rematlab
// --screenshot … -s …`, or Ctrl+R at start-up): the run waits for the budget to be made feasible.
TEST(UiNothingLost, ARunAskedForAtStartUpRunsUnderAFeasibleDefaultBudget) {
    MainWindow w(false);
    w.setupPanel()->setRepeats(1);
    w.setNetworkSpec(QStringLiteral("resmlp:depth=4,width=64,batch=32"));
    w.setStrategies({QStringLiteral("none"), QStringLiteral("sqrt-n")});
    w.show();
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    ResultsModel* m = w.resultsModel();
    ASSERT_EQ(m->rowCount(), 2);
    for (int row = 0; row < m->rowCount(); ++row) {
        const StrategyResult& r = m->result(row);
        EXPECT_TRUE(r.executed) << r.spec.toStdString() << " (" << r.status.toStdString()
                                << "): " << r.message.toStdString();
    }
    ASSERT_TRUE(w.budget().has_value()) << "the budget box stays ticked";
    EXPECT_TRUE(m->result(1).spec.contains(QStringLiteral("budget="))) << "run under the budget";
    EXPECT_FALSE(w.messageText().contains(QStringLiteral("infeasible")))
        << w.messageText().toStdString();
}

// A run over the memory cap keeps the plan and its predicted timeline, and says which
// instruction and which allocation went over.
TEST(UiNothingLost, ACapFailureKeepsThePlanAndNamesTheAllocation) {
    MainWindow w(false);
    w.setupPanel()->setRepeats(1);
    loadAndPlan(w, kActs, {QStringLiteral("none"), QStringLiteral("sqrt-n")});
    w.setBudget(std::nullopt);
    settle(w);
    ResultsModel* m = w.resultsModel();
    const uint64_t none_peak = m->result(0).predicted_peak;
    const uint64_t sqrt_peak = m->result(1).predicted_peak;
    ASSERT_LT(sqrt_peak, none_peak);
    w.setCap(QString::number(sqrt_peak));  // sqrt-n fits exactly, none does not
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    ASSERT_EQ(m->rowCount(), 2);
    const StrategyResult& none = m->result(0);
    EXPECT_EQ(none.status, QStringLiteral("cap exceeded"));
    EXPECT_FALSE(none.executed);
    EXPECT_TRUE(none.planned) << "the plan is kept";
    EXPECT_EQ(none.predicted_peak, none_peak);
    ASSERT_TRUE(none.predicted_timeline);
    EXPECT_FALSE(none.predicted_timeline->points.empty());
    ASSERT_TRUE(none.trace) << "the schedule views still have the plan";
    EXPECT_TRUE(none.message.contains(QStringLiteral("at instruction")))
        << none.message.toStdString();
    EXPECT_TRUE(none.message.contains(QStringLiteral("allocating"))) << none.message.toStdString();
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("cap exceeded")))
        << w.messageText().toStdString();
    EXPECT_TRUE(m->result(1).executed) << m->result(1).message.toStdString();
    EXPECT_EQ(m->result(1).measured_peak, sqrt_peak);

    // The cap, the instruction and the allocation that failed, and the curve measured up to
    // there: its events are the prediction's, up to the failing instruction.
    ASSERT_TRUE(none.cap_failure.has_value());
    const auto& cf = *none.cap_failure;
    EXPECT_EQ(cf.cap, sqrt_peak);
    EXPECT_GE(cf.instruction, 0);
    EXPECT_GT(cf.live + cf.requested, cf.cap);
    EXPECT_TRUE(none.message.contains(QStringLiteral("at instruction %1 ").arg(cf.instruction)))
        << none.message.toStdString();
    ASSERT_TRUE(none.measured_timeline) << "the partial measured curve";
    const Timeline& part = *none.measured_timeline;
    const Timeline& pred = *none.predicted_timeline;
    ASSERT_FALSE(part.points.empty());
    ASSERT_LT(part.points.size(), pred.points.size());
    for (size_t i = 0; i < part.points.size(); ++i) {
        EXPECT_EQ(part.points[i].y, pred.points[i].y) << "event " << i;
        EXPECT_EQ(part.instruction[i], pred.instruction[i]) << "event " << i;
        EXPECT_LE(part.points[i].y, double(cf.cap));
    }
    EXPECT_LE(part.instruction.back(), cf.instruction);
    // The prediction's next event is the allocation that failed.
    EXPECT_EQ(pred.points[part.points.size()].y, double(cf.live + cf.requested));
    EXPECT_EQ(pred.instruction[part.points.size()], cf.instruction);

    // The chart draws the cap as a line, the partial measured curve and the failed allocation.
    MemoryChart* chart = w.memoryChart();
    chart->flush();
    ASSERT_TRUE(chart->capSeries()->isVisible());
    const QList<QPointF> cap_line = chart->capSeries()->points();
    ASSERT_EQ(cap_line.size(), 2);
    const double divisor = double(cf.cap) / cap_line[0].y();
    EXPECT_GT(divisor, 0);
    EXPECT_TRUE(chart->capSeries()->name().contains(bytes_text(cf.cap)));
    EXPECT_FALSE(chart->measuredSeries(0)->points().isEmpty());
    ASSERT_EQ(chart->capFailureSeries()->count(), 1);
    EXPECT_DOUBLE_EQ(chart->capFailureSeries()->at(0).y() * divisor,
                     double(cf.live + cf.requested));
    EXPECT_DOUBLE_EQ(chart->capFailureSeries()->at(0).x(), part.points.back().x);
    for (const QPointF& p : chart->measuredSeries(0)->points())
        EXPECT_LE(p.x(), part.points.back().x);
}

}  // namespace
}  // namespace rl::ui
