// A tour runs in its own session (issue 15): it plans its own network and strategies without
// the user's budget, and at Finish or Esc the user's network, strategies, budget and results
// (measured figures included) come back exactly.
#include <gtest/gtest.h>

#include <QAction>
#include <QDockWidget>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTextDocument>
#include <set>

#include "strategies/policy.h"
#include "ui/main_window.h"
#include "ui/palette.h"
#include "ui/results_area.h"
#include "ui/results_model.h"
#include "ui/schedule_trace.h"
#include "ui/setup_panel.h"
#include "ui/tours.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

const QString kUserNet = QStringLiteral("mlp:depth=5,width=24,batch=64");

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

QAction* escAction(MainWindow& w) {
    for (QAction* a : w.findChildren<QAction*>())
        if (a->shortcut() == QKeySequence(Qt::Key_Escape) && a->text() == QStringLiteral("&Cancel"))
            return a;
    return nullptr;
}

TEST(UiTourSession, TeachModeAndThePageComeBackAsTheUserHadThem) {
    // Teach mode closed on the Pareto page, then open on the matrix: each comes back at Finish
    // and at Esc, though every tour step opens teach mode and shows a page of its own.
    for (const bool teaching : {false, true}) {
        for (const bool esc : {false, true}) {
            SCOPED_TRACE(std::string(teaching ? "teaching" : "not teaching") +
                         (esc ? ", Esc" : ", Finish"));
            MainWindow w(false);
            w.show();
            settle(w);
            w.showTeachMode(teaching);
            if (teaching)
                w.showScheduleTab(1);
            else
                w.resultsArea()->showPage(ResultsArea::ParetoTab);
            const int page = w.resultsArea()->currentPage();
            auto* dock = w.findChild<QDockWidget*>(QStringLiteral("teachDock"));
            ASSERT_NE(dock, nullptr);
            ASSERT_EQ(dock->isVisible(), teaching);

            w.startTour(0);
            settle(w);
            ASSERT_TRUE(w.inTour());
            EXPECT_TRUE(dock->isVisible()) << "a tour step opens teach mode";
            EXPECT_NE(w.resultsArea()->currentPage(), page) << "and shows its own page";

            if (esc) {
                QAction* cancel = escAction(w);
                ASSERT_NE(cancel, nullptr);
                cancel->trigger();
            } else {
                emit w.tourPanel()->finished();
            }
            EXPECT_FALSE(w.inTour());
            EXPECT_EQ(dock->isVisible(), teaching);
            EXPECT_EQ(w.resultsArea()->currentPage(), page);
            settle(w);
            EXPECT_EQ(dock->isVisible(), teaching) << "and stays so once the session is back";
            EXPECT_EQ(w.resultsArea()->currentPage(), page);
        }
    }
}

// Every figure a tour step's text quotes: what the window shows for that step.
struct OnScreen {
    std::set<QString> bytes;                            // "1.23 MiB", as the table writes them
    std::set<long> counts;                              // recomputations, checkpoints, saved values
    std::vector<double> ms;                             // predicted times of the rows
    std::vector<std::pair<uint64_t, uint64_t>> shares;  // (part, whole) for "N %"
};

OnScreen on_screen(const MainWindow& w) {
    OnScreen o;
    o.bytes.insert(bytes_text(w.network().param_bytes));
    o.bytes.insert(bytes_text(w.network().activation_bytes));
    const auto& rows = w.resultsModel()->results();
    for (const StrategyResult& r : rows) {
        if (!r.planned || !r.trace) continue;
        o.bytes.insert(bytes_text(r.predicted_peak));
        o.bytes.insert(bytes_text(r.predicted_activation_peak));
        o.bytes.insert(bytes_text(r.predicted_host_peak));  // the Host peak column
        for (const StrategyResult& q : rows)
            if (q.planned && q.predicted_peak > r.predicted_peak)
                o.bytes.insert(bytes_text(q.predicted_peak - r.predicted_peak));
        const SavedResiduals saved = saved_residuals(*r.trace->graph, r.trace->plan.schedule);
        o.bytes.insert(bytes_text(saved.total_bytes));
        o.counts.insert(long(saved.rows.size()));
        o.counts.insert(r.recomputes);
        o.counts.insert(long(r.trace->plan.checkpoints.size()));
        for (double ms : {r.predicted_forward_ms, r.predicted_recompute_ms, r.predicted_backward_ms,
                          r.predicted_total_ms, r.predicted_stall_ms})
            o.ms.push_back(ms);
        o.shares.emplace_back(r.predicted_activation_peak, r.predicted_peak);
    }
    return o;
}

