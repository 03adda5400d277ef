#include "ui/schedule_matrix.h"

#include <QApplication>
#include <QFileInfo>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QSaveFile>
#include <QToolTip>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <cmath>

#include "ui/chart_export.h"
#include "ui/node_selection.h"
#include "ui/qt_text.h"
#include "ui/schedule_palette.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

namespace sp = schedule_palette;

namespace {

constexpr int kLegendHeight = 26;
constexpr int kMargin = 8;

QColor cell_color(uint8_t f) {
    if (f & ScheduleMatrix::Recomputed) return sp::recomputed();
    if (f & ScheduleMatrix::Computed) return sp::computed();
    if (f & ScheduleMatrix::Backward) return sp::backward();
    if (f & ScheduleMatrix::Kept) return sp::kept();
    if (f & ScheduleMatrix::Freed) return sp::free_mark();
    return QColor(0xff, 0xff, 0xff);
}

}  // namespace

ScheduleMatrixView::ScheduleMatrixView(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setObjectName(QStringLiteral("scheduleMatrix"));
    setAutoFillBackground(true);
    QPalette pal = palette();
    pal.setColor(QPalette::Window, Qt::white);
    setPalette(pal);
    // Not a tooltip: Qt would show it over the hover read-out ~0.7 s after the mouse stops.
    setWhatsThis(QStringLiteral(
        "Rows: the forward, then each backward step; columns: nodes. Click a column to select "
        "its node."));
}

void ScheduleMatrixView::setSelection(NodeSelection* selection) {
    if (selection_) disconnect(selection_, nullptr, this, nullptr);
    selection_ = selection;
    if (selection_) {
        connect(selection_, &NodeSelection::changed, this, [this](int n) {
            selected_ = n;
            update();
        });
        selected_ = selection_->node();
    }
}

void ScheduleMatrixView::setTrace(std::shared_ptr<const ScheduleTrace> trace) {
    trace_ = std::move(trace);
    matrix_ = trace_ ? schedule_matrix(*trace_->graph, trace_->plan.schedule) : ScheduleMatrix{};
    n0_ = s0_ = 0;  // a new plan is shown whole
    nv_ = matrix_.nodes;
    sv_ = matrix_.stages;
    rebuildImage();
    layoutGrid();
    update();
}

void ScheduleMatrixView::setCurrentInstruction(long index) {
    if (current_ == index) return;
    current_ = index;
    update();
}

void ScheduleMatrixView::rebuildImage() {
    if (matrix_.stages == 0 || matrix_.nodes == 0) {
        cells_ = QImage();
        return;
    }
    cells_ = QImage(matrix_.nodes, matrix_.stages, QImage::Format_RGB32);
    for (int s = 0; s < matrix_.stages; ++s) {
        auto* line = reinterpret_cast<QRgb*>(cells_.scanLine(s));
        for (int n = 0; n < matrix_.nodes; ++n) {
            const uint8_t f = matrix_.at(s, n);
            // One pixel per cell: a Free shows as red only where nothing else happens.
            line[n] = cell_color(f).rgb();
        }
    }
}

void ScheduleMatrixView::layoutGrid() {
    const QFontMetrics fm(font());
    label_left_ = 0;
    label_top_ = 0;
    if (matrix_.stages == 0) return;
    int longest = 0;
    for (const auto& name : matrix_.stage_names)
        longest = std::max(longest, fm.horizontalAdvance(to_qstring(name)));
    int node_longest = 0;
    if (trace_)
        for (NodeId n = 0; n < matrix_.nodes; ++n)
            node_longest = std::max(node_longest,
                                    fm.horizontalAdvance(to_qstring(trace_->graph->node(n).name)));
    const int avail_w = width() - 2 * kMargin;
    const int avail_h = height() - 2 * kMargin - kLegendHeight;
    label_left_ = std::min(longest + 10, avail_w / 3);
    // Column labels at 60°: their height is about the name's length × sin 60°.
    label_top_ = std::min(static_cast<int>(node_longest * 0.87) + 12, avail_h / 3);
    const double cw = double(avail_w - label_left_) / std::max(1, nv_);
    const double ch = double(avail_h - label_top_) / std::max(1, sv_);
    show_columns_ = cw >= fm.height() * 0.9;
    show_rows_ = ch >= fm.height() * 0.8;
    if (!show_columns_) label_top_ = 6;
    if (!show_rows_)
        label_left_ = std::min(label_left_, fm.horizontalAdvance(QStringLiteral("backward")) + 10);
    grid_ = QRect(kMargin + label_left_, kMargin + label_top_, avail_w - label_left_,
                  avail_h - label_top_);
}

