#include "ui/pareto_chart.h"

#include <QGraphicsSimpleTextItem>
#include <QLegendMarker>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>
#include <algorithm>

#include "ui/palette.h"
#include "ui/results_model.h"

namespace rl::ui {

ParetoChart::ParetoChart(QWidget* parent) : QChartView(parent) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Peak memory vs recompute time"));
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setMargins(QMargins(6, 6, 6, 6));
    chart->setBackgroundRoundness(0);
    x_ = new QValueAxis;
    x_->setTitleText(QStringLiteral("recompute time (ms)   ● measured   ○ predicted"));
    x_->setLabelFormat(QStringLiteral("%g"));
    x_->setTickCount(6);  // with nice_ceiling's maxima (1, 2, 2.5, 5 × 10^k): round steps
    y_ = new QValueAxis;
    y_->setTitleText(QStringLiteral("peak memory (MiB)"));
    y_->setLabelFormat(QStringLiteral("%g"));
    y_->setTickCount(6);
    chart->addAxis(x_, Qt::AlignBottom);
    chart->addAxis(y_, Qt::AlignLeft);
    setChart(chart);
    setRenderHint(QPainter::Antialiasing);
    setToolTip(QStringLiteral(
        "Each strategy's peak memory against the time it spends recomputing: lower-left is "
        "better. Filled: measured; hollow: predicted by the simulator and the cost model."));
    rebuild_timer_.setSingleShot(true);
    rebuild_timer_.setInterval(16);
    connect(&rebuild_timer_, &QTimer::timeout, this, &ParetoChart::rebuild);
    connect(chart, &QChart::plotAreaChanged, this, &ParetoChart::placeLabels);
}

void ParetoChart::setModel(ResultsModel* model) {
    if (model_) disconnect(model_, nullptr, this, nullptr);
    model_ = model;
    if (model_) {
        connect(model_, &QAbstractItemModel::modelReset, this, &ParetoChart::scheduleRebuild);
        connect(model_, &QAbstractItemModel::layoutChanged, this, &ParetoChart::scheduleRebuild);
        connect(model_, &QAbstractItemModel::dataChanged, this, &ParetoChart::scheduleRebuild);
        connect(model_, &QAbstractItemModel::rowsInserted, this, &ParetoChart::scheduleRebuild);
        connect(model_, &QAbstractItemModel::rowsRemoved, this, &ParetoChart::scheduleRebuild);
    }
    scheduleRebuild();
}

void ParetoChart::setSweeps(std::vector<SweepCurve> sweeps) {
    sweeps_ = std::move(sweeps);
    scheduleRebuild();
}

void ParetoChart::scheduleRebuild() {
    if (!rebuild_timer_.isActive()) rebuild_timer_.start();
}

void ParetoChart::flush() {
    rebuild_timer_.stop();
    rebuild();
}

int ParetoChart::pointSeriesCount() const {
    int n = 0;
    for (auto* s : predicted_) n += s->count() > 0;
    for (auto* s : measured_) n += s->count() > 0;
    return n;
}

int ParetoChart::pointCount() const {
    int n = 0;
    for (auto* s : predicted_) n += s->count();
    for (auto* s : measured_) n += s->count();
    return n;
}

