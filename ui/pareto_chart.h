#pragma once
// Peak memory against recompute time. One point per strategy instance read from the results model
// (hollow = predicted, filled = measured, labelled with its spec); a sweep adds a curve per
// instance (dashed = predicted, solid = measured) and the optimal frontier as a dark line; the
// budget as a horizontal line. Hover names the point under the cursor.
#include <QChartView>
#include <QPointer>
#include <optional>
#include <vector>

#include "ui/chart_math.h"
#include "ui/frame_timer.h"
#include "ui/sweeps.h"

QT_BEGIN_NAMESPACE
class QScatterSeries;
class QLineSeries;
class QValueAxis;
class QGraphicsSimpleTextItem;
QT_END_NAMESPACE

namespace rl::ui {

class ResultsModel;

class ParetoChart : public QChartView {
    Q_OBJECT
  public:
    explicit ParetoChart(QWidget* parent = nullptr);
    void setModel(ResultsModel* model);
    void setSweeps(std::vector<SweepCurve> sweeps);
    const std::vector<SweepCurve>& sweeps() const { return sweeps_; }
    void setBudget(std::optional<uint64_t> bytes);
    void flush();

    // For tests.
    int pointSeriesCount() const;  // scatter series holding at least one point
    int pointCount() const;        // points over every scatter series
    int curveCount() const;        // sweep curves drawn, the frontier not counted
    // Points of the curve of `spec` (predicted or measured); -1 when there is no such curve.
    int curvePointCount(const QString& spec, bool measured = false) const;
    bool hasFrontier() const;
    int frontierPointCount() const;
    QStringList seriesNames() const;
    QLineSeries* budgetSeries() const { return budget_; }
    // The error bars of the measured recompute times, one per row timed more than once.
    const std::vector<QLineSeries*>& errorBars() const { return error_bars_; }
    QValueAxis* recomputeAxis() const { return x_; }
    QValueAxis* peakAxis() const { return y_; }
    // What hovering at `pos` (view coordinates) shows: the nearest point within a few pixels.
    QString hoverText(QPointF pos) const;

  protected:
    void resizeEvent(QResizeEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;

  private:
    // A swept instance: every point as a marker (hollow predicted, filled measured), and a line
    // through the points no other point of the instance beats (its own lower envelope), so a
    // range sweep whose points go back and forth draws no zig-zag.
    struct Curve {
        QString spec;
        bool frontier = false;
        QScatterSeries* predicted = nullptr;
        QScatterSeries* measured = nullptr;
        QLineSeries* predicted_line = nullptr;
        QLineSeries* measured_line = nullptr;
    };
    struct HoverPoint {
        QPointF value;  // chart coordinates (ms, unit)
        QString text;
    };
    void scheduleRebuild();
    void rebuild();
    void placeLabels();

    QPointer<ResultsModel> model_;
    std::vector<SweepCurve> sweeps_;
    std::optional<uint64_t> budget_bytes_;
    std::vector<QScatterSeries*> predicted_, measured_;
    std::vector<QLineSeries*> error_bars_;  // per executed row with several timed runs
    std::vector<Curve> curves_;
    std::vector<QGraphicsSimpleTextItem*> labels_;
    std::vector<QPointF> label_at_;  // data coordinates of each label
    std::vector<HoverPoint> hover_;
    QLineSeries* budget_ = nullptr;
    QValueAxis* x_ = nullptr;
    QValueAxis* y_ = nullptr;
    double divisor_ = 1;
    FrameTimer rebuild_timer_{[this] { rebuild(); }};
};

}  // namespace rl::ui
