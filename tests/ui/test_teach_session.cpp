// Teach mode, guided tours and sessions, offscreen.
#include <gtest/gtest.h>

#include <algorithm>

#include <QApplication>
#include <QBrush>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <nlohmann/json.hpp>

#include "engine/errors.h"
#include "engine/networks/network_json.h"
#include "engine/networks/presets.h"
#include "ui/evaluation.h"
#include "ui/graph_view.h"
#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/message_widget.h"
#include "ui/residuals_panel.h"
#include "ui/results_model.h"
#include "ui/schedule_trace.h"
#include "ui/session.h"
#include "ui/teach_panel.h"
#include "ui/tours.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

const QString kTeachNet = QStringLiteral("mlp:depth=4,width=16,batch=8");

RunSummary planned(const QStringList& strategies, bool execute = false) {
    RunRequest r;
    r.network = kTeachNet;
    r.strategies = strategies;
    return evaluate_all(r, execute);
}

TEST(UiTeach, SteppingForwardAndBackReturnsToTheSameState) {
    const RunSummary s = planned({QStringLiteral("none"), QStringLiteral("sqrt-n:segments=2")});
    TeachPanel teach;
    teach.setResults(s.results);
    teach.setStrategies(1, 0);
    ASSERT_GT(teach.size(), 0);
    const ScheduleState start = *teach.state();
    std::vector<ScheduleState> seen{start};
    std::vector<QString> sentences{teach.sentence()};
    while (teach.position() < teach.size()) {
        teach.stepForward();
        seen.push_back(*teach.state());
        sentences.push_back(teach.sentence());
    }
    // Back, one step at a time: every state and sentence comes back exactly.
    for (long p = teach.size(); p > 0; --p) {
        teach.stepBack();
        ASSERT_EQ(*teach.state(), seen[size_t(p - 1)]) << p;
        ASSERT_EQ(teach.sentence(), sentences[size_t(p - 1)]) << p;
    }
    EXPECT_EQ(*teach.state(), start);
    // The sentence is the engine's.
    teach.seek(7);
    const ScheduleTrace& t = *s.results[1].trace;
    const Explanation e = ScheduleExplainer(*t.graph, t.plan, t.sim, t.costs).explain(6);
    ASSERT_NE(teach.explanation(), nullptr);
    EXPECT_EQ(teach.explanation()->why, e.why);
    EXPECT_TRUE(teach.sentence().contains(QString::fromStdString(e.what)));
}

// The issue's example as teach mode shows it: block9.fc's backward (a linear layer) reads its
// own input block8.act, and block7.act's recompute names the recompute that really reads it.
TEST(UiTeach, ShowsTheRealResidualAndTheRealReaderOfARecompute) {
    RunRequest r;
    r.network = QStringLiteral("mlp:depth=12,width=8,batch=4");
    r.strategies = {QStringLiteral("sqrt-n")};
    const RunSummary s = evaluate_all(r, false);
    TeachPanel teach;
    teach.setResults(s.results);
    teach.setStrategies(0, -1);
    const ScheduleTrace& t = *s.results[0].trace;
    long backward = -1, recompute = -1;
    for (long i = 0; i < static_cast<long>(t.plan.schedule.size()); ++i) {
        const Instruction& ins = t.plan.schedule.code[size_t(i)];
        const std::string& name = t.graph->node(ins.target).name;
        if (ins.kind == InstrKind::Backward && name == "block9.fc") backward = i;
        if (ins.kind == InstrKind::Compute && name == "block7.act" && backward < 0) recompute = i;
    }
    ASSERT_GE(backward, 0);
    ASSERT_GE(recompute, 0);
    teach.seek(backward + 1);
    EXPECT_TRUE(teach.sentence().contains(QStringLiteral("reads its input block8.act")))
        << teach.sentence().toStdString();
    EXPECT_FALSE(teach.sentence().contains(QStringLiteral("block8.fc")))
        << teach.sentence().toStdString();
    teach.seek(recompute + 1);
    EXPECT_TRUE(teach.sentence().contains(
        QStringLiteral("block7.act is recomputed because recomputing block8.fc (#")))
        << teach.sentence().toStdString();
    EXPECT_TRUE(teach.sentence().contains(
        QStringLiteral("block8.act is needed by the backward of block9.fc (#%1)").arg(backward)))
        << teach.sentence().toStdString();
}

