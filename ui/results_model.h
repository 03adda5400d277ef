#pragma once
// One row per strategy of the current plan or run: the table shows it, the Pareto chart reads it
// (heaptrack's ChartModel feeding ChartWidget), and "Copy as CSV" / export write it.
#include <QAbstractTableModel>
#include <optional>
#include <vector>

#include "ui/snapshots.h"

namespace rl::ui {

class ResultsModel : public QAbstractTableModel {
    Q_OBJECT
  public:
    enum Column {
        Strategy,
        Status,
        PredictedPeak,
        MeasuredPeak,
        ActivationPeak,
        Recomputes,
        ForwardMs,
        RecomputeMs,
        BackwardMs,
        TotalMs,
        Overhead,
        GradsEqual,
        SolveMs,
        Budget,
        ColumnCount
    };
    // The raw value behind a cell (bytes, ms, a fraction): what sorting and the charts use. Empty
    // when the cell has no figure.
    static constexpr int SortRole = Qt::UserRole + 1;

    explicit ResultsModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

    void setResults(std::vector<StrategyResult> results, std::optional<double> baseline_ms = {});
    void setResult(int row, StrategyResult result);
    void setBaseline(std::optional<double> baseline_ms);
    void clear();
    const std::vector<StrategyResult>& results() const { return results_; }
    const StrategyResult& result(int row) const { return results_[static_cast<size_t>(row)]; }
    std::optional<double> overhead(int row) const;  // fraction of none's total time

    // Every row and column, the raw figures (bytes, ms), a header line; RFC 4180 quoting.
    QString toCsv() const;
    QByteArray toJson() const;

  private:
    std::vector<StrategyResult> results_;
    std::optional<double> baseline_ms_;
};

}  // namespace rl::ui
