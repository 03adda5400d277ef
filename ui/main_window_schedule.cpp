// The main window's schedule views, teach mode, guided tours and sessions — kept apart from
// main_window.cpp, which builds the setup panels, the charts and the run.
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineEdit>
#include <QLineSeries>
#include <QMenu>
#include <QMenuBar>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QValueAxis>

#include "engine/networks/presets.h"
#include "ui/graph_view.h"
#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/residuals_panel.h"
#include "ui/results_model.h"
#include "ui/schedule_matrix.h"
#include "ui/schedule_trace.h"
#include "ui/schedule_views.h"
#include "ui/session.h"
#include "ui/teach_panel.h"
#include "ui/tours.h"

namespace rl::ui {

namespace {

// The test setNetworkSpec uses: a path rather than a preset spec.
bool is_file_spec(const QString& spec) {
    return spec.contains(QLatin1Char('/')) || spec.endsWith(QLatin1String(".json")) ||
           spec.endsWith(QLatin1String(".onnx"));
}

QMenu* find_menu(QMenuBar* bar, const QString& title) {
    for (QAction* a : bar->actions())
        if (a->menu() && a->text() == title) return a->menu();
    return nullptr;
}

QAction* find_action(QMenu* menu, const QString& text) {
    if (!menu) return nullptr;
    for (QAction* a : menu->actions())
        if (a->text() == text) return a;
    return nullptr;
}

// Where teach mode should stand for a tour step.
long teach_position(const ScheduleTrace& t, const QString& at) {
    const auto& code = t.plan.schedule.code;
    const long n = static_cast<long>(code.size());
    if (at == QLatin1String("peak")) return std::min(n, long(t.sim.peak_instruction) + 1);
    if (at == QLatin1String("end")) return n;
    if (at == QLatin1String("recompute") || at == QLatin1String("backward")) {
        std::vector<uint8_t> seen(size_t(t.graph->num_nodes()), 0);
        for (long i = 0; i < n; ++i) {
            const Instruction& ins = code[size_t(i)];
            if (at == QLatin1String("backward") && ins.kind == InstrKind::Backward) return i + 1;
            if (ins.kind == InstrKind::Compute) {
                if (seen[size_t(ins.target)] && at == QLatin1String("recompute")) return i + 1;
                seen[size_t(ins.target)] = 1;
            }
        }
    }
    return 0;
}

}  // namespace

void MainWindow::buildScheduleViews() {
    graph_view_ = new GraphView;
    matrix_view_ = new ScheduleMatrixView;
    residuals_panel_ = new ResidualsPanel;
    teach_panel_ = new TeachPanel;
    const int first = charts_->count();
    charts_->addTab(graph_view_, QStringLiteral("Graph"));
    charts_->addTab(matrix_view_, QStringLiteral("Schedule matrix"));
    charts_->addTab(residuals_panel_, QStringLiteral("Saved residuals"));
    charts_->setTabToolTip(
        first,
        QStringLiteral(
            "The network laid out by Graphviz, coloured by what the selected strategy does with "
            "each output: kept, recomputed, freed early (Ctrl+3). Wheel: zoom; drag: pan; click: "
            "select"));
    charts_->setTabToolTip(
        first + 1,
        QStringLiteral(
            "Checkmate-style matrix: rows are the forward and each backward step, columns nodes "
            "(Ctrl+4)"));
    charts_->setTabToolTip(
        first + 2,
        QStringLiteral(
            "What the selected strategy keeps for the backward, like JAX's print_saved_residuals "
            "(Ctrl+5)"));

    teach_dock_ = new QDockWidget(QStringLiteral("Teach mode"), this);
    teach_dock_->setObjectName(QStringLiteral("teachDock"));
    teach_dock_->setWidget(teach_panel_);
    addDockWidget(Qt::BottomDockWidgetArea, teach_dock_);
    teach_dock_->hide();

    tour_panel_ = new TourPanel;
    tour_dock_ = new QDockWidget(QStringLiteral("Guided tour"), this);
    tour_dock_->setObjectName(QStringLiteral("tourDock"));
    tour_dock_->setWidget(tour_panel_);
    tour_dock_->setMinimumWidth(320);
    addDockWidget(Qt::RightDockWidgetArea, tour_dock_);
    tour_dock_->hide();

    schedule_views_ =
        new ScheduleViews(graph_view_, matrix_view_, residuals_panel_, teach_panel_, this);
    auto sync = [this] { schedule_views_->setResults(model_->results()); };
    connect(model_, &QAbstractItemModel::modelReset, this, sync);
    connect(model_, &QAbstractItemModel::dataChanged, this, sync);
    connect(model_, &QAbstractItemModel::rowsInserted, this, sync);
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                if (current.isValid())
                    schedule_views_->setCurrent(proxy_->mapToSource(current).row());
            });
    schedule_views_->setMemoryChart(memory_);
    connect(teach_dock_, &QDockWidget::visibilityChanged, schedule_views_,
            &ScheduleViews::setTeaching);
    connect(tour_panel_, &TourPanel::finished, tour_dock_, &QDockWidget::hide);

    // The teach cursor on the memory chart: a vertical line series on the chart's own axes (the
    // chart scales its axes from its strategies' data, not from this series).
    auto* cursor = new QLineSeries(memory_->chart());
    cursor->setName(QStringLiteral("teach mode"));
    QPen pen(QColor(0xe0, 0x3a, 0x1e), 1.6, Qt::DashLine);
    cursor->setPen(pen);
    memory_->chart()->addSeries(cursor);
    cursor->attachAxis(memory_->timeAxis());
    cursor->attachAxis(memory_->bytesAxis());
    for (QLegendMarker* m : memory_->chart()->legend()->markers(cursor)) m->setVisible(false);
    schedule_views_->memory_cursor = [cursor](int, std::optional<double> t) {
        if (!t)
            cursor->clear();
        else
            cursor->replace(QList<QPointF>{{*t, -1e12}, {*t, 1e12}});
    };

    tour_panel_->apply = [this](const TourStep& step) {
        tour_dock_->show();
        auto done = std::make_shared<QMetaObject::Connection>();
        *done = connect(this, &MainWindow::planReady, this, [this, step, done] {
            disconnect(*done);
            const auto results = model_->results();
            auto index_of = [&](int k) {
                if (k < 0 || k >= step.strategies.size()) return -1;
                const QString name = step.strategies[k].section(QLatin1Char(':'), 0, 0);
                for (size_t i = 0; i < results.size(); ++i)
                    if (results[i].name == name && results[i].trace) return int(i);
                return -1;
            };
            const int left = index_of(step.teach_left), right = index_of(step.teach_right);
            if (left >= 0) {
                schedule_views_->setCurrent(left);
                teach_panel_->setStrategies(left, right);
                teach_panel_->seek(teach_position(*results[size_t(left)].trace, step.teach_at));
            }
            showTeachMode(true);
            switch (step.view) {
                case TourView::Memory:
                    charts_->setCurrentIndex(0);
                    break;
                case TourView::Pareto:
                    charts_->setCurrentIndex(1);
                    break;
                case TourView::Graph:
                    showScheduleTab(0);
                    break;
                case TourView::Matrix:
                    showScheduleTab(1);
                    break;
                case TourView::Residuals:
                    showScheduleTab(2);
                    break;
            }
        });
        setNetworkSpec(step.network);
        setStrategies(step.strategies);
    };

    // Menus.
    QMenu* file = find_menu(menuBar(), QStringLiteral("&File"));
    QAction* quit = find_action(file, QStringLiteral("&Quit"));
    if (file) {
        auto* save = new QAction(QStringLiteral("&Save session…"), this);
        save->setShortcut(QKeySequence::Save);
        save->setToolTip(QStringLiteral(
            "Save the network, strategies, settings and results to reopen exactly (Ctrl+S)"));
        connect(save, &QAction::triggered, this, &MainWindow::saveSessionDialog);
        auto* open = new QAction(QStringLiteral("Open sess&ion…"), this);
        open->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+O")));
        open->setToolTip(QStringLiteral("Reopen a saved session (Ctrl+Shift+O)"));
        connect(open, &QAction::triggered, this, &MainWindow::openSessionDialog);
        auto* net = new QAction(QStringLiteral("Export &network…"), this);
        net->setToolTip(QStringLiteral("Save the network as Graphviz DOT or RematLab JSON"));
        connect(net, &QAction::triggered, this, &MainWindow::exportNetworkDialog);
        auto* sched = new QAction(QStringLiteral("Export sc&hedule…"), this);
        sched->setToolTip(QStringLiteral(
            "Save the selected strategy's schedule as JSON, or its matrix as an image or CSV"));
        connect(sched, &QAction::triggered, this, &MainWindow::exportScheduleDialog);
        QAction* before = quit ? quit : nullptr;
        file->insertActions(before, {save, open});
        file->insertSeparator(before);
        file->insertActions(before, {net, sched});
        file->insertSeparator(before);
    }
    if (QMenu* view = find_menu(menuBar(), QStringLiteral("&View"))) {
        view->addSeparator();
        const char* names[] = {"&Graph", "Schedule &matrix", "Saved r&esiduals"};
        for (int i = 0; i < 3; ++i) {
            auto* a = view->addAction(QString::fromUtf8(names[i]), this,
                                      [this, i] { showScheduleTab(i); });
            a->setShortcut(QKeySequence(QStringLiteral("Ctrl+%1").arg(3 + i)));
        }
        QAction* teach = teach_dock_->toggleViewAction();
        teach->setText(QStringLiteral("&Teach mode"));
        teach->setShortcut(QKeySequence(QStringLiteral("Ctrl+T")));
        teach->setToolTip(
            QStringLiteral("Step through a schedule with a sentence per instruction"));
        view->addAction(teach);
    }
    if (QMenu* help = find_menu(menuBar(), QStringLiteral("&Help"))) {
        auto* menu = new QMenu(QStringLiteral("Guided &tours"), help);
        for (size_t i = 0; i < tours().size(); ++i)
            menu->addAction(tours()[i].title, this, [this, i] { startTour(int(i)); });
        help->insertMenu(help->actions().isEmpty() ? nullptr : help->actions().front(), menu);
        help->insertSeparator(help->actions().size() > 1 ? help->actions()[1] : nullptr);
    }
}

