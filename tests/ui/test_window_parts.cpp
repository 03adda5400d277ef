// The window's parts on their own, through their signals: the setup panel emits the run request
// with exactly what it shows and says what changed; the results area reports a table row as the
// model's row whatever the sort; the session controller restores a session without its network
// file, locates it, and refuses to show saved results over another network; the window's menus
// hold every part's actions.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QThread>
#include <algorithm>

#include "engine/networks/onnx_import.h"
#include "engine/networks/presets.h"
#include "engine/networks/slice_narrowing.h"
#include "engine/units.h"
#include "ui/evaluation.h"
#include "ui/main_window.h"
#include "ui/palette.h"
#include "ui/results_area.h"
#include "ui/results_model.h"
#include "ui/schedule_matrix.h"
#include "ui/session.h"
#include "ui/session_controller.h"
#include "ui/setup_panel.h"
#include "ui/tours.h"

namespace rl::ui {
namespace {

const QString kNet = QStringLiteral("mlp:depth=4,width=16,batch=8");

QPushButton* button(QWidget& w, const QString& text) {
    for (QPushButton* b : w.findChildren<QPushButton*>())
        if (b->text() == text) return b;
    return nullptr;
}

QCheckBox* strategy_check(QWidget& w, const QString& name) {
    auto* frame = w.findChild<QWidget*>(QStringLiteral("strategy:") + name);
    return frame ? frame->findChild<QCheckBox*>() : nullptr;
}

// A panel showing kNet as loaded (its summary computed here, as the worker would).
struct LoadedPanel {
    SetupPanel panel;
    NetworkSummary net;
    LoadedPanel() {
        panel.setNetworkSpec(kNet);
        net = summarize(load_network(kNet.toStdString()), kNet);
        panel.setNetwork(net);
    }
    // A budget `f` of the way from the always-live bytes to plain backprop's peak.
    uint64_t between(double f) const {
        return net.floor_bytes +
               static_cast<uint64_t>(f * double(net.none_peak_bytes - net.floor_bytes));
    }
    uint64_t step() const { return (net.none_peak_bytes - net.floor_bytes) / 1000 + 1; }
};

TEST(UiSetupPanel, RunEmitsTheRequestWithWhatThePanelShows) {
    LoadedPanel p;
    ASSERT_GT(p.net.none_peak_bytes, p.net.floor_bytes);
    p.panel.setStrategies(
        {QStringLiteral("none"), QStringLiteral("periodic:k=3"), QStringLiteral("min-cut")});
    const uint64_t wanted = p.between(0.4);
    p.panel.setBudget(wanted);
    const int threads = std::min(2, QThread::idealThreadCount());
    p.panel.setThreads(threads);
    p.panel.setCap(QStringLiteral("32MiB"));

    QSignalSpy requested(&p.panel, &SetupPanel::runRequested);
    QSignalSpy invalid(&p.panel, &SetupPanel::invalidInput);
    QPushButton* run = button(p.panel, QStringLiteral("Run"));
    ASSERT_NE(run, nullptr);
    ASSERT_TRUE(run->isEnabled());
    run->click();
    ASSERT_EQ(requested.count(), 1);
    EXPECT_EQ(invalid.count(), 0);
    const auto r = requested.at(0).at(0).value<RunRequest>();

    // The network: the preset box and its form.
    EXPECT_EQ(r.network, kNet);
    auto* preset = p.panel.findChild<QComboBox*>();
    ASSERT_NE(preset, nullptr);
    EXPECT_EQ(preset->currentText(), QStringLiteral("mlp"));
    // The strategies in the order of their boxes, only the budgeted one with the budget.
    ASSERT_EQ(r.strategies.size(), 3);
    EXPECT_EQ(r.strategies[0], QStringLiteral("none"));
    EXPECT_EQ(r.strategies[1], QStringLiteral("periodic:k=3"));
    const Spec budgeted = parse_spec(r.strategies[2].toStdString());
    EXPECT_EQ(budgeted.name, "min-cut");
    ASSERT_EQ(budgeted.args.size(), 1u);
    EXPECT_EQ(budgeted.args[0].first, "budget");
    const uint64_t budget = parse_bytes(budgeted.args[0].second);
    // The slider holds the budget to one of its steps, printed as it parses (three figures).
    EXPECT_LE(budget > wanted ? budget - wanted : wanted - budget, p.step() + wanted / 200)
        << budgeted.args[0].second;
    ASSERT_TRUE(p.panel.budget());
    EXPECT_EQ(*p.panel.budget(), budget);
    // The label under the slider shows that same budget.
    bool shown = false;
    for (QLabel* l : p.panel.findChildren<QLabel*>())
        shown = shown || l->text().contains(bytes_text(budget));
    EXPECT_TRUE(shown) << bytes_text(budget).toStdString();
    // The run options.
    EXPECT_EQ(r.threads, threads);
    EXPECT_EQ(r.cap, uint64_t(32) << 20);
    EXPECT_EQ(r.device, QStringLiteral("cpu"));
    EXPECT_EQ(r.strategies, p.panel.strategySpecs());
}

// An opened network file is what the network box shows: an item of its own, selected, with no
// preset form under it (the box went on showing the last preset's depth, width and batch for an
// ONNX model or a benchmark graph). Picking a preset again drops the item and shows its form.
TEST(UiSetupPanel, AnOpenedFileIsShownAsTheNetworkNotAPresetsForm) {
    SetupPanel panel;
    panel.show();
    panel.setNetworkSpec(kNet);
    auto* preset = panel.findChild<QComboBox*>();
    ASSERT_NE(preset, nullptr);
    auto* forms = panel.findChild<QStackedWidget*>();
    ASSERT_NE(forms, nullptr);
    const int presets = preset->count();
    EXPECT_EQ(preset->currentText(), QStringLiteral("mlp"));
    EXPECT_TRUE(forms->isVisible());

    const QString file = QStringLiteral("/models/resnet18.onnx");
    panel.setNetworkSpec(file);
    EXPECT_EQ(panel.networkSpec(), file);
    EXPECT_EQ(preset->count(), presets + 1);
    EXPECT_EQ(preset->currentText(), QStringLiteral("file: resnet18.onnx"));
    EXPECT_EQ(preset->itemData(preset->currentIndex(), Qt::ToolTipRole).toString(), file);
    EXPECT_FALSE(forms->isVisible());
    // Another file replaces it rather than adding a second item.
    panel.setNetworkSpec(QStringLiteral("/graphs/fcn.json"));
    EXPECT_EQ(preset->count(), presets + 1);
    EXPECT_EQ(preset->currentText(), QStringLiteral("file: fcn.json"));

    QSignalSpy edited(&panel, &SetupPanel::networkEdited);
    preset->setCurrentIndex(preset->findData(QStringLiteral("transformer")));
    EXPECT_EQ(edited.count(), 1);
    EXPECT_EQ(preset->count(), presets);
    EXPECT_EQ(preset->currentText(), QStringLiteral("transformer"));
    EXPECT_TRUE(forms->isVisible());
    EXPECT_TRUE(panel.networkSpec().startsWith(QStringLiteral("transformer")))
        << panel.networkSpec().toStdString();
}

TEST(UiSetupPanel, ABadCapIsReportedInsteadOfARequest) {
    LoadedPanel p;
    p.panel.setCap(QStringLiteral("lots"));
    QSignalSpy requested(&p.panel, &SetupPanel::runRequested);
    QSignalSpy invalid(&p.panel, &SetupPanel::invalidInput);
    button(p.panel, QStringLiteral("Run"))->click();
    EXPECT_EQ(requested.count(), 0);
    ASSERT_EQ(invalid.count(), 1);
    const QString text = invalid.at(0).at(0).toString();
    EXPECT_TRUE(text.startsWith(QStringLiteral("Memory cap"))) << text.toStdString();
    EXPECT_TRUE(text.contains(QStringLiteral("lots"))) << text.toStdString();
}

TEST(UiSetupPanel, TheBudgetWaitsForANetwork) {
    SetupPanel panel;
    panel.setStrategies({QStringLiteral("min-cut")});
    const NetworkSummary net = summarize(load_network(kNet.toStdString()), kNet);
    const uint64_t wanted = net.floor_bytes + (net.none_peak_bytes - net.floor_bytes) / 4;
    panel.setBudget(wanted);
    // No network yet: no range for the slider, so no budget in the spec.
    EXPECT_FALSE(panel.budget());
    EXPECT_EQ(panel.strategySpecs(), QStringList{QStringLiteral("min-cut")});
    panel.setNetwork(net);
    ASSERT_TRUE(panel.budget());
    const uint64_t step = (net.none_peak_bytes - net.floor_bytes) / 1000 + 1;
    EXPECT_LE(*panel.budget() > wanted ? *panel.budget() - wanted : wanted - *panel.budget(),
              step + wanted / 200);
    // A network about to load again takes the range away; unticking the box, the budget.
    panel.unsetNetwork();
    EXPECT_FALSE(panel.budget());
    panel.setNetwork(net);
    EXPECT_TRUE(panel.budget());
    panel.setBudget(std::nullopt);
    EXPECT_FALSE(panel.budget());
    EXPECT_EQ(panel.strategySpecs(), QStringList{QStringLiteral("min-cut")});
}

TEST(UiSetupPanel, SaysWhatChanged) {
    LoadedPanel p;
    QSignalSpy network(&p.panel, &SetupPanel::networkEdited);
    QSignalSpy plan(&p.panel, &SetupPanel::planInputsChanged);

    // A parameter of the preset: load after a pause (typing coalesces).
    QSpinBox* param = nullptr;
    for (QSpinBox* s : p.panel.findChildren<QSpinBox*>())
        if (s->isVisibleTo(&p.panel) && s->objectName() == QStringLiteral("batch")) param = s;
    ASSERT_NE(param, nullptr);
    param->setValue(9);
    ASSERT_GE(network.count(), 1);
    EXPECT_EQ(network.last().at(0).toInt(), 300);
    EXPECT_EQ(p.panel.networkSpec(), QStringLiteral("mlp:depth=4,width=16,batch=9"));

    // Another preset: load at once.
    network.clear();
    auto* preset = p.panel.findChild<QComboBox*>();
    const int other = preset->findData(QStringLiteral("resnet"));
    ASSERT_GE(other, 0);
    preset->setCurrentIndex(other);
    ASSERT_EQ(network.count(), 1);
    EXPECT_EQ(network.at(0).at(0).toInt(), 0);
    EXPECT_TRUE(p.panel.networkSpec().startsWith(QStringLiteral("resnet")));
    EXPECT_EQ(plan.count(), 0);

    // Ticking a strategy or moving the threads: plan again; the network stays.
    network.clear();
    QCheckBox* revolve = strategy_check(p.panel, QStringLiteral("revolve"));
    ASSERT_NE(revolve, nullptr);
    const bool was = revolve->isChecked();
    revolve->setChecked(!was);
    EXPECT_EQ(plan.count(), 1);
    EXPECT_EQ(p.panel.strategySpecs().contains(QStringLiteral("revolve")), !was);
    QSpinBox* threads = nullptr;
    for (QSpinBox* s : p.panel.findChildren<QSpinBox*>())
        if (s->toolTip().startsWith(QStringLiteral("CPU threads"))) threads = s;
    ASSERT_NE(threads, nullptr);
    if (threads->maximum() > 1) {
        p.panel.setThreads(p.panel.threads() == 1 ? 2 : 1);
        EXPECT_EQ(plan.count(), 2);
    }
    EXPECT_EQ(network.count(), 0);

    // The Open… and Cancel buttons ask; Cancel only while busy.
    QSignalSpy open(&p.panel, &SetupPanel::openRequested);
    QSignalSpy cancel(&p.panel, &SetupPanel::cancelRequested);
    button(p.panel, QStringLiteral("Open…"))->click();
    EXPECT_EQ(open.count(), 1);
    QPushButton* cancel_button = button(p.panel, QStringLiteral("Cancel"));
    EXPECT_FALSE(cancel_button->isEnabled());
    p.panel.setBusy(true);
    EXPECT_FALSE(button(p.panel, QStringLiteral("Run"))->isEnabled());
    cancel_button->click();
    EXPECT_EQ(cancel.count(), 1);
}

TEST(UiSetupPanel, BadStrategiesAreReportedAndSkipped) {
    LoadedPanel p;
    QSignalSpy errors(&p.panel, &SetupPanel::strategyError);
    p.panel.setStrategies(
        {QStringLiteral("none"), QStringLiteral("no-such-thing"), QStringLiteral("periodic:k")});
    EXPECT_EQ(p.panel.strategySpecs(), QStringList{QStringLiteral("none")});
    ASSERT_EQ(errors.count(), 2);
    EXPECT_TRUE(errors.at(0).at(0).toString().contains(QStringLiteral("no-such-thing")));
    EXPECT_TRUE(errors.at(1).at(0).toString().contains(QStringLiteral("periodic:k")));
}

StrategyResult planned(const QString& spec, uint64_t peak) {
    StrategyResult r;
    r.name = spec.section(':', 0, 0);
    r.spec = spec;
    r.status = QStringLiteral("heuristic");
    r.planned = true;
    r.predicted_peak = peak;
    r.predicted_total_ms = 1;
    return r;
}

TEST(UiResultsArea, ATableRowIsReportedAsTheModelRowWhateverTheSort) {
    ResultsModel model;
    ResultsArea area(&model);
    const std::vector<StrategyResult> rows = {planned(QStringLiteral("none"), 9000),
                                              planned(QStringLiteral("sqrt-n"), 3000),
                                              planned(QStringLiteral("periodic:k=2"), 5000)};
    area.setResults(rows);
    QSignalSpy current(&area, &ResultsArea::currentRowChanged);
    QTableView* table = area.table();
    for (Qt::SortOrder order : {Qt::AscendingOrder, Qt::DescendingOrder}) {
        table->sortByColumn(ResultsModel::PredictedPeak, order);
        // The first row on screen is the smallest (largest) peak.
        size_t expected = 0;
        for (size_t i = 1; i < rows.size(); ++i)
            if ((rows[i].predicted_peak < rows[expected].predicted_peak) ==
                (order == Qt::AscendingOrder))
                expected = i;
        current.clear();
        table->selectionModel()->setCurrentIndex(table->model()->index(0, 0),
                                                 QItemSelectionModel::ClearAndSelect);
        ASSERT_EQ(current.count(), 1);
        EXPECT_EQ(current.at(0).at(0).toInt(), int(expected));
        // Row 1 next, to change the current row for the next order.
        table->selectionModel()->setCurrentIndex(table->model()->index(1, 0),
                                                 QItemSelectionModel::ClearAndSelect);
    }
    // The CSV of a selection is that row.
    table->selectionModel()->select(
        table->model()->index(0, 0),
        QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    int count = 0;
    const QString csv = area.selectionCsv(std::nullopt, &count);
    EXPECT_EQ(count, 1);
    EXPECT_TRUE(csv.contains(QStringLiteral("none"))) << csv.toStdString();
    EXPECT_FALSE(csv.contains(QStringLiteral("sqrt-n"))) << csv.toStdString();
}

TEST(UiSessionController, ASessionWithoutItsNetworkFileRestoresTheRestAndLocates) {
    QTemporaryDir dir;
    const QString net = dir.filePath(QStringLiteral("net.json"));
    const Graph g = load_network(kNet.toStdString());
    export_network(g, net);
    const QString path = dir.filePath(QStringLiteral("s.rematlab.json"));
    {
        SetupPanel panel;
        panel.setNetworkSpec(net);
        panel.setNetwork(summarize(g, net));
        panel.setStrategies({QStringLiteral("none"), QStringLiteral("periodic:k=3")});
        panel.setThreads(1);
        panel.setCap(QStringLiteral("64MiB"));
        ResultsModel model;
        SessionController saver(&panel, &model, nullptr);
        ASSERT_EQ(saver.save(path, net, std::nullopt), QString());
    }
    ASSERT_TRUE(QFile::remove(net));

    SetupPanel panel;
    ResultsModel model;
    SessionController session(&panel, &model, nullptr);
    QSignalSpy detached(&session, &SessionController::detached);
    QSignalSpy restored(&session, &SessionController::restoredWithoutNetwork);
    QSignalSpy edited(&panel, &SetupPanel::networkEdited);
    ASSERT_EQ(session.open(path), QString());
    // Nothing loads the missing file; the rest is in the panel.
    EXPECT_EQ(edited.count(), 0);
    EXPECT_EQ(detached.count(), 1);
    ASSERT_EQ(restored.count(), 1);
    EXPECT_EQ(restored.at(0).at(0).toString(), net);
    EXPECT_EQ(restored.at(0).at(1).toString(), QString::fromStdString(g.name()));
    EXPECT_TRUE(restored.at(0).at(2).toString().contains(QStringLiteral("not found")));
    EXPECT_EQ(session.missingNetwork(), net);
    EXPECT_EQ(panel.strategySpecs(),
              (QStringList{QStringLiteral("none"), QStringLiteral("periodic:k=3")}));
    EXPECT_EQ(panel.capText(), QStringLiteral("64MiB"));
    // The window takes the session to show its saved results, drawn from the copy it holds.
    ASSERT_TRUE(session.hasPending());
    const auto shown = session.takePending(nullptr);
    ASSERT_TRUE(shown);
    ASSERT_TRUE(shown->graph);
    EXPECT_EQ(shown->graph->num_nodes(), g.num_nodes());
    EXPECT_FALSE(session.hasPending());

    // Located: the file found is asked for, and the session waits for it to load again.
    QSignalSpy locate(&session, &SessionController::locateRequested);
    const QString found = dir.filePath(QStringLiteral("found.json"));
    session.locate(found);
    ASSERT_EQ(locate.count(), 1);
    EXPECT_EQ(locate.at(0).at(0).toString(), found);
    EXPECT_EQ(session.missingNetwork(), QString());
    ASSERT_TRUE(session.hasPending());
    // It was another network (node count): not shown, and the window is told why.
    QSignalSpy message(&session, &SessionController::message);
    NetworkSummary other = summarize(load_network("mlp:depth=2,width=16,batch=8"), found);
    ASSERT_NE(other.nodes, g.num_nodes());
    EXPECT_FALSE(session.takePending(&other));
    ASSERT_TRUE(message.wait(5000));
    EXPECT_EQ(message.at(0).at(0).value<MessageWidget::Kind>(), MessageWidget::Kind::Warning);
    EXPECT_TRUE(message.at(0).at(1).toString().contains(QStringLiteral("not the network")));
}

TEST(UiSessionController, ASessionThatLoadsFillsThePanelAndWaitsForItsPlan) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("s.rematlab.json"));
    {
        SetupPanel panel;
        panel.setNetworkSpec(kNet);
        panel.setNetwork(summarize(load_network(kNet.toStdString()), kNet));
        panel.setStrategies({QStringLiteral("sqrt-n")});
        ResultsModel model;
        ASSERT_EQ(SessionController(&panel, &model, nullptr).save(path, kNet, 4.5), QString());
    }
    SetupPanel panel;
    ResultsModel model;
    SessionController session(&panel, &model, nullptr);
    QSignalSpy edited(&panel, &SetupPanel::networkEdited);
    QSignalSpy detached(&session, &SessionController::detached);
    ASSERT_EQ(session.open(path), QString());
    ASSERT_EQ(edited.count(), 1);  // the window loads it
    EXPECT_EQ(detached.count(), 0);
    EXPECT_EQ(panel.networkSpec(), kNet);
    EXPECT_EQ(panel.strategySpecs(), QStringList{QStringLiteral("sqrt-n")});
    // A failed load of an ordinary network is not the session's business once taken.
    const NetworkSummary net = summarize(load_network(kNet.toStdString()), kNet);
    const auto s = session.takePending(&net);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->baseline_ms, 4.5);
    EXPECT_FALSE(session.networkFailed(kNet, QStringLiteral("gone")));
    // A broken file is an error, not a session.
    const QString bad = dir.filePath(QStringLiteral("bad.json"));
    QFile f(bad);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{\"format\": \"rematlab-session\", \"version\": 1");
    f.close();
    EXPECT_FALSE(session.open(bad).isEmpty());
    EXPECT_FALSE(session.hasPending());
}