void ScheduleMatrixView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    layoutGrid();
}

QRect ScheduleMatrixView::cellRect(int stage, int node) const {
    if (matrix_.stages == 0 || nv_ == 0 || sv_ == 0) return {};
    const double cw = double(grid_.width()) / nv_;
    const double ch = double(grid_.height()) / sv_;
    node -= n0_;
    stage -= s0_;
    const int x0 = grid_.left() + int(std::floor(node * cw)),
              x1 = grid_.left() + int(std::floor((node + 1) * cw));
    const int y0 = grid_.top() + int(std::floor(stage * ch)),
              y1 = grid_.top() + int(std::floor((stage + 1) * ch));
    return QRect(x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0));
}

QPoint ScheduleMatrixView::cellAt(QPoint pos) const {
    if (matrix_.stages == 0 || nv_ == 0 || sv_ == 0 || !grid_.contains(pos)) return {-1, -1};
    const int n = n0_ + int((pos.x() - grid_.left()) * double(nv_) / grid_.width());
    const int s = s0_ + int((pos.y() - grid_.top()) * double(sv_) / grid_.height());
    return {std::clamp(n, n0_, n0_ + nv_ - 1), std::clamp(s, s0_, s0_ + sv_ - 1)};
}

void ScheduleMatrixView::setView(int n0, int s0, int nv, int sv) {
    nv_ = std::clamp(nv, std::min(2, matrix_.nodes), matrix_.nodes);
    sv_ = std::clamp(sv, std::min(2, matrix_.stages), matrix_.stages);
    n0_ = std::clamp(n0, 0, matrix_.nodes - nv_);
    s0_ = std::clamp(s0, 0, matrix_.stages - sv_);
    layoutGrid();
    update();
}

void ScheduleMatrixView::zoomAt(QPoint pos, double factor) {
    if (matrix_.stages == 0 || !(factor > 0)) return;
    const QPoint c = cellAt(pos);
    // The fraction of the view left of / above the pointer stays the same.
    const double fx = grid_.width() > 0 ? double(pos.x() - grid_.left()) / grid_.width() : 0.5;
    const double fy = grid_.height() > 0 ? double(pos.y() - grid_.top()) / grid_.height() : 0.5;
    const int nv = std::max(1, int(std::lround(nv_ / factor)));
    const int sv = std::max(1, int(std::lround(sv_ / factor)));
    const double cn = c.x() >= 0 ? c.x() + 0.5 : n0_ + nv_ / 2.0;
    const double cs = c.y() >= 0 ? c.y() + 0.5 : s0_ + sv_ / 2.0;
    setView(int(std::lround(cn - std::clamp(fx, 0.0, 1.0) * nv)),
            int(std::lround(cs - std::clamp(fy, 0.0, 1.0) * sv)), nv, sv);
}

void ScheduleMatrixView::panBy(int nodes, int stages) {
    setView(n0_ + nodes, s0_ + stages, nv_, sv_);
}

void ScheduleMatrixView::resetZoom() {
    setView(0, 0, matrix_.nodes, matrix_.stages);
}

void ScheduleMatrixView::wheelEvent(QWheelEvent* event) {
    const int steps = event->angleDelta().y() / 120;
    if (steps == 0) return;
    zoomAt(event->position().toPoint(), std::pow(1.25, steps));
    event->accept();
}

void ScheduleMatrixView::mouseDoubleClickEvent(QMouseEvent*) {
    resetZoom();
}

