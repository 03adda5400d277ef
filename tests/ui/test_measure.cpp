// Measurements with their noise in the window: the Repeats setting reaches the run, the table
// shows every measured time as median (min–max) over the timed runs, overheads within the noise
// say so, and the Pareto chart draws the spread of the recompute time as error bars.
#include <gtest/gtest.h>

#include <QLineSeries>
#include <QRegularExpression>
#include <QSignalSpy>

#include "ui/main_window.h"
#include "ui/palette.h"
#include "ui/pareto_chart.h"
#include "ui/results_model.h"
#include "ui/run_controller.h"
#include "ui/setup_panel.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

TEST(UiMeasure, RepeatsAndSpreadInTheTableAndErrorBarsOnPareto) {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    EXPECT_EQ(w.setupPanel()->repeats(), kDefaultRepeats) << "the default, like --repeat";
    w.setupPanel()->setRepeats(4);
    EXPECT_EQ(w.setupPanel()->request().repeats, 4);
    w.setNetworkSpec(kSmall);
    w.setStrategies(
        {QStringLiteral("none"), QStringLiteral("sqrt-n"), QStringLiteral("periodic:k=2")});
    w.setBudget(std::nullopt);
    if (!w.isNetworkReady()) {
        QSignalSpy ready(&w, &MainWindow::networkReady);
        ASSERT_TRUE(ready.wait(kWaitMs));
    }
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    ResultsModel* m = w.resultsModel();
    ASSERT_EQ(m->rowCount(), 3);
    const QRegularExpression shown(QStringLiteral(R"(^(\d+\.?\d*) \((\d+\.?\d*)–(\d+\.?\d*)\)$)"));
    const Spread* baseline = nullptr;
    for (int row = 0; row < 3; ++row) {
        const StrategyResult& r = m->result(row);
        SCOPED_TRACE(r.spec.toStdString());
        ASSERT_TRUE(r.executed) << r.message.toStdString();
        ASSERT_TRUE(r.times);
        EXPECT_EQ(r.measured_peak, r.predicted_peak);
        EXPECT_TRUE(r.grads_equal);
        if (row == 0) baseline = &r.times->total;
        for (const auto& [col, sp] :
             {std::pair{int(ResultsModel::ForwardMs), &r.times->forward},
              std::pair{int(ResultsModel::RecomputeMs), &r.times->recompute},
              std::pair{int(ResultsModel::BackwardMs), &r.times->backward},
              std::pair{int(ResultsModel::TotalMs), &r.times->total}}) {
            EXPECT_EQ(sp->samples, 4) << col;
            EXPECT_LE(sp->min, sp->median);
            EXPECT_LE(sp->median, sp->max);
            const QString text = m->data(m->index(row, col)).toString();
            const auto match = shown.match(text);
            ASSERT_TRUE(match.hasMatch()) << col << ": " << text.toStdString();
            EXPECT_EQ(match.captured(1), ms_text(sp->median));
            EXPECT_EQ(match.captured(2), ms_text(sp->min));
            EXPECT_EQ(match.captured(3), ms_text(sp->max));
        }
        const QString overhead = m->data(m->index(row, ResultsModel::Overhead)).toString();
        if (row == 0) {
            EXPECT_EQ(overhead, QStringLiteral("baseline"));
            continue;
        }
        const bool overlap =
            r.times->total.min <= baseline->max && baseline->min <= r.times->total.max;
        if (overlap) {
            EXPECT_EQ(overhead, QStringLiteral("within noise"));
        } else {
            EXPECT_TRUE(overhead.endsWith(QStringLiteral(" %"))) << overhead.toStdString();
            EXPECT_TRUE(overhead.startsWith(QLatin1Char('+')) ||
                        overhead.startsWith(QLatin1Char('-')))
                << overhead.toStdString();
        }
    }

    // Pareto: an error bar per measured point, from the fastest to the slowest timed run.
    ParetoChart* p = w.paretoChart();
    p->flush();
    ASSERT_EQ(p->errorBars().size(), 3u);
    for (int row = 0; row < 3; ++row) {
        const StrategyResult& r = m->result(row);
        const QLineSeries* bar = p->errorBars()[static_cast<size_t>(row)];
        EXPECT_EQ(bar->name(), r.spec + QStringLiteral(" (spread)"));
        double lo = 1e300, hi = -1e300;
        for (const QPointF& q : bar->points()) lo = std::min(lo, q.x()), hi = std::max(hi, q.x());
        EXPECT_DOUBLE_EQ(lo, r.times->recompute.min);
        EXPECT_DOUBLE_EQ(hi, r.times->recompute.max);
    }
}

