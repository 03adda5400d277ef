#include "ui/memory_chart.h"

#include <QApplication>
#include <QGraphicsLineItem>
#include <QLegendMarker>
#include <QLineSeries>
#include <QMouseEvent>
#include <QScatterSeries>
#include <QToolTip>
#include <QValueAxis>
#include <algorithm>
#include <cmath>
#include <utility>

#include "ui/memory_profiler.h"
#include "ui/palette.h"
#include "ui/schedule_palette.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

namespace {

QList<QPointF> to_points(const std::vector<XY>& xy, double divisor) {
    QList<QPointF> out;
    out.reserve(static_cast<qsizetype>(xy.size()));
    for (const XY& p : xy) out.append(QPointF(p.x, p.y / divisor));
    return out;
}

double max_x(const std::vector<XY>& v) {
    return v.empty() ? 0 : v.back().x;
}

QColor mark_color(MarkKind k) {
    switch (k) {
        case MarkKind::Compute:
            return schedule_palette::computed();
        case MarkKind::Recompute:
            return schedule_palette::recomputed();
        case MarkKind::Backward:
            return schedule_palette::backward();
    }
    return Qt::black;
}
double max_y(const std::vector<XY>& v) {
    double m = 0;
    for (const XY& p : v) m = std::max(m, p.y);
    return m;
}

}  // namespace

MemoryChart::MemoryChart(QWidget* parent) : QChartView(parent) {
    auto* chart = new QChart;
    chart->setTitle(QStringLiteral("Memory over time"));
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setMargins(QMargins(6, 6, 6, 6));
    chart->setBackgroundRoundness(0);
    x_ = new QValueAxis;
    x_->setTitleText(QStringLiteral("time since the step began (ms)"));
    x_->setLabelFormat(QStringLiteral("%g"));
    set_axis(x_, AxisFit{});  // round steps from 0 (fit_axis)
    y_ = new QValueAxis;
    // Titled with unit_ (bytes until data says otherwise): updateAxes() retitles only when the
    // unit changes, so a title set apart from it would stay wrong for a network under 1 KiB.
    y_->setTitleText(QStringLiteral("live memory (%1)").arg(QString::fromLatin1(unit_.name)));
    y_->setLabelFormat(QStringLiteral("%g"));
    set_axis(y_, AxisFit{});
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
    cap_ = new QLineSeries;
    QPen cap_pen(QColor(0xc0, 0x39, 0x2b));
    cap_pen.setWidthF(1.5);
    cap_pen.setStyle(Qt::DashLine);
    cap_->setPen(cap_pen);
    chart->addSeries(cap_);
    cap_->attachAxis(x_);
    cap_->attachAxis(y_);
    cap_->setVisible(false);
    cap_failures_ = new QScatterSeries;
    cap_failures_->setName(QStringLiteral("allocation over the cap"));
    cap_failures_->setMarkerShape(QScatterSeries::MarkerShapeStar);
    cap_failures_->setMarkerSize(14);
    cap_failures_->setColor(QColor(0xc0, 0x39, 0x2b));
    chart->addSeries(cap_failures_);
    cap_failures_->attachAxis(x_);
    cap_failures_->attachAxis(y_);
    for (QLegendMarker* lm : chart->legend()->markers(cap_failures_)) lm->setVisible(false);
    for (MarkKind k : {MarkKind::Compute, MarkKind::Recompute, MarkKind::Backward}) {
        auto* m = new QScatterSeries;
        m->setMarkerShape(k == MarkKind::Backward ? QScatterSeries::MarkerShapeRectangle
                                                  : QScatterSeries::MarkerShapeCircle);
        m->setMarkerSize(11);
        m->setColor(mark_color(k));
        m->setBorderColor(Qt::white);
        chart->addSeries(m);
        m->attachAxis(x_);
        m->attachAxis(y_);
        // Always visible (empty draws nothing); only its legend entry comes and goes.
        for (QLegendMarker* lm : chart->legend()->markers(m)) lm->setVisible(false);
        mark_series_[int(k)] = m;
    }
    setChart(chart);
    connect(chart, &QChart::plotAreaChanged, this, [this] { placeMarkLines(); });
    setRenderHint(QPainter::Antialiasing);
    setRubberBand(QChartView::HorizontalRubberBand);
    setMouseTracking(true);
    click_timer_.setSingleShot(true);
    connect(&click_timer_, &QTimer::timeout, this, &MemoryChart::emitPendingClick);
    // Not a tooltip: Qt would show it over the hover read-out ~0.7 s after the mouse stops.
    setWhatsThis(QStringLiteral(
        "Live bytes during one training step. Drag to zoom into a time range, double-click to "
        "zoom out; hover to see the instruction at that moment."));
    cursor_ = new QGraphicsLineItem(chart);
    cursor_->setPen(QPen(QColor(0, 0, 0, 90), 1, Qt::DashLine));
    cursor_->setZValue(20);
    cursor_->hide();
    connect(x_, &QValueAxis::rangeChanged, this, [this](qreal lo, qreal hi) {
        if (in_redraw_) return;
        // A rubber-band zoom: decimate again for the visible range.
        if (lo > 1e-12 || hi < x_max_ - 1e-12) zoomed_ = true;
        // Round ticks inside the zoomed range too.
        in_redraw_ = true;
        x_->setTickInterval(fit_axis(hi - lo).step);
        in_redraw_ = false;
        scheduleRedraw();
    });
    unit_ = byte_unit_for(0);
}