TEST(UiTeach, LockstepMovesBothToTheBackwardOfTheSameNode) {
    const RunSummary s = planned({QStringLiteral("none"), QStringLiteral("sqrt-n:segments=2")});
    TeachPanel teach;
    teach.setResults(s.results);
    teach.setStrategies(1, 0);
    for (int k = 0; k < 4; ++k) {
        teach.nextBackward();
        ASSERT_NE(teach.explanation(), nullptr);
        ASSERT_NE(teach.rightExplanation(), nullptr);
        EXPECT_EQ(teach.explanation()->instruction.kind, InstrKind::Backward);
        EXPECT_EQ(teach.rightExplanation()->instruction, teach.explanation()->instruction);
    }
    // Plain steps move both by one instruction.
    const long left = teach.position();
    const long right = teach.rightState()->position;
    teach.stepForward();
    EXPECT_EQ(teach.position(), left + 1);
    EXPECT_EQ(teach.rightState()->position, right + 1);
}

TEST(UiTeach, WindowShowsTheViewsAndFollowsTheSteps) {
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.setNetworkSpec(kTeachNet);
    w.setStrategies({QStringLiteral("none"), QStringLiteral("sqrt-n:segments=2")});
    ASSERT_TRUE(plan.wait(kWaitMs));
    auto* tabs = w.findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    QStringList names;
    for (int i = 0; i < tabs->count(); ++i) names << tabs->tabText(i);
    EXPECT_TRUE(names.contains(QStringLiteral("Graph")));
    EXPECT_TRUE(names.contains(QStringLiteral("Schedule matrix")));
    EXPECT_TRUE(names.contains(QStringLiteral("Saved residuals")));
    ASSERT_NE(w.graphView()->trace(), nullptr);
    EXPECT_GT(w.teachPanel()->size(), 0);
    EXPECT_GT(w.residualsPanel()->residuals().rows.size(), 0u);
    w.showTeachMode(true);
    w.teachPanel()->seek(3);
    // The memory chart's teach cursor is a two-point vertical line.
    QLineSeries* cursor = nullptr;
    for (QAbstractSeries* s : w.memoryChart()->chart()->series())
        if (s->name() == QLatin1String("teach mode")) cursor = qobject_cast<QLineSeries*>(s);
    ASSERT_NE(cursor, nullptr);
    EXPECT_EQ(cursor->count(), 2);
    w.showTeachMode(false);
    EXPECT_EQ(cursor->count(), 0);
}

TEST(UiTour, EveryStepHasItsFiguresAndATourLoadsIntoTheWindow) {
    for (const Tour& t : tours()) {
        EXPECT_GE(t.steps.size(), 1u) << t.name.toStdString();
        for (const TourStep& s : t.steps) EXPECT_TRUE(s.text) << t.name.toStdString();
    }
    MainWindow w(false);
    w.resize(1400, 900);
    w.show();
    int revolve = -1;
    for (size_t i = 0; i < tours().size(); ++i)
        if (tours()[i].name == QLatin1String("revolve")) revolve = int(i);
    ASSERT_GE(revolve, 0);
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.startTour(revolve);
    while (!(w.teachPanel()->trace() && w.teachPanel()->trace()->spec.rfind("revolve", 0) == 0))
        ASSERT_TRUE(plan.wait(kWaitMs));
    QCoreApplication::processEvents();
    EXPECT_TRUE(w.tourPanel()->text().contains(QStringLiteral("repetition number is r = ")));
    EXPECT_GT(w.teachPanel()->position(), 0);  // at the first recompute
    ASSERT_NE(w.teachPanel()->explanation(), nullptr);
    EXPECT_TRUE(w.teachPanel()->explanation()->recompute);
}

