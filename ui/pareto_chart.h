#pragma once
// Peak memory against recompute time, one point per strategy read from the results model:
// hollow = predicted, filled = measured; labelled with the strategy. A budget sweep adds a curve
// per strategy, and the sweep of an optimal strategy is drawn as the frontier.
#include <QChartView>
#include <QPointer>
#include <QTimer>
#include <vector>

#include "ui/chart_math.h"

QT_BEGIN_NAMESPACE
class QScatterSeries;
class QLineSeries;
class QValueAxis;
class QGraphicsSimpleTextItem;
QT_END_NAMESPACE

namespace rl::ui {

class ResultsModel;

struct SweepCurve {
    QString name;            // strategy name
    bool optimal = false;    // every point solved to optimality: drawn as the frontier
    std::vector<XY> points;  // x = predicted recompute ms, y = predicted peak bytes
};

class ParetoChart : public QChartView {
    Q_OBJECT
  public:
    explicit ParetoChart(QWidget* parent = nullptr);
    void setModel(ResultsModel* model);
    void setSweeps(std::vector<SweepCurve> sweeps);
    void flush();

    // For tests.
    int pointSeriesCount() const;  // scatter series holding at least one point
    int pointCount() const;        // points over every scatter series
    int curveCount() const { return static_cast<int>(curves_.size()); }

  protected:
    void resizeEvent(QResizeEvent* event) override;

  private:
    void scheduleRebuild();
    void rebuild();
    void placeLabels();

    QPointer<ResultsModel> model_;
    std::vector<SweepCurve> sweeps_;
    std::vector<QScatterSeries*> predicted_, measured_;
    std::vector<QLineSeries*> curves_;
    std::vector<QGraphicsSimpleTextItem*> labels_;
    std::vector<QPointF> label_at_;  // data coordinates of each label
    QValueAxis* x_ = nullptr;
    QValueAxis* y_ = nullptr;
    double divisor_ = 1;
    QTimer rebuild_timer_;
};

}  // namespace rl::ui
