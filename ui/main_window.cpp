#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSlider>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QThread>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <functional>

#include "engine/backend.h"
#include "engine/networks/presets.h"
#include "engine/units.h"
#include "strategies/strategy.h"
#include "ui/evaluation.h"
#include "ui/graph_view.h"
#include "ui/memory_chart.h"
#include "ui/palette.h"
#include "ui/param_form.h"
#include "ui/pareto_chart.h"
#include "ui/qt_text.h"
#include "ui/results_model.h"

namespace rl::ui {

namespace {

// Calls back when the watched widget is resized.
class ResizeWatcher : public QObject {
  public:
    ResizeWatcher(QObject* parent, std::function<void()> f) : QObject(parent), f_(std::move(f)) {}
    bool eventFilter(QObject* o, QEvent* e) override {
        if (e->type() == QEvent::Resize) f_();
        return QObject::eventFilter(o, e);
    }

  private:
    std::function<void()> f_;
};

// The default network and strategies: activations dominate parameters, so checkpointing shows.
const char* const kDefaultPreset = "mlp";
const std::vector<std::pair<std::string, std::string>> kDefaultPresetArgs = {
    {"depth", "32"}, {"width", "256"}, {"batch", "1024"}};
const QStringList kDefaultStrategies = {QStringLiteral("none"), QStringLiteral("sqrt-n"),
                                        QStringLiteral("periodic")};
constexpr int kSliderSteps = 1000;
constexpr int kMaxRecent = 8;

QString flops_text(double f) {
    const char* units[] = {"", "K", "M", "G", "T", "P"};
    int i = 0;
    while (f >= 1000 && i < 5) f /= 1000, ++i;
    return QStringLiteral("%1 %2FLOP").arg(f, 0, 'f', f < 10 ? 2 : 1).arg(QLatin1String(units[i]));
}

// A budget that prints exactly as it parses: "21.3MiB" (the slider snaps to it).
uint64_t round_budget(uint64_t bytes) {
    std::string s = format_bytes(bytes);
    s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
    try {
        return parse_bytes(s);
    } catch (const std::exception&) {
        return bytes;
    }
}

QString budget_arg(uint64_t bytes) {
    std::string s = format_bytes(bytes);
    s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
    try {
        if (parse_bytes(s) == bytes) return QString::fromStdString(s);
    } catch (const std::exception&) {
    }
    return QString::number(bytes);
}

}  // namespace

MainWindow::MainWindow(bool restore_settings, QWidget* parent)
    : QMainWindow(parent), restore_(restore_settings) {
    setWindowTitle(QStringLiteral("RematLab"));
    setObjectName(QStringLiteral("RematLabMainWindow"));
    controller_ = new RunController(this);
    model_ = new ResultsModel(this);

    buildCentral();
    auto* setup = new QWidget;
    auto* column = new QVBoxLayout(setup);
    column->setContentsMargins(8, 8, 8, 8);
    column->setSpacing(10);
    column->addWidget(buildNetworkPanel());
    column->addWidget(buildStrategyPanel());
    column->addWidget(buildRunPanel());
    column->addStretch(1);
    auto* scroll = new QScrollArea;
    scroll->setWidget(setup);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    auto* dock = new QDockWidget(QStringLiteral("Setup"), this);
    dock->setObjectName(QStringLiteral("setupDock"));
    dock->setWidget(scroll);
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
    dock->setMinimumWidth(330);
    addDockWidget(Qt::LeftDockWidgetArea, dock);
    buildActions();
    buildScheduleViews();

    status_label_ = new QLabel(QStringLiteral("Ready"));
    status_label_->setToolTip(QStringLiteral("What RematLab is doing"));
    progress_ = new QProgressBar;
    progress_->setRange(0, kSliderSteps);
    progress_->setMaximumWidth(260);
    progress_->setTextVisible(false);
    progress_->setToolTip(QStringLiteral("Progress of the run over every ticked strategy"));
    progress_->hide();
    statusBar()->addWidget(status_label_, 1);
    statusBar()->addPermanentWidget(progress_);

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

// ---- building the window -----------------------------------------------------------------

void MainWindow::buildCentral() {
    memory_ = new MemoryChart;
    pareto_ = new ParetoChart;
    pareto_->setModel(model_);

    auto* memory_page = new QWidget;
    auto* memory_layout = new QVBoxLayout(memory_page);
    memory_layout->setContentsMargins(0, 0, 0, 0);
    memory_layout->setSpacing(2);
    auto* toggles = new QHBoxLayout;
    toggles->setContentsMargins(8, 4, 8, 0);
    show_measured_ = new QCheckBox(QStringLiteral("Measured (solid)"));
    show_measured_->setChecked(true);
    show_measured_->setToolTip(
        QStringLiteral("Show the timelines the tracking allocator measured"));
    show_predicted_ = new QCheckBox(QStringLiteral("Predicted (dashed)"));
    show_predicted_->setChecked(true);
    show_predicted_->setToolTip(QStringLiteral("Show the timelines the simulator predicted"));
    auto* hint = new QLabel(
        QStringLiteral("drag to zoom · double-click to reset · hover for the instruction"));
    hint->setStyleSheet(QStringLiteral("color: #777;"));
    hint->setToolTip(memory_->toolTip());
    toggles->addWidget(show_measured_);
    toggles->addWidget(show_predicted_);
    toggles->addStretch(1);
    toggles->addWidget(hint);
    memory_layout->addLayout(toggles);
    memory_layout->addWidget(memory_, 1);
    connect(show_measured_, &QCheckBox::toggled, memory_, &MemoryChart::setShowMeasured);
    connect(show_predicted_, &QCheckBox::toggled, memory_, &MemoryChart::setShowPredicted);

    charts_ = new QTabWidget;
    charts_->setDocumentMode(true);
    charts_->addTab(memory_page, QStringLiteral("Memory timeline"));
    charts_->addTab(buildParetoPage(), QStringLiteral("Pareto: memory vs recompute"));
    charts_->setTabToolTip(0, QStringLiteral("Live memory over one training step (Ctrl+1)"));
    charts_->setTabToolTip(1, QStringLiteral("Peak memory against recompute time (Ctrl+2)"));

    proxy_ = new QSortFilterProxyModel(this);
    proxy_->setSourceModel(model_);
    proxy_->setSortRole(ResultsModel::SortRole);
    table_ = new QTableView;
    table_->setModel(proxy_);
    table_->setSortingEnabled(true);
    table_->sortByColumn(-1, Qt::AscendingOrder);
    table_->setAlternatingRowColors(true);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->verticalHeader()->hide();
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->horizontalHeader()->setMinimumSectionSize(48);
    table_->verticalHeader()->setDefaultSectionSize(24);
    // Fit the columns to their figures when rows change; the user may resize them after.
    auto fit = [this] { fitTableColumns(); };
    connect(model_, &QAbstractItemModel::modelReset, table_, fit);
    connect(model_, &QAbstractItemModel::rowsInserted, table_, fit);
    table_->viewport()->installEventFilter(new ResizeWatcher(table_->viewport(), fit));
    table_->setWordWrap(false);
    table_->setTextElideMode(Qt::ElideMiddle);
    table_->setToolTip(QStringLiteral(
        "One row per strategy: measured figures after a run, predicted ones (grey) before. "
        "Click a header to sort; Ctrl+C copies the selected rows as CSV."));

    splitter_ = new QSplitter(Qt::Vertical);
    splitter_->addWidget(charts_);
    splitter_->addWidget(table_);
    splitter_->setStretchFactor(0, 3);
    splitter_->setStretchFactor(1, 1);
    splitter_->setSizes({600, 220});

    message_ = new MessageWidget;
    auto* central = new QWidget;
    auto* v = new QVBoxLayout(central);
    v->setContentsMargins(6, 6, 6, 0);
    v->setSpacing(6);
    v->addWidget(message_);
    v->addWidget(splitter_, 1);
    setCentralWidget(central);
}

QWidget* MainWindow::buildParetoPage() {
    auto* page = new QWidget;
    auto* layout = new QVBoxLayout(page);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(2);
    auto* row = new QHBoxLayout;
    row->setContentsMargins(8, 4, 8, 0);
    sweep_button_ = new QPushButton(QStringLiteral("Sweep"));
    sweep_button_->setToolTip(QStringLiteral(
        "Trace each ticked strategy's memory / recompute curve — budgeted ones over budgets from "
        "the smallest they can meet to plain backprop's peak, the others over their own range — "
        "and the optimal frontier (Ctrl+Shift+R)"));
    sweep_points_ = new QSpinBox;
    sweep_points_->setRange(2, 60);
    sweep_points_->setValue(12);
    sweep_points_->setSuffix(QStringLiteral(" budgets"));
    sweep_points_->setToolTip(QStringLiteral("Points of each budget sweep"));
    sweep_execute_ = new QCheckBox(QStringLiteral("Run each point (measured)"));
    sweep_execute_->setToolTip(QStringLiteral(
        "Also execute every point of the sweep and draw the measured curve (slower); predicted "
        "points are always drawn"));
    sweep_clear_ = new QPushButton(QStringLiteral("Clear"));
    sweep_clear_->setToolTip(QStringLiteral("Remove the sweep curves"));
    auto* hint = new QLabel(QStringLiteral("dashed: predicted · solid: measured · hover a point"));
    hint->setStyleSheet(QStringLiteral("color: #777;"));
    row->addWidget(sweep_button_);
    row->addWidget(sweep_points_);
    row->addWidget(sweep_execute_);
    row->addWidget(sweep_clear_);
    row->addStretch(1);
    row->addWidget(hint);
    layout->addLayout(row);
    layout->addWidget(pareto_, 1);
    connect(sweep_button_, &QPushButton::clicked, this, &MainWindow::startSweep);
    connect(sweep_clear_, &QPushButton::clicked, this, [this] {
        sweeps_.clear();
        pareto_->setSweeps({});
    });
    return page;
}

void MainWindow::fitTableColumns() {
    table_->resizeColumnsToContents();
    // The figures up to "Grads = none" must be in view: when they are not, the strategy and
    // status columns give way (their text elides in the middle; tooltips have all of it). Solve
    // time and budget may scroll.
    const QHeaderView* h = table_->horizontalHeader();
    int needed = 0;
    for (int v = 0; v <= h->visualIndex(ResultsModel::GradsEqual); ++v)
        needed += h->sectionSize(h->logicalIndex(v));
    int excess = needed - table_->viewport()->width();
    for (const auto& [column, least] :
         {std::pair{int(ResultsModel::Strategy), 110}, std::pair{int(ResultsModel::Status), 80}}) {
        if (excess <= 0) break;
        const int width = h->sectionSize(column);
        const int narrower = std::max(std::min(least, width), width - excess);
        table_->setColumnWidth(column, narrower);
        excess -= width - narrower;
    }
}

QWidget* MainWindow::buildNetworkPanel() {
    auto* group = new QGroupBox(QStringLiteral("Network"));
    auto* v = new QVBoxLayout(group);
    auto* row = new QHBoxLayout;
    preset_ = new QComboBox;
    preset_->setToolTip(QStringLiteral("A built-in network; its parameters are below"));
    preset_forms_ = new QStackedWidget;
    for (const PresetInfo& p : presets()) {
        preset_->addItem(to_qstring(p.name), to_qstring(p.name));
        preset_->setItemData(preset_->count() - 1, to_qstring(p.about), Qt::ToolTipRole);
        auto* form = new ParamForm(p.schema);
        preset_forms_->addWidget(form);
        preset_param_forms_.push_back(form);
        connect(form, &ParamForm::changed, this, [this] {
            if (!suppress_) {
                file_spec_.clear();
                scheduleNetworkLoad(300);
            }
        });
    }
    open_button_ = new QPushButton(QStringLiteral("Open…"));
    open_button_->setToolTip(
        QStringLiteral("Open a network file in RematLab's JSON format (Ctrl+O)"));
    row->addWidget(preset_, 1);
    row->addWidget(open_button_);
    v->addLayout(row);
    v->addWidget(preset_forms_);
    summary_ = new QLabel(QStringLiteral("Loading…"));
    summary_->setWordWrap(true);
    summary_->setTextFormat(Qt::RichText);
    summary_->setToolTip(QStringLiteral("Size of the loaded network"));
    summary_->setStyleSheet(QStringLiteral("color: #444;"));
    v->addWidget(summary_);
    // The stack takes the height of the current form only, not of the tallest one.
    connect(preset_forms_, &QStackedWidget::currentChanged, this, [this](int i) {
        for (int k = 0; k < preset_forms_->count(); ++k)
            preset_forms_->widget(k)->setSizePolicy(
                QSizePolicy::Preferred, k == i ? QSizePolicy::Preferred : QSizePolicy::Ignored);
        preset_forms_->adjustSize();
    });
    connect(preset_, &QComboBox::currentIndexChanged, this, [this](int i) {
        if (i >= 0 && i < preset_forms_->count()) preset_forms_->setCurrentIndex(i);
        if (!suppress_) {
            file_spec_.clear();
            scheduleNetworkLoad(0);
        }
    });
    connect(open_button_, &QPushButton::clicked, this, &MainWindow::openDialog);
    // Defaults.
    suppress_ = true;
    const int def = preset_->findData(QString::fromLatin1(kDefaultPreset));
    if (def >= 0) {
        preset_->setCurrentIndex(def);
        preset_forms_->setCurrentIndex(def);
        preset_param_forms_[static_cast<size_t>(def)]->setArgs(kDefaultPresetArgs);
    }
    emit preset_forms_->currentChanged(preset_forms_->currentIndex());
    suppress_ = false;
    return group;
}

QWidget* MainWindow::buildStrategyPanel() {
    auto* group = new QGroupBox(QStringLiteral("Strategies"));
    auto* v = new QVBoxLayout(group);
    v->setSpacing(4);
    strategy_layout_ = v;
    for (const Strategy* s : strategies()) addStrategyBox(*s, false);
    for (const auto& sb : strategy_boxes_)
        sb->check->setChecked(kDefaultStrategies.contains(sb->name));

    budget_box_ = new QGroupBox(QStringLiteral("Memory budget"));
    budget_box_->setCheckable(true);
    budget_box_->setChecked(true);
    budget_box_->setToolTip(QStringLiteral(
        "The byte budget given to every budgeted strategy; the plan follows the slider as it "
        "moves. Untick to plan budgeted strategies without a budget."));
    auto* bv = new QVBoxLayout(budget_box_);
    budget_slider_ = new QSlider(Qt::Horizontal);
    budget_slider_->setRange(0, kSliderSteps);
    budget_slider_->setValue(kSliderSteps / 2);
    budget_slider_->setToolTip(QStringLiteral(
        "Budget from the always-live bytes (parameters and inputs) up to plain backprop's peak"));
    budget_label_ = new QLabel;
    budget_label_->setToolTip(budget_slider_->toolTip());
    bv->addWidget(budget_slider_);
    bv->addWidget(budget_label_);
    v->addWidget(budget_box_);
    connect(budget_slider_, &QSlider::valueChanged, this, [this] {
        updateBudgetLabel();
        if (!suppress_) schedulePlan();
    });
    connect(budget_box_, &QGroupBox::toggled, this, [this] {
        if (!suppress_) schedulePlan();
    });
    updateBudgetLabel();
    return group;
}

Spec MainWindow::StrategyBox::spec() const {
    return Spec{name.toStdString(), form ? form->args() : decltype(Spec::args){}};
}

MainWindow::StrategyBox* MainWindow::addStrategyBox(const Strategy& s, bool copy) {
    auto owned = std::make_unique<StrategyBox>();
    StrategyBox* sb = owned.get();
    sb->name = to_qstring(s.name());
    sb->budgeted = takes_budget(s);
    sb->copy = copy;
    sb->frame = new QWidget;
    const int n = strategyBoxCount(sb->name);
    sb->frame->setObjectName(QStringLiteral("strategy:") + sb->name +
                             (copy ? QStringLiteral("#%1").arg(n + 1) : QString()));
    auto* col = new QVBoxLayout(sb->frame);
    col->setContentsMargins(0, 0, 0, 0);
    col->setSpacing(2);
    auto* head = new QHBoxLayout;
    head->setContentsMargins(0, 0, 0, 0);
    sb->check =
        new QCheckBox(sb->name + (sb->budgeted ? QStringLiteral("  · budgeted") : QString()));
    sb->check->setToolTip(
        to_qstring(s.about()) +
        (sb->budgeted ? QStringLiteral("\nIts budget comes from the budget slider.") : QString()));
    head->addWidget(sb->check, 1);
    auto* add = new QToolButton;
    add->setText(QStringLiteral("+"));
    add->setAutoRaise(true);
    add->setObjectName(QStringLiteral("duplicate:") + sb->name);
    add->setToolTip(QStringLiteral("Add another %1 with parameters of its own, to compare "
                                   "instances side by side")
                        .arg(sb->name));
    head->addWidget(add);
    connect(add, &QToolButton::clicked, this, [this, name = sb->name] {
        duplicateStrategy(name);
        schedulePlan();
    });
    if (copy) {
        auto* remove = new QToolButton;
        remove->setText(QStringLiteral("×"));
        remove->setAutoRaise(true);
        remove->setObjectName(QStringLiteral("remove:") + sb->name);
        remove->setToolTip(QStringLiteral("Remove this instance"));
        head->addWidget(remove);
        connect(remove, &QToolButton::clicked, this, [this, sb] {
            removeStrategyBox(sb);
            schedulePlan();
        });
    }
    col->addLayout(head);
    sb->form = new ParamForm(s.schema(), {"budget"});
    if (sb->form->empty()) {
        delete sb->form;
        sb->form = nullptr;
    } else {
        // Indented under its check box; unticked strategies are one row, nothing below.
        sb->form->setContentsMargins(22, 0, 0, 2);
        col->addWidget(sb->form);
        sb->form->setVisible(false);
        connect(sb->form, &ParamForm::changed, this, &MainWindow::schedulePlan);
    }
    connect(sb->check, &QCheckBox::toggled, this, [this, form = sb->form](bool on) {
        if (form) form->setVisible(on);
        if (!suppress_) schedulePlan();
    });
    // After the last instance of the same strategy, in the panel and in the list (which is the
    // order strategies are planned, run and listed in).
    auto after = strategy_boxes_.end();
    for (auto it = strategy_boxes_.begin(); it != strategy_boxes_.end(); ++it)
        if ((*it)->name == sb->name) after = it + 1;
    const int at = after == strategy_boxes_.end() ? strategy_layout_->count()
                                                  : strategy_layout_->indexOf((*after)->frame);
    strategy_layout_->insertWidget(at, sb->frame);
    strategy_boxes_.insert(after, std::move(owned));
    return sb;
}

void MainWindow::removeStrategyBox(StrategyBox* box) {
    auto it = std::find_if(strategy_boxes_.begin(), strategy_boxes_.end(),
                           [box](const auto& p) { return p.get() == box; });
    if (it == strategy_boxes_.end() || !box->copy) return;
    box->frame->hide();
    box->frame->deleteLater();
    strategy_boxes_.erase(it);
}

int MainWindow::duplicateStrategy(const QString& name) {
    const Strategy* found = nullptr;
    for (const Strategy* s : strategies())
        if (to_qstring(s->name()) == name) found = s;
    if (!found) return -1;
    const int index = strategyBoxCount(name);
    StrategyBox* sb = addStrategyBox(*found, true);
    // A copy starts as the instance it copies, ticked, ready to be changed.
    const StrategyBox* source = nullptr;
    for (const auto& other : strategy_boxes_)
        if (other->name == name && other.get() != sb && (!source || other->check->isChecked()))
            source = other.get();
    const bool was = suppress_;
    suppress_ = true;
    if (source && source->form && sb->form) sb->form->setArgs(source->form->args());
    sb->check->setChecked(true);
    suppress_ = was;
    return index;
}

int MainWindow::strategyBoxCount(const QString& name) const {
    return static_cast<int>(std::count_if(strategy_boxes_.begin(), strategy_boxes_.end(),
                                          [&](const auto& sb) { return sb->name == name; }));
}

QWidget* MainWindow::buildRunPanel() {
    auto* group = new QGroupBox(QStringLiteral("Run"));
    auto* form = new QFormLayout(group);
    form->setLabelAlignment(Qt::AlignRight | Qt::AlignVCenter);
    device_ = new QComboBox;
    device_->addItem(QStringLiteral("CPU"));
    device_->addItem(QStringLiteral("GPU (CUDA)"));
    std::string why;
    if (cuda_available(&why)) {
        device_->setToolTip(QStringLiteral(
            "Where the step runs: the CPU, or the GPU with exact device-memory accounting"));
    } else {
        // Disabled, with the reason: no CUDA backend in this build, or no usable GPU.
        device_->setItemData(1, false, Qt::UserRole - 1);
        device_->setItemData(1, to_qstring(why), Qt::ToolTipRole);
        device_->setToolTip(QStringLiteral("Where the step runs; no GPU here: ") + to_qstring(why));
    }
    threads_ = new QSpinBox;
    threads_->setRange(1, std::max(1, QThread::idealThreadCount()));
    threads_->setValue(1);
    threads_->setToolTip(QStringLiteral(
        "CPU threads for the kernels; gradients are bitwise equal across strategies at a fixed "
        "thread count"));
    cap_ = new QLineEdit;
    cap_->setPlaceholderText(QStringLiteral("none (e.g. 32MiB)"));
    cap_->setToolTip(QStringLiteral(
        "Simulate a smaller device: a run that allocates more stops with an error naming the "
        "instruction"));
    form->addRow(QStringLiteral("Device"), device_);
    form->addRow(QStringLiteral("Threads"), threads_);
    form->addRow(QStringLiteral("Memory cap"), cap_);
    auto* buttons = new QHBoxLayout;
    run_button_ = new QPushButton(QStringLiteral("Run"));
    run_button_->setToolTip(
        QStringLiteral("Plan, execute and compare the ticked strategies (Ctrl+R)"));
    run_button_->setDefault(true);
    run_button_->setMinimumHeight(30);
    cancel_button_ = new QPushButton(QStringLiteral("Cancel"));
    cancel_button_->setToolTip(QStringLiteral("Stop the run between two instructions (Esc)"));
    cancel_button_->setMinimumHeight(30);
    buttons->addWidget(run_button_, 2);
    buttons->addWidget(cancel_button_, 1);
    form->addRow(buttons);
    connect(run_button_, &QPushButton::clicked, this, &MainWindow::startRun);
    connect(cancel_button_, &QPushButton::clicked, this, &MainWindow::cancelRun);
    connect(threads_, &QSpinBox::valueChanged, this, [this] {
        if (!suppress_) schedulePlan();
    });
    return group;
}

void MainWindow::buildActions() {
    auto* file = menuBar()->addMenu(QStringLiteral("&File"));
    open_action_ = file->addAction(QStringLiteral("&Open network…"), this, &MainWindow::openDialog);
    open_action_->setShortcut(QKeySequence::Open);
    open_action_->setToolTip(QStringLiteral("Open a network file (Ctrl+O)"));
    recent_menu_ = file->addMenu(QStringLiteral("Open &recent"));
    file->addSeparator();
    export_chart_action_ =
        file->addAction(QStringLiteral("&Export chart…"), this, &MainWindow::exportChartDialog);
    export_chart_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+E")));
    export_chart_action_->setToolTip(QStringLiteral("Save a chart as PNG, SVG or PDF (Ctrl+E)"));
    export_data_action_ =
        file->addAction(QStringLiteral("Export &data…"), this, &MainWindow::exportDataDialog);
    export_data_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+E")));
    export_data_action_->setToolTip(
        QStringLiteral("Save the results as CSV or JSON (Ctrl+Shift+E)"));
    file->addSeparator();
    auto* quit = file->addAction(QStringLiteral("&Quit"), this, &QWidget::close);
    quit->setShortcut(QKeySequence::Quit);

    auto* edit = menuBar()->addMenu(QStringLiteral("&Edit"));
    copy_action_ =
        edit->addAction(QStringLiteral("&Copy results as CSV"), this, &MainWindow::copyCsv);
    copy_action_->setShortcut(QKeySequence::Copy);
    copy_action_->setToolTip(QStringLiteral("Copy the selected rows (or all) as CSV (Ctrl+C)"));

    auto* runm = menuBar()->addMenu(QStringLiteral("&Run"));
    run_action_ = runm->addAction(QStringLiteral("&Run strategies"), this, &MainWindow::startRun);
    run_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+R")));
    run_action_->setToolTip(
        QStringLiteral("Plan, execute and compare the ticked strategies (Ctrl+R)"));
    cancel_action_ = runm->addAction(QStringLiteral("&Cancel"), this, &MainWindow::cancelRun);
    cancel_action_->setShortcut(QKeySequence(Qt::Key_Escape));
    cancel_action_->setToolTip(QStringLiteral("Stop the run (Esc)"));
    sweep_action_ = runm->addAction(QStringLiteral("&Sweep for the Pareto chart"), this,
                                    &MainWindow::startSweep);
    sweep_action_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+R")));
    sweep_action_->setToolTip(QStringLiteral(
        "Trace each ticked strategy's memory / recompute curve and the optimal frontier "
        "(Ctrl+Shift+R)"));

    auto* view = menuBar()->addMenu(QStringLiteral("&View"));
    auto* mem = view->addAction(QStringLiteral("&Memory timeline"), this,
                                [this] { charts_->setCurrentIndex(0); });
    mem->setShortcut(QKeySequence(QStringLiteral("Ctrl+1")));
    auto* par = view->addAction(QStringLiteral("&Pareto chart"), this,
                                [this] { charts_->setCurrentIndex(1); });
    par->setShortcut(QKeySequence(QStringLiteral("Ctrl+2")));
    auto* zoom = view->addAction(QStringLiteral("Reset &zoom"), memory_, &MemoryChart::resetZoom);
    zoom->setShortcut(QKeySequence(QStringLiteral("Ctrl+0")));

    auto* help = menuBar()->addMenu(QStringLiteral("&Help"));
    auto* about_action =
        help->addAction(QStringLiteral("&About RematLab"), this, &MainWindow::about);
    about_action->setShortcut(QKeySequence::HelpContents);
    help->addAction(QStringLiteral("About &Qt"), qApp, &QApplication::aboutQt);

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

QString MainWindow::networkSpec() const {
    if (!file_spec_.isEmpty()) return file_spec_;
    const int i = preset_->currentIndex();
    if (i < 0) return {};
    Spec spec{preset_->currentData().toString().toStdString(),
              preset_param_forms_[static_cast<size_t>(i)]->args()};
    return QString::fromStdString(format_spec(spec));
}

void MainWindow::setNetworkSpec(const QString& spec) {
    const bool file = spec.contains(QLatin1Char('/')) || spec.endsWith(QLatin1String(".json")) ||
                      spec.endsWith(QLatin1String(".onnx"));
    if (file) {
        file_spec_ = spec;
    } else {
        file_spec_.clear();
        suppress_ = true;
        try {
            const Spec parsed = parse_spec(spec.toStdString());
            const int i = preset_->findData(to_qstring(parsed.name));
            if (i < 0) {
                // Let the loader say what is wrong (it lists the presets).
                file_spec_ = spec;
            } else {
                preset_->setCurrentIndex(i);
                preset_forms_->setCurrentIndex(i);
                preset_param_forms_[static_cast<size_t>(i)]->setArgs(parsed.args);
            }
        } catch (const std::exception&) {
            file_spec_ = spec;
        }
        suppress_ = false;
    }
    scheduleNetworkLoad(0);
}

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
    network_timer_.start(delay_ms);
}

void MainWindow::loadNetworkNow() {
    network_timer_.stop();
    loading_spec_ = networkSpec();
    network_ready_ = false;
    summary_->setText(QStringLiteral("Loading <i>%1</i>…").arg(loading_spec_.toHtmlEscaped()));
    status_label_->setText(QStringLiteral("Loading %1…").arg(loading_spec_));
    network_job_ = controller_->loadNetwork(loading_spec_);
}

void MainWindow::onNetworkAvailable(quint64 job, const NetworkSummary& s) {
    if (job != network_job_) return;
    if (s.spec != network_.spec) {
        sweeps_.clear();  // curves of another network
        pareto_->setSweeps({});
    }
    network_ = s;
    network_ready_ = true;
    missing_network_.clear();  // a network is back (located, or another one chosen)
    detached_session_.reset();
    setWindowTitle(QStringLiteral("%1 — RematLab").arg(s.spec));
    if (message_->kind() == MessageWidget::Kind::Error && !message_->text().isEmpty() &&
        message_->text().startsWith(QLatin1String("Cannot load")))
        message_->dismiss();
    updateSummary();
    suppress_ = true;
    if (pending_budget_) {
        setBudget(pending_budget_);
        pending_budget_.reset();
    }
    suppress_ = false;
    updateBudgetLabel();
    status_label_->setText(QStringLiteral("Loaded %1").arg(s.spec));
    emit networkReady();
    if (run_when_ready_) {
        run_when_ready_ = false;
        startRun();
    } else {
        schedulePlan();
    }
}

void MainWindow::updateSummary() {
    const NetworkSummary& s = network_;
    summary_->setText(QStringLiteral("<b>%1</b> — %2 nodes, %3 parameter tensors<br>"
                                     "parameters %4 · activations %5<br>"
                                     "forward %6 · plain backprop peak %7")
                          .arg(s.name.toHtmlEscaped())
                          .arg(s.nodes)
                          .arg(s.params)
                          .arg(bytes_text(s.param_bytes), bytes_text(s.activation_bytes),
                               flops_text(s.forward_flops), bytes_text(s.none_peak_bytes)));
    summary_->setToolTip(QStringLiteral("%1\ninputs %2").arg(s.spec, bytes_text(s.input_bytes)));
}

// ---- strategies and budget -----------------------------------------------------------------

std::optional<uint64_t> MainWindow::sliderBytes() const {
    if (!network_ready_ || network_.none_peak_bytes <= network_.floor_bytes) return std::nullopt;
    const double span = static_cast<double>(network_.none_peak_bytes - network_.floor_bytes);
    const double f = static_cast<double>(budget_slider_->value()) / kSliderSteps;
    return round_budget(network_.floor_bytes + static_cast<uint64_t>(span * f));
}

std::optional<uint64_t> MainWindow::budget() const {
    if (!budget_box_->isChecked()) return std::nullopt;
    return sliderBytes();
}

void MainWindow::setBudget(std::optional<uint64_t> bytes) {
    if (!bytes) {
        budget_box_->setChecked(false);
        return;
    }
    budget_box_->setChecked(true);
    if (!network_ready_) {
        pending_budget_ = bytes;
        return;
    }
    const double lo = static_cast<double>(network_.floor_bytes);
    const double hi = static_cast<double>(network_.none_peak_bytes);
    const double f = hi > lo ? (static_cast<double>(*bytes) - lo) / (hi - lo) : 1.0;
    budget_slider_->setValue(static_cast<int>(std::clamp(f, 0.0, 1.0) * kSliderSteps + 0.5));
}

void MainWindow::updateBudgetLabel() {
    const auto b = sliderBytes();
    if (!b) {
        budget_label_->setText(QStringLiteral("(load a network)"));
        return;
    }
    const double pct =
        100.0 * static_cast<double>(*b) / static_cast<double>(network_.none_peak_bytes);
    budget_label_->setText(QStringLiteral("<b>%1</b> · %2 % of plain backprop's peak")
                               .arg(bytes_text(*b))
                               .arg(pct, 0, 'f', 0));
}

void MainWindow::setStrategies(const QStringList& specs) {
    suppress_ = true;
    // Copies go; every original is unticked; then each spec takes the first free box of its
    // strategy, or a new copy.
    std::vector<StrategyBox*> copies;
    for (const auto& sb : strategy_boxes_)
        if (sb->copy) copies.push_back(sb.get());
    for (StrategyBox* sb : copies) removeStrategyBox(sb);
    for (const auto& sb : strategy_boxes_) sb->check->setChecked(false);
    for (const QString& text : specs) {
        Spec spec;
        try {
            spec = parse_spec(text.toStdString());
        } catch (const std::exception& e) {
            message_->showMessage(
                MessageWidget::Kind::Error,
                QStringLiteral("Bad strategy '%1': %2").arg(text, to_qstring(e.what())));
            continue;
        }
        StrategyBox* box = nullptr;
        bool known = false;
        for (const auto& sb : strategy_boxes_) {
            if (sb->name != to_qstring(spec.name)) continue;
            known = true;
            if (!sb->check->isChecked()) {
                box = sb.get();
                break;
            }
        }
        if (!known) {
            message_->showMessage(
                MessageWidget::Kind::Error,
                QStringLiteral("Unknown strategy '%1'").arg(to_qstring(spec.name)));
            continue;
        }
        if (!box) {
            int index = duplicateStrategy(to_qstring(spec.name));
            for (const auto& sb : strategy_boxes_)
                if (sb->name == to_qstring(spec.name) && index-- == 0) box = sb.get();
        }
        box->check->setChecked(true);
        std::vector<std::pair<std::string, std::string>> args;
        for (const auto& [k, v] : spec.args) {
            if (k == "budget" && box->budgeted) {
                try {
                    setBudget(parse_bytes(v));
                } catch (const std::exception&) {
                }
            } else {
                args.emplace_back(k, v);
            }
        }
        if (box->form) box->form->setArgs(args);
    }
    suppress_ = false;
    schedulePlan();
}

QStringList MainWindow::strategySpecs() const {
    QStringList out;
    const auto b = budget();
    for (const auto& sb : strategy_boxes_) {
        if (!sb->check->isChecked()) continue;
        const Spec spec = sb->spec();
        QString text = QString::fromStdString(format_spec(spec));
        if (sb->budgeted && b)
            text += (spec.args.empty() ? QStringLiteral(":") : QStringLiteral(",")) +
                    QStringLiteral("budget=") + budget_arg(*b);
        if (!out.contains(text)) out << text;  // instances are keyed by their full spec
    }
    return out;
}

QStringList MainWindow::sweepSpecs() const {
    QStringList out;
    for (const auto& sb : strategy_boxes_) {
        if (!sb->check->isChecked()) continue;
        const QString text = QString::fromStdString(format_spec(sb->spec()));
        if (!out.contains(text)) out << text;
    }
    return out;
}

void MainWindow::setThreads(int threads) {
    threads_->setValue(threads);
}
void MainWindow::setCap(const QString& text) {
    cap_->setText(text);
}

RunRequest MainWindow::request() const {
    RunRequest r;
    r.network = networkSpec();
    r.strategies = strategySpecs();
    r.threads = threads_->value();
    r.device = device_->currentIndex() == 1 ? QStringLiteral("cuda") : QStringLiteral("cpu");
    const QString cap = cap_->text().trimmed();
    r.cap = cap.isEmpty() ? 0 : parse_bytes(cap.toStdString());
    return r;
}

void MainWindow::schedulePlan() {
    if (!network_ready_) return;
    if (!plan_timer_.isActive()) plan_timer_.start();
}

void MainWindow::planNow() {
    if (!network_ready_) return;
    RunRequest r;
    try {
        r = request();
    } catch (const std::exception& e) {
        message_->showMessage(MessageWidget::Kind::Error,
                              QStringLiteral("Memory cap: %1").arg(to_qstring(e.what())));
        return;
    }
    if (r.strategies.isEmpty()) {
        model_->clear();
        memory_->setResults({});
        status_label_->setText(QStringLiteral("Tick at least one strategy"));
        return;
    }
    plan_job_ = controller_->plan(r);
    run_job_ = 0;
    status_label_->setText(QStringLiteral("Planning %1 strateg%2…")
                               .arg(r.strategies.size())
                               .arg(r.strategies.size() == 1 ? "y" : "ies"));
}

void MainWindow::onPlanAvailable(quint64 job, const RunSummary& plan) {
    if (job != plan_job_) return;
    if (applyPendingSession()) return;  // an opened session shows its own results
    model_->setResults(plan.results);
    memory_->setResults(plan.results);
    memory_->setBudget(budget());
    pareto_->setBudget(budget());
    dropStaleSweeps();
    int failed = 0;
    for (const auto& r : plan.results) failed += r.failed();
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
}

// ---- running ---------------------------------------------------------------------------------

bool MainWindow::running() const {
    return controller_->busy();
}

void MainWindow::startRun() {
    if (!network_ready_ || networkSpec() != network_.spec) {
        run_when_ready_ = true;
        // (Re)load unless a load is about to start: a file that failed may have been fixed.
        if (!network_timer_.isActive()) loadNetworkNow();
        return;
    }
    try {
        run_request_ = request();
    } catch (const std::exception& e) {
        message_->showMessage(MessageWidget::Kind::Error,
                              QStringLiteral("Memory cap: %1").arg(to_qstring(e.what())));
        emit runCompleted();
        return;
    }
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
        model_->setResults(rows);
        memory_->setResults(rows);
    }
    memory_->setBudget(budget());
    pareto_->setBudget(budget());
    live_index_ = -2;
    baseline_ms_.reset();
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
    const int index = p.strategy_index < 0 ? count - 1 : p.strategy_index;
    progress_->setValue(static_cast<int>(kSliderSteps * (index + frac) / count));
    if (p.strategy_index != live_index_) {
        live_index_ = p.strategy_index;
        if (p.strategy_index >= 0) memory_->beginLive(p.strategy_index);
    }
    if (p.strategy_index >= 0) memory_->appendLive(p.strategy_index, p.new_points);
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
    model_->setResult(index, r);
    memory_->setResult(index, r);
}

void MainWindow::onRunFinished(quint64 job, const RunSummary& s) {
    if (job != run_job_) return;
    model_->setResults(s.results, s.baseline_total_ms);
    memory_->setResults(s.results);
    memory_->setBudget(budget());
    pareto_->setBudget(budget());
    baseline_ms_ = s.baseline_total_ms;
    int ok = 0;
    for (const auto& r : s.results) ok += r.executed;
    status_label_->setText(QStringLiteral("Ran %1 of %2 strategies in %3 s on %4")
                               .arg(ok)
                               .arg(s.results.size())
                               .arg(s.wall_ms / 1000, 0, 'f', 1)
                               .arg(run_request_.network));
    if (ok < static_cast<int>(s.results.size())) reportFailures(s.results);
    emit runCompleted();
}

void MainWindow::reportFailures(const std::vector<StrategyResult>& results) {
    QStringList lines;
    std::optional<uint64_t> smallest;
    for (const auto& r : results) {
        if (!r.failed()) continue;
        lines << QStringLiteral("<b>%1</b> (%2): %3")
                     .arg(r.spec.toHtmlEscaped(), r.status, r.message.toHtmlEscaped());
        if (r.min_feasible_budget && (!smallest || *r.min_feasible_budget > *smallest))
            smallest = r.min_feasible_budget;
    }
    if (lines.isEmpty()) return;
    if (smallest) {
        const uint64_t b = round_budget(*smallest);
        const uint64_t fit = b >= *smallest ? b : round_budget(*smallest + (*smallest - b) * 2 + 1);
        message_->showMessage(MessageWidget::Kind::Warning, lines.join(QStringLiteral("<br>")),
                              QStringLiteral("Use %1").arg(bytes_text(fit)),
                              [this, fit] { setBudget(fit); });
    } else {
        message_->showMessage(MessageWidget::Kind::Warning, lines.join(QStringLiteral("<br>")));
    }
}

void MainWindow::onFailed(quint64 job, FailureKind kind, const QString& message) {
    if (kind == FailureKind::Network) {
        if (job != network_job_) return;
        if (pending_session_) {  // a session's network file no longer loads: restore the rest
            restoreSessionWithoutNetwork(loading_spec_,
                                         QStringLiteral("cannot be loaded: %1").arg(message));
            emit networkFailed(message);
            return;
        }
        network_ready_ = false;
        run_when_ready_ = false;
        summary_->setText(QStringLiteral("<span style='color:#c0392b'>Not loaded</span>"));
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
    if (kind == FailureKind::Cancelled) {
        message_->showMessage(MessageWidget::Kind::Info,
                              QStringLiteral("Run cancelled. Figures of strategies that finished "
                                             "are kept; Ctrl+R runs again."));
        status_label_->setText(QStringLiteral("Cancelled"));
    } else {
        message_->showMessage(
            MessageWidget::Kind::Error,
            QStringLiteral("%1 failed: %2")
                .arg(was_run ? QStringLiteral("The run") : QStringLiteral("Planning"),
                     message.toHtmlEscaped()));
        status_label_->setText(QStringLiteral("Failed"));
    }
    if (was_run) emit runCompleted();
}

// ---- sweeps ----------------------------------------------------------------------------------

void MainWindow::setSweepPoints(int points) {
    sweep_points_->setValue(points);
}

void MainWindow::setSweepExecutes(bool execute) {
    sweep_execute_->setChecked(execute);
}

void MainWindow::startSweep() {
    if (!network_ready_ || networkSpec() != network_.spec) {
        message_->showMessage(MessageWidget::Kind::Warning,
                              QStringLiteral("Wait for the network to load, then sweep."));
        emit sweepCompleted();
        return;
    }
    SweepRequest r;
    try {
        const RunRequest base = request();
        r.network = base.network;
        r.threads = base.threads;
        r.cap = base.cap;
        r.device = base.device;
    } catch (const std::exception& e) {
        message_->showMessage(MessageWidget::Kind::Error,
                              QStringLiteral("Memory cap: %1").arg(to_qstring(e.what())));
        emit sweepCompleted();
        return;
    }
    r.strategies = sweepSpecs();
    r.points = sweep_points_->value();
    r.execute = sweep_execute_->isChecked();
    for (const auto& sb : strategy_boxes_)
        if (sb->name == QLatin1String("optimal") && sb->check->isChecked()) {
            r.frontier_spec = QString::fromStdString(format_spec(sb->spec()));
            break;
        }
    // Predict with the cost model the table's figures came from: after a run, the profiled one.
    const auto& rows = model_->results();
    r.use_run_costs =
        std::any_of(rows.begin(), rows.end(), [](const auto& x) { return x.executed; });
    plan_timer_.stop();
    message_->dismiss();
    sweep_job_ = controller_->sweep(r);
    plan_job_ = run_job_ = 0;
    progress_->setValue(0);
    charts_->setCurrentIndex(1);
    status_label_->setText(QStringLiteral("Sweeping…"));
}

void MainWindow::onSweepProgress(quint64 job, int done, int total, const QString& spec) {
    if (job != sweep_job_) return;
    progress_->setValue(total > 0 ? kSliderSteps * done / total : 0);
    status_label_->setText(
        QStringLiteral("Sweeping %1 (%2/%3)").arg(spec).arg(done + 1).arg(total));
}

void MainWindow::onSweepAvailable(quint64 job, const SweepSummary& s) {
    if (job != sweep_job_) return;
    sweep_job_ = 0;
    sweeps_ = s.curves;
    pareto_->setSweeps(sweeps_);
    pareto_->setBudget(budget());
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

void MainWindow::dropStaleSweeps() {
    // Curves of instances no longer ticked go; the frontier stays.
    const QStringList ticked = sweepSpecs();
    const auto before = sweeps_.size();
    std::erase_if(sweeps_,
                  [&](const SweepCurve& c) { return !c.frontier && !ticked.contains(c.spec); });
    if (sweeps_.size() != before) pareto_->setSweeps(sweeps_);
}

void MainWindow::updateRunState(bool busy) {
    run_action_->setEnabled(!busy);
    run_button_->setEnabled(!busy);
    sweep_action_->setEnabled(!busy);
    sweep_button_->setEnabled(!busy);
    cancel_action_->setEnabled(busy);
    cancel_button_->setEnabled(busy);
    progress_->setVisible(busy);
}

QString MainWindow::statusText() const {
    return status_label_->text();
}

// ---- export, clipboard, about, settings ----------------------------------------------------

ExportInput MainWindow::exportInput() const {
    ExportInput in;
    in.results = model_->results();
    in.baseline_ms = baseline_ms_;
    in.budget = budget();
    in.sweeps = sweeps_;
    in.show_predicted = memory_->showPredicted();
    in.show_measured = memory_->showMeasured();
    return in;
}

QString MainWindow::exportChart(ChartKind kind, const QString& path, QSize size) const {
    ExportInput in = exportInput();
    in.title = (kind == ChartKind::Memory ? QStringLiteral("Memory over time — %1")
                                          : QStringLiteral("Peak memory vs recompute time — %1"))
                   .arg(network_.spec);
    return export_chart(kind, in, path, size);
}

void MainWindow::exportChartDialog() {
    QDialog dialog(this);
    dialog.setWindowTitle(QStringLiteral("Export chart"));
    auto* form = new QFormLayout(&dialog);
    auto* chart = new QComboBox;
    chart->addItem(QStringLiteral("Memory timeline"));
    chart->addItem(QStringLiteral("Pareto: memory vs recompute"));
    chart->addItem(QStringLiteral("Graph (the whole drawing, with its legend)"));
    chart->setCurrentIndex(
        charts_->currentWidget() == graph_view_ ? 2 : std::min(charts_->currentIndex(), 1));
    chart->setToolTip(QStringLiteral(
        "Which chart to export; the graph is drawn whole, one pixel per point, whatever the size"));
    auto* width = new QSpinBox;
    width->setRange(100, 20000);
    width->setValue(1600);
    width->setSuffix(QStringLiteral(" px"));
    width->setToolTip(QStringLiteral("Width of the exported chart"));
    auto* height = new QSpinBox;
    height->setRange(100, 20000);
    height->setValue(900);
    height->setSuffix(QStringLiteral(" px"));
    height->setToolTip(QStringLiteral("Height of the exported chart"));
    form->addRow(QStringLiteral("Chart"), chart);
    form->addRow(QStringLiteral("Width"), width);
    form->addRow(QStringLiteral("Height"), height);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel);
    form->addRow(buttons);
    connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    connect(chart, &QComboBox::currentIndexChanged, &dialog, [width, height](int i) {
        width->setEnabled(i != 2);
        height->setEnabled(i != 2);
    });
    width->setEnabled(chart->currentIndex() != 2);
    height->setEnabled(chart->currentIndex() != 2);
    if (dialog.exec() != QDialog::Accepted) return;
    const int which = chart->currentIndex();
    const QString names[] = {QStringLiteral("memory.png"), QStringLiteral("pareto.png"),
                             QStringLiteral("graph.png")};
    const QString path = QFileDialog::getSaveFileName(
        this, QStringLiteral("Export chart"), names[which],
        which == 2 ? QStringLiteral("PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)")
                   : QStringLiteral("PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf);;"
                                    "CSV data (*.csv)"));
    if (path.isEmpty()) return;
    QString err;
    if (which == 2) {
        err = graph_view_->isLaidOut()
                  ? graph_view_->exportImage(path, 1.0)
                  : QStringLiteral("Plan a strategy and wait for the graph to be laid out first.");
    } else {
        err = exportChart(which == 0 ? ChartKind::Memory : ChartKind::Pareto, path,
                          QSize(width->value(), height->value()));
    }
    if (err.isEmpty())
        status_label_->setText(QStringLiteral("Exported %1").arg(path));
    else
        message_->showMessage(MessageWidget::Kind::Error, err.toHtmlEscaped());
}

void MainWindow::exportDataDialog() {
    const QString path = QFileDialog::getSaveFileName(
        this, QStringLiteral("Export data"), QStringLiteral("results.csv"),
        QStringLiteral("CSV table (*.csv);;JSON (*.json)"));
    if (path.isEmpty()) return;
    const QString err = exportChart(ChartKind::Pareto, path, QSize(800, 600));
    if (err.isEmpty())
        status_label_->setText(QStringLiteral("Exported %1").arg(path));
    else
        message_->showMessage(MessageWidget::Kind::Error, err.toHtmlEscaped());
}

void MainWindow::copyCsv() {
    // Selected rows only when there is a selection.
    const auto rows =
        table_->selectionModel() ? table_->selectionModel()->selectedRows() : QModelIndexList{};
    QString csv;
    if (rows.isEmpty()) {
        csv = model_->toCsv();
    } else {
        ResultsModel subset;
        std::vector<StrategyResult> picked;
        for (const QModelIndex& i : rows)
            picked.push_back(model_->result(proxy_->mapToSource(i).row()));
        subset.setResults(picked, baseline_ms_);
        csv = subset.toCsv();
    }
    QApplication::clipboard()->setText(csv);
    status_label_->setText(QStringLiteral("Copied %1 row(s) as CSV")
                               .arg(rows.isEmpty() ? model_->rowCount() : rows.size()));
}

void MainWindow::about() {
    QMessageBox::about(
        this, QStringLiteral("About RematLab"),
        QStringLiteral("<h3>RematLab %1</h3>"
                       "<p>A lab for gradient checkpointing: plan strategies as schedules, predict "
                       "their memory, run them for real and compare.</p>"
                       "<p>Qt %2 (built with %3) · Eigen %4</p>")
            .arg(QStringLiteral(REMATLAB_VERSION), QString::fromLatin1(qVersion()),
                 QStringLiteral(QT_VERSION_STR), QStringLiteral(EIGEN_VERSION_TEXT)));
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
    s.setValue(QStringLiteral("window/splitter"), splitter_->saveState());
    s.setValue(QStringLiteral("window/chartTab"), charts_->currentIndex());
    s.setValue(QStringLiteral("recentFiles"), recent_files_);
    s.setValue(QStringLiteral("network"), networkSpec());
    s.setValue(QStringLiteral("strategies"), sweepSpecs().join(QLatin1Char(';')));
    s.setValue(QStringLiteral("sweep/points"), sweep_points_->value());
    s.setValue(QStringLiteral("sweep/execute"), sweep_execute_->isChecked());
    s.setValue(QStringLiteral("budget/enabled"), budget_box_->isChecked());
    s.setValue(QStringLiteral("budget/slider"), budget_slider_->value());
    s.setValue(QStringLiteral("threads"), threads_->value());
    s.setValue(QStringLiteral("cap"), cap_->text());
    s.setValue(QStringLiteral("view/predicted"), show_predicted_->isChecked());
    s.setValue(QStringLiteral("view/measured"), show_measured_->isChecked());
}

void MainWindow::loadSettings() {
    QSettings s;
    restoreGeometry(s.value(QStringLiteral("window/geometry")).toByteArray());
    restoreState(s.value(QStringLiteral("window/state")).toByteArray());
    splitter_->restoreState(s.value(QStringLiteral("window/splitter")).toByteArray());
    charts_->setCurrentIndex(s.value(QStringLiteral("window/chartTab"), 0).toInt());
    recent_files_ = s.value(QStringLiteral("recentFiles")).toStringList();
    rebuildRecentMenu();
    const QString net = s.value(QStringLiteral("network")).toString();
    if (!net.isEmpty()) setNetworkSpec(net);
    const QString ticked = s.value(QStringLiteral("strategies")).toString();
    if (s.contains(QStringLiteral("strategies")))
        setStrategies(ticked.split(QLatin1Char(';'), Qt::SkipEmptyParts));
    suppress_ = true;
    budget_box_->setChecked(s.value(QStringLiteral("budget/enabled"), true).toBool());
    budget_slider_->setValue(s.value(QStringLiteral("budget/slider"), kSliderSteps / 2).toInt());
    threads_->setValue(s.value(QStringLiteral("threads"), 1).toInt());
    cap_->setText(s.value(QStringLiteral("cap")).toString());
    show_predicted_->setChecked(s.value(QStringLiteral("view/predicted"), true).toBool());
    show_measured_->setChecked(s.value(QStringLiteral("view/measured"), true).toBool());
    sweep_points_->setValue(s.value(QStringLiteral("sweep/points"), 12).toInt());
    sweep_execute_->setChecked(s.value(QStringLiteral("sweep/execute"), false).toBool());
    suppress_ = false;
}

}  // namespace rl::ui
