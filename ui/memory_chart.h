#pragma once
// Live memory over time, one line per strategy (solid: measured, dashed: predicted), the budget as
// a line, and a hover read-out naming the instruction under the cursor ("recompute block3.fc").
// The x axis is time or, as in the Memory breakdown page, the instruction index (where predicted
// and measured are the same events and line up exactly).
//
// A run over the memory cap draws the cap as a line, the curve measured up to the failure beside
// the plan's predicted one, and the allocation that failed as a cross at the failure.
// Series are fed with QXYSeries::replace of vectors decimated to the plot's pixel width, at most
// once per frame; the axes are created once and only their ranges move.
//
// The node selected in the schedule views is marked on the strategy they show: a point on its
// line and a thin vertical line at each instruction that computes (blue), recomputes (orange) or
// runs the backward of (purple) that node. A click (no drag) on a line emits the instruction
// under it, which the window turns into a node selection.
#include <QChartView>
#include <QColor>
#include <QTimer>
#include <memory>
#include <optional>
#include <vector>

#include "ui/chart_math.h"
#include "ui/frame_timer.h"
#include "ui/node_marks.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QLineSeries;
class QScatterSeries;
class QValueAxis;
class QGraphicsLineItem;
QT_END_NAMESPACE

namespace rl::ui {

class MemoryChart : public QChartView {
    Q_OBJECT
  public:
    explicit MemoryChart(QWidget* parent = nullptr);

    // Replaces every strategy (a new plan); keeps nothing of the old ones.
    void setResults(const std::vector<StrategyResult>& results);
    // One strategy's figures changed (its run finished): its timelines replace the live data.
    void setResult(int index, const StrategyResult& result);
    // Points measured so far while strategy `index` executes (x = ms, y = bytes), each with the
    // index of the instruction it ended (`instructions`, one per point; empty: the points show
    // on the time axis only).
    void beginLive(int index);
    void appendLive(int index, const std::vector<XY>& points,
                    const std::vector<int32_t>& instructions = {});
    // The live points as drawn on the axis in use (tests).
    const std::vector<XY>& livePoints(int index) const;
    void setBudget(std::optional<uint64_t> bytes);
    // x = the instruction index instead of milliseconds (memory_profiler's instruction_axis).
    void setInstructionAxis(bool on);
    bool instructionAxis() const { return by_instruction_; }
    void setShowPredicted(bool on);
    void setShowMeasured(bool on);
    bool showPredicted() const { return show_predicted_; }
    bool showMeasured() const { return show_measured_; }
    void resetZoom();

    // Redraws now instead of at the next frame (tests, exports, benchmarks).
    void flush();

    // For tests and the hover read-out.
    int strategyCount() const { return static_cast<int>(tracks_.size()); }
    QLineSeries* measuredSeries(int index) const;
    QLineSeries* predictedSeries(int index) const;
    QLineSeries* budgetSeries() const { return budget_; }
    // The memory cap of a run that went over it (hidden otherwise) and the failed allocations
    // (one point per failed strategy: where it failed, at the bytes it would have reached).
    QLineSeries* capSeries() const { return cap_; }
    QScatterSeries* capFailureSeries() const { return cap_failures_; }
    QValueAxis* timeAxis() const { return x_; }
    QValueAxis* bytesAxis() const { return y_; }
    QString hoverText(double time_ms) const;

    // Marks `marks` (node_marks of the selected node, unplaced) on strategy `track`'s timeline —
    // the predicted one while it is shown, else the measured one. `node_name` names the legend
    // entries ("recompute block3.fc"). The marks survive setResults: the schedule views re-send
    // them when the plan changes.
    void setNodeMarks(int track, const QString& node_name, std::vector<NodeMark> marks);
    void clearNodeMarks();
    int markedTrack() const { return marks_track_; }
    // The marks as drawn (placed on the timeline in use), for tests.
    const std::vector<NodeMark>& nodeMarks() const { return placed_; }
    QScatterSeries* markSeries(MarkKind kind) const { return mark_series_[int(kind)]; }
    // The strategy and instruction under a point in chart coordinates: the shown line nearest to
    // it in y at that time; nullopt outside the plot or where no line has an instruction.
    std::optional<std::pair<int, long>> instructionAt(QPointF chart_pos) const;

  signals:
    // A click (not a drag) on the plot: the instruction under it (instructionAt).
    void instructionClicked(int track, long instruction);

  protected:
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void leaveEvent(QEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

  private:
    struct Track {
        QString label, name, spec;                                  // label: instance_labels
        std::shared_ptr<const Timeline> predicted, measured;        // on the x axis in use
        std::shared_ptr<const Timeline> predicted_ms, measured_ms;  // as given (x = ms)
        long instructions = 0;
        std::optional<StrategyResult::CapFailure> cap_failure;
        std::vector<XY> live;                 // while it runs (x = ms)
        std::vector<XY> live_by_instruction;  // the same, x = instruction index
        const std::vector<XY>& liveOn(bool by_instruction) const {
            return by_instruction ? live_by_instruction : live;
        }
        std::vector<XY> predicted_steps, measured_steps;  // cached stepped copies
        std::shared_ptr<const std::vector<QString>> texts;
        QLineSeries* predicted_series = nullptr;
        QLineSeries* measured_series = nullptr;
        QLineSeries* host_series = nullptr;  // offloaded values on the host (predicted, dotted)
        std::vector<XY> host_steps;
        bool predicted_dense = false;  // drawn solid and thin: see redraw()
        QColor color;                  // its strategy's colour, shaded per instance
    };
    void scheduleRedraw();
    void redraw();
    void updateAxes();
    void assign(Track& t, const StrategyResult& r);
    void applyAxis(Track& t) const;
    int plotColumns() const;
    void redrawMarks();
    void placeMarkLines();

    std::vector<Track> tracks_;
    QValueAxis* x_ = nullptr;
    QValueAxis* y_ = nullptr;
    QLineSeries* budget_ = nullptr;
    QLineSeries* cap_ = nullptr;
    QScatterSeries* cap_failures_ = nullptr;
    QGraphicsLineItem* cursor_ = nullptr;
    std::optional<uint64_t> budget_bytes_;
    ByteUnit unit_;
    double x_max_ = 0, y_max_ = 0;  // axis maxima in ms and in unit_
    bool zoomed_ = false, show_predicted_ = true, show_measured_ = true, by_instruction_ = false;
    // The results are of an abstract benchmark graph: times are its durations, in its own units.
    bool duration_units_ = false;
    QString timeAxisTitle() const;
    bool in_redraw_ = false;
    // The selected node's marks.
    int marks_track_ = -1;
    QString marks_name_;
    std::vector<NodeMark> marks_, placed_;
    const Timeline* placed_on_ = nullptr;
    std::shared_ptr<const Timeline> placed_keep_;  // keeps placed_on_ alive
    QScatterSeries* mark_series_[3] = {};
    std::vector<QGraphicsLineItem*> mark_lines_;
    QPoint press_pos_;
    // A click is emitted once the double-click interval has passed without a double-click.
    void emitPendingClick();
    QTimer click_timer_;
    std::optional<std::pair<int, long>> pending_click_;
    bool after_double_click_ = false;
    FrameTimer redraw_timer_{[this] { redraw(); }};
};

}  // namespace rl::ui
