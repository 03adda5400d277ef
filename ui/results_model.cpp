#include "ui/results_model.h"

#include <QBrush>
#include <QColor>
#include <QFont>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "strategies/strategy.h"
#include "ui/palette.h"

namespace rl::ui {

namespace {

bool failed_status(const QString& s) {
    return s == QLatin1String("infeasible") || s == QLatin1String("cap exceeded") ||
           s == QLatin1String("error") || s == QLatin1String("cancelled");
}

QString percent(double fraction) {
    const double p = fraction * 100;
    return QString::number(p, 'f', p < 0.1 ? 2 : 1) + QStringLiteral(" %");
}

const Spread* spread_of_column(const MeasuredTimes& t, int col) {
    switch (col) {
        case ResultsModel::ForwardMs:
            return &t.forward;
        case ResultsModel::RecomputeMs:
            return &t.recompute;
        case ResultsModel::BackwardMs:
            return &t.backward;
        case ResultsModel::TotalMs:
            return &t.total;
        default:
            return nullptr;
    }
}

QString csv_field(const QString& s) {
    if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) &&
        !s.contains(QLatin1Char('\n')))
        return s;
    QString q = s;
    q.replace(QLatin1String("\""), QLatin1String("\"\""));
    return QLatin1Char('"') + q + QLatin1Char('"');
}

}  // namespace

QString status_text(const StrategyResult& r) {
    if (r.status == QLatin1String("feasible") && r.gap && *r.gap > 0)
        return QStringLiteral("gap %1").arg(percent(*r.gap)) +
               (r.method.isEmpty() ? QString() : QStringLiteral(" · ") + r.method);
    if (!r.method.isEmpty() && r.planned) return r.status + QStringLiteral(" · ") + r.method;
    return r.status;
}

QString spec_without_budget(const QString& spec) {
    try {
        Spec parsed = parse_spec(spec.toStdString());
        std::erase_if(parsed.args, [](const auto& a) { return a.first == "budget"; });
        return QString::fromStdString(format_spec(parsed));
    } catch (const std::exception&) {
        return spec;
    }
}

ResultsModel::ResultsModel(QObject* parent) : QAbstractTableModel(parent) {}

int ResultsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(results_.size());
}

int ResultsModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

std::optional<double> ResultsModel::overhead(int row) const {
    const StrategyResult& r = result(row);
    if (!r.executed || !baseline_ms_ || *baseline_ms_ <= 0) return std::nullopt;
    return (r.total_ms - *baseline_ms_) / *baseline_ms_;
}

bool ResultsModel::isBaseline(int row) const {
    const StrategyResult& r = result(row);
    return r.executed && r.spec == QLatin1String("none") && r.times && baseline_spread_ &&
           r.times->total.median == baseline_spread_->median &&
           r.times->total.min == baseline_spread_->min &&
           r.times->total.max == baseline_spread_->max;
}

bool ResultsModel::withinNoise(int row) const {
    const StrategyResult& r = result(row);
    if (!r.executed || !r.times || !baseline_spread_) return false;
    return overhead_against(r.times->total, *baseline_spread_).within_noise;
}