// Cancel keeps what was measured: the rows whose timed repeats completed are published, each with
// the number of repeats it took, and a strategy with none says it has no timing.
TEST(UiMeasure, CancelKeepsEachStrategysCompletedRepeats) {
    constexpr int kRepeats = 6;
    // Cancel as the second strategy of timed round `round` starts (round 1: only the first
    // strategy has a timed repeat; round 3: every strategy has at least two).
    for (const int round : {1, 3}) {
        SCOPED_TRACE("cancelled in round " + std::to_string(round));
        MainWindow w(false);
        w.resize(1400, 900);
        w.show();
        w.setupPanel()->setRepeats(kRepeats);
        // Steps of ~0.1 s: the cancel (queued to the GUI thread) lands within the step that
        // started it, long before the last round.
        w.setNetworkSpec(QStringLiteral("mlp:depth=8,width=512,batch=1024"));
        w.setStrategies(
            {QStringLiteral("none"), QStringLiteral("sqrt-n"), QStringLiteral("periodic:k=2")});
        w.setBudget(std::nullopt);
        if (!w.isNetworkReady()) {
            QSignalSpy ready(&w, &MainWindow::networkReady);
            ASSERT_TRUE(ready.wait(kWaitMs));
        }
        bool cancelled = false;
        QObject::connect(w.controller(), &RunController::progress, &w,
                         [&](quint64, const ProgressSnapshot& p) {
                             if (!cancelled && p.round == round && p.strategy_index == 1) {
                                 cancelled = true;
                                 w.cancelRun();
                             }
                         });
        QSignalSpy done(&w, &MainWindow::runCompleted);
        w.startRun();
        ASSERT_TRUE(done.wait(kWaitMs));
        ASSERT_TRUE(cancelled);
        ResultsModel* m = w.resultsModel();
        ASSERT_EQ(m->rowCount(), 3);
        const QString message = w.messageText();
        EXPECT_TRUE(message.startsWith(QStringLiteral("Run cancelled."))) << message.toStdString();
        int previous = kRepeats;
        for (int row = 0; row < 3; ++row) {
            const StrategyResult& r = m->result(row);
            SCOPED_TRACE(r.spec.toStdString());
            ASSERT_TRUE(r.planned);
            const int taken = r.executed && r.times ? r.times->total.samples : 0;
            // Interleaved round by round: a strategy earlier in the round has at least as many.
            EXPECT_LE(taken, previous);
            previous = taken;
            EXPECT_LT(taken, kRepeats) << "cancelled before the last round";
            if (row == 0) {
                EXPECT_GE(taken, round) << "the first strategy finished round " << round;
            }
            if (taken == 0) {
                EXPECT_FALSE(r.executed);
                EXPECT_TRUE(r.message.startsWith(QStringLiteral("No timing")))
                    << r.message.toStdString();
                EXPECT_TRUE(message.contains(QStringLiteral("No timing for")));
                EXPECT_TRUE(message.contains(QStringLiteral("<b>%1</b>").arg(r.spec)));
                continue;
            }
            EXPECT_EQ(r.measured_peak, r.predicted_peak);
            EXPECT_TRUE(r.grads_equal);
            EXPECT_EQ(r.times->forward.samples, taken);
            EXPECT_LE(r.times->total.min, r.times->total.median);
            EXPECT_LE(r.times->total.median, r.times->total.max);
            EXPECT_DOUBLE_EQ(r.total_ms, r.times->total.median);
            EXPECT_TRUE(message.contains(
                QStringLiteral("<b>%1</b> %2 of %3").arg(r.spec).arg(taken).arg(kRepeats)))
                << message.toStdString();
            const QString tip =
                m->data(m->index(row, ResultsModel::TotalMs), Qt::ToolTipRole).toString();
            EXPECT_TRUE(taken == 1 ? tip.contains(QStringLiteral("one timed repeat"))
                                   : tip.contains(QStringLiteral("of %1 timed repeats").arg(taken)))
                << tip.toStdString();
        }
        if (round == 1) {
            EXPECT_EQ(m->result(2).executed, false) << "periodic had not started round 1";
        } else {
            for (int row = 0; row < 3; ++row) EXPECT_GE(m->result(row).times->total.samples, 2);
        }
    }
}

}  // namespace
}  // namespace rl::ui
