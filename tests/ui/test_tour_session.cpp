// A tour runs in its own session (issue 15): it plans its own network and strategies without
// the user's budget, and at Finish or Esc the user's network, strategies, budget and results
// (measured figures included) come back exactly.
#include <gtest/gtest.h>

#include <QAction>
#include <QSignalSpy>

#include "ui/main_window.h"
#include "ui/results_model.h"
#include "ui/setup_panel.h"
#include "ui/tours.h"

namespace rl::ui {
namespace {

constexpr int kWaitMs = 120000;
const QString kUserNet = QStringLiteral("mlp:depth=5,width=24,batch=64");

void settle(MainWindow& w) {
    QSignalSpy plan(&w, &MainWindow::planReady);
    ASSERT_TRUE(plan.wait(kWaitMs));
    while (plan.wait(500)) {
    }
}

struct Seen {
    QString network;
    QStringList strategies;
    std::optional<uint64_t> budget;
    std::vector<std::tuple<QString, bool, double, uint64_t>> rows;
};

Seen seen(const MainWindow& w) {
    Seen s{w.networkSpec(), w.strategySpecs(), w.budget(), {}};
    for (const StrategyResult& r : w.resultsModel()->results())
        s.rows.emplace_back(r.spec, r.executed, r.total_ms, r.measured_peak);
    return s;
}

void userSessionWithARun(MainWindow& w) {
    w.setupPanel()->setRepeats(1);
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.setNetworkSpec(kUserNet);
    w.setStrategies(
        {QStringLiteral("none"), QStringLiteral("sqrt-n"), QStringLiteral("periodic:k=2")});
    ASSERT_TRUE(plan.count() > 0 || plan.wait(kWaitMs));
    while (plan.wait(500)) {
    }
    const uint64_t none_peak = w.resultsModel()->result(0).predicted_peak;
    const uint64_t b = none_peak - none_peak / 10;
    if (w.setupPanel()->budgetFor(b) != w.budget()) {
        w.setBudget(b);
        settle(w);
    }
    QSignalSpy done(&w, &MainWindow::runCompleted);
    w.startRun();
    ASSERT_TRUE(done.wait(kWaitMs));
    ASSERT_TRUE(w.resultsModel()->result(0).executed);
}

void expectSame(const Seen& a, const Seen& b) {
    EXPECT_EQ(a.network, b.network);
    EXPECT_EQ(a.strategies, b.strategies);
    EXPECT_EQ(a.budget, b.budget);
    ASSERT_EQ(a.rows.size(), b.rows.size());
    for (size_t i = 0; i < a.rows.size(); ++i) {
        EXPECT_EQ(std::get<0>(a.rows[i]), std::get<0>(b.rows[i]));
        EXPECT_EQ(std::get<1>(a.rows[i]), std::get<1>(b.rows[i])) << "measured figures kept";
        EXPECT_EQ(std::get<2>(a.rows[i]), std::get<2>(b.rows[i]));
        EXPECT_EQ(std::get<3>(a.rows[i]), std::get<3>(b.rows[i]));
    }
}

TEST(UiTourSession, FinishAndEscBringTheUsersSessionBackExactly) {
    for (const bool esc : {false, true}) {
        SCOPED_TRACE(esc ? "Esc" : "Finish");
        MainWindow w(false);
        w.show();
        userSessionWithARun(w);
        const Seen before = seen(w);
        ASSERT_TRUE(before.budget);

        w.startTour(0);
        settle(w);
        ASSERT_TRUE(w.inTour());
        const TourStep& first = tours()[0].steps[0];
        EXPECT_EQ(w.networkSpec(), first.network);
        EXPECT_FALSE(w.budget()) << "the tour plans without the user's budget";
        for (const StrategyResult& r : w.resultsModel()->results())
            EXPECT_FALSE(r.spec.contains(QStringLiteral("budget="))) << r.spec.toStdString();
        if (tours()[0].steps.size() > 1) {
            w.tourPanel()->showStep(1);
            settle(w);
        }

        if (esc) {
            QAction* cancel = nullptr;
            for (QAction* a : w.findChildren<QAction*>())
                if (a->shortcut() == QKeySequence(Qt::Key_Escape) &&
                    a->text() == QStringLiteral("&Cancel"))
                    cancel = a;
            ASSERT_NE(cancel, nullptr);
            cancel->trigger();
        } else {
            emit w.tourPanel()->finished();
        }
        settle(w);
        EXPECT_FALSE(w.inTour());
        expectSame(before, seen(w));
    }
}

}  // namespace
}  // namespace rl::ui