QVariant ResultsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal) return {};
    static const char* const names[] = {"Strategy",  "Status",     "Pred. peak", "Meas. peak",
                                        "Act. peak", "Recomputes", "Fwd ms",     "Recomp ms",
                                        "Bwd ms",    "Total ms",   "Overhead",   "Grads = none",
                                        "Solve ms",  "Budget",     "Host peak",  "Stall ms"};
    static const char* const tips[] = {
        "Strategy spec as planned (name:key=value,…)",
        "optimal / feasible / heuristic; or why it failed (hover for the message)",
        "Peak memory predicted by the simulator",
        "Peak memory measured by the tracking allocator (equals the prediction on CPU)",
        "Peak bytes of activations (measured when run, else predicted)",
        "Forward computations repeated in the backward",
        "Forward time (measured when run; grey: predicted by the cost model)",
        "Time spent recomputing forwards",
        "Backward time",
        "Forward + recompute + backward; measured: the median of the timed runs (min–max)",
        "Total time against none's (the price of the memory saved); \"within noise\" when the "
        "two min–max ranges overlap",
        "Parameter gradients bitwise equal to those of plain backprop",
        "Time the strategy took to plan",
        "The byte budget the strategy was given",
        "Peak of host memory holding offloaded values (measured when run, else predicted; equal "
        "on CPU)",
        "Time the step waited for offload and prefetch copies (measured when run; predicted from "
        "the host link's bandwidth)"};
    // Two lines in the table's header, so columns are as wide as their figures, not their titles.
    static const char* const shown[] = {
        "Strategy",  "Status",     "Pred.\npeak", "Meas.\npeak", "Act.\npeak", "Re-\ncomputes",
        "Fwd\nms",   "Recomp\nms", "Bwd\nms",     "Total\nms",   "Overhead",   "Grads =\nnone",
        "Solve\nms", "Budget",     "Host\npeak",  "Stall\nms"};
    if (section < 0 || section >= ColumnCount) return {};
    // An abstract benchmark graph's times are its durations, in the file's units (planning
    // time, Solve, stays in ms).
    const bool units = duration_units_ && section >= ForwardMs && section <= TotalMs;
    auto in_units = [&](const char* text) {
        QString t = QString::fromLatin1(text);
        if (units) t.replace(QStringLiteral("ms"), QStringLiteral("units"));
        return t;
    };
    if (role == Qt::DisplayRole) return in_units(shown[section]);
    if (role == NameRole) return in_units(names[section]);
    if (role == Qt::ToolTipRole)
        return units ? QString::fromLatin1(tips[section]) +
                           QStringLiteral(
                               " (in the graph's duration units: an abstract "
                               "benchmark graph is planned, never run)")
                     : QString::fromLatin1(tips[section]);
    return {};
}

