#include "ui/pareto_chart.h"

#include <QGraphicsSimpleTextItem>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QScatterSeries>
#include <QToolTip>
#include <QValueAxis>
#include <algorithm>
#include <cmath>

#include "ui/palette.h"
#include "ui/results_model.h"

namespace rl::ui {

namespace {

QString point_text(const QString& title, double ms, double bytes, uint64_t host = 0) {
    QString t =
        QStringLiteral("<b>%1</b><br>peak %2 · recompute %3 ms")
            .arg(title.toHtmlEscaped(), bytes_text(static_cast<uint64_t>(bytes)), ms_text(ms));
    if (host)
        t += QStringLiteral("<br>host memory %1 (offloaded; the dot's area)").arg(bytes_text(host));
    return t;
}

// A strategy that offloads draws its dots larger, by area in proportion to its host peak
// against the largest host peak on the chart; one that keeps everything on the device keeps
// the plain size.
qreal marker_size(qreal base, uint64_t host, uint64_t max_host) {
    if (!host || !max_host) return base;
    return base + 14.0 * std::sqrt(static_cast<double>(host) / static_cast<double>(max_host));
}

}  // namespace

ParetoChart::ParetoChart(QWidget* parent) : QChartView(parent) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Peak memory vs recompute time"));
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setMargins(QMargins(6, 6, 6, 6));
    chart->setBackgroundRoundness(0);
    x_ = new QValueAxis;
    x_->setTitleText(QStringLiteral("recompute time (ms)   ● measured   ○ predicted"));
    x_->setLabelFormat(QStringLiteral("%g"));
    y_ = new QValueAxis;
    y_->setTitleText(QStringLiteral("peak memory (MiB)"));
    y_->setLabelFormat(QStringLiteral("%g"));
    chart->addAxis(x_, Qt::AlignBottom);
    chart->addAxis(y_, Qt::AlignLeft);
    budget_ = new QLineSeries;
    budget_->setName(QStringLiteral("budget"));
    QPen pen(QColor(0x55, 0x55, 0x55));
    pen.setStyle(Qt::DashDotLine);
    pen.setWidthF(1.5);
    budget_->setPen(pen);
    chart->addSeries(budget_);
    budget_->attachAxis(x_);
    budget_->attachAxis(y_);
    budget_->setVisible(false);
    setChart(chart);
    setRenderHint(QPainter::Antialiasing);
    setMouseTracking(true);
    setRubberBand(QChartView::RectangleRubberBand);  // drag to zoom; right-click zooms out
    // Not a tooltip: Qt would show it over the hover read-out ~0.7 s after the mouse stops.
    setWhatsThis(QStringLiteral(
        "Each strategy's peak memory against the time it spends recomputing: lower-left is "
        "better. Filled: measured; hollow: predicted by the simulator and the cost model. Sweep "
        "draws each strategy's trade-off curve and the optimal frontier; hover a point for its "
        "figures."));
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

void ParetoChart::setBudget(std::optional<uint64_t> bytes) {
    budget_bytes_ = bytes;
    scheduleRebuild();
}

void ParetoChart::scheduleRebuild() {
    rebuild_timer_.request();
}

void ParetoChart::flush() {
    rebuild_timer_.flush();
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

int ParetoChart::curveCount() const {
    return static_cast<int>(
        std::count_if(curves_.begin(), curves_.end(), [](const Curve& c) { return !c.frontier; }));
}

int ParetoChart::curvePointCount(const QString& spec, bool measured) const {
    for (const Curve& c : curves_)
        if (!c.frontier && c.spec == spec) return (measured ? c.measured : c.predicted)->count();
    return -1;
}

bool ParetoChart::hasFrontier() const {
    return std::any_of(curves_.begin(), curves_.end(), [](const Curve& c) { return c.frontier; });
}

int ParetoChart::frontierPointCount() const {
    for (const Curve& c : curves_)
        if (c.frontier) return c.predicted->count();
    return 0;
}

QStringList ParetoChart::seriesNames() const {
    QStringList out;
    for (QAbstractSeries* s : chart()->series())
        if (s->isVisible()) out << s->name();
    return out;
}

void ParetoChart::rebuild() {
    QChart* c = chart();
    // Strategies come and go with a plan; at a few dozen series, recreating them is cheap. The
    // axes and the budget line stay.
    for (auto* s : predicted_) c->removeSeries(s), delete s;
    for (auto* s : measured_) c->removeSeries(s), delete s;
    for (const Curve& k : curves_)
        for (QAbstractSeries* s :
             {static_cast<QAbstractSeries*>(k.predicted), static_cast<QAbstractSeries*>(k.measured),
              static_cast<QAbstractSeries*>(k.predicted_line),
              static_cast<QAbstractSeries*>(k.measured_line)}) {
            c->removeSeries(s);
            delete s;
        }
    for (auto* l : labels_) delete l;
    predicted_.clear();
    measured_.clear();
    error_bars_.clear();
    curves_.clear();
    labels_.clear();
    label_at_.clear();
    hover_.clear();

    struct Row {
        QString name, label;
        int instance;
        bool executed;
        double pred_x, pred_y, meas_x, meas_y;
        std::optional<Spread> x_spread;  // the measured recompute time's min–max (error bar)
        uint64_t pred_host = 0, meas_host = 0;  // host peaks of an offloading plan
    };
    std::vector<Row> rows;
    double xmax = 0, ymax = 0;
    if (model_) {
        std::vector<QString> names;
        for (const auto& r : model_->results()) names.push_back(r.name);
        const std::vector<int> instances = instance_numbers(names);
        std::vector<QString> specs;
        for (const auto& r : model_->results()) specs.push_back(r.spec);
        const std::vector<QString> labels = instance_labels(names, specs);
        for (size_t i = 0; i < model_->results().size(); ++i) {
            const StrategyResult& r = model_->results()[i];
            if (!r.planned) continue;
            Row row{r.name,
                    labels[i],
                    instances[i],
                    r.executed,
                    r.predicted_recompute_ms,
                    static_cast<double>(r.predicted_peak),
                    r.recompute_ms,
                    static_cast<double>(r.measured_peak),
                    std::nullopt,
                    r.predicted_host_peak,
                    r.executed ? r.measured_host_peak : 0};
            if (r.executed && r.times && r.times->recompute.samples > 1)
                row.x_spread = r.times->recompute;
            xmax = std::max({xmax, row.pred_x, row.executed ? row.meas_x : 0.0,
                             row.x_spread ? row.x_spread->max : 0.0});
            ymax = std::max({ymax, row.pred_y, row.executed ? row.meas_y : 0.0});
            rows.push_back(row);
        }
    }
    for (const SweepCurve& s : sweeps_)
        for (const SweepSample& p : s.samples) {
            xmax = std::max(xmax, p.predicted.x);
            ymax = std::max(ymax, p.predicted.y);
            if (p.measured)
                xmax = std::max(xmax, p.measured->x), ymax = std::max(ymax, p.measured->y);
        }
    if (budget_bytes_) ymax = std::max(ymax, static_cast<double>(*budget_bytes_));
    const ByteUnit unit = byte_unit_for(static_cast<uint64_t>(ymax));
    divisor_ = unit.divisor;
    y_->setTitleText(QStringLiteral("peak memory (%1)").arg(QString::fromLatin1(unit.name)));
    set_axis(x_, fit_axis(std::max(xmax * 1.08, 1e-3)));
    // The y axis fits the points (and the budget), not 0 to the top: unet's 40 sweep points lie
    // within 0.4 % of each other.
    double ylo = ymax;
    for (const Row& row : rows) ylo = std::min({ylo, row.pred_y, row.executed ? row.meas_y : ymax});
    for (const SweepCurve& s : sweeps_)
        for (const SweepSample& p : s.samples)
            ylo = std::min({ylo, p.predicted.y, p.measured ? p.measured->y : ymax});
    if (budget_bytes_) ylo = std::min(ylo, static_cast<double>(*budget_bytes_));
    const double pad = (ymax - ylo) * 0.04;
    set_axis(y_, fit_range(std::max(0.0, ylo - pad) / divisor_,
                           std::max((ymax + pad) / divisor_, 1e-3)));

    if (budget_bytes_) {
        const double y = static_cast<double>(*budget_bytes_) / divisor_;
        budget_->replace(QList<QPointF>{{0, y}, {x_->max(), y}});
        budget_->setName(QStringLiteral("budget %1").arg(bytes_text(*budget_bytes_)));
        budget_->setVisible(true);
    } else {
        budget_->clear();
        budget_->setVisible(false);
    }

    auto add = [&](QAbstractSeries* s) {
        c->addSeries(s);
        s->attachAxis(x_);
        s->attachAxis(y_);
    };
    auto hide_legend = [&](QAbstractSeries* s) {
        for (QLegendMarker* m : c->legend()->markers(s)) m->setVisible(false);
    };
    for (const SweepCurve& s : sweeps_) {
        Curve k;
        k.spec = s.spec;
        k.frontier = s.frontier;
        const QColor col =
            s.frontier ? QColor(0x22, 0x22, 0x22) : instance_color(s.name, s.instance);
        std::vector<XY> pred, meas;
        for (const SweepSample& p : s.samples) {
            pred.push_back({p.predicted.x, p.predicted.y / divisor_});
            hover_.push_back({QPointF(pred.back().x, pred.back().y),
                              point_text(readable_budget(p.spec) + QStringLiteral(" (predicted)"),
                                         p.predicted.x, p.predicted.y)});
            if (!p.measured) continue;
            meas.push_back({p.measured->x, p.measured->y / divisor_});
            hover_.push_back({QPointF(meas.back().x, meas.back().y),
                              point_text(readable_budget(p.spec) + QStringLiteral(" (measured)"),
                                         p.measured->x, p.measured->y)});
        }
        auto points = [](const std::vector<XY>& xy) {
            QList<QPointF> out;
            for (const XY& p : xy) out.append(QPointF(p.x, p.y));
            return out;
        };
        k.predicted_line = new QLineSeries;
        k.measured_line = new QLineSeries;
        QPen pp(col);
        pp.setWidthF(s.frontier ? 2.6 : 1.4);
        if (!s.frontier) pp.setStyle(Qt::DashLine);
        k.predicted_line->setPen(pp);
        k.predicted_line->replace(points(lower_envelope(pred)));
        QPen mp(col);
        mp.setWidthF(1.8);
        k.measured_line->setPen(mp);
        k.measured_line->replace(points(lower_envelope(meas)));
        k.predicted = new QScatterSeries;
        k.predicted->setMarkerShape(QScatterSeries::MarkerShapeCircle);
        k.predicted->setMarkerSize(s.frontier ? 6 : 8);
        k.predicted->setPen(QPen(col, 1.5));
        // Hollow like every predicted point: the frontier is predicted, never measured (filled).
        k.predicted->setBrush(QBrush(Qt::white));
        k.predicted->replace(points(pred));
        k.measured = new QScatterSeries;
        k.measured->setMarkerShape(QScatterSeries::MarkerShapeCircle);
        k.measured->setMarkerSize(7);
        k.measured->setPen(QPen(col.darker(130), 1));
        k.measured->setBrush(col);
        k.measured->replace(points(meas));
        // Named by spec; the legend shows the frontier only: an instance's curve has the colour
        // of its point, which has the legend entry.
        const QString name = s.frontier
                                 ? (s.spec == QLatin1String("optimal")
                                        ? QStringLiteral("optimal frontier")
                                        : QStringLiteral("optimal frontier (%1)").arg(s.spec))
                                 : QStringLiteral("%1 sweep").arg(s.spec);
        k.predicted_line->setName(name);
        k.measured_line->setName(name + QStringLiteral(" (measured)"));
        k.predicted->setName(name + QStringLiteral(" points"));
        k.measured->setName(name + QStringLiteral(" (measured) points"));
        for (QAbstractSeries* x : {static_cast<QAbstractSeries*>(k.predicted_line),
                                   static_cast<QAbstractSeries*>(k.measured_line),
                                   static_cast<QAbstractSeries*>(k.predicted),
                                   static_cast<QAbstractSeries*>(k.measured)}) {
            add(x);
            if (!(s.frontier && x == k.predicted_line)) hide_legend(x);
        }
        curves_.push_back(k);
    }
    uint64_t max_host = 0;
    for (const Row& row : rows) max_host = std::max({max_host, row.pred_host, row.meas_host});
    x_->setTitleText(max_host ? QStringLiteral("recompute time (ms)   ● measured   ○ predicted   · "
                                               " larger dot: more host memory (offload)")
                              : QStringLiteral("recompute time (ms)   ● measured   ○ predicted"));
    for (const Row& row : rows) {
        const QColor col = instance_color(row.name, row.instance);
        auto* pred = new QScatterSeries;
        pred->setName(row.label + QStringLiteral(" (predicted)"));
        pred->setMarkerShape(QScatterSeries::MarkerShapeCircle);
        pred->setMarkerSize(marker_size(13, row.pred_host, max_host));
        pred->setBrush(Qt::NoBrush);
        pred->setPen(QPen(col, 2));
        pred->append(row.pred_x, row.pred_y / divisor_);
        hover_.push_back({QPointF(row.pred_x, row.pred_y / divisor_),
                          point_text(row.label + QStringLiteral(" (predicted)"), row.pred_x,
                                     row.pred_y, row.pred_host)});
        auto* meas = new QScatterSeries;
        meas->setName(row.label);
        meas->setMarkerShape(QScatterSeries::MarkerShapeCircle);
        meas->setMarkerSize(marker_size(10, row.meas_host, max_host));
        meas->setBrush(col);
        meas->setPen(QPen(col.darker(130), 1));
        if (row.executed) {
            meas->append(row.meas_x, row.meas_y / divisor_);
            hover_.push_back({QPointF(row.meas_x, row.meas_y / divisor_),
                              point_text(row.label + QStringLiteral(" (measured)"), row.meas_x,
                                         row.meas_y, row.meas_host)});
        }
        if (row.x_spread) {
            // The spread of the measured recompute time over the timed runs, as an error bar
            // with end caps: (min) |—•—| (max) at the measured peak.
            const double y = row.meas_y / divisor_;
            const double cap = (y_->max() - y_->min()) * 0.012;
            const double lo = row.x_spread->min, hi = row.x_spread->max;
            auto* bar = new QLineSeries;
            bar->setName(row.label + QStringLiteral(" (spread)"));
            bar->setPen(QPen(col.darker(130), 1.4));
            bar->replace(QList<QPointF>{
                {lo, y - cap}, {lo, y + cap}, {lo, y}, {hi, y}, {hi, y + cap}, {hi, y - cap}});
            add(bar);
            hide_legend(bar);
            error_bars_.push_back(bar);
            hover_.push_back({QPointF(lo, y), QStringLiteral("%1: recompute %2 ms at the fastest "
                                                             "of %3 timed runs")
                                                  .arg(row.label, ms_text(lo))
                                                  .arg(row.x_spread->samples)});
            hover_.push_back({QPointF(hi, y), QStringLiteral("%1: recompute %2 ms at the slowest "
                                                             "of %3 timed runs")
                                                  .arg(row.label, ms_text(hi))
                                                  .arg(row.x_spread->samples)});
        }
        add(pred);
        add(meas);
        hide_legend(pred);
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

QString ParetoChart::hoverText(QPointF pos) const {
    const QPointF at = chart()->mapFromScene(mapToScene(pos.toPoint()));
    constexpr double kReach = 9;  // pixels
    // Every point under the cursor, nearest first: strategies that land on the same spot (equal
    // peaks, recompute times within a pixel) are all named rather than one hiding the others.
    std::vector<std::pair<double, const HoverPoint*>> near;
    for (const HoverPoint& h : hover_) {
        const QPointF p = chart()->mapToPosition(h.value);
        const double dx = p.x() - at.x(), dy = p.y() - at.y(), d = dx * dx + dy * dy;
        if (d <= kReach * kReach) near.emplace_back(d, &h);
    }
    std::stable_sort(near.begin(), near.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    QStringList texts;
    for (const auto& [d, h] : near) texts << h->text;
    return texts.join(QStringLiteral("<hr>"));
}

void ParetoChart::mouseMoveEvent(QMouseEvent* event) {
    QChartView::mouseMoveEvent(event);
    const QString text = hoverText(event->position());
    if (!text.isEmpty())
        QToolTip::showText(event->globalPosition().toPoint(), text, this);
    else
        QToolTip::hideText();
}

void ParetoChart::resizeEvent(QResizeEvent* event) {
    QChartView::resizeEvent(event);
    placeLabels();
}

}  // namespace rl::ui
