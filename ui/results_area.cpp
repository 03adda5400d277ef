#include "ui/results_area.h"

#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QPushButton>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <functional>

#include "ui/memory_chart.h"
#include "ui/pareto_chart.h"
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

}  // namespace

ResultsArea::ResultsArea(ResultsModel* model, QWidget* parent) : QWidget(parent), model_(model) {
    memory_ = new MemoryChart;
    pareto_ = new ParetoChart;
    pareto_->setModel(model_);

    charts_ = new QTabWidget;
    charts_->setDocumentMode(true);
    charts_->addTab(buildMemoryPage(), QStringLiteral("Memory timeline"));
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

    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(0, 0, 0, 0);
    v->addWidget(splitter_);
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& current) {
                if (current.isValid()) emit currentRowChanged(proxy_->mapToSource(current).row());
            });
}

QWidget* ResultsArea::buildMemoryPage() {
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
    memory_axis_ = new QComboBox;
    memory_axis_->addItems({QStringLiteral("Time (ms)"), QStringLiteral("Instruction index")});
    memory_axis_->setToolTip(QStringLiteral(
        "x axis. Instruction index: predicted and measured are the same events, so they line up "
        "exactly"));
    auto* hint = new QLabel(
        QStringLiteral("drag to zoom · double-click to reset · hover for the instruction"));
    hint->setStyleSheet(QStringLiteral("color: #777;"));
    hint->setWordWrap(true);  // not a floor on the window's width
    // Rich text, so Qt wraps it instead of drawing one line wider than the screen.
    hint->setToolTip(QStringLiteral("<p>%1</p>").arg(memory_->whatsThis().toHtmlEscaped()));
    toggles->addWidget(show_measured_);
    toggles->addWidget(show_predicted_);
    toggles->addWidget(memory_axis_);
    toggles->addStretch(1);
    toggles->addWidget(hint);
    memory_layout->addLayout(toggles);
    memory_layout->addWidget(memory_, 1);
    connect(show_measured_, &QCheckBox::toggled, memory_, &MemoryChart::setShowMeasured);
    connect(show_predicted_, &QCheckBox::toggled, memory_, &MemoryChart::setShowPredicted);
    connect(memory_axis_, &QComboBox::currentIndexChanged, memory_,
            [this](int i) { memory_->setInstructionAxis(i == 1); });

    return memory_page;
}

QWidget* ResultsArea::buildParetoPage() {
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
    // A reminder, not a control: it gives way (clipped) rather than set the window's minimum
    // width; its tooltip holds all of it.
    hint->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    hint->setToolTip(hint->text());
    row->addWidget(sweep_button_);
    row->addWidget(sweep_points_);
    row->addWidget(sweep_execute_);
    row->addWidget(sweep_clear_);
    row->addStretch(1);
    row->addWidget(hint);
    layout->addLayout(row);
    layout->addWidget(pareto_, 1);
    connect(sweep_button_, &QPushButton::clicked, this, &ResultsArea::sweepRequested);
    connect(sweep_clear_, &QPushButton::clicked, this, [this] {
        sweeps_.clear();
        pareto_->setSweeps({});
    });
    return page;
}

void ResultsArea::fitTableColumns() {
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

void ResultsArea::setResults(const std::vector<StrategyResult>& results,
                             std::optional<double> baseline_ms,
                             std::optional<Spread> baseline_spread) {
    model_->setResults(results, baseline_ms, baseline_spread);
    memory_->setResults(results);
}

void ResultsArea::setResult(int row, const StrategyResult& result) {
    model_->setResult(row, result);
    memory_->setResult(row, result);
}

void ResultsArea::setBudget(std::optional<uint64_t> budget) {
    memory_->setBudget(budget);
    pareto_->setBudget(budget);
}

void ResultsArea::setSweeps(std::vector<SweepCurve> curves) {
    sweeps_ = std::move(curves);
    pareto_->setSweeps(sweeps_);
}

void ResultsArea::dropSweepsExcept(const QStringList& ticked) {
    const auto before = sweeps_.size();
    std::erase_if(sweeps_,
                  [&](const SweepCurve& c) { return !c.frontier && !ticked.contains(c.spec); });
    if (sweeps_.size() != before) pareto_->setSweeps(sweeps_);
}

int ResultsArea::sweepPoints() const {
    return sweep_points_->value();
}

void ResultsArea::setSweepPoints(int points) {
    sweep_points_->setValue(points);
}

bool ResultsArea::sweepExecutes() const {
    return sweep_execute_->isChecked();
}

void ResultsArea::setSweepExecutes(bool execute) {
    sweep_execute_->setChecked(execute);
}

void ResultsArea::addPage(QWidget* page, const QString& title, const QString& tooltip) {
    charts_->setTabToolTip(charts_->addTab(page, title), tooltip);
}

void ResultsArea::showPage(int index) {
    charts_->setCurrentIndex(index);
}

void ResultsArea::showPage(QWidget* page) {
    charts_->setCurrentWidget(page);
}

int ResultsArea::currentPage() const {
    return charts_->currentIndex();
}

QWidget* ResultsArea::currentPageWidget() const {
    return charts_->currentWidget();
}

QString ResultsArea::selectionCsv(std::optional<double> baseline_ms, int* rows) const {
    const auto selected =
        table_->selectionModel() ? table_->selectionModel()->selectedRows() : QModelIndexList{};
    if (rows) *rows = selected.isEmpty() ? model_->rowCount() : int(selected.size());
    if (selected.isEmpty()) return model_->toCsv();
    ResultsModel subset;
    std::vector<StrategyResult> picked;
    for (const QModelIndex& i : selected)
        picked.push_back(model_->result(proxy_->mapToSource(i).row()));
    subset.setResults(picked, baseline_ms);
    return subset.toCsv();
}

void ResultsArea::setBusy(bool busy) {
    sweep_button_->setEnabled(!busy);
}

void ResultsArea::saveSettings(QSettings& s) const {
    s.setValue(QStringLiteral("window/splitter"), splitter_->saveState());
    s.setValue(QStringLiteral("window/chartTab"), charts_->currentIndex());
    s.setValue(QStringLiteral("sweep/points"), sweep_points_->value());
    s.setValue(QStringLiteral("sweep/execute"), sweep_execute_->isChecked());
    s.setValue(QStringLiteral("view/predicted"), show_predicted_->isChecked());
    s.setValue(QStringLiteral("view/measured"), show_measured_->isChecked());
}

void ResultsArea::loadSettings(QSettings& s) {
    splitter_->restoreState(s.value(QStringLiteral("window/splitter")).toByteArray());
    charts_->setCurrentIndex(s.value(QStringLiteral("window/chartTab"), 0).toInt());
    show_predicted_->setChecked(s.value(QStringLiteral("view/predicted"), true).toBool());
    show_measured_->setChecked(s.value(QStringLiteral("view/measured"), true).toBool());
    sweep_points_->setValue(s.value(QStringLiteral("sweep/points"), 12).toInt());
    sweep_execute_->setChecked(s.value(QStringLiteral("sweep/execute"), false).toBool());
}

}  // namespace rl::ui