// The menus as a user reads them: every part's actions where the window puts them, with their
// shortcuts (the schedule views' and sessions' actions used to be inserted into menus found by
// their titles, and silently went missing when a title changed).
TEST(UiMainWindow, EveryPartsActionsAreInTheMenus) {
    MainWindow w(false);
    auto menu = [&](const QString& title) -> QMenu* {
        for (QAction* a : w.menuBar()->actions())
            if (a->text() == title) return a->menu();
        return nullptr;
    };
    auto entries = [](QMenu* m) {
        QStringList out;
        for (QAction* a : m->actions())
            out << (a->isSeparator() ? QStringLiteral("--")
                                     : a->text() + QLatin1Char('|') +
                                           a->shortcut().toString(QKeySequence::PortableText));
        return out;
    };
    QMenu* file = menu(QStringLiteral("&File"));
    ASSERT_NE(file, nullptr);
    EXPECT_EQ(
        entries(file),
        (QStringList{
            "&Open network…|Ctrl+O", "Open &recent|", "--", "&Export chart…|Ctrl+E",
            "Export &data…|Ctrl+Shift+E", "--", "&Save session…|Ctrl+S",
            "Open sess&ion…|Ctrl+Shift+O", "--", "Export &network…|", "Export sc&hedule…|",
            "Export &plan…|", "--",
            "&Quit|" + QKeySequence(QKeySequence::Quit).toString(QKeySequence::PortableText)}));
    QMenu* view = menu(QStringLiteral("&View"));
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(entries(view),
              (QStringList{"&Memory timeline|Ctrl+1", "&Pareto chart|Ctrl+2", "Reset &zoom|Ctrl+0",
                           "--", "&Graph|Ctrl+3", "Schedule &matrix|Ctrl+4",
                           "Saved r&esiduals|Ctrl+5", "&Teach mode|Ctrl+T", "&Find node…|Ctrl+F"}));
    QMenu* help = menu(QStringLiteral("&Help"));
    ASSERT_NE(help, nullptr);
    ASSERT_GE(help->actions().size(), 4);
    QMenu* tours_menu = help->actions().front()->menu();
    ASSERT_NE(tours_menu, nullptr);
    EXPECT_EQ(tours_menu->title(), QStringLiteral("Guided &tours"));
    ASSERT_EQ(tours_menu->actions().size(), qsizetype(tours().size()));
    for (size_t i = 0; i < tours().size(); ++i)
        EXPECT_EQ(tours_menu->actions()[qsizetype(i)]->text(), tours()[i].title);
    EXPECT_TRUE(help->actions()[1]->isSeparator());

    // The actions reach their parts: Ctrl+4 shows the matrix, Teach mode shows the teach dock.
    for (QAction* a : view->actions())
        if (a->text() == QStringLiteral("Schedule &matrix")) a->trigger();
    EXPECT_EQ(w.findChild<QTabWidget*>()->currentWidget(),
              static_cast<QWidget*>(w.scheduleMatrix()));
    auto* teach = w.findChild<QDockWidget*>(QStringLiteral("teachDock"));
    ASSERT_NE(teach, nullptr);
    EXPECT_FALSE(teach->isVisibleTo(&w));
    for (QAction* a : view->actions())
        if (a->text() == QStringLiteral("&Teach mode")) a->trigger();
    EXPECT_TRUE(teach->isVisibleTo(&w));
}