QLineSeries* MemoryChart::measuredSeries(int index) const {
    return tracks_.at(static_cast<size_t>(index)).measured_series;
}
QLineSeries* MemoryChart::predictedSeries(int index) const {
    return tracks_.at(static_cast<size_t>(index)).predicted_series;
}

void MemoryChart::assign(Track& t, const StrategyResult& r) {
    if (t.spec != r.spec || t.label.isEmpty()) t.label = r.spec;  // setResults labels instances
    t.spec = r.spec;
    t.name = r.name;
    t.predicted_ms = r.predicted_timeline;
    t.measured_ms = r.measured_timeline;
    t.instructions = r.instructions;
    t.cap_failure = r.cap_failure;
    t.texts = r.instruction_text;
    applyAxis(t);
    if (t.measured) {
        t.live.clear();
        t.live_by_instruction.clear();
    }
}

void MemoryChart::applyAxis(Track& t) const {
    // On the instruction axis each event sits at its instruction's index: the predicted and the
    // measured timeline (the same events) share their xs.
    auto on_axis =
        [&](const std::shared_ptr<const Timeline>& ms) -> std::shared_ptr<const Timeline> {
        if (!ms || !by_instruction_) return ms;
        auto out = std::make_shared<Timeline>(*ms);
        const std::vector<double> x = instruction_axis(ms->instruction, t.instructions);
        for (size_t i = 0; i < out->points.size() && i < x.size(); ++i) out->points[i].x = x[i];
        return out;
    };
    t.predicted = on_axis(t.predicted_ms);
    t.measured = on_axis(t.measured_ms);
    t.predicted_steps = t.predicted ? stepped(t.predicted->points) : std::vector<XY>{};
    t.host_steps.clear();
    if (t.predicted_ms && !t.predicted_ms->host.empty()) {
        std::vector<XY> host = t.predicted_ms->host;
        if (by_instruction_) {
            const std::vector<double> x =
                instruction_axis(t.predicted_ms->host_instruction, t.instructions);
            for (size_t i = 0; i < host.size() && i < x.size(); ++i) host[i].x = x[i];
        }
        t.host_steps = stepped(host);
    }
    t.measured_steps = t.measured ? stepped(t.measured->points) : std::vector<XY>{};
}

void MemoryChart::setInstructionAxis(bool on) {
    if (on == by_instruction_) return;
    by_instruction_ = on;
    for (Track& t : tracks_) applyAxis(t);
    x_->setTitleText(on ? QStringLiteral("instruction") : timeAxisTitle());
    placed_on_ = nullptr;  // the marks are placed again on the new axis
    placed_keep_.reset();
    resetZoom();
}