void merge(OnScreen& into, const OnScreen& from) {
    into.bytes.insert(from.bytes.begin(), from.bytes.end());
    into.counts.insert(from.counts.begin(), from.counts.end());
    into.ms.insert(into.ms.end(), from.ms.begin(), from.ms.end());
    into.shares.insert(into.shares.end(), from.shares.begin(), from.shares.end());
}

// Checks each figure of `html` against `shown`; returns how many it checked.
int expectFiguresShown(const QString& html, const OnScreen& shown) {
    QTextDocument doc;
    doc.setHtml(html);
    const QString text = doc.toPlainText();
    int checked = 0;
    static const QRegularExpression bytes(QStringLiteral("(\\d+(?:\\.\\d+)?) (B|KiB|MiB|GiB)\\b"));
    for (auto m = bytes.globalMatch(text); m.hasNext(); ++checked) {
        const QString figure = m.next().captured(0);
        EXPECT_TRUE(shown.bytes.count(figure))
            << figure.toStdString() << " in: " << text.toStdString();
    }
    static const QRegularExpression ms(QStringLiteral("(\\d+(?:\\.(\\d+))?) ms\\b"));
    for (auto m = ms.globalMatch(text); m.hasNext(); ++checked) {
        const auto match = m.next();
        const int decimals = int(match.captured(2).size());
        bool found = false;
        for (double v : shown.ms) found |= QString::number(v, 'f', decimals) == match.captured(1);
        EXPECT_TRUE(found) << match.captured(0).toStdString() << " in: " << text.toStdString();
    }
    static const QRegularExpression count(
        QStringLiteral("(\\d+) (recomputations|checkpoints|values)\\b"));
    for (auto m = count.globalMatch(text); m.hasNext(); ++checked) {
        const auto match = m.next();
        EXPECT_TRUE(shown.counts.count(match.captured(1).toLong()))
            << match.captured(0).toStdString() << " in: " << text.toStdString();
    }
    static const QRegularExpression share(QStringLiteral("(\\d+) %"));
    for (auto m = share.globalMatch(text); m.hasNext(); ++checked) {
        const auto match = m.next();
        bool found = false;
        for (auto [part, whole] : shown.shares)
            found |= whole && QString::number(100.0 * double(part) / double(whole), 'f', 0) ==
                                  match.captured(1);
        EXPECT_TRUE(found) << match.captured(0).toStdString() << " in: " << text.toStdString();
    }
    return checked;
}

TEST(UiTourSession, EveryFigureAStepQuotesIsOneTheWindowShowsForIt) {
    MainWindow w(false);
    w.show();
    int checked = 0;
    for (size_t t = 0; t < tours().size(); ++t) {
        SCOPED_TRACE(tours()[t].name.toStdString());
        std::optional<OnScreen> previous;
        for (size_t k = 0; k < tours()[t].steps.size(); ++k) {
            SCOPED_TRACE("step " + std::to_string(k + 1));
            QSignalSpy plan(&w, &MainWindow::planReady);
            if (k == 0)
                w.startTour(int(t));
            else
                w.tourPanel()->showStep(int(k));  // Next
            while (!w.tourPanel()->shown()) {
                const bool planned = plan.wait(kWaitMs);
                QStringList rows;
                for (const StrategyResult& r : w.resultsModel()->results()) rows << r.spec;
                ASSERT_TRUE(planned) << "rows: " << rows.join(QLatin1Char(';')).toStdString();
            }
            ASSERT_EQ(w.network().spec, w.networkSpec());
            OnScreen shown = on_screen(w);
            const OnScreen now = shown;
            // A step may compare with the step the user came from (it says so).
            if (previous) merge(shown, *previous);
            const QString text = w.tourPanel()->text();
            EXPECT_FALSE(text.contains(QStringLiteral("could not compute"))) << text.toStdString();
            checked += expectFiguresShown(text, shown);
            previous = now;
        }
        w.endTour();
        QSignalSpy plan(&w, &MainWindow::planReady);
        plan.wait(2000);
    }
    EXPECT_GE(checked, 25) << "the tours quote their figures in the forms checked here";
}

}  // namespace
}  // namespace rl::ui
