#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QKeySequence>
#include <QLabel>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QStatusBar>
#include <QTableView>
#include <QToolBar>
#include <QVBoxLayout>
#include <algorithm>

#include "engine/errors.h"
#include "engine/gemm.h"
#include "ui/evaluation.h"
#include "ui/export_dialogs.h"
#include "ui/memory_chart.h"
#include "ui/palette.h"
#include "ui/pareto_chart.h"
#include "ui/qt_text.h"
#include "ui/results_area.h"
#include "ui/results_model.h"
#include "ui/schedule_area.h"
#include "ui/session.h"
#include "ui/session_controller.h"
#include "ui/setup_panel.h"
#include "ui/tours.h"

namespace rl::ui {

namespace {

constexpr int kProgressSteps = 1000;
constexpr int kMaxRecent = 8;

}  // namespace

namespace {

// The setup panel scrolls vertically only, so its scroll area asks for the panel's minimum width
// plus the scroll bar's: at a narrow window the width comes from the charts, and nothing at the
// panel's right edge (buttons, figures) is clipped.
class SetupScrollArea : public QScrollArea {
  public:
    explicit SetupScrollArea(QWidget* panel) {
        setWidget(panel);
        setWidgetResizable(true);
        setFrameShape(QFrame::NoFrame);
        setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        panel->installEventFilter(this);
    }
    QSize minimumSizeHint() const override {
        QSize hint = QScrollArea::minimumSizeHint();
        if (widget())
            hint.setWidth(widget()->minimumSizeHint().width() +
                          verticalScrollBar()->sizeHint().width() + 2 * frameWidth());
        return hint;
    }

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override {
        // The panel's layout changed (a strategy's parameters shown): its minimum may have.
        if (watched == widget() && event->type() == QEvent::LayoutRequest) updateGeometry();
        return QScrollArea::eventFilter(watched, event);
    }
};

}  // namespace

MainWindow::MainWindow(bool restore_settings, QWidget* parent)
    : QMainWindow(parent), restore_(restore_settings) {
    setWindowTitle(QStringLiteral("RematLab"));
    setObjectName(QStringLiteral("RematLabMainWindow"));
    controller_ = new RunController(this);
    model_ = new ResultsModel(this);

    results_ = new ResultsArea(model_);
    message_ = new MessageWidget;
    auto* central = new QWidget;
    auto* v = new QVBoxLayout(central);
    v->setContentsMargins(6, 6, 6, 0);
    v->setSpacing(6);
    v->addWidget(message_);
    v->addWidget(results_, 1);
    setCentralWidget(central);

    setup_ = new SetupPanel;
    auto* scroll = new SetupScrollArea(setup_);
    auto* dock = new QDockWidget(QStringLiteral("Setup"), this);
    dock->setObjectName(QStringLiteral("setupDock"));
    dock->setWidget(scroll);
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
    dock->setMinimumWidth(330);
    addDockWidget(Qt::LeftDockWidgetArea, dock);

    schedule_ = new ScheduleArea(results_, this);
    session_ = new SessionController(setup_, model_, this);
    exports_ = new ExportDialogs(
        results_, schedule_->graphView(), setup_,
        [this](ChartKind kind, const QString& path, QSize size) {
            return exportChart(kind, path, size);
        },
        this);
    buildActions();

    status_label_ = new QLabel(QStringLiteral("Ready"));
    status_label_->setToolTip(QStringLiteral("What RematLab is doing"));
    progress_ = new QProgressBar;
    progress_->setRange(0, kProgressSteps);
    progress_->setMaximumWidth(260);
    progress_->setTextVisible(false);
    progress_->setToolTip(QStringLiteral("Progress of the run over every ticked strategy"));
    progress_->hide();
    statusBar()->addWidget(status_label_, 1);
    statusBar()->addPermanentWidget(progress_);

    // The setup panel: what it shows changed, or it asks for something.
    connect(setup_, &SetupPanel::networkEdited, this, &MainWindow::scheduleNetworkLoad);
    connect(setup_, &SetupPanel::planInputsChanged, this, &MainWindow::schedulePlan);
    connect(setup_, &SetupPanel::openRequested, this, &MainWindow::openDialog);
    connect(setup_, &SetupPanel::reloadRequested, this, &MainWindow::loadNetworkNow);
    connect(setup_, &SetupPanel::runRequested, this, &MainWindow::run);
    connect(setup_, &SetupPanel::invalidInput, this, [this](const QString& text) {
        message_->showMessage(MessageWidget::Kind::Error, text.toHtmlEscaped());
        emit runCompleted();
    });
    connect(setup_, &SetupPanel::cancelRequested, this, &MainWindow::cancelRun);
    connect(setup_, &SetupPanel::strategyError, this, [this](const QString& text) {
        message_->showMessage(MessageWidget::Kind::Error, text.toHtmlEscaped());
    });
    // The results area and the schedule views.
    connect(results_, &ResultsArea::sweepRequested, this, &MainWindow::startSweep);
    connect(schedule_, &ScheduleArea::tourStepRequested, this, &MainWindow::applyTourStep);
    connect(schedule_->tourPanel(), &TourPanel::finished, this, &MainWindow::endTour);
    // Sessions.
    connect(session_, &SessionController::detached, this, &MainWindow::detachNetwork);
    connect(session_, &SessionController::restoredWithoutNetwork, this,
            &MainWindow::showRestoredWithoutNetwork);
    connect(session_, &SessionController::locateRequested, this, &MainWindow::openFile);
    connect(session_, &SessionController::message, message_,
            [this](MessageWidget::Kind kind, const QString& html) {
                message_->showMessage(kind, html);
            });
    connect(session_, &SessionController::dismissMessage, message_, &MessageWidget::dismiss);
    connect(session_, &SessionController::status, status_label_, &QLabel::setText);
    // Exports.
    connect(exports_, &ExportDialogs::exported, status_label_, &QLabel::setText);
    connect(exports_, &ExportDialogs::failed, message_,
            [this](MessageWidget::Kind kind, const QString& html) {
                message_->showMessage(kind, html);
            });
    // The worker.
    connect(controller_, &RunController::networkAvailable, this, &MainWindow::onNetworkAvailable);
    connect(controller_, &RunController::planAvailable, this, &MainWindow::onPlanAvailable);
    connect(controller_, &RunController::progress, this, &MainWindow::onProgress);
    connect(controller_, &RunController::resultAvailable, this, &MainWindow::onResult);
    connect(controller_, &RunController::runFinished, this, &MainWindow::onRunFinished);
    connect(controller_, &RunController::failed, this, &MainWindow::onFailed);
    connect(controller_, &RunController::busyChanged, this, &MainWindow::updateRunState);
    connect(controller_, &RunController::sweepProgress, this, &MainWindow::onSweepProgress);
    connect(controller_, &RunController::sweepAvailable, this, &MainWindow::onSweepAvailable);

    network_timer_.setSingleShot(true);
    connect(&network_timer_, &QTimer::timeout, this, &MainWindow::loadNetworkNow);
    plan_timer_.setSingleShot(true);
    plan_timer_.setInterval(0);  // coalesce the events of one slider move; newest job wins anyway
    connect(&plan_timer_, &QTimer::timeout, this, &MainWindow::planNow);

    resize(1480, 920);
    if (restore_) loadSettings();
    updateRunState(false);
    scheduleNetworkLoad(0);
}

MainWindow::~MainWindow() = default;

// ---- the parts -------------------------------------------------------------------------------

MemoryChart* MainWindow::memoryChart() const {
    return results_->memoryChart();
}
ParetoChart* MainWindow::paretoChart() const {
    return results_->paretoChart();
}
QTableView* MainWindow::resultsTable() const {
    return results_->table();
}
GraphView* MainWindow::graphView() const {
    return schedule_->graphView();
}
ScheduleMatrixView* MainWindow::scheduleMatrix() const {
    return schedule_->scheduleMatrix();
}
ResidualsPanel* MainWindow::residualsPanel() const {
    return schedule_->residualsPanel();
}
TeachPanel* MainWindow::teachPanel() const {
    return schedule_->teachPanel();
}
ScheduleViews* MainWindow::scheduleViews() const {
    return schedule_->scheduleViews();
}
TourPanel* MainWindow::tourPanel() const {
    return schedule_->tourPanel();
}
void MainWindow::showTeachMode(bool on) {
    schedule_->showTeachMode(on);
}
void MainWindow::showScheduleTab(int which) {
    schedule_->showScheduleTab(which);
}
void MainWindow::startTour(int tour) {
    schedule_->startTour(tour);
}

QString MainWindow::networkSpec() const {
    return setup_->networkSpec();
}
void MainWindow::setNetworkSpec(const QString& spec) {
    setup_->setNetworkSpec(spec);  // emits networkEdited: the load follows
}
void MainWindow::setStrategies(const QStringList& specs) {
    setup_->setStrategies(specs);
}
int MainWindow::duplicateStrategy(const QString& name) {
    return setup_->duplicateStrategy(name);
}
int MainWindow::strategyBoxCount(const QString& name) const {
    return setup_->strategyBoxCount(name);
}
void MainWindow::setBudget(std::optional<uint64_t> bytes) {
    setup_->setBudget(bytes);
}
void MainWindow::setThreads(int threads) {
    setup_->setThreads(threads);
}
void MainWindow::setLinkGbps(double gbps) {
    setup_->setLinkGbps(gbps);
}
void MainWindow::setCap(const QString& text) {
    setup_->setCap(text);
}
QStringList MainWindow::strategySpecs() const {
    return setup_->strategySpecs();
}
QStringList MainWindow::sweepSpecs() const {
    return setup_->sweepSpecs();
}
std::optional<uint64_t> MainWindow::budget() const {
    return setup_->budget();
}
void MainWindow::setSweepPoints(int points) {
    results_->setSweepPoints(points);
}
void MainWindow::setSweepExecutes(bool execute) {
    results_->setSweepExecutes(execute);
}

QString MainWindow::saveSession(const QString& path) const {
    return session_->save(path, network_.spec, baseline_ms_, baseline_spread_);
}
QString MainWindow::openSession(const QString& path) {
    return session_->open(path);
}
QString MainWindow::missingNetwork() const {
    return session_->missingNetwork();
}
void MainWindow::locateNetwork(const QString& path) {
    session_->locate(path);
}

// ---- menus and the tool bar ------------------------------------------------------------------

void MainWindow::buildActions() {
    file_menu_ = menuBar()->addMenu(QStringLiteral("&File"));
    open_action_ =
        file_menu_->addAction(QStringLiteral("&Open network…"), this, &MainWindow::openDialog);
    open_action_->setShortcut(QKeySequence::Open);
    open_action_->setToolTip(QStringLiteral("Open a network file (Ctrl+O)"));
    recent_menu_ = file_menu_->addMenu(QStringLiteral("Open &recent"));
    file_menu_->addSeparator();
    export_chart_action_ = file_menu_->addAction(QStringLiteral("&Export chart…"), exports_,
                                                 &ExportDialogs::exportChart);
    export_chart_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+E")));
    export_chart_action_->setToolTip(QStringLiteral("Save a chart as PNG, SVG or PDF (Ctrl+E)"));
    export_data_action_ = file_menu_->addAction(QStringLiteral("Export &data…"), exports_,
                                                &ExportDialogs::exportData);
    export_data_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+E")));
    export_data_action_->setToolTip(
        QStringLiteral("Save the results as CSV or JSON (Ctrl+Shift+E)"));
    file_menu_->addSeparator();
    save_session_action_ = file_menu_->addAction(QStringLiteral("&Save session…"), this, [this] {
        session_->saveDialog(network_.spec, baseline_ms_, baseline_spread_);
    });
    save_session_action_->setShortcut(QKeySequence::Save);
    save_session_action_->setToolTip(QStringLiteral(
        "Save the network, strategies, settings and results to reopen exactly (Ctrl+S)"));
    open_session_action_ = file_menu_->addAction(QStringLiteral("Open sess&ion…"), session_,
                                                 &SessionController::openDialog);
    open_session_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+O")));
    open_session_action_->setToolTip(QStringLiteral("Reopen a saved session (Ctrl+Shift+O)"));
    file_menu_->addSeparator();
    export_network_action_ = file_menu_->addAction(QStringLiteral("Export &network…"), exports_,
                                                   &ExportDialogs::exportNetwork);
    export_network_action_->setToolTip(
        QStringLiteral("Save the network as Graphviz DOT or RematLab JSON"));
    export_schedule_action_ = file_menu_->addAction(QStringLiteral("Export sc&hedule…"), exports_,
                                                    &ExportDialogs::exportSchedule);
    export_schedule_action_->setToolTip(QStringLiteral(
        "Save the selected strategy's schedule as JSON, or its matrix as an image or CSV"));
    auto* export_plan = file_menu_->addAction(QStringLiteral("Export &plan…"), exports_,
                                              &ExportDialogs::exportPlan);
    export_plan->setObjectName(QStringLiteral("exportPlanAction"));
    export_plan->setToolTip(QStringLiteral(
        "Save the selected strategy's plan for PyTorch (apply(model) wraps the modules it "
        "recomputes in checkpoints), for JAX (a save_only_these_names policy) or as JSON"));
    file_menu_->addSeparator();
    auto* quit = file_menu_->addAction(QStringLiteral("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    edit_menu_ = menuBar()->addMenu(QStringLiteral("&Edit"));
    copy_action_ =
        edit_menu_->addAction(QStringLiteral("&Copy results as CSV"), this, &MainWindow::copyCsv);
    copy_action_->setShortcut(QKeySequence::Copy);
    copy_action_->setToolTip(QStringLiteral("Copy the selected rows (or all) as CSV (Ctrl+C)"));

    run_menu_ = menuBar()->addMenu(QStringLiteral("&Run"));
    run_action_ =
        run_menu_->addAction(QStringLiteral("&Run strategies"), this, &MainWindow::startRun);
    run_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+R")));
    run_action_->setToolTip(
        QStringLiteral("Plan, execute and compare the ticked strategies (Ctrl+R)"));
    cancel_action_ = run_menu_->addAction(QStringLiteral("&Cancel"), this, [this] {
        if (inTour())
            endTour();  // Esc leaves a tour, with the user's session back
        else
            cancelRun();
    });
    cancel_action_->setShortcut(QKeySequence(Qt::Key_Escape));
    cancel_action_->setToolTip(QStringLiteral("Stop the run (Esc)"));
    sweep_action_ = run_menu_->addAction(QStringLiteral("&Sweep for the Pareto chart"), this,
                                         &MainWindow::startSweep);
    sweep_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+R")));
    sweep_action_->setToolTip(QStringLiteral(
        "Trace each ticked strategy's memory / recompute curve and the optimal frontier "
        "(Ctrl+Shift+R)"));

    view_menu_ = menuBar()->addMenu(QStringLiteral("&View"));
    auto* mem = view_menu_->addAction(QStringLiteral("&Memory timeline"), this,
                                      [this] { results_->showPage(ResultsArea::MemoryTab); });
    mem->setShortcut(QKeySequence(QStringLiteral("Ctrl+1")));
    auto* par = view_menu_->addAction(QStringLiteral("&Pareto chart"), this,
                                      [this] { results_->showPage(ResultsArea::ParetoTab); });
    par->setShortcut(QKeySequence(QStringLiteral("Ctrl+2")));
    auto* zoom = view_menu_->addAction(QStringLiteral("Reset &zoom"), memoryChart(),
                                       &MemoryChart::resetZoom);
    zoom->setShortcut(QKeySequence(QStringLiteral("Ctrl+0")));
    view_menu_->addSeparator();
    view_menu_->addActions(schedule_->viewActions());

    help_menu_ = menuBar()->addMenu(QStringLiteral("&Help"));
    help_menu_->addMenu(schedule_->toursMenu());
    help_menu_->addSeparator();
    auto* about_action =
        help_menu_->addAction(QStringLiteral("&About RematLab"), this, &MainWindow::about);
    about_action->setShortcut(QKeySequence::HelpContents);
    help_menu_->addAction(QStringLiteral("About &Qt"), qApp, &QApplication::aboutQt);

    auto* tools = addToolBar(QStringLiteral("Main"));
    tools->setObjectName(QStringLiteral("mainToolBar"));
    tools->setMovable(false);
    tools->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    open_action_->setIcon(style()->standardIcon(QStyle::SP_DialogOpenButton));
    run_action_->setIcon(style()->standardIcon(QStyle::SP_MediaPlay));
    cancel_action_->setIcon(style()->standardIcon(QStyle::SP_MediaStop));
    export_chart_action_->setIcon(style()->standardIcon(QStyle::SP_DialogSaveButton));
    copy_action_->setIcon(style()->standardIcon(QStyle::SP_FileDialogDetailedView));
    tools->addAction(open_action_);
    tools->addSeparator();
    tools->addAction(run_action_);
    tools->addAction(cancel_action_);
    sweep_action_->setIcon(style()->standardIcon(QStyle::SP_BrowserReload));
    tools->addAction(sweep_action_);
    tools->addSeparator();
    tools->addAction(export_chart_action_);
    tools->addAction(copy_action_);
    rebuildRecentMenu();
}

// ---- network -------------------------------------------------------------------------------

void MainWindow::openFile(const QString& path) {
    addRecentFile(path);
    setNetworkSpec(QFileInfo(path).absoluteFilePath());
}

void MainWindow::openDialog() {
    QSettings settings;
    const QString dir = settings.value(QStringLiteral("lastOpenDir")).toString();
    const QString path =
        QFileDialog::getOpenFileName(this, QStringLiteral("Open network"), dir,
                                     QStringLiteral("Networks (*.json *.onnx);;All files (*)"));
    if (path.isEmpty()) return;
    if (restore_) settings.setValue(QStringLiteral("lastOpenDir"), QFileInfo(path).absolutePath());
    openFile(path);
}

void MainWindow::addRecentFile(const QString& path) {
    const QString abs = QFileInfo(path).absoluteFilePath();
    recent_files_.removeAll(abs);
    recent_files_.prepend(abs);
    while (recent_files_.size() > kMaxRecent) recent_files_.removeLast();
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    recent_menu_->clear();
    for (const QString& f : recent_files_) {
        auto* a =
            recent_menu_->addAction(QFileInfo(f).fileName(), this, [this, f] { openFile(f); });
        a->setToolTip(f);
    }
    if (recent_files_.isEmpty())
        recent_menu_->addAction(QStringLiteral("(none)"))->setEnabled(false);
    recent_menu_->setToolTipsVisible(true);
}

void MainWindow::scheduleNetworkLoad(int delay_ms) {
    network_ready_ = false;
    network_pending_ = true;
    setup_->unsetNetwork();
    network_timer_.start(delay_ms);
    updateRunEnabled();
}

void MainWindow::loadNetworkNow() {
    network_timer_.stop();
    loading_spec_ = networkSpec();
    network_ready_ = false;
    network_pending_ = true;
    setup_->showLoading(loading_spec_);
    updateRunEnabled();
    status_label_->setText(QStringLiteral("Loading %1…").arg(loading_spec_));
    network_job_ = controller_->loadNetwork(loading_spec_);
}

void MainWindow::onNetworkAvailable(quint64 job, const NetworkSummary& s) {
    if (job != network_job_) return;
    if (s.spec != network_.spec) results_->setSweeps({});  // curves of another network
    network_ = s;
    network_ready_ = true;
    network_pending_ = false;
    updateRunEnabled();
    session_->networkLoaded();
    setWindowTitle(QStringLiteral("%1 — RematLab").arg(s.spec));
    if (message_->kind() == MessageWidget::Kind::Error && !message_->text().isEmpty() &&
        message_->text().startsWith(QLatin1String("Cannot load")))
        message_->dismiss();
    setup_->setNetwork(s);
    status_label_->setText(QStringLiteral("Loaded %1").arg(s.spec));
    emit networkReady();
    if (run_when_ready_ && !(first_plan_ && setup_->budgetIsDefault())) {
        run_when_ready_ = false;
        startRun();
    } else {
        // A run asked for at start-up waits for the first plan: it makes the default budget one
        // the ticked strategies can meet (onPlanAvailable), then runs.
        schedulePlan();
    }
}

// ---- planning --------------------------------------------------------------------------------

void MainWindow::schedulePlan() {
    if (!network_ready_) return;
    if (!plan_timer_.isActive()) plan_timer_.start();
}

void MainWindow::planNow() {
    if (!network_ready_) return;
    RunRequest r;
    try {
        r = setup_->request();
    } catch (const std::exception& e) {
        message_->showMessage(
            MessageWidget::Kind::Error,
            QStringLiteral("Memory cap: %1").arg(to_qstring(e.what()).toHtmlEscaped()));
        runIfAsked();  // a run waiting for this plan says for itself what is wrong
        return;
    }
    if (r.strategies.isEmpty()) {
        model_->clear();
        memoryChart()->setResults({});
        status_label_->setText(QStringLiteral("Tick at least one strategy"));
        runIfAsked();
        return;
    }
    if (run_job_ != 0 && controller_->busy()) {
        // A new plan would make the run stale and drop it: plan once it has ended.
        plan_queued_ = true;
        return;
    }
    plan_job_ = controller_->plan(r);
    run_job_ = 0;
    status_label_->setText(QStringLiteral("Planning %1 strateg%2…")
                               .arg(r.strategies.size())
                               .arg(r.strategies.size() == 1 ? "y" : "ies"));
}

namespace {
// A row that failed, though it may hold figures: a cap failure keeps its plan, an infeasible
// re-plan keeps the stale figures of the last run.
bool is_failure(const StrategyResult& r) {
    return r.failed() || r.status == QLatin1String("cap exceeded") ||
           r.status == QLatin1String("infeasible") || r.status == QLatin1String("error");
}
}  // namespace

std::vector<StrategyResult> MainWindow::keepMeasured(std::vector<StrategyResult> planned) const {
    // Measured figures are only comparable on the network, threads, cap and device they came from.
    RunRequest now;
    try {
        now = setup_->request();
    } catch (const std::exception&) {
        return planned;
    }
    if (now.network != measured_with_.network || now.threads != measured_with_.threads ||
        now.cap != measured_with_.cap || now.device != measured_with_.device ||
        now.link_gbps != measured_with_.link_gbps)
        return planned;
    const auto& old = model_->results();
    std::vector<bool> used(old.size(), false);
    auto take = [&](size_t o) {
        used[o] = true;
        return old[o];
    };
    for (size_t i = 0; i < planned.size(); ++i) {
        StrategyResult& p = planned[i];
        // The same spec: its run still holds, whatever else changed (a strategy without budget
        // keeps its figures when the budget moves).
        bool kept = false;
        for (size_t o = 0; o < old.size() && !kept; ++o)
            if (!used[o] && old[o].executed && !old[o].stale() && old[o].spec == p.spec) {
                p = take(o);
                kept = true;
            }
        if (kept) continue;
        // The same strategy with other parameters: its measured figures are kept, greyed, with
        // what changed, beside the new prediction until the next run.
        for (size_t o = 0; o < old.size() && !kept; ++o) {
            if (used[o] || !old[o].executed || old[o].name != p.name) continue;
            const StrategyResult& m = take(o);
            p.executed = true;
            p.measured_peak = m.measured_peak;
            p.measured_activation_peak = m.measured_activation_peak;
            p.measured_peak_instruction = m.measured_peak_instruction;
            p.forward_ms = m.forward_ms;
            p.recompute_ms = m.recompute_ms;
            p.backward_ms = m.backward_ms;
            p.total_ms = m.total_ms;
            p.measured_host_peak = m.measured_host_peak;
            p.stall_ms = m.stall_ms;
            p.times = m.times;
            p.loss = m.loss;
            p.grads_equal = m.grads_equal;
            p.max_grad_diff = m.max_grad_diff;
            p.measured_timeline = m.measured_timeline;
            p.stale_measured_as = m.stale() ? m.stale_measured_as : m.spec;
            kept = true;
        }
    }
    return planned;
}

void MainWindow::onPlanAvailable(quint64 job, const RunSummary& plan) {
    if (job != plan_job_) return;
    if (applyPendingSession()) {  // an opened session shows its own results
        runIfAsked();
        return;
    }
    if (restore_after_tour_ && networkSpec() == restore_after_tour_->network) {
        // Back from a tour: the user's rows exactly as they were, measured figures included.
        UserSession s = std::move(*restore_after_tour_);
        restore_after_tour_.reset();
        results_->setResults(s.results, s.baseline_ms, s.baseline_spread);
        results_->setBudget(budget());
        baseline_ms_ = s.baseline_ms;
        baseline_spread_ = s.baseline_spread;
        measured_with_ = s.measured_with;
        status_label_->setText(QStringLiteral("Back from the tour: your session as it was"));
        message_->dismiss();
        emit planReady();
        runIfAsked();
        return;
    }
    results_->setResults(keepMeasured(plan.results), baseline_ms_, baseline_spread_);
    results_->setBudget(budget());
    results_->dropSweepsExcept(sweepSpecs());
    int failed = 0;
    bool infeasible = false;
    std::optional<uint64_t> smallest;
    for (const auto& r : plan.results) {
        failed += is_failure(r);
        if (r.status == QLatin1String("infeasible") && r.min_feasible_budget) {
            infeasible = true;
            smallest = std::max(smallest.value_or(0), *r.min_feasible_budget);
        }
    }
    const bool first = first_plan_;
    first_plan_ = false;
    if (infeasible && first && setup_->budgetIsDefault() && smallest &&
        setup_->budgetFor(*smallest)) {
        // The budget at start-up is the slider's default: make it one the ticked strategies can
        // meet rather than greet a first start with "infeasible".
        verify_budget_ = true;
        setBudget(*smallest);
        return;
    }
    if (infeasible && verify_budget_ && setup_->raiseBudgetOneStep()) {
        return;  // "Use X" was not enough after all: one step up, planned again
    }
    verify_budget_ = false;
    status_label_->setText(
        QStringLiteral("Planned %1 strateg%2 in %3 ms (predicted; Ctrl+R runs them)")
            .arg(plan.results.size())
            .arg(plan.results.size() == 1 ? "y" : "ies")
            .arg(plan.wall_ms, 0, 'f', 0));
    if (failed)
        reportFailures(plan.results);
    else if (message_->kind() != MessageWidget::Kind::Error ||
             !message_->text().startsWith(QLatin1String("Cannot load")))
        message_->dismiss();
    emit planReady();
    runIfAsked();
}

void MainWindow::runIfAsked() {
    if (!run_when_ready_) return;
    run_when_ready_ = false;
    startRun();
}

// ---- running ---------------------------------------------------------------------------------

bool MainWindow::running() const {
    return controller_->busy();
}

void MainWindow::startRun() {
    setup_->requestRun();  // runRequested (run) or invalidInput
}

void MainWindow::run(const RunRequest& request) {
    if (!network_ready_ || networkSpec() != network_.spec) {
        run_when_ready_ = true;
        // (Re)load unless a load is about to start: a file that failed may have been fixed.
        if (!network_timer_.isActive()) loadNetworkNow();
        return;
    }
    if (network_.plan_only) {
        // Nothing to execute: Run shows the plans' predicted figures, once they are in the table
        // (a plan in flight, or one not yet made for these strategies, is waited for once).
        bool planned = static_cast<int>(request.strategies.size()) == model_->rowCount();
        for (int i = 0; planned && i < model_->rowCount(); ++i)
            planned = model_->result(i).spec == request.strategies[i];
        const bool planning = plan_timer_.isActive() || controller_->busy();
        if (planning || (!planned && !plan_only_waited_)) {
            plan_only_waited_ = true;
            run_when_ready_ = true;
            if (!planning) planNow();
            return;
        }
        plan_only_waited_ = false;
        message_->showMessage(MessageWidget::Kind::Warning,
                              QString::fromUtf8(kPlanOnlyNoKernels) +
                                  QStringLiteral(". The table and charts show the predicted "
                                                 "figures of each strategy's plan."));
        emit runCompleted();
        return;
    }
    run_request_ = request;
    if (run_request_.strategies.isEmpty()) {
        message_->showMessage(MessageWidget::Kind::Warning,
                              QStringLiteral("Tick at least one strategy to run."));
        emit runCompleted();
        return;
    }
    plan_timer_.stop();
    message_->dismiss();
    // Keep the predicted rows when they are the ones about to run; else start from placeholders.
    bool same = static_cast<int>(run_request_.strategies.size()) == model_->rowCount();
    for (int i = 0; same && i < model_->rowCount(); ++i)
        same = model_->result(i).spec == run_request_.strategies[i];
    if (!same) {
        std::vector<StrategyResult> rows;
        for (const QString& s : run_request_.strategies)
            rows.push_back(failure_result(s, QStringLiteral("queued"), {}));
        results_->setResults(rows);
    }
    results_->setBudget(budget());
    live_index_ = -2;
    baseline_ms_.reset();
    baseline_spread_.reset();
    plan_queued_ = false;  // the run plans what it runs
    run_job_ = controller_->run(run_request_);
    plan_job_ = 0;
    progress_->setValue(0);
    status_label_->setText(QStringLiteral("Running…"));
}

void MainWindow::cancelRun() {
    if (!controller_->busy()) return;
    controller_->cancel();
    status_label_->setText(QStringLiteral("Cancelling…"));
}

void MainWindow::onProgress(quint64 job, const ProgressSnapshot& p) {
    if (job != run_job_) return;
    const int count = std::max(1, p.strategy_count);
    long instructions = 0;
    if (p.strategy_index >= 0 && p.strategy_index < model_->rowCount())
        instructions = model_->result(p.strategy_index).instructions;
    const double frac = instructions > 0 ? std::min(1.0, double(p.instruction) / instructions) : 0;
    // Steps run round by round (a warm-up round, then the timed ones), a hidden baseline last.
    const int steps = count + 1;
    const int index = p.strategy_index < 0 ? count : p.strategy_index;
    const int step = p.round * steps + index;
    progress_->setValue(
        static_cast<int>(kProgressSteps * (step + frac) / (steps * (p.rounds + 1))));
    if (step != live_index_) {  // each step draws its own live curve
        live_index_ = step;
        if (p.strategy_index >= 0) memoryChart()->beginLive(p.strategy_index);
    }
    if (p.strategy_index >= 0)
        memoryChart()->appendLive(p.strategy_index, p.new_points, p.new_instructions);
    status_label_->setText(p.strategy_index < 0
                               ? QStringLiteral("Running none as the time baseline…")
                               : QStringLiteral("Running %1 (%2/%3) — instruction %4/%5, %6 live")
                                     .arg(p.label)
                                     .arg(p.strategy_index + 1)
                                     .arg(p.strategy_count)
                                     .arg(p.instruction)
                                     .arg(instructions)
                                     .arg(bytes_text(p.live_bytes)));
}

void MainWindow::onResult(quint64 job, int index, const StrategyResult& r) {
    if (job != run_job_) return;
    results_->setResult(index, r);
}

void MainWindow::onRunFinished(quint64 job, const RunSummary& s) {
    if (job != run_job_) return;
    results_->setResults(s.results, s.baseline_total_ms, s.baseline_total);
    results_->setBudget(budget());
    baseline_ms_ = s.baseline_total_ms;
    baseline_spread_ = s.baseline_total;
    measured_with_ = run_request_;
    int ok = 0;
    for (const auto& r : s.results) ok += r.executed;
    if (s.cancelled) {
        // Cancel keeps what was measured: say how much of it there is, row by row.
        QStringList timed, untimed;
        for (const auto& r : s.results) {
            const QString name = QStringLiteral("<b>%1</b>").arg(r.spec.toHtmlEscaped());
            if (r.executed && r.times)
                timed << QStringLiteral("%1 %2 of %3")
                             .arg(name)
                             .arg(r.times->total.samples)
                             .arg(run_request_.repeats);
            else if (r.planned && !is_failure(r))
                untimed << name;
        }
        QString text = QStringLiteral("Run cancelled. ");
        if (!timed.isEmpty())
            text += QStringLiteral(
                        "Kept what was measured, the timed repeats each strategy "
                        "completed: %1. ")
                        .arg(timed.join(QStringLiteral(", ")));
        if (!untimed.isEmpty())
            text += QStringLiteral("No timing for %1 (the plan's figures are shown). ")
                        .arg(untimed.join(QStringLiteral(", ")));
        message_->showMessage(MessageWidget::Kind::Info,
                              text + QStringLiteral("Ctrl+R runs again."));
        status_label_->setText(QStringLiteral("Cancelled: %1 of %2 strategies timed")
                                   .arg(timed.size())
                                   .arg(s.results.size()));
        emit runCompleted();
        planQueued();
        return;
    }
    status_label_->setText(QStringLiteral("Ran %1 of %2 strategies in %3 s on %4")
                               .arg(ok)
                               .arg(s.results.size())
                               .arg(s.wall_ms / 1000, 0, 'f', 1)
                               .arg(run_request_.network));
    if (ok < static_cast<int>(s.results.size())) reportFailures(s.results);
    emit runCompleted();
    planQueued();
}

void MainWindow::planQueued() {
    if (!plan_queued_) return;
    plan_queued_ = false;
    schedulePlan();
}

void MainWindow::reportFailures(const std::vector<StrategyResult>& results) {
    QStringList lines;
    std::optional<uint64_t> smallest;
    for (const auto& r : results) {
        if (!is_failure(r)) continue;
        lines << QStringLiteral("<b>%1</b> (%2): %3")
                     .arg(r.spec.toHtmlEscaped(), r.status, r.message.toHtmlEscaped());
        if (r.min_feasible_budget && (!smallest || *r.min_feasible_budget > *smallest))
            smallest = r.min_feasible_budget;
    }
    if (lines.isEmpty()) return;
    const std::optional<uint64_t> fit = smallest ? setup_->budgetFor(*smallest) : std::nullopt;
    if (fit) {
        // The budget the slider will really show (never rounded below the smallest feasible);
        // the plan that follows checks it (onPlanAvailable).
        message_->showMessage(MessageWidget::Kind::Warning, lines.join(QStringLiteral("<br>")),
                              QStringLiteral("Use %1").arg(bytes_text(*fit)), [this, fit] {
                                  verify_budget_ = true;
                                  setBudget(*fit);
                              });
    } else {
        message_->showMessage(MessageWidget::Kind::Warning, lines.join(QStringLiteral("<br>")));
    }
}

void MainWindow::onFailed(quint64 job, FailureKind kind, const QString& message) {
    if (kind == FailureKind::Network) {
        if (job != network_job_) return;
        network_pending_ = false;
        updateRunEnabled();
        // A session's network file no longer loads: the session restores the rest.
        if (session_->networkFailed(loading_spec_, message)) {
            emit networkFailed(message);
            return;
        }
        network_ready_ = false;
        run_when_ready_ = false;
        setup_->showNotLoaded();
        message_->showMessage(MessageWidget::Kind::Error,
                              QStringLiteral("Cannot load network '%1': %2")
                                  .arg(loading_spec_.toHtmlEscaped(), message.toHtmlEscaped()));
        status_label_->setText(QStringLiteral("Cannot load %1").arg(loading_spec_));
        emit networkFailed(message);
        if (run_job_ == 0) emit runCompleted();
        return;
    }
    if (job != 0 && job == sweep_job_) {
        sweep_job_ = 0;
        if (kind == FailureKind::Cancelled) {
            message_->showMessage(MessageWidget::Kind::Info, QStringLiteral("Sweep cancelled."));
            status_label_->setText(QStringLiteral("Sweep cancelled"));
        } else {
            message_->showMessage(
                MessageWidget::Kind::Error,
                QStringLiteral("The sweep failed: %1").arg(message.toHtmlEscaped()));
            status_label_->setText(QStringLiteral("Sweep failed"));
        }
        emit sweepCompleted();
        return;
    }
    if (job != run_job_ && job != plan_job_) return;
    const bool was_run = job == run_job_;
    if (!was_run && run_when_ready_ && kind != FailureKind::Cancelled) {
        runIfAsked();  // the run asked for reports for itself what went wrong
        return;
    }
    if (kind == FailureKind::Cancelled) {
        message_->showMessage(MessageWidget::Kind::Info,
                              QStringLiteral("Run cancelled before any step was measured; the "
                                             "plans are kept. Ctrl+R runs again."));
        status_label_->setText(QStringLiteral("Cancelled"));
    } else {
        message_->showMessage(
            MessageWidget::Kind::Error,
            QStringLiteral("%1 failed: %2")
                .arg(was_run ? QStringLiteral("The run") : QStringLiteral("Planning"),
                     message.toHtmlEscaped()));
        status_label_->setText(QStringLiteral("Failed"));
    }
    if (was_run) {
        emit runCompleted();
        planQueued();
    }
}

// ---- sweeps ----------------------------------------------------------------------------------

void MainWindow::startSweep() {
    if (!network_ready_ || networkSpec() != network_.spec) {
        message_->showMessage(MessageWidget::Kind::Warning,
                              QStringLiteral("Wait for the network to load, then sweep."));
        emit sweepCompleted();
        return;
    }
    SweepRequest r;
    try {
        const RunRequest base = setup_->request();
        r.network = base.network;
        r.threads = base.threads;
        r.cap = base.cap;
        r.device = base.device;
        r.link_gbps = base.link_gbps;
    } catch (const std::exception& e) {
        message_->showMessage(
            MessageWidget::Kind::Error,
            QStringLiteral("Memory cap: %1").arg(to_qstring(e.what()).toHtmlEscaped()));
        emit sweepCompleted();
        return;
    }
    r.strategies = sweepSpecs();
    r.points = results_->sweepPoints();
    r.execute = results_->sweepExecutes();
    r.frontier_spec = setup_->frontierSpec();
    // Predict with the cost model the table's figures came from: after a run, the profiled one.
    const auto& rows = model_->results();
    r.use_run_costs =
        std::any_of(rows.begin(), rows.end(), [](const auto& x) { return x.executed; });
    plan_timer_.stop();
    message_->dismiss();
    sweep_job_ = controller_->sweep(r);
    plan_job_ = run_job_ = 0;
    progress_->setValue(0);
    results_->showPage(ResultsArea::ParetoTab);
    status_label_->setText(QStringLiteral("Sweeping…"));
}

void MainWindow::onSweepProgress(quint64 job, int done, int total, const QString& spec) {
    if (job != sweep_job_) return;
    progress_->setValue(total > 0 ? kProgressSteps * done / total : 0);
    status_label_->setText(
        QStringLiteral("Sweeping %1 (%2/%3)").arg(spec).arg(done + 1).arg(total));
}

void MainWindow::onSweepAvailable(quint64 job, const SweepSummary& s) {
    if (job != sweep_job_) return;
    sweep_job_ = 0;
    results_->setSweeps(s.curves);
    paretoChart()->setBudget(budget());
    int points = 0;
    QStringList notes;
    for (const SweepCurve& c : s.curves) {
        points += static_cast<int>(c.samples.size());
        if (!c.message.isEmpty())
            notes << QStringLiteral("<b>%1</b>: %2")
                         .arg(c.spec.toHtmlEscaped(), c.message.toHtmlEscaped());
    }
    status_label_->setText(QStringLiteral("Swept %1 curve(s), %2 points in %3 s")
                               .arg(s.curves.size())
                               .arg(points)
                               .arg(s.wall_ms / 1000, 0, 'f', 1));
    if (!notes.isEmpty())
        message_->showMessage(MessageWidget::Kind::Info,
                              QStringLiteral("Sweep: ") + notes.join(QStringLiteral("<br>")));
    // The sweep replaced a plan still in flight: plan again so the table matches the boxes.
    const QStringList specs = strategySpecs();
    bool same = static_cast<int>(specs.size()) == model_->rowCount();
    for (int i = 0; same && i < model_->rowCount(); ++i) same = model_->result(i).spec == specs[i];
    if (!same) schedulePlan();
    emit sweepCompleted();
}

bool MainWindow::isRunEnabled() const {
    return run_action_->isEnabled();
}

void MainWindow::updateRunEnabled() {
    const bool runnable = network_ready_ || network_pending_;
    run_action_->setEnabled(!controller_->busy() && runnable);
    setup_->setRunnable(runnable);
}

void MainWindow::updateRunState(bool busy) {
    run_action_->setEnabled(!busy && (network_ready_ || network_pending_));
    sweep_action_->setEnabled(!busy);
    cancel_action_->setEnabled(busy || inTour());  // Esc also leaves a tour
    setup_->setBusy(busy);
    results_->setBusy(busy);
    progress_->setVisible(busy);
}

QString MainWindow::statusText() const {
    return status_label_->text();
}

// ---- sessions and tours ------------------------------------------------------------------------

bool MainWindow::applyPendingSession() {
    const auto s = session_->takePending(network_ready_ ? &network_ : nullptr);
    if (!s) return false;
    results_->setResults(s->results, s->baseline_ms, s->baseline_spread);
    memoryChart()->setBudget(s->budget);
    baseline_ms_ = s->baseline_ms;
    baseline_spread_ = s->baseline_spread;  // absent in sessions saved before it was kept
    measured_with_ = RunRequest{};
    measured_with_.network = s->network_spec;
    measured_with_.threads = setup_->threads();
    try {
        const RunRequest now = setup_->request();
        measured_with_.cap = now.cap;
        measured_with_.device = now.device;
    } catch (const std::exception&) {
    }
    status_label_->setText(QStringLiteral("Opened a session: %1 strateg%2 on %3, as saved")
                               .arg(s->results.size())
                               .arg(s->results.size() == 1 ? "y" : "ies")
                               .arg(s->network_spec));
    emit planReady();
    return true;
}

void MainWindow::detachNetwork() {
    network_timer_.stop();
    plan_timer_.stop();
    network_job_ = plan_job_ = 0;
    run_when_ready_ = false;
    network_ready_ = false;
    network_pending_ = false;
    setup_->unsetNetwork();
    results_->setSweeps({});
    updateRunEnabled();
}

void MainWindow::showRestoredWithoutNetwork(const QString& path, const QString& name,
                                            const QString& reason) {
    applyPendingSession();
    setup_->showMissingNetwork(path, name);
    setWindowTitle(QStringLiteral("%1 (missing) — RematLab").arg(path));
    message_->showMessage(
        MessageWidget::Kind::Warning,
        QStringLiteral("The session's network file <b>%1</b> %2. Everything else was restored — "
                       "the strategies, settings and saved results, drawn from the copy of the "
                       "network kept in the session. Locate the file to plan or run again.")
            .arg(path.toHtmlEscaped(), reason.toHtmlEscaped()),
        QStringLiteral("Locate…"), [this] { session_->locateDialog(); });
    status_label_->setText(
        QStringLiteral("Opened a session; its network file %1 is missing").arg(path));
}

void MainWindow::applyTourStep(const TourStep& step) {
    if (!before_tour_ && restore_after_tour_) {
        // A tour started while the last one's restore is still planning: the user's session is
        // the one waiting to come back, not the rows on screen (the last tour's).
        before_tour_ = std::move(restore_after_tour_);
        restore_after_tour_.reset();
        cancel_action_->setEnabled(true);
    } else if (!before_tour_) {
        UserSession s;
        s.network = networkSpec();
        s.strategies = strategySpecs();
        s.budget = budget();
        s.results = model_->results();
        s.baseline_ms = baseline_ms_;
        s.baseline_spread = baseline_spread_;
        s.measured_with = measured_with_;
        s.teaching = schedule_->teachModeShown();
        s.page = results_->currentPage();
        s.link_gbps = setup_->linkGbps();
        before_tour_ = std::move(s);
        restore_after_tour_.reset();
        cancel_action_->setEnabled(true);  // Esc leaves the tour
    }
    // The step is shown once the window's plan is of its network and strategies (a plan of the
    // step before may arrive first); a step left before that is dropped.
    auto done = std::make_shared<QMetaObject::Connection>();
    const int tour = tourPanel()->tour(), index = tourPanel()->step();
    *done = connect(this, &MainWindow::planReady, this, [this, step, done, tour, index] {
        if (!inTour() || tourPanel()->tour() != tour || tourPanel()->step() != index) {
            disconnect(*done);
            return;
        }
        if (network_.spec != networkSpec()) return;
        for (const QString& spec : step.strategies)
            if (tour_row(model_->results(), spec) < 0) return;
        disconnect(*done);
        schedule_->showTourStep(step, network_, model_->results());
    });
    setNetworkSpec(step.network);
    setStrategies(step.strategies);
    if (step.link_gbps > 0) setup_->setLinkGbps(step.link_gbps);
    // The tour's strategies plan with their own parameters, not under the user's budget (its
    // words describe those plans).
    setBudget(std::nullopt);
    schedulePlan();
}

void MainWindow::endTour() {
    if (!before_tour_) return;
    UserSession s = std::move(*before_tour_);
    before_tour_.reset();
    cancel_action_->setEnabled(running());
    if (tourPanel()->parentWidget()) tourPanel()->parentWidget()->hide();  // its dock
    schedule_->showTeachMode(s.teaching);  // the tour opened it; the user's choice comes back
    results_->showPage(s.page);
    setNetworkSpec(s.network);
    setStrategies(s.strategies);
    setBudget(s.budget);
    setup_->setLinkGbps(s.link_gbps);
    restore_after_tour_ = std::move(s);
    schedulePlan();
}

// ---- export, clipboard, about, settings ----------------------------------------------------

ExportInput MainWindow::exportInput() const {
    ExportInput in;
    in.results = model_->results();
    in.baseline_ms = baseline_ms_;
    in.budget = budget();
    in.sweeps = results_->sweeps();
    in.show_predicted = memoryChart()->showPredicted();
    in.show_measured = memoryChart()->showMeasured();
    return in;
}

QString MainWindow::exportChart(ChartKind kind, const QString& path, QSize size) const {
    ExportInput in = exportInput();
    in.title = (kind == ChartKind::Memory ? QStringLiteral("Memory over time — %1")
                                          : QStringLiteral("Peak memory vs recompute time — %1"))
                   .arg(network_.spec);
    return export_chart(kind, in, path, size);
}

void MainWindow::copyCsv() {
    // Selected rows only when there is a selection.
    int rows = 0;
    QApplication::clipboard()->setText(results_->selectionCsv(baseline_ms_, &rows));
    status_label_->setText(QStringLiteral("Copied %1 row(s) as CSV").arg(rows));
}

void MainWindow::about() {
    QMessageBox::about(
        this, QStringLiteral("About RematLab"),
        QStringLiteral("<h3>RematLab %1</h3>"
                       "<p>A lab for gradient checkpointing: plan strategies as schedules, predict "
                       "their memory, run them for real and compare.</p>"
                       "<p>Qt %2 (built with %3) · Eigen %4</p>"
                       "<p>GEMM: %5</p><p>%6</p>")
            .arg(QStringLiteral(REMATLAB_VERSION), QString::fromLatin1(qVersion()),
                 QStringLiteral(QT_VERSION_STR), QStringLiteral(EIGEN_VERSION_TEXT),
                 QString::fromStdString(gemm_choice().summary()).toHtmlEscaped(),
                 QString::fromStdString(gemm_shape_stats().summary()).toHtmlEscaped()));
}

void MainWindow::closeEvent(QCloseEvent* event) {
    controller_->cancel();
    if (restore_) saveSettings();
    QMainWindow::closeEvent(event);
}

void MainWindow::saveSettings() const {
    QSettings s;
    s.setValue(QStringLiteral("window/geometry"), saveGeometry());
    s.setValue(QStringLiteral("window/state"), saveState());
    s.setValue(QStringLiteral("recentFiles"), recent_files_);
    s.setValue(QStringLiteral("network"), networkSpec());
    s.setValue(QStringLiteral("strategies"), sweepSpecs().join(QLatin1Char(';')));
    setup_->saveSettings(s);
    results_->saveSettings(s);
}

void MainWindow::loadSettings() {
    QSettings s;
    restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(s.value(QStringLiteral("window/state")).toByteArray());
    recent_files_ = s.value(QStringLiteral("recentFiles")).toStringList();
    rebuildRecentMenu();
    const QString net = s.value(QStringLiteral("network")).toString();
    if (!net.isEmpty()) setNetworkSpec(net);
    const QString ticked = s.value(QStringLiteral("strategies")).toString();
    if (s.contains(QStringLiteral("strategies")))
        setStrategies(ticked.split(QLatin1Char(';'), Qt::SkipEmptyParts));
    setup_->loadSettings(s);
    results_->loadSettings(s);
}

}  // namespace rl::ui