// The summary says when the import narrowed nodes (engine/networks/slice_narrowing.h), with the
// graph's own count, and says nothing of it for a network it did not touch.
TEST(UiSetupPanel, SummarySaysHowManyNodesTheImportNarrowed) {
    if (!onnx_import_available()) GTEST_SKIP() << "built with -DREMATLAB_ONNX=OFF";
    auto summary_text = [](const Graph& g, const QString& spec) {
        SetupPanel panel;
        panel.setNetwork(summarize(g, spec));
        QString all;
        for (const QLabel* l : panel.findChildren<QLabel*>()) all += l->text() + '\n';
        return all;
    };
    const std::string vit = std::string(REMATLAB_SOURCE_DIR) + "/tests/fixtures/onnx/tiny_vit.onnx";
    const Graph cut = load_network(vit);
    const int n = narrowed_node_count(cut);
    ASSERT_GT(n, 0);
    const QString with = summary_text(cut, QString::fromStdString(vit));
    EXPECT_TRUE(with.contains(QStringLiteral("%1 nodes (%2 narrowed to the part a slice reads)")
                                  .arg(cut.num_nodes())
                                  .arg(n)))
        << with.toStdString();
    OnnxImportOptions keep;
    keep.narrow_slices = false;
    const QString without = summary_text(load_onnx_file(vit, keep), QString::fromStdString(vit));
    EXPECT_FALSE(without.contains(QStringLiteral("narrowed"))) << without.toStdString();
}

}  // namespace
}  // namespace rl::ui
