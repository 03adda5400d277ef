#pragma once
// The "Memory breakdown" page: what a heaptrack or PyTorch memory_viz user expects of a memory
// profiler, for one strategy at a time.
//
//  - the timeline stacked by category (parameters, parameter gradients, inputs, saved
//    activations, recomputed values, activation gradients, workspace), predicted or measured,
//    against time or against the instruction index (where predicted and measured line up
//    exactly: they are the same events); a toggle draws the total line alone;
//  - a click on the chart shows the live set at that instruction in the panel beside it, largest
//    first, with each tensor's fate (kept, recomputed at #N, freed at #N);
//  - "compare peak with" another strategy shows what one holds at its peak that the other does
//    not, with bytes ("why is this one higher");
//  - drag to zoom, double-click to reset; the y axis fits the visible data.
//
// The numbers come from analysis/memory_view (engine/liveness replayed); this page only draws.
#include <QChartView>
#include <QWidget>
#include <map>
#include <memory>
#include <vector>

#include "analysis/memory_view.h"
#include "ui/chart_math.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QCheckBox;
class QComboBox;
class QLabel;
class QTreeWidget;
class QValueAxis;
QT_END_NAMESPACE

namespace rl::ui {

// One stacked layer per memory kind: the upper edge of kind k is the sum of kinds 0..k, as a step
// function over `x` (one x per event; 2 × events − 1 points, the same xs in every layer). The last
// layer's edge is the total line. Kinds whose bytes are 0 at every event are left out (`kinds` says
// which are drawn, bottom first). Values are divided by `divisor` (the axis' byte unit).
struct StackedLayers {
    std::vector<MemoryKind> kinds;
    std::vector<std::vector<XY>> upper;  // per drawn kind, stepped
};
StackedLayers stacked_layers(const std::vector<KindBytes>& stacks, const std::vector<double>& x,
                             double divisor);

// x per event on the instruction axis: an event of instruction i at i; set-up events at −1 and
// the end-of-run releases at `instructions`.
std::vector<double> instruction_axis(const std::vector<int32_t>& event_instruction,
                                     long instructions);

// The chart: stacked areas (or the total alone), rubber-band zoom, double-click reset, a click
// emits the instruction under it.
class MemoryBreakdownChart : public QChartView {
    Q_OBJECT
  public:
    explicit MemoryBreakdownChart(QWidget* parent = nullptr);
    // `instruction` per event (for clicks); x per event; empty stacks clear the chart.
    void setData(const std::vector<KindBytes>& stacks, const std::vector<double>& x,
                 const std::vector<int32_t>& instruction, const QString& x_title, bool stacked);
    int layerCount() const { return layers_; }
    QValueAxis* xAxis() const { return x_; }
    QValueAxis* yAxis() const { return y_; }
    void resetZoom();
    // The instruction of the last event at or before chart x; −1 where none.
    long instructionAtX(double x) const;

  signals:
    void instructionClicked(long instruction);

  protected:
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;

  private:
    void fitY();
    QValueAxis* x_ = nullptr;
    QValueAxis* y_ = nullptr;
    std::vector<double> xs_;
    std::vector<int32_t> instruction_;
    std::vector<uint64_t> totals_;
    double x_min_ = 0, x_max_ = 1;
    double divisor_ = 1;
    int layers_ = 0;
    QPoint press_pos_;
    bool double_clicked_ = false;
};

class MemoryProfilerPage : public QWidget {
    Q_OBJECT
  public:
    explicit MemoryProfilerPage(QWidget* parent = nullptr);
    void setResults(const std::vector<StrategyResult>& results);
    // The strategy shown (an index into the results); ignored for one without a plan.
    void setCurrent(int index);
    int current() const { return current_; }
    // Live set at instruction `index` of the current strategy (predicted events) in the panel.
    void showLiveSet(long index);
    // The live set at the current strategy's predicted peak (what the page shows first).
    void showPeak();
    // The diff of the current strategy's peak against result `other`'s.
    void showPeakDiff(int other);

    MemoryBreakdownChart* chart() const { return chart_; }
    QTreeWidget* liveSetPanel() const { return panel_; }
    QLabel* panelTitle() const { return panel_title_; }
    QCheckBox* stackedToggle() const { return stacked_; }
    QComboBox* sourceBox() const { return source_; }
    QComboBox* axisBox() const { return axis_; }

  private:
    struct Replayed {
        std::shared_ptr<const void> keep;  // the trace it was made from
        MemoryReplay replay;
    };
    const MemoryReplay* replayOf(int index);
    void refreshChart();
    void refreshChoices();

    std::vector<StrategyResult> results_;
    std::map<int, Replayed> replays_;
    int current_ = -1;
    const void* panel_trace_ = nullptr;  // the plan whose peak the panel opened on
    QComboBox* strategy_ = nullptr;
    QComboBox* source_ = nullptr;
    QComboBox* axis_ = nullptr;
    QComboBox* compare_ = nullptr;
    QCheckBox* stacked_ = nullptr;
    MemoryBreakdownChart* chart_ = nullptr;
    QLabel* panel_title_ = nullptr;
    QTreeWidget* panel_ = nullptr;
};

}  // namespace rl::ui