void expect_same_results(const std::vector<StrategyResult>& a,
                         const std::vector<StrategyResult>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const StrategyResult &x = a[i], &y = b[i];
        EXPECT_EQ(x.spec, y.spec);
        EXPECT_EQ(x.status, y.status);
        EXPECT_EQ(x.predicted_peak, y.predicted_peak);
        EXPECT_EQ(x.predicted_total_ms, y.predicted_total_ms);
        EXPECT_EQ(x.recomputes, y.recomputes);
        EXPECT_EQ(x.executed, y.executed);
        EXPECT_EQ(x.measured_peak, y.measured_peak);
        EXPECT_EQ(x.total_ms, y.total_ms);
        EXPECT_EQ(x.loss, y.loss);
        EXPECT_EQ(x.grads_equal, y.grads_equal);
        for (const auto& [p, q] : {std::pair{x.predicted_timeline, y.predicted_timeline},
                                   std::pair{x.measured_timeline, y.measured_timeline}}) {
            ASSERT_EQ(bool(p), bool(q));
            if (!p) continue;
            ASSERT_EQ(p->points.size(), q->points.size());
            for (size_t k = 0; k < p->points.size(); ++k) {
                EXPECT_EQ(p->points[k].x, q->points[k].x);
                EXPECT_EQ(p->points[k].y, q->points[k].y);
            }
            EXPECT_EQ(p->instruction, q->instruction);
            // The host lane (offload), saved beside the device one.
            ASSERT_EQ(p->host.size(), q->host.size());
            for (size_t k = 0; k < p->host.size(); ++k) {
                EXPECT_EQ(p->host[k].x, q->host[k].x);
                EXPECT_EQ(p->host[k].y, q->host[k].y);
            }
            EXPECT_EQ(p->host_instruction, q->host_instruction);
        }
        EXPECT_EQ(x.predicted_host_peak, y.predicted_host_peak);
        EXPECT_EQ(x.measured_host_peak, y.measured_host_peak);
        EXPECT_EQ(x.predicted_stall_ms, y.predicted_stall_ms);
        ASSERT_EQ(bool(x.trace), bool(y.trace));
        if (!x.trace) continue;
        EXPECT_EQ(x.trace->plan.schedule.code, y.trace->plan.schedule.code);
        EXPECT_EQ(x.trace->plan.checkpoints, y.trace->plan.checkpoints);
        EXPECT_EQ(x.trace->sim.peak_bytes, y.trace->sim.peak_bytes);
        EXPECT_EQ(x.trace->sim.total_ms(), y.trace->sim.total_ms());
        for (size_t n = 0; n < x.trace->costs.size(); ++n)
            EXPECT_EQ(x.trace->costs.forward_ms(NodeId(n)), y.trace->costs.forward_ms(NodeId(n)));
        ASSERT_TRUE(x.instruction_text && y.instruction_text);
        EXPECT_EQ(*x.instruction_text, *y.instruction_text);
    }
}