QString ScheduleMatrixView::cellText(int stage, int node) const {
    if (!trace_ || stage < 0 || node < 0) return {};
    const uint8_t f = matrix_.at(stage, node);
    QStringList what;
    if (f & ScheduleMatrix::Computed) what << QStringLiteral("computed");
    if (f & ScheduleMatrix::Recomputed) what << QStringLiteral("recomputed");
    if (f & ScheduleMatrix::Kept) what << QStringLiteral("kept (live as the stage begins)");
    if (f & ScheduleMatrix::Backward) what << QStringLiteral("its backward runs");
    if (f & ScheduleMatrix::Freed) what << QStringLiteral("freed");
    if (what.isEmpty()) what << QStringLiteral("not in memory");
    return QStringLiteral("<b>%1</b> in stage <i>%2</i> (instructions %3–%4):<br>%5")
        .arg(to_qstring(trace_->graph->node(node).name).toHtmlEscaped(),
             to_qstring(matrix_.stage_names[size_t(stage)]).toHtmlEscaped())
        .arg(matrix_.stage_first[size_t(stage)])
        .arg(matrix_.stage_last[size_t(stage)])
        .arg(what.join(QStringLiteral(", ")));
}

void ScheduleMatrixView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), Qt::white);
    if (!trace_ || matrix_.stages == 0) {
        p.setPen(QColor(0x77, 0x77, 0x77));
        p.drawText(rect(), Qt::AlignCenter,
                   QStringLiteral("Plan a strategy to see its schedule matrix"));
        return;
    }
    const double cw = double(grid_.width()) / nv_;
    const double ch = double(grid_.height()) / sv_;
    // Cells: the visible part of the one-pixel-per-cell image scaled up without smoothing.
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    p.drawImage(QRectF(grid_), cells_, QRectF(n0_, s0_, nv_, sv_));
    p.save();
    p.setClipRect(grid_.adjusted(-2, -2, 2, 2));
    // Free corners and grid lines where the cells are large enough to carry them.
    if (cw >= 4 && ch >= 4) {
        p.setPen(Qt::NoPen);
        p.setBrush(sp::free_mark());
        const double t = std::min({cw, ch}) * 0.45;
        for (int s = s0_; s < s0_ + sv_; ++s)
            for (int n = n0_; n < n0_ + nv_; ++n) {
                const uint8_t f = matrix_.at(s, n);
                if (!(f & ScheduleMatrix::Freed) || f == ScheduleMatrix::Freed) continue;
                const QRectF c = cellRect(s, n);
                QPolygonF tri;
                tri << c.bottomRight() + QPointF(1, 1) << c.bottomRight() + QPointF(1 - t, 1)
                    << c.bottomRight() + QPointF(1, 1 - t);
                p.drawPolygon(tri);
            }
    }
    if (cw >= 6 && ch >= 6) {
        p.setPen(QPen(QColor(0xe2, 0xe2, 0xe2), 1));
        for (int n = 0; n <= nv_; ++n) {
            const double x = grid_.left() + n * cw;
            p.drawLine(QPointF(x, grid_.top()), QPointF(x, grid_.bottom() + 1));
        }
        for (int s = 0; s <= sv_; ++s) {
            const double y = grid_.top() + s * ch;
            p.drawLine(QPointF(grid_.left(), y), QPointF(grid_.right() + 1, y));
        }
    }
    p.restore();
    p.setPen(QPen(QColor(0x99, 0x99, 0x99), 1));
    p.setBrush(Qt::NoBrush);
    p.drawRect(grid_.adjusted(0, 0, 0, 0));
    // Labels.
    const QFontMetrics fm(font());
    p.setPen(QColor(0x33, 0x33, 0x33));
    if (show_rows_) {
        for (int s = s0_; s < s0_ + sv_; ++s) {
            const QRect r(kMargin, grid_.top() + int((s - s0_) * ch), label_left_ - 6, int(ch) + 1);
            p.drawText(r, Qt::AlignRight | Qt::AlignVCenter,
                       fm.elidedText(to_qstring(matrix_.stage_names[size_t(s)]), Qt::ElideLeft,
                                     r.width()));
        }
    } else {
        p.drawText(QRect(kMargin, grid_.top(), label_left_ - 6, fm.height()),
                   Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("forward"));
        p.drawText(QRect(kMargin, grid_.bottom() - fm.height(), label_left_ - 6, fm.height()),
                   Qt::AlignRight | Qt::AlignVCenter, QStringLiteral("last backward"));
    }
    if (show_columns_) {
        for (NodeId n = n0_; n < n0_ + nv_; ++n) {
            p.save();
            p.translate(grid_.left() + (n - n0_ + 0.5) * cw + fm.ascent() / 3.0, grid_.top() - 4);
            p.rotate(-60);
            p.drawText(0, 0,
                       fm.elidedText(to_qstring(trace_->graph->node(n).name), Qt::ElideLeft,
                                     int(label_top_ / 0.87)));
            p.restore();
        }
    }
    // Selected column and teach mode's stage (inside the grid: a zoom may leave them out).
    p.save();
    p.setClipRect(grid_.adjusted(-3, -3, 3, 3));
    if (selected_ >= 0 && selected_ < matrix_.nodes) {
        const QRect top = cellRect(0, selected_);
        p.setPen(QPen(sp::selected(), 2));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRect(top.left() - 1, grid_.top() - 1, top.width() + 1, grid_.height() + 1));
    }
    if (current_ >= 0) {
        const int s = matrix_.stage_of(current_);
        if (s >= 0) {
            const QRect left = cellRect(s, 0);
            p.setPen(QPen(sp::current(), 1.5, Qt::DashLine));
            p.drawRect(
                QRect(grid_.left() - 1, left.top() - 1, grid_.width() + 1, left.height() + 1));
            const Instruction& ins = trace_->plan.schedule.code[size_t(current_)];
            const NodeId n =
                targets_value(ins.kind) ? trace_->graph->value(ins.target).producer : ins.target;
            if (n >= 0) {
                p.setPen(QPen(sp::current(), 3));
                p.drawRect(cellRect(s, n).adjusted(-1, -1, 1, 1));
            }
        }
    }
    p.restore();
    // Legend.
    struct Entry {
        QColor c;
        const char* text;
    };
    const Entry entries[] = {{sp::computed(), "computed"},
                             {sp::recomputed(), "recomputed"},
                             {sp::kept(), "kept"},
                             {sp::backward(), "backward"},
                             {sp::free_mark(), "freed (corner)"}};
    int x = grid_.left();
    const int y = height() - kMargin - kLegendHeight + 8;
    for (const Entry& e : entries) {
        p.setPen(QColor(0x88, 0x88, 0x88));
        p.setBrush(e.c);
        p.drawRect(x, y + 2, 14, 12);
        p.setPen(QColor(0x33, 0x33, 0x33));
        const QString t = QString::fromLatin1(e.text);
        p.drawText(x + 19, y + 1, fm.horizontalAdvance(t) + 2, 16, Qt::AlignVCenter, t);
        x += 19 + fm.horizontalAdvance(t) + 18;
    }
    QString info = QStringLiteral("%1 stages × %2 nodes · %3")
                       .arg(matrix_.stages)
                       .arg(matrix_.nodes)
                       .arg(to_qstring(trace_->spec));
    if (nv_ < matrix_.nodes || sv_ < matrix_.stages)
        info = QStringLiteral("zoomed: nodes %1–%2, stages %3–%4 (double-click: all) · ")
                   .arg(n0_)
                   .arg(n0_ + nv_ - 1)
                   .arg(s0_)
                   .arg(s0_ + sv_ - 1) +
               info;
    p.drawText(QRect(x, y, std::max(0, width() - kMargin - x), 16),
               Qt::AlignRight | Qt::AlignVCenter,
               fm.elidedText(info, Qt::ElideRight, std::max(0, width() - kMargin - x)));
}

