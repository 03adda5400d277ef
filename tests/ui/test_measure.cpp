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
#include "ui/setup_panel.h"

namespace rl::ui {
namespace {

constexpr int kWaitMs = 120000;
const QString kSmall = QStringLiteral("mlp:depth=6,width=32,batch=16");

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

}  // namespace
}  // namespace rl::ui