TEST(UiSession, ASavedSessionReopensWithIdenticalResults) {
    const QStringList strategies = {
        QStringLiteral("none"), QStringLiteral("sqrt-n:segments=2"),
        QStringLiteral(
            "policy:policy=save_and_offload_only_these_names,names=fc,offload_names=act")};
    const RunSummary run = planned(strategies, true);
    // The offload policy has a host lane to save.
    ASSERT_TRUE(run.results[2].predicted_timeline);
    ASSERT_FALSE(run.results[2].predicted_timeline->host.empty());
    EXPECT_GT(run.results[2].predicted_host_peak, 0u);
    Session s;
    s.network_spec = kTeachNet;
    s.graph = run.results[0].trace->graph;
    s.strategies = strategies;
    s.budget = 123456;
    s.threads = 1;
    s.results = run.results;
    s.baseline_ms = run.baseline_total_ms;
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("s.json"));
    save_session(path, s);
    const Session back = load_session(path);
    EXPECT_EQ(back.network_spec, s.network_spec);
    EXPECT_EQ(back.strategies, s.strategies);
    EXPECT_EQ(back.budget, s.budget);
    EXPECT_EQ(back.baseline_ms, s.baseline_ms);
    EXPECT_EQ(network_to_json(*back.graph), network_to_json(*s.graph));
    expect_same_results(back.results, s.results);

    // Bad files say what is wrong.
    QFile bad(dir.filePath(QStringLiteral("bad.json")));
    ASSERT_TRUE(bad.open(QIODevice::WriteOnly));
    bad.write("{\"format\": \"rematlab-session\", \"version\": 99}");
    bad.close();
    try {
        (void)load_session(bad.fileName());
        FAIL() << "a newer version loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
    }
    // A number beyond a double (the library throws out_of_range, not parse_error) and a value of
    // the wrong type: our error, with the line and column where there is one, and no library
    // message prefix.
    QFile good(path);
    ASSERT_TRUE(good.open(QIODevice::ReadOnly));
    const std::string saved = good.readAll().toStdString();
    good.close();
    const std::string threads = "\"threads\": 1";
    ASSERT_NE(saved.find(threads), std::string::npos) << saved;
    auto load_edited = [&](const std::string& replacement) {
        std::string text = saved;
        text.replace(text.find(threads), threads.size(), "\"threads\": " + replacement);
        QFile edited(dir.filePath(QStringLiteral("edited.json")));
        EXPECT_TRUE(edited.open(QIODevice::WriteOnly | QIODevice::Truncate));
        edited.write(text.data(), static_cast<qint64>(text.size()));
        edited.close();
        try {
            (void)load_session(edited.fileName());
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string("(loaded)");
    };
    std::string e = load_edited("99999999999E9999");
    const size_t line =
        1 + static_cast<size_t>(std::count(
                saved.begin(), saved.begin() + static_cast<long>(saved.find(threads)), '\n'));
    EXPECT_NE(e.find("edited.json:" + std::to_string(line) + ":"), std::string::npos) << e;
    EXPECT_NE(e.find("number overflow"), std::string::npos) << e;
    EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
    e = load_edited("\"one\"");
    EXPECT_NE(e.find("edited.json' is malformed"), std::string::npos) << e;
    EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
}

// What the table shows, cell by cell (text and tooltip): spreads "(min–max)", "within noise",
// the greyed stale figures and their "measured as" tooltips included.
std::vector<QString> table_cells(const ResultsModel& m) {
    std::vector<QString> cells;
    for (int row = 0; row < m.rowCount(); ++row)
        for (int col = 0; col < m.columnCount(); ++col) {
            const QModelIndex i = m.index(row, col);
            cells.push_back(m.data(i).toString() + QStringLiteral(" | ") +
                            m.data(i, Qt::ToolTipRole).toString() + QStringLiteral(" | ") +
                            m.data(i, Qt::ForegroundRole).value<QBrush>().color().name());
        }
    return cells;
}

void expect_same_spread(const Spread& a, const Spread& b) {
    EXPECT_EQ(a.median, b.median);
    EXPECT_EQ(a.min, b.min);
    EXPECT_EQ(a.max, b.max);
    EXPECT_EQ(a.samples, b.samples);
}