QString MemoryChart::timeAxisTitle() const {
    return duration_units_
               ? QStringLiteral("time since the step began (the graph's duration units)")
               : QStringLiteral("time since the step began (ms)");
}

void MemoryChart::setResults(const std::vector<StrategyResult>& results) {
    duration_units_ = in_duration_units(results);
    if (!by_instruction_) x_->setTitleText(timeAxisTitle());
    for (Track& t : tracks_) {
        chart()->removeSeries(t.predicted_series);
        chart()->removeSeries(t.measured_series);
        chart()->removeSeries(t.host_series);
        delete t.predicted_series;
        delete t.measured_series;
        delete t.host_series;
    }
    tracks_.clear();
    tracks_.resize(results.size());
    std::vector<QString> names;
    for (const StrategyResult& r : results) names.push_back(r.name);
    const std::vector<int> instances = instance_numbers(names);
    std::vector<QString> specs;
    for (const StrategyResult& r : results) specs.push_back(r.spec);
    const std::vector<QString> labels = instance_labels(names, specs);
    for (size_t i = 0; i < results.size(); ++i) {
        Track& t = tracks_[i];
        assign(t, results[i]);
        t.label = labels[i];  // its full spec where the strategy has more than one instance
        t.color = instance_color(t.name, instances[i]);
        const QColor c = t.color;
        t.measured_series = new QLineSeries;
        t.measured_series->setName(t.label);
        QPen solid(c);
        solid.setWidthF(2.0);
        t.measured_series->setPen(solid);
        t.predicted_series = new QLineSeries;
        t.predicted_series->setName(t.label + QStringLiteral(" (predicted)"));
        QPen dashed(c.lighter(115));
        dashed.setWidthF(1.5);
        dashed.setStyle(Qt::DashLine);
        t.predicted_series->setPen(dashed);
        t.host_series = new QLineSeries;
        t.host_series->setName(QStringLiteral("host memory, dotted: ") + t.label);
        QPen dotted(c.darker(120));
        dotted.setWidthF(2.0);
        dotted.setStyle(Qt::DotLine);
        t.host_series->setPen(dotted);
        for (QLineSeries* s : {t.predicted_series, t.measured_series, t.host_series}) {
            chart()->addSeries(s);
            s->attachAxis(x_);
            s->attachAxis(y_);
        }
        // One legend entry per strategy, in its colour; a second, dotted, for its host memory
        // when it offloads.
        for (QLegendMarker* m : chart()->legend()->markers(t.predicted_series))
            m->setVisible(false);
        for (QLegendMarker* m : chart()->legend()->markers(t.host_series))
            m->setVisible(!t.host_steps.empty());
    }
    // The node marks above the lines (series paint in the order they were added).
    for (QScatterSeries* m : mark_series_) {
        chart()->removeSeries(m);
        chart()->addSeries(m);
        m->attachAxis(x_);
        m->attachAxis(y_);
        for (QLegendMarker* lm : chart()->legend()->markers(m)) lm->setVisible(m->count() > 0);
    }
    placed_on_ = nullptr;
    placed_keep_.reset();
    zoomed_ = false;
    x_max_ = y_max_ = 0;
    scheduleRedraw();
}

void MemoryChart::setResult(int index, const StrategyResult& result) {
    if (index < 0 || index >= strategyCount()) return;
    assign(tracks_[static_cast<size_t>(index)], result);
    scheduleRedraw();
}

void MemoryChart::beginLive(int index) {
    if (index < 0 || index >= strategyCount()) return;
    Track& t = tracks_[static_cast<size_t>(index)];
    t.measured.reset();
    t.measured_steps.clear();
    t.live.clear();
    t.live_by_instruction.clear();
    scheduleRedraw();
}

