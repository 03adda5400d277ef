// An abstract benchmark graph (Checkmate's node-link JSON) opened in the window, offscreen: it
// loads as a plan-only network, its strategies are planned and predicted, the inapplicable ones
// say so, and Run refuses with the reason instead of executing.
#include <gtest/gtest.h>

#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>

#include "ui/main_window.h"
#include "ui/results_model.h"
#include "ui/setup_panel.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

// a(4) -> b(10) -> loss(1) -> gb(2, reads loss and b) -> ga(2, reads gb and a). Without
// recomputation the peak is at gb: a + b + loss + gb = 17 bytes (by hand).
const char* kTinyTrain = R"({"directed": true, "graph": {"name": "tiny_train"},
  "nodes": [{"id": 0, "name": "a", "backward": false, "cost_cpu": 3, "cost_ram": 4},
            {"id": 1, "name": "b", "backward": false, "cost_cpu": 1, "cost_ram": 10},
            {"id": 2, "name": "loss", "backward": false, "cost_cpu": 1, "cost_ram": 1},
            {"id": 3, "name": "gb", "backward": true, "cost_cpu": 2, "cost_ram": 2},
            {"id": 4, "name": "ga", "backward": true, "cost_cpu": 3, "cost_ram": 2}],
  "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2}, {"source": 2, "target": 3},
            {"source": 1, "target": 3}, {"source": 3, "target": 4}, {"source": 0, "target": 4}]})";

TEST(UiAbstractNetwork, PlansPredictsAndRefusesToRun) {
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("tiny_train.json"));
    {
        QFile f(path);
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write(kTinyTrain);
    }
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    w.setStrategies({QStringLiteral("none"), QStringLiteral("sqrt-n")});
    QSignalSpy ready(&w, &MainWindow::networkReady);
    w.openFile(path);
    if (!w.isNetworkReady()) {
        ASSERT_TRUE(ready.wait(kWaitMs));
    }
    EXPECT_TRUE(w.network().plan_only);
    EXPECT_EQ(w.network().nodes, 5);
    EXPECT_EQ(w.network().none_peak_bytes, 17u);
    // It starts at the benchmarks' budget, 0.9 of that peak (floor 15), not the slider's middle.
    ASSERT_TRUE(w.setupPanel()->budget());
    EXPECT_GE(*w.setupPanel()->budget(), 15u);
    EXPECT_LT(*w.setupPanel()->budget(), 17u);
    QSignalSpy plan(&w, &MainWindow::planReady);
    ASSERT_TRUE(plan.wait(kWaitMs));
    ASSERT_EQ(w.resultsModel()->rowCount(), 2);
    const StrategyResult& none = w.resultsModel()->result(0);
    EXPECT_TRUE(none.planned) << none.message.toStdString();
    EXPECT_EQ(none.predicted_peak, 17u);
    const StrategyResult& sqrt_n = w.resultsModel()->result(1);
    EXPECT_EQ(sqrt_n.status, QStringLiteral("not applicable"));
    EXPECT_TRUE(sqrt_n.message.contains(QStringLiteral("does not apply")))
        << sqrt_n.message.toStdString();
    // Its times are the file's durations, not milliseconds: the time columns say so (the
    // planning time stays in ms), as does the memory chart's axis.
    const ResultsModel* m = w.resultsModel();
    for (const int c : {ResultsModel::ForwardMs, ResultsModel::RecomputeMs,
                        ResultsModel::BackwardMs, ResultsModel::TotalMs}) {
        const QString name = m->headerData(c, Qt::Horizontal, ResultsModel::NameRole).toString();
        EXPECT_TRUE(name.endsWith(QStringLiteral("units"))) << name.toStdString();
        EXPECT_FALSE(m->headerData(c, Qt::Horizontal).toString().contains(QStringLiteral("ms")));
    }
    EXPECT_EQ(m->headerData(ResultsModel::SolveMs, Qt::Horizontal, ResultsModel::NameRole),
              QStringLiteral("Solve ms"));
    EXPECT_TRUE(m->toJson().contains("\"time_unit\": \"graph duration units\""));
    EXPECT_EQ(none.predicted_total_ms, 3.0 + 1 + 1 + 2 + 3);  // the durations, summed

    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    if (done.isEmpty()) {
        ASSERT_TRUE(done.wait(kWaitMs));
    }
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("no kernels")))
        << w.messageText().toStdString();
    EXPECT_FALSE(w.resultsModel()->result(0).executed);
}

}  // namespace
}  // namespace rl::ui