TEST(UiSession, SpreadRepeatsAndStaleMarksComeBackAndOldSessionsStillOpen) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("spread.json"));
    std::vector<StrategyResult> before;
    std::vector<QString> cells;
    {
        MainWindow w(false);
        w.show();
        w.setNetworkSpec(kTeachNet);
        w.setStrategies(
            {QStringLiteral("none"), QStringLiteral("periodic:k=2"), QStringLiteral("sqrt-n")});
        w.setBudget(std::nullopt);
        QSignalSpy plan(&w, &MainWindow::planReady);
        ASSERT_TRUE(plan.wait(kWaitMs));
        QSignalSpy done(&w, &MainWindow::runCompleted);
        w.startRun();
        ASSERT_TRUE(done.wait(kWaitMs));
        // periodic planned anew: its measured figures stay, greyed and marked stale.
        w.setStrategies(
            {QStringLiteral("none"), QStringLiteral("periodic:k=3"), QStringLiteral("sqrt-n")});
        ASSERT_TRUE(plan.wait(kWaitMs));
        while (plan.wait(300)) {
        }
        before = w.resultsModel()->results();
        ASSERT_EQ(before.size(), 3u);
        for (const StrategyResult& r : before) {
            EXPECT_EQ(r.stale(), r.name == QLatin1String("periodic")) << r.spec.toStdString();
            ASSERT_TRUE(r.executed && r.times) << r.spec.toStdString();
            EXPECT_EQ(r.times->total.samples, kDefaultRepeats);
        }
        cells = table_cells(*w.resultsModel());
        ASSERT_EQ(w.saveSession(path), QString());
    }
    auto reopen = [&](const QString& file, std::vector<StrategyResult>* rows,
                      std::vector<QString>* shown) {
        MainWindow w(false);
        w.show();
        QSignalSpy plan(&w, &MainWindow::planReady);
        ASSERT_EQ(w.openSession(file), QString());
        ASSERT_TRUE(plan.wait(kWaitMs));
        *rows = w.resultsModel()->results();
        *shown = table_cells(*w.resultsModel());
    };
    std::vector<StrategyResult> after;
    std::vector<QString> after_cells;
    reopen(path, &after, &after_cells);
    expect_same_results(after, before);
    ASSERT_EQ(after.size(), before.size());
    for (size_t i = 0; i < after.size(); ++i) {
        SCOPED_TRACE(before[i].spec.toStdString());
        EXPECT_EQ(after[i].stale_measured_as, before[i].stale_measured_as);
        ASSERT_TRUE(after[i].times);
        for (auto part : {&MeasuredTimes::forward, &MeasuredTimes::recompute,
                          &MeasuredTimes::backward, &MeasuredTimes::total, &MeasuredTimes::cpu})
            expect_same_spread((*after[i].times).*part, (*before[i].times).*part);
    }
    EXPECT_EQ(after_cells, cells) << "the table reads the same, spreads, noise and stale marks";

    // A session saved before spreads and stale marks were kept: medians only, nothing stale.
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    auto j = nlohmann::json::parse(f.readAll().toStdString());
    f.close();
    j.erase("baseline_total");
    for (auto& r : j.at("results")) {
        r.erase("times");
        r.erase("stale_measured_as");
    }
    const QString old_path = dir.filePath(QStringLiteral("old.json"));
    QFile old(old_path);
    ASSERT_TRUE(old.open(QIODevice::WriteOnly));
    old.write(QByteArray::fromStdString(j.dump(1)));
    old.close();
    std::vector<StrategyResult> old_rows;
    std::vector<QString> old_cells;
    reopen(old_path, &old_rows, &old_cells);
    ASSERT_EQ(old_rows.size(), before.size());
    for (size_t i = 0; i < old_rows.size(); ++i) {
        EXPECT_TRUE(old_rows[i].executed);
        EXPECT_FALSE(old_rows[i].times);
        EXPECT_FALSE(old_rows[i].stale());
        EXPECT_EQ(old_rows[i].total_ms, before[i].total_ms);
    }
}