void MemoryChart::appendLive(int index, const std::vector<XY>& points,
                             const std::vector<int32_t>& instructions) {
    if (index < 0 || index >= strategyCount() || points.empty()) return;
    Track& t = tracks_[static_cast<size_t>(index)];
    if (t.measured) return;  // the full timeline has arrived already
    t.live.insert(t.live.end(), points.begin(), points.end());
    // On the instruction axis a point sits at the instruction it ended, as the measured
    // timeline's events do once the run is over.
    for (size_t k = 0; k < points.size() && k < instructions.size(); ++k)
        t.live_by_instruction.push_back({static_cast<double>(instructions[k]), points[k].y});
    scheduleRedraw();
}

const std::vector<XY>& MemoryChart::livePoints(int index) const {
    static const std::vector<XY> none;
    if (index < 0 || index >= strategyCount()) return none;
    return tracks_[static_cast<size_t>(index)].liveOn(by_instruction_);
}

void MemoryChart::setBudget(std::optional<uint64_t> bytes) {
    budget_bytes_ = bytes;
    scheduleRedraw();
}

void MemoryChart::setShowPredicted(bool on) {
    show_predicted_ = on;
    scheduleRedraw();
}

void MemoryChart::setShowMeasured(bool on) {
    show_measured_ = on;
    scheduleRedraw();
}

void MemoryChart::resetZoom() {
    zoomed_ = false;
    x_max_ = 0;
    scheduleRedraw();
}

void MemoryChart::scheduleRedraw() {
    redraw_timer_.request();
}

void MemoryChart::flush() {
    redraw_timer_.flush();
}

int MemoryChart::plotColumns() const {
    const int w = static_cast<int>(chart()->plotArea().width());
    return std::max(w, 200);
}

void MemoryChart::updateAxes() {
    double xm = 0, ym = 0;
    for (const Track& t : tracks_) {
        if (show_predicted_ && t.predicted)
            xm = std::max(xm, max_x(t.predicted->points)),
            ym = std::max(ym, max_y(t.predicted->points));
        if (show_predicted_ && !t.host_steps.empty()) ym = std::max(ym, max_y(t.host_steps));
        if (show_measured_) {
            const auto& m = t.measured ? t.measured->points : t.liveOn(by_instruction_);
            xm = std::max(xm, max_x(m));
            ym = std::max(ym, max_y(m));
        }
        if (t.cap_failure)
            ym = std::max(ym, static_cast<double>(t.cap_failure->live + t.cap_failure->requested));
    }
    if (budget_bytes_) ym = std::max(ym, static_cast<double>(*budget_bytes_));
    const ByteUnit unit = byte_unit_for(static_cast<uint64_t>(ym));
    if (unit.divisor != unit_.divisor) {
        unit_ = unit;
        y_->setTitleText(QStringLiteral("live memory (%1)").arg(QString::fromLatin1(unit_.name)));
        y_max_ = 0;
    }
    // Ranges fit the data snugly (a round step, the first multiple above the largest value) and
    // only grow while data streams in (no jitter); a new plan resets them.
    const AxisFit yfit = fit_axis(ym / unit_.divisor * 1.04);
    if (yfit.max > y_max_ || yfit.max < y_max_ * 0.4) {
        y_max_ = yfit.max;
        set_axis(y_, yfit);
    }
    const AxisFit xfit = fit_axis(std::max(xm, 1e-3));
    if (xfit.max > x_max_ || xfit.max < x_max_ * 0.4) {
        x_max_ = xfit.max;
        if (!zoomed_) set_axis(x_, xfit);
    }
}

