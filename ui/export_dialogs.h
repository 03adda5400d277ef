#pragma once
// The File menu's export dialogs: a chart (the memory timeline, the Pareto chart, the whole
// graph) as an image or CSV, the results as CSV or JSON, the network as DOT or JSON, the selected
// strategy's schedule as JSON or its matrix, its plan for PyTorch, JAX or as JSON. Each asks where,
// writes, and says how it went: exported (a status line) or failed (an HTML message). The writing
// itself is chart_export's, session's and the graph view's.
#include <QObject>
#include <QSize>
#include <QString>
#include <functional>

#include "analysis/plan_export.h"
#include "ui/chart_export.h"
#include "ui/message_widget.h"

QT_BEGIN_NAMESPACE
class QWidget;
QT_END_NAMESPACE

namespace rl::ui {

class GraphView;
class ResultsArea;
class SetupPanel;
struct ScheduleTrace;

// File → Export plan: the format a save dialog's choice means — JSON for a .json path, else the
// JAX policy when its filter was chosen, else the PyTorch module.
PlanFormat plan_format_for(const QString& path, const QString& selected_filter);
// Writes `trace`'s plan on the network `network_spec` in `format` to `path`, whole or not at all
// (analysis/plan_export.h, as `rematlab-cli export-plan`). Returns "" and sets `summary` (exact,
// or approximated by how many bytes) on success; otherwise the error: a plan PyTorch cannot take,
// with the reason, or a file that cannot be written.
QString write_plan_file(const ScheduleTrace& trace, const std::string& network_spec,
                        const QString& path, PlanFormat format, QString& summary);

class ExportDialogs : public QObject {
    Q_OBJECT
  public:
    // Writes a memory or Pareto chart, or the results (csv/json), at a size; "" on success.
    using WriteChart = std::function<QString(ChartKind, const QString& path, QSize size)>;

    ExportDialogs(const ResultsArea* results, const GraphView* graph, const SetupPanel* setup,
                  WriteChart write_chart, QWidget* dialog_parent);

    void exportChart();
    void exportData();
    void exportNetwork();
    void exportSchedule();
    void exportPlan();

  signals:
    void exported(const QString& status);
    void failed(MessageWidget::Kind kind, const QString& html);

  private:
    void report(const QString& path, const QString& error, const QString& what);

    const ResultsArea* results_;
    const GraphView* graph_;
    const SetupPanel* setup_;
    WriteChart write_chart_;
    QWidget* parent_;
};

}  // namespace rl::ui