TEST(UiSession, TheWindowSavesAndReopensARun) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("window.json"));
    std::vector<StrategyResult> before;
    {
        MainWindow w(false);
        w.show();
        w.setNetworkSpec(kTeachNet);
        w.setStrategies({QStringLiteral("none"), QStringLiteral("periodic:k=2")});
        QSignalSpy plan(&w, &MainWindow::planReady);
        ASSERT_TRUE(plan.wait(kWaitMs));
        QSignalSpy done(&w, &MainWindow::runCompleted);
        w.startRun();
        ASSERT_TRUE(done.wait(kWaitMs));
        before = w.resultsModel()->results();
        ASSERT_EQ(w.saveSession(path), QString());
    }
    MainWindow w(false);
    w.show();
    QSignalSpy plan(&w, &MainWindow::planReady);
    ASSERT_EQ(w.openSession(path), QString());
    // The first plan after the load is replaced by the session's own results.
    ASSERT_TRUE(plan.wait(kWaitMs));
    expect_same_results(w.resultsModel()->results(), before);
    EXPECT_EQ(w.networkSpec(), kTeachNet);
    EXPECT_TRUE(w.resultsModel()->results()[0].executed);
    // The views show the reopened plans.
    ASSERT_NE(w.graphView()->trace(), nullptr);
}

// Saves a session of `strategies` on a network file `net` (written from kTeachNet); returns the
// results it holds.
std::vector<StrategyResult> save_file_session(const QString& net, const QString& path) {
    export_network(load_network(kTeachNet.toStdString()), net);
    MainWindow w(false);
    w.show();
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.openFile(net);
    w.setStrategies({QStringLiteral("none"), QStringLiteral("periodic:k=2")});
    w.setThreads(1);
    w.setCap(QStringLiteral("64MiB"));
    EXPECT_TRUE(plan.wait(kWaitMs));
    while (w.resultsModel()->rowCount() != 2 && plan.wait(kWaitMs)) {
    }
    EXPECT_EQ(w.networkSpec(), QFileInfo(net).absoluteFilePath());
    EXPECT_EQ(w.saveSession(path), QString());
    return w.resultsModel()->results();
}

TEST(UiSession, AMissingNetworkFileRestoresTheRestAndNamesThePath) {
    QTemporaryDir dir;
    const QString net = dir.filePath(QStringLiteral("net.json"));
    const QString path = dir.filePath(QStringLiteral("s.json"));
    const auto before = save_file_session(net, path);
    ASSERT_EQ(before.size(), 2u);
    ASSERT_TRUE(QFile::remove(net));

    MainWindow w(false);
    w.show();
    ASSERT_EQ(w.openSession(path), QString());
    // Everything but the network, at once, from the copy the session holds.
    expect_same_results(w.resultsModel()->results(), before);
    EXPECT_EQ(w.memoryChart()->strategyCount(), 2);
    ASSERT_NE(w.graphView()->trace(), nullptr);
    QStringList specs = w.strategySpecs();
    EXPECT_TRUE(specs.contains(QStringLiteral("periodic:k=2"))) << specs.join(',').toStdString();
    EXPECT_TRUE(specs.contains(QStringLiteral("none")));
    // The message says what is missing and what to do.
    EXPECT_EQ(w.messageKind(), MessageWidget::Kind::Warning);
    EXPECT_TRUE(w.messageText().contains(net)) << w.messageText().toStdString();
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("not found")));
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("Locate")));
    EXPECT_EQ(w.missingNetwork(), net);
    EXPECT_EQ(w.networkSpec(), net);
    // Nothing loads or plans over it afterwards.
    QSignalSpy failed(&w, &MainWindow::networkFailed);
    QSignalSpy plan(&w, &MainWindow::planReady);
    EXPECT_FALSE(plan.wait(500));
    EXPECT_EQ(failed.count(), 0);
    expect_same_results(w.resultsModel()->results(), before);
    EXPECT_EQ(w.messageKind(), MessageWidget::Kind::Warning);

    // Located elsewhere: it loads, and the saved results stay on screen.
    ASSERT_TRUE(QDir(dir.path()).mkpath(QStringLiteral("moved")));
    const QString moved = dir.filePath(QStringLiteral("moved/net.json"));
    export_network(load_network(kTeachNet.toStdString()), moved);
    w.locateNetwork(moved);
    ASSERT_TRUE(plan.wait(kWaitMs));
    EXPECT_TRUE(w.isNetworkReady());
    EXPECT_EQ(w.networkSpec(), QFileInfo(moved).absoluteFilePath());
    EXPECT_EQ(w.missingNetwork(), QString());
    expect_same_results(w.resultsModel()->results(), before);
    EXPECT_TRUE(w.messageText().isEmpty()) << w.messageText().toStdString();
}