void ScheduleMatrixView::mouseMoveEvent(QMouseEvent* event) {
    if (event->buttons() & Qt::LeftButton) {
        // A drag pans by whole cells.
        if (!dragging_ && (event->pos() - press_pos_).manhattanLength() > 3) {
            dragging_ = true;
            drag_from_ = press_pos_;
        }
        if (dragging_ && grid_.width() > 0 && grid_.height() > 0) {
            const double cw = double(grid_.width()) / nv_, ch = double(grid_.height()) / sv_;
            const int dn = int((drag_from_.x() - event->pos().x()) / cw);
            const int ds = int((drag_from_.y() - event->pos().y()) / ch);
            if (dn != 0 || ds != 0) {
                panBy(dn, ds);
                drag_from_ += QPoint(int(-dn * cw), int(-ds * ch));
            }
            return;
        }
    }
    const QPoint c = cellAt(event->pos());
    if (c.x() < 0) {
        QToolTip::hideText();
        return;
    }
    QToolTip::showText(event->globalPosition().toPoint(), cellText(c.y(), c.x()), this);
}

void ScheduleMatrixView::mousePressEvent(QMouseEvent* event) {
    press_pos_ = event->pos();
    dragging_ = false;
}

void ScheduleMatrixView::mouseReleaseEvent(QMouseEvent* event) {
    // A click (not the end of a drag) selects the column's node.
    if (event->button() == Qt::LeftButton && !dragging_) {
        const QPoint c = cellAt(event->pos());
        if (c.x() >= 0 && selection_) selection_->select(c.x());
    }
    dragging_ = false;
}

