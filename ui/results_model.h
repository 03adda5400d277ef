#pragma once
// One row per strategy of the current plan or run: the table shows it, the Pareto chart reads it
// (heaptrack's ChartModel feeding ChartWidget), and "Copy as CSV" / export write it.
#include <QAbstractTableModel>
#include <optional>
#include <vector>

#include "ui/snapshots.h"

namespace rl::ui {

// The Status column: "optimal · rotor-dp", "gap 3.2 % · milp", "heuristic", "infeasible", …
QString status_text(const StrategyResult& r);
// "sqrt-n:segments=4,budget=12MiB" → "sqrt-n:segments=4" (the table's Budget column shows it).
QString spec_without_budget(const QString& spec);

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
        HostPeak,  // offload: the host pool's peak (measured when run, else predicted)
        StallMs,   // offload: the compute stream's waits for copies
        ColumnCount
    };
    // The raw value behind a cell (bytes, ms, a fraction): what sorting and the charts use. Empty
    // when the cell has no figure.
    static constexpr int SortRole = Qt::UserRole + 1;
    // A column's name on one line (CSV); the header's DisplayRole may take two.
    static constexpr int NameRole = Qt::UserRole + 2;

    explicit ResultsModel(QObject* parent = nullptr);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

    // `baseline_spread`: none's total time with its spread; with it, an overhead whose range
    // overlaps none's shows as "within noise".
    void setResults(std::vector<StrategyResult> results, std::optional<double> baseline_ms = {},
                    std::optional<Spread> baseline_spread = {});
    void setResult(int row, StrategyResult result);
    void setBaseline(std::optional<double> baseline_ms, std::optional<Spread> baseline_spread = {});
    void clear();
    const std::vector<StrategyResult>& results() const { return results_; }
    const StrategyResult& result(int row) const { return results_[static_cast<size_t>(row)]; }
    std::optional<double> overhead(int row) const;  // fraction of none's total time
    bool withinNoise(int row) const;
    bool isBaseline(int row) const;  // the row is the run of none the overheads are against  // its
                                     // total's range overlaps none's (analysis/measure.h)

    // The results are of an abstract benchmark graph (plan-only): its times are the graph's
    // durations in the file's own units, not milliseconds, and the time columns say so.
    bool durationUnits() const { return duration_units_; }

    // Every row and column, the raw figures (bytes, ms), a header line; RFC 4180 quoting.
    QString toCsv() const;
    QByteArray toJson() const;

  private:
    void updateInstances();
    void updateUnits();
    std::vector<StrategyResult> results_;
    std::vector<int> instances_;   // per row: its instance of its strategy (colour shade)
    std::vector<QString> labels_;  // per row: what the Strategy column calls it (instance_labels)
    std::optional<double> baseline_ms_;
    std::optional<Spread> baseline_spread_;
    bool duration_units_ = false;
};

}  // namespace rl::ui