TEST(UiSession, ANetworkFileThatNoLongerLoadsRestoresTheRest) {
    QTemporaryDir dir;
    const QString net = dir.filePath(QStringLiteral("net.json"));
    const QString path = dir.filePath(QStringLiteral("s.json"));
    const auto before = save_file_session(net, path);
    QFile broken(net);
    ASSERT_TRUE(broken.open(QIODevice::WriteOnly | QIODevice::Truncate));
    broken.write("{ not json");
    broken.close();

    MainWindow w(false);
    w.show();
    QSignalSpy failed(&w, &MainWindow::networkFailed);
    ASSERT_EQ(w.openSession(path), QString());
    ASSERT_TRUE(failed.wait(kWaitMs));
    expect_same_results(w.resultsModel()->results(), before);
    EXPECT_EQ(w.messageKind(), MessageWidget::Kind::Warning);
    EXPECT_TRUE(w.messageText().contains(net)) << w.messageText().toStdString();
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("cannot be loaded")));
    EXPECT_EQ(w.missingNetwork(), net);
}

TEST(UiSession, LocatingAnotherNetworkPlansItAnewAndSaysSo) {
    QTemporaryDir dir;
    const QString net = dir.filePath(QStringLiteral("net.json"));
    const QString path = dir.filePath(QStringLiteral("s.json"));
    const auto before = save_file_session(net, path);
    ASSERT_TRUE(QFile::remove(net));
    MainWindow w(false);
    w.show();
    ASSERT_EQ(w.openSession(path), QString());
    const QString other = dir.filePath(QStringLiteral("other.json"));
    export_network(load_network("mlp:depth=2,width=16,batch=8"), other);
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.locateNetwork(other);
    ASSERT_TRUE(plan.wait(kWaitMs));
    QApplication::processEvents();
    EXPECT_EQ(w.messageKind(), MessageWidget::Kind::Warning);
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("is not the network")))
        << w.messageText().toStdString();
    ASSERT_EQ(w.resultsModel()->rowCount(), 2);
    // Planned on the located network, not the saved results.
    EXPECT_EQ(w.resultsModel()->results()[0].trace->graph->num_nodes(),
              load_network("mlp:depth=2,width=16,batch=8").num_nodes());
}

TEST(UiSession, NetworkAndScheduleExports) {
    const RunSummary s = planned({QStringLiteral("sqrt-n:segments=2")});
    const ScheduleTrace& t = *s.results[0].trace;
    QTemporaryDir dir;
    export_network(*t.graph, dir.filePath(QStringLiteral("n.dot")));
    export_network(*t.graph, dir.filePath(QStringLiteral("n.json")));
    export_schedule(t, dir.filePath(QStringLiteral("s.json")));
    EXPECT_EQ(
        network_to_json(load_network_file(dir.filePath(QStringLiteral("n.json")).toStdString())),
        network_to_json(*t.graph));
    const std::string dot = network_dot(*t.graph);
    EXPECT_EQ(dot.rfind("digraph ", 0), 0u);
    EXPECT_NE(dot.find("\"block0.fc\" -> \"block0.act\""), std::string::npos) << dot;
    const std::string js = schedule_json(t);
    EXPECT_NE(js.find("\"recompute\": true"), std::string::npos);
    EXPECT_THROW(export_network(*t.graph, dir.filePath(QStringLiteral("n.txt"))), Error);
}

}  // namespace
}  // namespace rl::ui
