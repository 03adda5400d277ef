#pragma once
// Live memory over time, one line per strategy (solid: measured, dashed: predicted), the budget as
// a line, and a hover read-out naming the instruction under the cursor ("recompute block3.fc").
// Series are fed with QXYSeries::replace of vectors decimated to the plot's pixel width, at most
// once per frame; the axes are created once and only their ranges move.
#include <QChartView>
#include <QColor>
#include <memory>
#include <optional>
#include <vector>

#include "ui/chart_math.h"
#include "ui/frame_timer.h"
#include "ui/snapshots.h"

QT_BEGIN_NAMESPACE
class QLineSeries;
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
    // Points measured so far while strategy `index` executes (x = ms, y = bytes).
    void beginLive(int index);
    void appendLive(int index, const std::vector<XY>& points);
    void setBudget(std::optional<uint64_t> bytes);
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
    QValueAxis* timeAxis() const { return x_; }
    QValueAxis* bytesAxis() const { return y_; }
    QString hoverText(double time_ms) const;

  protected:
    void mouseMoveEvent(QMouseEvent* event) override;
    void leaveEvent(QEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;

  private:
    struct Track {
        QString label, name;
        std::shared_ptr<const Timeline> predicted, measured;
        std::vector<XY> live;                             // while it runs
        std::vector<XY> predicted_steps, measured_steps;  // cached stepped copies
        std::shared_ptr<const std::vector<QString>> texts;
        QLineSeries* predicted_series = nullptr;
        QLineSeries* measured_series = nullptr;
        bool predicted_dense = false;  // drawn solid and thin: see redraw()
        QColor color;                  // its strategy's colour, shaded per instance
    };
    void scheduleRedraw();
    void redraw();
    void updateAxes();
    void assign(Track& t, const StrategyResult& r);
    int plotColumns() const;

    std::vector<Track> tracks_;
    QValueAxis* x_ = nullptr;
    QValueAxis* y_ = nullptr;
    QLineSeries* budget_ = nullptr;
    QGraphicsLineItem* cursor_ = nullptr;
    std::optional<uint64_t> budget_bytes_;
    ByteUnit unit_;
    double x_max_ = 0, y_max_ = 0;  // axis maxima in ms and in unit_
    bool zoomed_ = false, show_predicted_ = true, show_measured_ = true;
    bool in_redraw_ = false;
    FrameTimer redraw_timer_{[this] { redraw(); }};
};

}  // namespace rl::ui