void ParetoChart::rebuild() {
    QChart* c = chart();
    // Strategies come and go with a plan; at a handful of series, recreating them is cheap. The
    // axes stay.
    for (auto* s : predicted_) c->removeSeries(s), delete s;
    for (auto* s : measured_) c->removeSeries(s), delete s;
    for (auto* s : curves_) c->removeSeries(s), delete s;
    for (auto* l : labels_) delete l;
    predicted_.clear();
    measured_.clear();
    curves_.clear();
    labels_.clear();
    label_at_.clear();

    struct Row {
        QString name, label;
        bool planned, executed;
        double pred_x, pred_y, meas_x, meas_y;
    };
    std::vector<Row> rows;
    double xmax = 0, ymax = 0;
    if (model_) {
        for (const auto& r : model_->results()) {
            if (!r.planned) continue;
            Row row{r.name,
                    r.spec,
                    r.planned,
                    r.executed,
                    r.predicted_recompute_ms,
                    static_cast<double>(r.predicted_peak),
                    r.recompute_ms,
                    static_cast<double>(r.measured_peak)};
            xmax = std::max({xmax, row.pred_x, row.executed ? row.meas_x : 0.0});
            ymax = std::max({ymax, row.pred_y, row.executed ? row.meas_y : 0.0});
            rows.push_back(row);
        }
    }
    for (const SweepCurve& s : sweeps_)
        for (const XY& p : s.points) xmax = std::max(xmax, p.x), ymax = std::max(ymax, p.y);
    const ByteUnit unit = byte_unit_for(static_cast<uint64_t>(ymax));
    divisor_ = unit.divisor;
    y_->setTitleText(QStringLiteral("peak memory (%1)").arg(QString::fromLatin1(unit.name)));
    x_->setRange(0, nice_ceiling(std::max(xmax * 1.15, 1e-3)));
    y_->setRange(0, nice_ceiling(std::max(ymax / divisor_ * 1.12, 1e-3)));

    for (const SweepCurve& s : sweeps_) {
        auto* line = new QLineSeries;
        const QColor col = s.optimal ? QColor(0x33, 0x33, 0x33) : strategy_color(s.name);
        QPen pen(col);
        pen.setWidthF(s.optimal ? 2.0 : 1.3);
        if (!s.optimal) pen.setStyle(Qt::DotLine);
        line->setPen(pen);
        line->setName(s.optimal ? QStringLiteral("optimal frontier (%1)").arg(s.name)
                                : QStringLiteral("%1 sweep").arg(s.name));
        std::vector<XY> pts = s.points;
        std::sort(pts.begin(), pts.end(), [](const XY& a, const XY& b) { return a.x < b.x; });
        QList<QPointF> q;
        for (const XY& p : pts) q.append(QPointF(p.x, p.y / divisor_));
        line->replace(q);
        c->addSeries(line);
        line->attachAxis(x_);
        line->attachAxis(y_);
        curves_.push_back(line);
    }
    for (const Row& row : rows) {
        const QColor col = strategy_color(row.name);
        auto* pred = new QScatterSeries;
        pred->setName(row.label + QStringLiteral(" (predicted)"));
        pred->setMarkerShape(QScatterSeries::MarkerShapeCircle);
        pred->setMarkerSize(13);
        pred->setBrush(Qt::NoBrush);
        pred->setPen(QPen(col, 2));
        pred->append(row.pred_x, row.pred_y / divisor_);
        auto* meas = new QScatterSeries;
        meas->setName(row.label);
        meas->setMarkerShape(QScatterSeries::MarkerShapeCircle);
        meas->setMarkerSize(9);
        meas->setBrush(col);
        meas->setPen(QPen(col.darker(130), 1));
        if (row.executed) meas->append(row.meas_x, row.meas_y / divisor_);
        for (QScatterSeries* s : {pred, meas}) {
            c->addSeries(s);
            s->attachAxis(x_);
            s->attachAxis(y_);
        }
        for (QLegendMarker* m : c->legend()->markers(pred)) m->setVisible(false);
        predicted_.push_back(pred);
        measured_.push_back(meas);

        auto* label = new QGraphicsSimpleTextItem(row.label, c);
        label->setBrush(col.darker(140));
        label->setZValue(30);
        labels_.push_back(label);
        label_at_.push_back(row.executed ? QPointF(row.meas_x, row.meas_y / divisor_)
                                         : QPointF(row.pred_x, row.pred_y / divisor_));
    }
    placeLabels();
}

void ParetoChart::placeLabels() {
    const QRectF plot = chart()->plotArea();
    std::vector<QRectF> placed;
    for (size_t i = 0; i < labels_.size(); ++i) {
        const QPointF p = chart()->mapToPosition(label_at_[i], measured_[i]);
        const QRectF box = labels_[i]->boundingRect();
        double x = p.x() + 9, y = p.y() - box.height() - 2;
        if (x + box.width() > plot.right()) x = p.x() - 9 - box.width();
        if (y < plot.top()) y = p.y() + 4;
        // Strategies on the same spot: stack their labels instead of overprinting them.
        for (bool moved = true; moved;) {
            moved = false;
            for (const QRectF& r : placed)
                if (r.intersects(QRectF(x, y, box.width(), box.height()))) {
                    y = r.bottom() + 1;
                    moved = true;
                }
        }
        placed.emplace_back(x, y, box.width(), box.height());
        labels_[i]->setPos(x, y);
    }
}

void ParetoChart::resizeEvent(QResizeEvent* event) {
    QChartView::resizeEvent(event);
    placeLabels();
}

}  // namespace rl::ui