QVariant ResultsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() < 0 || index.row() >= rowCount()) return {};
    const StrategyResult& r = result(index.row());
    const int col = index.column();
    const bool run = r.executed;
    auto time = [&](double measured, double predicted) -> QVariant {
        if (run) return measured;
        if (r.planned) return predicted;
        return {};
    };

    if (role == SortRole) {
        switch (col) {
            case Strategy:
                return r.spec;
            case Status:
                return r.status;
            case PredictedPeak:
                return r.planned ? QVariant(qulonglong(r.predicted_peak)) : QVariant();
            case MeasuredPeak:
                return run ? QVariant(qulonglong(r.measured_peak)) : QVariant();
            case ActivationPeak:
                if (run) return qulonglong(r.measured_activation_peak);
                return r.planned ? QVariant(qulonglong(r.predicted_activation_peak)) : QVariant();
            case Recomputes:
                return r.planned ? QVariant(qlonglong(r.recomputes)) : QVariant();
            case ForwardMs:
                return time(r.forward_ms, r.predicted_forward_ms);
            case RecomputeMs:
                return time(r.recompute_ms, r.predicted_recompute_ms);
            case BackwardMs:
                return time(r.backward_ms, r.predicted_backward_ms);
            case TotalMs:
                return time(r.total_ms, r.predicted_total_ms);
            case Overhead: {
                const auto o = overhead(index.row());
                return o ? QVariant(*o) : QVariant();
            }
            case GradsEqual:
                return run ? QVariant(r.grads_equal) : QVariant();
            case SolveMs:
                return r.solve_ms;
            case Budget:
                return r.budget ? QVariant(qulonglong(*r.budget)) : QVariant();
            case HostPeak:
                if (run) return qulonglong(r.measured_host_peak);
                return r.planned ? QVariant(qulonglong(r.predicted_host_peak)) : QVariant();
            case StallMs:
                return time(r.stall_ms, r.predicted_stall_ms);
            default:
                return {};
        }
    }

    if (role == Qt::DisplayRole) {
        const QVariant v = data(index, SortRole);
        switch (col) {
            case Strategy: {
                // Its full spec where the strategy has more than one instance, less the budget
                // (the Budget column has it).
                const size_t i = static_cast<size_t>(index.row());
                return i < labels_.size() ? labels_[i]
                                          : (r.budget ? spec_without_budget(r.spec) : r.spec);
            }
            case Status:
                return r.stale() ? status_text(r) + QStringLiteral(" · stale") : status_text(r);
            case PredictedPeak:
            case MeasuredPeak:
            case ActivationPeak:
            case Budget:
            case HostPeak:
                return v.isValid() ? bytes_text(v.toULongLong()) : QStringLiteral("—");
            case StallMs:
                return v.isValid() ? ms_text(v.toDouble()) : QStringLiteral("—");
            case Recomputes:
                return v.isValid() ? QString::number(v.toLongLong()) : QStringLiteral("—");
            case ForwardMs:
            case RecomputeMs:
            case BackwardMs:
            case TotalMs: {
                if (!v.isValid()) return QStringLiteral("—");
                // Measured over several timed runs: the median and its min–max range.
                const Spread* sp = run && r.times ? spread_of_column(*r.times, col) : nullptr;
                if (sp && sp->samples > 1)
                    return QStringLiteral("%1 (%2–%3)")
                        .arg(ms_text(sp->median), ms_text(sp->min), ms_text(sp->max));
                return ms_text(v.toDouble());
            }
            case SolveMs:
                return v.isValid() ? ms_text(v.toDouble()) : QStringLiteral("—");
            case Overhead:
                if (!v.isValid()) return QStringLiteral("—");
                if (isBaseline(index.row())) return QStringLiteral("baseline");
                // Ranges that overlap none's: the sign of the difference says nothing.
                if (withinNoise(index.row())) return QStringLiteral("within noise");
                return QStringLiteral("%1%2 %")
                    .arg(v.toDouble() >= 0 ? "+" : "")
                    .arg(v.toDouble() * 100, 0, 'f', 1);
            case GradsEqual:
                return v.isValid() ? (v.toBool() ? QStringLiteral("✓") : QStringLiteral("✗"))
                                   : QStringLiteral("—");
            default:
                return {};
        }
    }
    if (role == Qt::TextAlignmentRole) {
        if (col == Strategy || col == Status) return int(Qt::AlignLeft | Qt::AlignVCenter);
        if (col == GradsEqual) return int(Qt::AlignCenter);
        return int(Qt::AlignRight | Qt::AlignVCenter);
    }
    if (role == Qt::DecorationRole && col == Strategy) {
        const size_t i = static_cast<size_t>(index.row());
        return instance_color(r.name, i < instances_.size() ? instances_[i] : 0);
    }
    if (role == Qt::ForegroundRole) {
        if (col == Status && failed_status(r.status)) return QBrush(QColor(0xc0, 0x39, 0x2b));
        if (col == GradsEqual && run)
            return QBrush(r.grads_equal ? QColor(0x2e, 0x7d, 0x32) : QColor(0xc0, 0x39, 0x2b));
        // Out of date: the measured figures of an earlier plan, greyed until the next run.
        if (r.stale() && (col == Status || col == MeasuredPeak || col == ActivationPeak ||
                          col == ForwardMs || col == RecomputeMs || col == BackwardMs ||
                          col == TotalMs || col == Overhead || col == GradsEqual))
            return QBrush(QColor(0x9e, 0x9e, 0x9e));
        if (col == MeasuredPeak && run && r.measured_peak != r.predicted_peak)
            return QBrush(QColor(0xc0, 0x39, 0x2b));
        if (!run && (col == ForwardMs || col == RecomputeMs || col == BackwardMs || col == TotalMs))
            return QBrush(QColor(0x80, 0x80, 0x80));
    }
    if (role == Qt::FontRole && col == Strategy) {
        QFont f;
        f.setBold(true);
        return f;
    }
    if (role == Qt::ToolTipRole) {
        if (!r.message.isEmpty()) return r.message;
        if (r.stale() && col != PredictedPeak && col != Recomputes && col != SolveMs &&
            col != Budget && col != Strategy)
            return QStringLiteral("Stale: measured as %1, now planned as %2; Run to measure again")
                .arg(r.stale_measured_as, r.spec);
        if (col == Strategy) return r.spec;
        if (col == Status) {
            QStringList lines;
            lines << r.status;
            if (!r.method.isEmpty()) lines << QStringLiteral("method: %1").arg(r.method);
            if (r.lower_bound_ms)
                lines << QStringLiteral("proven lower bound on the recompute time: %1 ms")
                             .arg(ms_text(*r.lower_bound_ms));
            if (r.gap)
                lines << QStringLiteral("gap to the bound: %1 %").arg(*r.gap * 100, 0, 'f', 2);
            lines << QStringLiteral("solved in %1 ms").arg(ms_text(r.solve_ms));
            return lines.join(QLatin1Char('\n'));
        }
        if (col == PredictedPeak && r.planned)
            return QStringLiteral("%1 bytes, at %2")
                .arg(r.predicted_peak)
                .arg(r.predicted_peak_instruction);
        if (col == MeasuredPeak && run)
            return QStringLiteral("%1 bytes, at %2")
                .arg(r.measured_peak)
                .arg(r.measured_peak_instruction);
        if (!run && r.planned &&
            (col == ForwardMs || col == RecomputeMs || col == BackwardMs || col == TotalMs))
            return QStringLiteral("predicted by the %1 cost model; Run to measure")
                .arg(r.cost_model);
        if (col == GradsEqual && run)
            return QStringLiteral("max |Δ| against none: %1").arg(r.max_grad_diff);
        if (run && r.times &&
            (col == ForwardMs || col == RecomputeMs || col == BackwardMs || col == TotalMs))
            return r.times->total.samples == 1
                       ? QStringLiteral("one timed repeat: no spread")
                       : QStringLiteral("median (min–max) of %1 timed repeats")
                             .arg(r.times->total.samples);
    }
    return {};
}

