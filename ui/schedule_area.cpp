#include "ui/schedule_area.h"

#include <QAction>
#include <QDockWidget>
#include <QInputDialog>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMainWindow>
#include <QMenu>
#include <QMessageBox>
#include <QValueAxis>

#include "ui/graph_view.h"
#include "ui/memory_chart.h"
#include "ui/memory_profiler.h"
#include "ui/residuals_panel.h"
#include "ui/results_area.h"
#include "ui/results_model.h"
#include "ui/schedule_matrix.h"
#include "ui/schedule_trace.h"
#include "ui/schedule_views.h"
#include "ui/teach_panel.h"
#include "ui/tours.h"

namespace rl::ui {

namespace {

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

ScheduleArea::ScheduleArea(ResultsArea* results, QMainWindow* window)
    : QObject(window), results_(results) {
    graph_view_ = new GraphView;
    matrix_view_ = new ScheduleMatrixView;
    residuals_panel_ = new ResidualsPanel;
    teach_panel_ = new TeachPanel;
    results_->addPage(
        graph_view_, QStringLiteral("Graph"),
        QStringLiteral(
            "The network laid out by Graphviz, coloured by what the selected strategy does with "
            "each output: kept, recomputed, freed early (Ctrl+3). Wheel: zoom; drag: pan; click: "
            "select"));
    results_->addPage(
        matrix_view_, QStringLiteral("Schedule matrix"),
        QStringLiteral(
            "Checkmate-style matrix: rows are the forward and each backward step, columns nodes "
            "(Ctrl+4)"));
    results_->addPage(
        residuals_panel_, QStringLiteral("Saved residuals"),
        QStringLiteral(
            "What the selected strategy keeps for the backward, like JAX's print_saved_residuals "
            "(Ctrl+5)"));

    addMemoryProfiler();

    teach_dock_ = new QDockWidget(QStringLiteral("Teach mode"), window);
    teach_dock_->setObjectName(QStringLiteral("teachDock"));
    teach_dock_->setWidget(teach_panel_);
    window->addDockWidget(Qt::BottomDockWidgetArea, teach_dock_);
    teach_dock_->hide();

    tour_panel_ = new TourPanel;
    tour_dock_ = new QDockWidget(QStringLiteral("Guided tour"), window);
    tour_dock_->setObjectName(QStringLiteral("tourDock"));
    tour_dock_->setWidget(tour_panel_);
    tour_dock_->setMinimumWidth(320);
    window->addDockWidget(Qt::RightDockWidgetArea, tour_dock_);
    tour_dock_->hide();

    schedule_views_ =
        new ScheduleViews(graph_view_, matrix_view_, residuals_panel_, teach_panel_, this);
    ResultsModel* model = results_->model();
    auto sync = [this, model] { schedule_views_->setResults(model->results()); };
    connect(model, &QAbstractItemModel::modelReset, this, sync);
    connect(model, &QAbstractItemModel::dataChanged, this, sync);
    connect(model, &QAbstractItemModel::rowsInserted, this, sync);
    connect(results_, &ResultsArea::currentRowChanged, schedule_views_, &ScheduleViews::setCurrent);
    MemoryChart* memory = results_->memoryChart();
    schedule_views_->setMemoryChart(memory);
    connect(teach_dock_, &QDockWidget::visibilityChanged, schedule_views_,
            &ScheduleViews::setTeaching);
    connect(tour_panel_, &TourPanel::finished, tour_dock_, &QDockWidget::hide);

    // The teach cursor on the memory chart: a vertical line series on the chart's own axes (the
    // chart scales its axes from its strategies' data, not from this series).
    auto* cursor = new QLineSeries(memory->chart());
    cursor->setName(QStringLiteral("teach mode"));
    QPen pen(QColor(0xe0, 0x3a, 0x1e), 1.6, Qt::DashLine);
    cursor->setPen(pen);
    memory->chart()->addSeries(cursor);
    cursor->attachAxis(memory->timeAxis());
    cursor->attachAxis(memory->bytesAxis());
    for (QLegendMarker* m : memory->chart()->legend()->markers(cursor)) m->setVisible(false);
    schedule_views_->memory_cursor = [cursor](int, std::optional<double> t) {
        if (!t)
            cursor->clear();
        else
            cursor->replace(QList<QPointF>{{*t, -1e12}, {*t, 1e12}});
    };

    tour_panel_->apply = [this](const TourStep& step) {
        tour_dock_->show();
        emit tourStepRequested(step);
    };

    const char* names[] = {"&Graph", "Schedule &matrix", "Saved r&esiduals"};
    for (int i = 0; i < 3; ++i) {
        auto* a = new QAction(QString::fromUtf8(names[i]), this);
        a->setShortcut(QKeySequence(QStringLiteral("Ctrl+%1").arg(3 + i)));
        connect(a, &QAction::triggered, this, [this, i] { showScheduleTab(i); });
        view_actions_ << a;
    }
    QAction* teach = teach_dock_->toggleViewAction();
    teach->setText(QStringLiteral("&Teach mode"));
    teach->setShortcut(QKeySequence(QStringLiteral("Ctrl+T")));
    teach->setToolTip(QStringLiteral("Step through a schedule with a sentence per instruction"));
    view_actions_ << teach;
    addFindNode(window);

    tours_menu_ = new QMenu(QStringLiteral("Guided &tours"), window);
    for (size_t i = 0; i < tours().size(); ++i)
        tours_menu_->addAction(tours()[i].title, this, [this, i] { startTour(int(i)); });
}

// The memory-profiler page (stacked categories, live set, peak diff) follows the results and the
// strategy chosen in the table.
void ScheduleArea::addMemoryProfiler() {
    memory_profiler_ = new MemoryProfilerPage;
    results_->addPage(
        memory_profiler_, QStringLiteral("Memory breakdown"),
        QStringLiteral("Live memory stacked by category; click a time for the live set there"));
    ResultsModel* model = results_->model();
    auto sync = [this, model] { memory_profiler_->setResults(model->results()); };
    connect(model, &QAbstractItemModel::modelReset, this, sync);
    connect(model, &QAbstractItemModel::dataChanged, this, sync);
    connect(model, &QAbstractItemModel::rowsInserted, this, sync);
    connect(results_, &ResultsArea::currentRowChanged, memory_profiler_,
            &MemoryProfilerPage::setCurrent);
}

// Edit › Find node (Ctrl+F): a name, completed from the network's nodes, selects that node in
// the graph, the matrix, the residuals, teach mode and the memory chart.
void ScheduleArea::addFindNode(QMainWindow* window) {
    auto* find = new QAction(QStringLiteral("&Find node…"), this);
    find->setShortcut(QKeySequence::Find);
    find->setToolTip(QStringLiteral("Select a node by name in every view (Ctrl+F)"));
    connect(find, &QAction::triggered, this, [this, window] {
        const QStringList names = schedule_views_->nodeNames();
        if (names.isEmpty()) return;
        bool ok = false;
        const QString name = QInputDialog::getItem(window, QStringLiteral("Find node"),
                                                   QStringLiteral("Node name (or part of it):"),
                                                   names, 0, true, &ok);
        if (!ok) return;
        if (!schedule_views_->selectByName(name))
            QMessageBox::information(
                window, QStringLiteral("Find node"),
                QStringLiteral("No single node's name contains \"%1\"; pick one from the list.")
                    .arg(name));
    });
    view_actions_ << find;
}

void ScheduleArea::showTeachMode(bool on) {
    teach_dock_->setVisible(on);
    schedule_views_->setTeaching(on);
}

bool ScheduleArea::teachModeShown() const {
    return !teach_dock_->isHidden();
}

void ScheduleArea::showScheduleTab(int which) {
    QWidget* pages[] = {graph_view_, matrix_view_, residuals_panel_};
    if (which >= 0 && which < 3) results_->showPage(pages[which]);
}

void ScheduleArea::startTour(int tour) {
    tour_dock_->show();
    tour_panel_->start(tour);
}

void ScheduleArea::showTourStep(const TourStep& step, const NetworkSummary& network,
                                const std::vector<StrategyResult>& results) {
    tour_panel_->showFigures(TourShown{network, results, nullptr});
    auto index_of = [&](int k) {
        if (k < 0 || k >= step.strategies.size()) return -1;
        const int i = tour_row(results, step.strategies[k]);
        return i >= 0 && results[size_t(i)].trace ? i : -1;
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
            results_->showPage(ResultsArea::MemoryTab);
            break;
        case TourView::Pareto:
            results_->showPage(ResultsArea::ParetoTab);
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
}

}  // namespace rl::ui
