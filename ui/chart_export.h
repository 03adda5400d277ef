#pragma once
// Writes a chart to PNG, SVG or PDF at a chosen size, or its data to CSV / JSON — for the
// window's Export dialog and for the headless `rematlab --export` (what `rematlab-cli export`
// runs). Both build a fresh chart widget from the same results with the same chart classes, so
// the window and the command line draw the same thing.
#include <QSize>
#include <QString>
#include <optional>
#include <vector>

#include "ui/pareto_chart.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QWidget;
QT_END_NAMESPACE

namespace rl::ui {

enum class ChartKind { Memory, Pareto };

struct ExportInput {
    std::vector<StrategyResult> results;
    std::optional<double> baseline_ms;
    std::optional<uint64_t> budget;
    std::vector<SweepCurve> sweeps;
    bool show_predicted = true, show_measured = true;
    QString title;  // "" = the chart's own
};

// Parses "memory" / "pareto"; throws rl::Error for anything else.
ChartKind parse_chart_kind(const QString& text);

// Writes `path` by its suffix: .png, .svg, .pdf (the chart at `size` pixels), .csv (the memory
// timelines, or the results table for the Pareto chart), .json (the results). Returns "" on
// success, else what went wrong.
QString export_chart(ChartKind kind, const ExportInput& input, const QString& path, QSize size);

// Renders any widget (a chart view, the main window) to an image file by its suffix: .png, .svg,
// .pdf. Returns "" on success.
QString render_widget(QWidget* widget, const QString& path);

}  // namespace rl::ui