void ResultsModel::setResults(std::vector<StrategyResult> results,
                              std::optional<double> baseline_ms,
                              std::optional<Spread> baseline_spread) {
    beginResetModel();
    results_ = std::move(results);
    baseline_ms_ = baseline_ms;
    baseline_spread_ = baseline_spread;
    updateInstances();
    updateUnits();
    endResetModel();
}

void ResultsModel::updateUnits() {
    const bool units = in_duration_units(results_);
    if (units == duration_units_) return;
    duration_units_ = units;
    emit headerDataChanged(Qt::Horizontal, ForwardMs, TotalMs);
}

void ResultsModel::updateInstances() {
    std::vector<QString> names;
    for (const StrategyResult& r : results_) names.push_back(r.name);
    instances_ = instance_numbers(names);
    std::vector<QString> specs;
    for (const StrategyResult& r : results_)  // the Budget column shows the budget
        specs.push_back(r.budget ? spec_without_budget(r.spec) : r.spec);
    labels_ = instance_labels(names, specs);
}

void ResultsModel::setResult(int row, StrategyResult result) {
    if (row < 0) return;
    if (row >= rowCount()) {
        beginInsertRows({}, rowCount(), row);
        results_.resize(static_cast<size_t>(row) + 1);
        results_[static_cast<size_t>(row)] = std::move(result);
        updateInstances();
        endInsertRows();
        updateUnits();
        return;
    }
    results_[static_cast<size_t>(row)] = std::move(result);
    updateInstances();
    updateUnits();
    emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

void ResultsModel::setBaseline(std::optional<double> baseline_ms,
                               std::optional<Spread> baseline_spread) {
    baseline_ms_ = baseline_ms;
    baseline_spread_ = baseline_spread;
    if (rowCount() > 0) emit dataChanged(index(0, Overhead), index(rowCount() - 1, Overhead));
}

void ResultsModel::clear() {
    setResults({});
}

QString ResultsModel::toCsv() const {
    QStringList lines;
    QStringList header;
    for (int c = 0; c < ColumnCount; ++c)
        header << headerData(c, Qt::Horizontal, NameRole).toString();
    header << QStringLiteral("Method") << QStringLiteral("Gap") << QStringLiteral("Lower bound ms")
           << QStringLiteral("Message");
    lines << header.join(QLatin1Char(','));
    for (int r = 0; r < rowCount(); ++r) {
        QStringList row;
        for (int c = 0; c < ColumnCount; ++c) {
            const QVariant v = data(index(r, c), SortRole);
            if (c == GradsEqual && v.isValid())
                row << (v.toBool() ? QStringLiteral("true") : QStringLiteral("false"));
            else
                row << csv_field(v.isValid() ? v.toString() : QString());
        }
        const StrategyResult& res = result(r);
        row << csv_field(res.method) << (res.gap ? QString::number(*res.gap) : QString())
            << (res.lower_bound_ms ? QString::number(*res.lower_bound_ms) : QString())
            << csv_field(res.message);
        lines << row.join(QLatin1Char(','));
    }
    return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

QByteArray ResultsModel::toJson() const {
    QJsonArray rows;
    for (int i = 0; i < rowCount(); ++i) {
        const StrategyResult& r = result(i);
        QJsonObject o;
        o[QStringLiteral("strategy")] = r.spec;
        o[QStringLiteral("status")] = r.status;
        if (!r.message.isEmpty()) o[QStringLiteral("message")] = r.message;
        if (r.budget) o[QStringLiteral("budget")] = double(*r.budget);
        if (r.min_feasible_budget)
            o[QStringLiteral("min_feasible_budget")] = double(*r.min_feasible_budget);
        o[QStringLiteral("solve_ms")] = r.solve_ms;
        if (!r.method.isEmpty()) o[QStringLiteral("method")] = r.method;
        if (r.gap) o[QStringLiteral("gap")] = *r.gap;
        if (r.lower_bound_ms) o[QStringLiteral("lower_bound_ms")] = *r.lower_bound_ms;
        if (r.planned) {
            o[QStringLiteral("predicted_peak_bytes")] = double(r.predicted_peak);
            o[QStringLiteral("predicted_activation_peak_bytes")] =
                double(r.predicted_activation_peak);
            o[QStringLiteral("peak_instruction")] = r.predicted_peak_instruction;
            o[QStringLiteral("instructions")] = double(r.instructions);
            o[QStringLiteral("computes")] = double(r.computes);
            o[QStringLiteral("recomputes")] = double(r.recomputes);
            o[QStringLiteral("predicted_forward_ms")] = r.predicted_forward_ms;
            o[QStringLiteral("predicted_recompute_ms")] = r.predicted_recompute_ms;
            o[QStringLiteral("predicted_backward_ms")] = r.predicted_backward_ms;
            o[QStringLiteral("predicted_total_ms")] = r.predicted_total_ms;
            o[QStringLiteral("cost_model")] = r.cost_model;
            // Abstract benchmark graphs: the *_ms figures are the graph's durations, in its units.
            o[QStringLiteral("time_unit")] =
                duration_units_ ? QStringLiteral("graph duration units") : QStringLiteral("ms");
        }
        if (r.executed) {
            o[QStringLiteral("measured_peak_bytes")] = double(r.measured_peak);
            o[QStringLiteral("activation_peak_bytes")] = double(r.measured_activation_peak);
            o[QStringLiteral("forward_ms")] = r.forward_ms;
            o[QStringLiteral("recompute_ms")] = r.recompute_ms;
            o[QStringLiteral("backward_ms")] = r.backward_ms;
            o[QStringLiteral("total_ms")] = r.total_ms;
            o[QStringLiteral("loss")] = r.loss;
            o[QStringLiteral("grads_bitwise_equal_to_none")] = r.grads_equal;
            if (const auto ov = overhead(i)) o[QStringLiteral("overhead")] = *ov;
            if (r.times) {  // as rematlab-cli compare --json: each time's min-max spread
                o[QStringLiteral("timed_repeats")] = r.times->total.samples;
                const std::pair<const char*, const Spread*> spreads[] = {
                    {"forward_ms", &r.times->forward},
                    {"recompute_ms", &r.times->recompute},
                    {"backward_ms", &r.times->backward},
                    {"total_ms", &r.times->total}};
                for (const auto& [name, sp] : spreads) {
                    o[QString::fromLatin1(name) + QStringLiteral("_min")] = sp->min;
                    o[QString::fromLatin1(name) + QStringLiteral("_max")] = sp->max;
                }
                o[QStringLiteral("overhead_within_noise")] = withinNoise(i);
            }
            if (r.stale()) o[QStringLiteral("stale_measured_as")] = r.stale_measured_as;
        }
        rows.append(o);
    }
    return QJsonDocument(rows).toJson(QJsonDocument::Indented);
}

}  // namespace rl::ui