void MainWindow::showTeachMode(bool on) {
    teach_dock_->setVisible(on);
    schedule_views_->setTeaching(on);
}

void MainWindow::showScheduleTab(int which) {
    QWidget* pages[] = {graph_view_, matrix_view_, residuals_panel_};
    if (which >= 0 && which < 3) charts_->setCurrentWidget(pages[which]);
}

void MainWindow::startTour(int tour) {
    tour_dock_->show();
    tour_panel_->start(tour);
}

// ---- sessions and exports ----------------------------------------------------------------------

QString MainWindow::saveSession(const QString& path) const {
    try {
        Session s;
        s.network_spec = network_.spec;
        for (const StrategyResult& r : model_->results())
            if (r.trace) {
                s.graph = r.trace->graph;
                break;
            }
        if (!s.graph)
            s.graph = std::make_shared<const Graph>(load_network(networkSpec().toStdString()));
        s.strategies = strategySpecs();
        s.budget = budget();
        s.threads = threads_->value();
        s.cap = cap_->text();
        s.results = model_->results();
        s.baseline_ms = baseline_ms_;
        save_session(path, s);
        return {};
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
}

QString MainWindow::openSession(const QString& path) {
    Session s;
    try {
        s = load_session(path);
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
    pending_session_ = std::make_shared<Session>(std::move(s));
    detached_session_.reset();
    missing_network_.clear();
    const Session& p = *pending_session_;
    if (is_file_spec(p.network_spec) && !QFileInfo::exists(p.network_spec)) {
        restoreSessionWithoutNetwork(
            p.network_spec,
            QStringLiteral("was not found: it has been moved, renamed or deleted since the "
                           "session was saved"));
        return {};
    }
    setNetworkSpec(p.network_spec);
    setStrategies(p.strategies);
    setThreads(p.threads);
    setCap(p.cap);
    setBudget(p.budget);
    status_label_->setText(QStringLiteral("Opening session %1…").arg(path));
    return {};
}

bool MainWindow::applyPendingSession() {
    if (!pending_session_) return false;
    const auto s = std::move(pending_session_);
    pending_session_.reset();
    if (network_ready_ && s->graph && s->graph->num_nodes() != network_.nodes) {
        // A located file that is another network: the saved plans do not fit it. Said after
        // onPlanAvailable has shown the new plan (which dismisses older messages).
        const QString text =
            QStringLiteral(
                "<b>%1</b> is not the network the session was saved with (%2 nodes, "
                "not %3): its strategies were planned anew and the saved results "
                "are not shown.")
                .arg(network_.spec.toHtmlEscaped())
                .arg(network_.nodes)
                .arg(s->graph->num_nodes());
        QTimer::singleShot(
            0, this, [this, text] { message_->showMessage(MessageWidget::Kind::Warning, text); });
        return false;
    }
    model_->setResults(s->results, s->baseline_ms);
    memory_->setResults(s->results);
    memory_->setBudget(s->budget);
    baseline_ms_ = s->baseline_ms;
    status_label_->setText(QStringLiteral("Opened a session: %1 strateg%2 on %3, as saved")
                               .arg(s->results.size())
                               .arg(s->results.size() == 1 ? "y" : "ies")
                               .arg(s->network_spec));
    emit planReady();
    return true;
}

void MainWindow::restoreSessionWithoutNetwork(const QString& path, const QString& reason) {
    if (!pending_session_) return;
    detached_session_ = pending_session_;
    missing_network_ = path;
    // Nothing may plan or load over the saved results: no network is ready until one is located.
    network_timer_.stop();
    plan_timer_.stop();
    network_job_ = plan_job_ = 0;
    run_when_ready_ = false;
    network_ready_ = false;
    file_spec_ = path;
    sweeps_.clear();
    pareto_->setSweeps({});
    const Session& p = *detached_session_;
    setStrategies(p.strategies);
    setThreads(p.threads);
    setCap(p.cap);
    setBudget(p.budget);  // kept pending: applied when a network loads
    applyPendingSession();
    const QString name = p.graph ? QString::fromStdString(p.graph->name()) : QString();
    summary_->setText(
        QStringLiteral("<span style='color:#b9770e'>Network file missing</span>"
                       "<br><i>%1</i><br>showing the copy saved in the session%2")
            .arg(path.toHtmlEscaped(),
                 name.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(name.toHtmlEscaped())));
    setWindowTitle(QStringLiteral("%1 (missing) — RematLab").arg(path));
    message_->showMessage(
        MessageWidget::Kind::Warning,
        QStringLiteral("The session's network file <b>%1</b> %2. Everything else was restored — "
                       "the strategies, settings and saved results, drawn from the copy of the "
                       "network kept in the session. Locate the file to plan or run again.")
            .arg(path.toHtmlEscaped(), reason.toHtmlEscaped()),
        QStringLiteral("Locate…"), [this] { locateNetworkDialog(); });
    status_label_->setText(
        QStringLiteral("Opened a session; its network file %1 is missing").arg(path));
}

void MainWindow::locateNetworkDialog() {
    const QString missing = missing_network_;
    QString dir = QFileInfo(missing).absolutePath();
    while (!dir.isEmpty() && !QFileInfo(dir).isDir() && QFileInfo(dir).absolutePath() != dir)
        dir = QFileInfo(dir).absolutePath();
    const QString found = QFileDialog::getOpenFileName(
        this, QStringLiteral("Locate %1").arg(QFileInfo(missing).fileName()),
        QDir(dir).filePath(QFileInfo(missing).fileName()),
        QStringLiteral("Networks (*.json *.onnx);;All files (*)"));
    if (!found.isEmpty()) locateNetwork(found);
}

void MainWindow::locateNetwork(const QString& path) {
    if (detached_session_) pending_session_ = detached_session_;  // shown again once it loads
    detached_session_.reset();
    missing_network_.clear();
    message_->dismiss();
    openFile(path);
}

void MainWindow::saveSessionDialog() {
    const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Save session"),
                                                      QStringLiteral("session.rematlab.json"),
                                                      QStringLiteral("RematLab session (*.json)"));
    if (path.isEmpty()) return;
    const QString err = saveSession(path);
    if (err.isEmpty())
        status_label_->setText(QStringLiteral("Saved the session to %1").arg(path));
    else
        message_->showMessage(MessageWidget::Kind::Error, err.toHtmlEscaped());
}

void MainWindow::openSessionDialog() {
    const QString path =
        QFileDialog::getOpenFileName(this, QStringLiteral("Open session"), QString(),
                                     QStringLiteral("RematLab session (*.json);;All files (*)"));
    if (path.isEmpty()) return;
    const QString err = openSession(path);
    if (!err.isEmpty()) message_->showMessage(MessageWidget::Kind::Error, err.toHtmlEscaped());
}

void MainWindow::exportNetworkDialog() {
    const QString path = QFileDialog::getSaveFileName(
        this, QStringLiteral("Export network"), QStringLiteral("network.dot"),
        QStringLiteral("Graphviz DOT (*.dot);;RematLab network JSON (*.json)"));
    if (path.isEmpty()) return;
    try {
        const ScheduleTrace* t = graph_view_->trace();
        if (t)
            export_network(*t->graph, path);
        else
            export_network(load_network(networkSpec().toStdString()), path);
        status_label_->setText(QStringLiteral("Exported the network to %1").arg(path));
    } catch (const std::exception& e) {
        message_->showMessage(MessageWidget::Kind::Error,
                              QString::fromUtf8(e.what()).toHtmlEscaped());
    }
}

void MainWindow::exportScheduleDialog() {
    const auto trace = graph_view_->traceShared();
    if (!trace) {
        message_->showMessage(MessageWidget::Kind::Warning,
                              QStringLiteral("Plan a strategy first: there is no schedule yet."));
        return;
    }
    const QString path = QFileDialog::getSaveFileName(
        this, QStringLiteral("Export schedule"), QStringLiteral("schedule.json"),
        QStringLiteral("Schedule JSON (*.json);;Matrix image (*.png *.svg *.pdf);;"
                       "Matrix CSV (*.csv)"));
    if (path.isEmpty()) return;
    QString err;
    try {
        if (path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive))
            export_schedule(*trace, path);
        else
            err = export_schedule_matrix(trace, path, QSize(1600, 900));
    } catch (const std::exception& e) {
        err = QString::fromUtf8(e.what());
    }
    if (err.isEmpty())
        status_label_->setText(QStringLiteral("Exported the schedule to %1").arg(path));
    else
        message_->showMessage(MessageWidget::Kind::Error, err.toHtmlEscaped());
}

}  // namespace rl::ui
