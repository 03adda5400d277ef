#pragma once
// The results area: the chart tabs (memory timeline with its measured / predicted toggles, the
// Pareto chart with its sweep controls, and whatever pages are added: the schedule views) above
// the results table. It shows results and sweep curves it is given; it starts nothing — the Sweep
// button emits sweepRequested, and a row chosen in the table emits currentRowChanged with the
// row's index in the model (not the sorted view's).
#include <QWidget>
#include <optional>
#include <vector>

#include "ui/snapshots.h"
#include "ui/sweeps.h"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QPushButton;
class QSettings;
class QSortFilterProxyModel;
class QSpinBox;
class QSplitter;
class QTabWidget;
class QTableView;
QT_END_NAMESPACE

namespace rl::ui {

class MemoryChart;
class ParetoChart;
class ResultsModel;

class ResultsArea : public QWidget {
    Q_OBJECT
  public:
    enum Chart { MemoryTab = 0, ParetoTab = 1 };

    explicit ResultsArea(ResultsModel* model, QWidget* parent = nullptr);

    ResultsModel* model() const { return model_; }
    MemoryChart* memoryChart() const { return memory_; }
    // The Memory tab's x axis: "Time (ms)" or "Instruction index".
    QComboBox* memoryAxisBox() const { return memory_axis_; }
    ParetoChart* paretoChart() const { return pareto_; }
    QTableView* table() const { return table_; }

    // The table and the memory chart show these rows (the Pareto chart reads the model).
    void setResults(const std::vector<StrategyResult>& results,
                    std::optional<double> baseline_ms = {},
                    std::optional<Spread> baseline_spread = {});
    void setResult(int row, const StrategyResult& result);
    // The budget line on the memory and Pareto charts.
    void setBudget(std::optional<uint64_t> budget);

    // Sweep curves on the Pareto chart.
    const std::vector<SweepCurve>& sweeps() const { return sweeps_; }
    void setSweeps(std::vector<SweepCurve> curves);
    // Curves of instances not in `ticked` go; the frontier stays.
    void dropSweepsExcept(const QStringList& ticked);
    int sweepPoints() const;
    void setSweepPoints(int points);
    bool sweepExecutes() const;
    void setSweepExecutes(bool execute);

    // Pages: the memory timeline (0), the Pareto chart (1), then those added.
    void addPage(QWidget* page, const QString& title, const QString& tooltip);
    void showPage(int index);
    void showPage(QWidget* page);
    int currentPage() const;
    QWidget* currentPageWidget() const;

    // The selected rows (all when none is selected) as CSV, a selection with `baseline_ms` for
    // its overheads; `rows` gets how many.
    QString selectionCsv(std::optional<double> baseline_ms, int* rows) const;
    // Sweep disabled while busy.
    void setBusy(bool busy);

    void saveSettings(QSettings& settings) const;
    void loadSettings(QSettings& settings);

  signals:
    void sweepRequested();
    void currentRowChanged(int row);

  private:
    QWidget* buildMemoryPage();
    QWidget* buildParetoPage();
    void fitTableColumns();

    ResultsModel* model_;
    MemoryChart* memory_ = nullptr;
    ParetoChart* pareto_ = nullptr;
    QTabWidget* charts_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QTableView* table_ = nullptr;
    QSplitter* splitter_ = nullptr;
    QCheckBox* show_predicted_ = nullptr;
    QComboBox* memory_axis_ = nullptr;
    QCheckBox* show_measured_ = nullptr;
    QSpinBox* sweep_points_ = nullptr;
    QCheckBox* sweep_execute_ = nullptr;
    QPushButton* sweep_button_ = nullptr;
    QPushButton* sweep_clear_ = nullptr;
    std::vector<SweepCurve> sweeps_;
};

}  // namespace rl::ui