QString export_schedule_matrix(const std::shared_ptr<const ScheduleTrace>& trace,
                               const QString& path, QSize size, const QString& title) {
    if (!trace) return QStringLiteral("no schedule to export");
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("json") || suffix == QLatin1String("csv")) {
        const ScheduleMatrix m = schedule_matrix(*trace->graph, trace->plan.schedule);
        QByteArray bytes;
        if (suffix == QLatin1String("json")) {
            bytes = QByteArray::fromStdString(schedule_matrix_json(*trace->graph, m));
        } else {
            bytes = "stage,stage_name,node,computed,recomputed,kept,freed,backward\n";
            for (int s = 0; s < m.stages; ++s)
                for (NodeId n = 0; n < m.nodes; ++n) {
                    const uint8_t f = m.at(s, n);
                    if (!f) continue;
                    bytes += QByteArray::number(s) + ",\"" +
                             QByteArray::fromStdString(m.stage_names[size_t(s)]) + "\"," +
                             QByteArray::fromStdString(trace->graph->node(n).name) + ',' +
                             QByteArray::number(bool(f & ScheduleMatrix::Computed)) + ',' +
                             QByteArray::number(bool(f & ScheduleMatrix::Recomputed)) + ',' +
                             QByteArray::number(bool(f & ScheduleMatrix::Kept)) + ',' +
                             QByteArray::number(bool(f & ScheduleMatrix::Freed)) + ',' +
                             QByteArray::number(bool(f & ScheduleMatrix::Backward)) + '\n';
                }
        }
        QSaveFile f(path);
        if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit())
            return QStringLiteral("cannot write '%1': %2").arg(path, f.errorString());
        return {};
    }
    if (size.width() < 100 || size.height() < 100 || size.width() > 20000 || size.height() > 20000)
        return QStringLiteral("export size %1×%2 is out of range (100 to 20000 pixels)")
            .arg(size.width())
            .arg(size.height());
    QWidget frame;
    frame.setAttribute(Qt::WA_DontShowOnScreen);
    auto* v = new QVBoxLayout(&frame);
    v->setContentsMargins(0, 6, 0, 0);
    auto* heading = new QLabel(
        title.isEmpty()
            ? QStringLiteral("Schedule matrix — %1").arg(QString::fromStdString(trace->spec))
            : title);
    QFont f = heading->font();
    f.setPointSizeF(f.pointSizeF() + 2);
    f.setBold(true);
    heading->setFont(f);
    heading->setAlignment(Qt::AlignCenter);
    QPalette pal = frame.palette();
    pal.setColor(QPalette::Window, Qt::white);
    frame.setPalette(pal);
    frame.setAutoFillBackground(true);
    auto* view = new ScheduleMatrixView;
    view->setTrace(trace);
    v->addWidget(heading);
    v->addWidget(view, 1);
    frame.resize(size);
    frame.show();
    QCoreApplication::sendPostedEvents();
    return render_widget(&frame, path);
}

}  // namespace rl::ui