void MemoryChart::redraw() {
    in_redraw_ = true;
    updateAxes();
    const double x0 = x_->min(), x1 = x_->max();
    const int cols = plotColumns();
    std::optional<uint64_t> cap;
    QList<QPointF> failures;
    for (Track& t : tracks_) {
        const std::vector<XY>& m = t.measured ? t.measured_steps : t.liveOn(by_instruction_);
        if (t.cap_failure) {
            cap = std::max(cap.value_or(0), t.cap_failure->cap);
            // The failed allocation: at the last event measured (the failure came right after),
            // or at the failing instruction on the instruction axis; at the bytes it would reach.
            double x = 0;
            if (by_instruction_)
                x = static_cast<double>(std::max<long>(t.cap_failure->instruction, -1));
            else if (t.measured && !t.measured->points.empty())
                x = t.measured->points.back().x;
            failures.append(
                QPointF(x, static_cast<double>(t.cap_failure->live + t.cap_failure->requested) /
                               unit_.divisor));
        }
        if (show_measured_) {
            t.measured_series->replace(to_points(
                decimate_min_max(t.measured ? m : stepped(m), x0, x1, cols), unit_.divisor));
        } else {
            t.measured_series->clear();
        }
        if (show_predicted_ && t.predicted) {
            QList<QPointF> pts =
                to_points(decimate_min_max(t.predicted_steps, x0, x1, cols), unit_.divisor);
            // Dashing thousands of short segments costs ~15 ms a series to paint; a dense
            // prediction is drawn as a thin translucent line instead (same colour).
            const bool dense = pts.size() > 1500;
            if (dense != t.predicted_dense) {
                t.predicted_dense = dense;
                const QColor c = t.color;
                QPen pen(dense ? QColor(c.red(), c.green(), c.blue(), 150) : c.lighter(115));
                pen.setWidthF(dense ? 1.0 : 1.5);
                pen.setStyle(dense ? Qt::SolidLine : Qt::DashLine);
                t.predicted_series->setPen(pen);
            }
            t.predicted_series->replace(pts);
        } else {
            t.predicted_series->clear();
        }
        if (show_predicted_ && !t.host_steps.empty())
            t.host_series->replace(
                to_points(decimate_min_max(t.host_steps, x0, x1, cols), unit_.divisor));
        else
            t.host_series->clear();
    }
    if (budget_bytes_) {
        const double y = static_cast<double>(*budget_bytes_) / unit_.divisor;
        budget_->replace(QList<QPointF>{{x0, y}, {x1, y}});
        budget_->setName(QStringLiteral("budget %1").arg(bytes_text(*budget_bytes_)));
        budget_->setVisible(true);
    } else {
        budget_->clear();
        budget_->setVisible(false);
    }
    if (cap) {
        const double y = static_cast<double>(*cap) / unit_.divisor;
        cap_->replace(QList<QPointF>{{x0, y}, {x1, y}});
        cap_->setName(QStringLiteral("cap %1").arg(bytes_text(*cap)));
        cap_->setVisible(true);
    } else {
        cap_->clear();
        cap_->setVisible(false);
    }
    cap_failures_->replace(failures);
    for (QLegendMarker* lm : chart()->legend()->markers(cap_failures_))
        lm->setVisible(!failures.isEmpty());
    redrawMarks();
    in_redraw_ = false;
}

// ---- the selected node's marks -----------------------------------------------------------------

void MemoryChart::setNodeMarks(int track, const QString& node_name, std::vector<NodeMark> marks) {
    marks_track_ = track;
    marks_name_ = node_name;
    marks_ = std::move(marks);
    placed_on_ = nullptr;
    placed_keep_.reset();
    // Only the marks change: no need to decimate every line again (a full redraw of 100k-point
    // timelines costs tens of milliseconds; this is a pass over one timeline).
    redrawMarks();
}

void MemoryChart::clearNodeMarks() {
    setNodeMarks(-1, QString(), {});
}

