#pragma once
// Keeps the schedule views in step: the graph view, the schedule matrix and the saved-residuals
// table show one strategy's plan (the current one: the results table's row, or teach mode's left
// strategy), share one node selection, and follow teach mode's steps (live values in the graph,
// the stage in the matrix, a cursor on the memory chart through `memory_cursor`).
//
// The selected node is also shown where the other views can show it: the memory chart marks the
// current strategy's instructions that compute, recompute and run the backward of it, and teach
// mode lists them (and, while shown, jumps to the next one). A click on an instruction in the
// memory chart (selectInstruction) selects its node everywhere.
#include <QObject>
#include <QSize>
#include <QStringList>
#include <functional>
#include <optional>
#include <vector>

#include "ui/snapshots.h"

namespace rl::ui {

// The headless export of a schedule view of the first planned result: "schedule" (the matrix:
// .png .svg .pdf .json .csv) or "graph" (the whole layered drawing at one scene pixel per image
// pixel, `size` ignored: .png .svg .pdf). Returns "" on success.
QString export_schedule_view(const QString& chart, const std::vector<StrategyResult>& results,
                             const QString& path, QSize size);

class GraphView;
class MemoryChart;
class NodeSelection;
class ResidualsPanel;
class ScheduleMatrixView;
class TeachPanel;

class ScheduleViews : public QObject {
    Q_OBJECT
  public:
    ScheduleViews(GraphView* graph, ScheduleMatrixView* matrix, ResidualsPanel* residuals,
                  TeachPanel* teach, QObject* parent = nullptr);

    void setResults(const std::vector<StrategyResult>& results);
    void setCurrent(int index);  // a result index; ignored for a result without a plan
    int current() const { return current_; }
    // Teach mode shown: the views follow its steps; hidden: plain colours again.
    void setTeaching(bool on);
    bool teaching() const { return teaching_; }
    NodeSelection* selection() const { return selection_; }
    // Find a node by name (Ctrl+F): selects, in every view, the node named `name` in the current
    // strategy's network — exactly, else the one node whose name contains it (any case). False,
    // selecting nothing new, when none or several match.
    bool selectByName(const QString& name);
    // The current network's node names, in graph order (the find box's completions).
    QStringList nodeNames() const;
    // The memory chart that marks the selected node (null: none).
    void setMemoryChart(MemoryChart* chart);
    // Instruction `instruction` of result `index` (a click in the memory chart): that strategy
    // becomes the current one, the instruction's node the selection, and teach mode, while
    // shown, moves to that very instruction.
    void selectInstruction(int index, long instruction);

    // Called with (strategy index, time in ms) on each teach step, or (-1, nullopt) to clear.
    std::function<void(int, std::optional<double>)> memory_cursor;

  signals:
    void currentChanged(int index);

  private:
    void show();
    void onStepped();
    void onSelectionChanged(int node);
    void updateMarks();

    GraphView* graph_;
    ScheduleMatrixView* matrix_;
    ResidualsPanel* residuals_;
    TeachPanel* teach_;
    MemoryChart* memory_ = nullptr;
    NodeSelection* selection_;
    std::vector<StrategyResult> results_;
    int current_ = -1;
    bool teaching_ = false;
};

}  // namespace rl::ui