void MemoryChart::redrawMarks() {
    // The timeline the marks sit on: the predicted one while shown (complete before a run), else
    // the measured one.
    std::shared_ptr<const Timeline> on;
    if (marks_track_ >= 0 && marks_track_ < strategyCount() && !marks_.empty()) {
        const Track& t = tracks_[size_t(marks_track_)];
        if (show_predicted_ && t.predicted)
            on = t.predicted;
        else if (show_measured_ && t.measured)
            on = t.measured;
    }
    if (on.get() != placed_on_ || !on) {
        placed_ = on ? marks_ : std::vector<NodeMark>{};
        if (on) place_marks(placed_, *on);
        placed_on_ = on.get();
        placed_keep_ = on;
    }
    QList<QPointF> points[3];
    for (const NodeMark& m : placed_)
        if (m.time_ms) points[int(m.kind)].append(QPointF(*m.time_ms, m.bytes / unit_.divisor));
    for (int k = 0; k < 3; ++k) {
        QScatterSeries* s = mark_series_[k];
        s->replace(points[k]);
        s->setName(
            QStringLiteral("%1 %2").arg(QLatin1String(mark_kind_name(MarkKind(k))), marks_name_));
        for (QLegendMarker* lm : chart()->legend()->markers(s))
            lm->setVisible(!points[k].isEmpty());
    }
    placeMarkLines();
}

void MemoryChart::placeMarkLines() {
    size_t used = 0;
    const QRectF plot = chart()->plotArea();
    const double x0 = x_->min(), x1 = x_->max();
    for (const NodeMark& m : placed_) {
        if (!m.time_ms || *m.time_ms < x0 || *m.time_ms > x1) continue;
        if (used == mark_lines_.size()) {
            auto* line = new QGraphicsLineItem(chart());
            line->setZValue(15);
            mark_lines_.push_back(line);
        }
        QGraphicsLineItem* line = mark_lines_[used++];
        QColor c = mark_color(m.kind);
        c.setAlpha(170);
        line->setPen(QPen(c, 1.2));
        const double x = chart()->mapToPosition(QPointF(*m.time_ms, 0), mark_series_[0]).x();
        line->setLine(x, plot.top(), x, plot.bottom());
        line->show();
    }
    for (size_t i = used; i < mark_lines_.size(); ++i) mark_lines_[i]->hide();
}

std::optional<std::pair<int, long>> MemoryChart::instructionAt(QPointF chart_pos) const {
    if (!chart()->plotArea().contains(chart_pos)) return std::nullopt;
    const double x = chart()->mapToValue(chart_pos, mark_series_[0]).x();
    std::optional<std::pair<int, long>> best;
    double best_distance = 0;
    // The marked strategy first: on a tie (lines drawn over each other) it wins.
    std::vector<int> order;
    if (marks_track_ >= 0 && marks_track_ < strategyCount()) order.push_back(marks_track_);
    for (int k = 0; k < strategyCount(); ++k)
        if (k != marks_track_) order.push_back(k);
    for (int k : order) {
        const Track& t = tracks_[size_t(k)];
        for (const Timeline* tl : {show_measured_ ? t.measured.get() : nullptr,
                                   show_predicted_ ? t.predicted.get() : nullptr}) {
            if (!tl || tl->points.empty() || x > tl->points.back().x) continue;
            const size_t i = index_at(tl->points, x);
            if (i >= tl->instruction.size() || tl->instruction[i] < 0) continue;
            const double y =
                chart()
                    ->mapToPosition(QPointF(x, tl->points[i].y / unit_.divisor), mark_series_[0])
                    .y();
            const double d = std::abs(y - chart_pos.y());
            if (!best || d < best_distance) {
                best = std::pair<int, long>(k, tl->instruction[i]);
                best_distance = d;
            }
        }
    }
    return best;
}

void MemoryChart::mousePressEvent(QMouseEvent* event) {
    press_pos_ = event->position().toPoint();
    after_double_click_ = false;
    QChartView::mousePressEvent(event);
}

void MemoryChart::mouseReleaseEvent(QMouseEvent* event) {
    const bool click = event->button() == Qt::LeftButton &&
                       (event->position().toPoint() - press_pos_).manhattanLength() <= 3;
    QChartView::mouseReleaseEvent(event);
    if (!click) return;
    if (after_double_click_) {  // the release that ends a double-click: a reset, not a click
        after_double_click_ = false;
        return;
    }
    const QPointF pos = chart()->mapFromScene(mapToScene(event->position().toPoint()));
    // A click waits out the double-click interval: a double-click resets the zoom and selects
    // nothing.
    pending_click_ = instructionAt(pos);
    if (pending_click_) click_timer_.start(QApplication::doubleClickInterval());
}

void MemoryChart::emitPendingClick() {
    if (const auto hit = std::exchange(pending_click_, std::nullopt))
        emit instructionClicked(hit->first, hit->second);
}

QString MemoryChart::hoverText(double time_ms) const {
    QStringList lines;
    lines << (by_instruction_ ? QStringLiteral("<b>instruction %1</b>")
                                    .arg(static_cast<long>(std::floor(time_ms)))
                              : QStringLiteral("<b>t = %1 ms</b>").arg(ms_text(time_ms)));
    for (const Track& t : tracks_) {
        // Measured and predicted each get a line when both are shown: they differ in time.
        const std::pair<const Timeline*, QString> kinds[] = {
            {show_measured_ ? t.measured.get() : nullptr, QString()},
            {show_predicted_ ? t.predicted.get() : nullptr, QStringLiteral(" (predicted)")}};
        for (const auto& [tl, kind] : kinds) {
            if (!tl || tl->points.empty() || time_ms > tl->points.back().x) continue;
            const size_t i = index_at(tl->points, time_ms);
            const int32_t ins = tl->instruction[i];
            QString what = QStringLiteral("—");
            if (t.texts && ins >= 0 && static_cast<size_t>(ins) < t.texts->size())
                what = QStringLiteral("#%1 %2").arg(ins).arg((*t.texts)[static_cast<size_t>(ins)]);
            lines << QStringLiteral("<span style='color:%1'>■</span> %2%3: %4 — %5")
                         .arg(t.color.name(), t.label.toHtmlEscaped(), kind,
                              bytes_text(static_cast<uint64_t>(tl->points[i].y)),
                              what.toHtmlEscaped());
        }
    }
    for (const Track& t : tracks_)
        if (t.cap_failure && lines.size() > 1)
            lines << QStringLiteral("%1: allocating %2 for %3 at #%4 went over the cap of %5")
                         .arg(t.label.toHtmlEscaped(), bytes_text(t.cap_failure->requested),
                              t.cap_failure->what.toHtmlEscaped())
                         .arg(t.cap_failure->instruction)
                         .arg(bytes_text(t.cap_failure->cap));
    if (budget_bytes_ && lines.size() > 1)
        lines << QStringLiteral("budget %1").arg(bytes_text(*budget_bytes_));
    return lines.size() > 1 ? lines.join(QStringLiteral("<br>")) : QString();
}

void MemoryChart::mouseMoveEvent(QMouseEvent* event) {
    QChartView::mouseMoveEvent(event);
    const QPointF scene = mapToScene(event->position().toPoint());
    const QPointF pos = chart()->mapFromScene(scene);
    const QRectF plot = chart()->plotArea();
    if (!plot.contains(pos)) {
        cursor_->hide();
        QToolTip::hideText();
        return;
    }
    cursor_->setLine(pos.x(), plot.top(), pos.x(), plot.bottom());
    cursor_->show();
    const double x = chart()->mapToValue(pos).x();
    const QString text = hoverText(x);
    if (!text.isEmpty())
        QToolTip::showText(event->globalPosition().toPoint(), text, this);
    else
        QToolTip::hideText();
}

void MemoryChart::leaveEvent(QEvent* event) {
    cursor_->hide();
    QChartView::leaveEvent(event);
}

void MemoryChart::mouseDoubleClickEvent(QMouseEvent* event) {
    click_timer_.stop();
    pending_click_.reset();
    after_double_click_ = true;
    resetZoom();
    QChartView::mouseDoubleClickEvent(event);
}

void MemoryChart::resizeEvent(QResizeEvent* event) {
    QChartView::resizeEvent(event);
    scheduleRedraw();  // the pixel width changed: decimate again
}

}  // namespace rl::ui
