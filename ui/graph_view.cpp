#include "ui/graph_view.h"

#include <QApplication>
#include <QEventLoop>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QGraphicsItem>
#include <QGraphicsScene>
#include <QKeyEvent>
#include <QPainter>
#include <QPdfWriter>
#include <QScrollBar>
#include <QSvgGenerator>
#include <QThreadPool>
#include <QTimer>
#include <QWheelEvent>
#include <cmath>

#include "engine/ops/op.h"
#include "engine/units.h"
#include "ui/node_selection.h"
#include "ui/palette.h"
#include "ui/qt_text.h"
#include "ui/schedule_palette.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

namespace sp = schedule_palette;

namespace {

QFont name_font() {
    QFont f = QApplication::font();
    f.setPointSizeF(9);
    f.setBold(true);
    return f;
}

QFont detail_font() {
    QFont f = QApplication::font();
    f.setPointSizeF(8);
    return f;
}

QString short_bytes(uint64_t bytes) {
    QString s = to_qstring(format_bytes(bytes));
    return s;
}

}  // namespace

std::vector<QSizeF> graph_view_sizes(const Graph& g) {
    const QFontMetricsF name(name_font()), detail(detail_font());
    uint64_t lo = UINT64_MAX, hi = 1;
    for (const Value& v : g.values()) {
        lo = std::min(lo, std::max<uint64_t>(v.bytes, 1));
        hi = std::max(hi, v.bytes);
    }
    const double span = std::log(double(hi)) - std::log(double(std::max<uint64_t>(lo, 1)));
    auto scale = [&](uint64_t bytes) {
        if (span <= 0) return 0.5;
        return (std::log(double(std::max<uint64_t>(bytes, 1))) - std::log(double(lo))) / span;
    };
    std::vector<QSizeF> out;
    out.reserve(g.inputs().size() + size_t(g.num_nodes()));
    for (ValueId v : g.inputs()) {
        const Value& val = g.value(v);
        const double w = std::max(name.horizontalAdvance(to_qstring(val.name)),
                                  detail.horizontalAdvance(short_bytes(val.bytes)));
        out.emplace_back(std::ceil(w + 18), 30);
    }
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const Node& node = g.node(n);
        const Value& val = g.value(node.output);
        const double s = scale(val.bytes);
        const QString line2 = QStringLiteral("%1 · %2").arg(
            to_qstring(std::string(op_name(node.op))), short_bytes(val.bytes));
        // Room for the checkpoint diamond on the left and the "×3" badge on the right.
        const double text = std::max(name.horizontalAdvance(to_qstring(node.name)) + 24,
                                     detail.horizontalAdvance(line2) + 2 * 26);
        const double w = std::max(text + 8, 64 + 70 * s);
        const double h = 32 + 14 * s;
        out.emplace_back(std::ceil(w), std::ceil(h));
    }
    return out;
}

// One box: a graph input (white, rounded ends) or a node coloured by its fate.
class GraphNodeItem : public QGraphicsItem {
  public:
    GraphNodeItem(QRectF rect, QString name, QString detail, bool input)
        : rect_(rect), name_(std::move(name)), detail_(std::move(detail)), input_(input) {
        setAcceptHoverEvents(true);
    }
    QRectF boundingRect() const override { return rect_.adjusted(-4, -4, 4, 4); }

    void paint(QPainter* p, const QStyleOptionGraphicsItem*, QWidget*) override {
        QColor fill = input_ ? sp::input() : sp::fate_color(fate_);
        QColor text = Qt::black;
        if (dimmed_) {
            fill = QColor(0xfa, 0xfa, 0xfa);
            text = QColor(0x99, 0x99, 0x99);
        }
        QPen pen(dimmed_ ? QColor(0xbb, 0xbb, 0xbb) : QColor(0x55, 0x5b, 0x66), 1.0);
        if (fate_ == NodeFate::FreedEarly && !input_) pen.setStyle(Qt::DashLine);
        p->setPen(pen);
        p->setBrush(fill);
        const double radius = input_ ? rect_.height() / 2 : 5;
        p->drawRoundedRect(rect_, radius, radius);
        if (backwarded_) {  // a purple corner: its backward has run
            QPolygonF tri;
            tri << rect_.topRight() << rect_.topRight() + QPointF(-10, 0)
                << rect_.topRight() + QPointF(0, 10);
            p->setPen(Qt::NoPen);
            p->setBrush(sp::backward());
            p->drawPolygon(tri);
        }
        p->setPen(text);
        p->setFont(name_font());
        const QRectF top(rect_.left() + 4, rect_.top() + 2, rect_.width() - 8,
                         rect_.height() / 2 - 1);
        const QRectF bottom(rect_.left() + 4, rect_.center().y(), rect_.width() - 8,
                            rect_.height() / 2 - 2);
        p->drawText(top, Qt::AlignHCenter | Qt::AlignBottom, name_);
        p->setFont(detail_font());
        p->drawText(computes_ > 1 ? bottom.adjusted(22, 0, -22, 0) : bottom,
                    Qt::AlignHCenter | Qt::AlignTop, detail_);
        if (computes_ > 1) {
            const QString badge = QStringLiteral("×%1").arg(computes_);
            QFont f = detail_font();
            f.setBold(true);
            p->setFont(f);
            p->setPen(QColor(0x8a, 0x3c, 0x00));
            p->drawText(rect_.adjusted(0, 0, -4, -2), Qt::AlignRight | Qt::AlignBottom, badge);
        }
        if (checkpoint_) {  // a dark diamond: one of the plan's checkpoints
            const QPointF c = rect_.topLeft() + QPointF(9, rect_.height() / 2 - 6);
            QPolygonF d;
            d << c + QPointF(0, -4) << c + QPointF(4, 0) << c + QPointF(0, 4) << c + QPointF(-4, 0);
            p->setPen(Qt::NoPen);
            p->setBrush(QColor(0x1d, 0x5e, 0x2a));
            p->drawPolygon(d);
        }
        auto outline = [&](const QColor& c, double width, Qt::PenStyle style) {
            QPen o(c, width);
            o.setStyle(style);
            p->setPen(o);
            p->setBrush(Qt::NoBrush);
            p->drawRoundedRect(rect_.adjusted(-2, -2, 2, 2), radius + 2, radius + 2);
        };
        if (related_) outline(sp::current(), 1.6, Qt::DashLine);
        if (current_) outline(sp::current(), 3.2, Qt::SolidLine);
        if (selected_) outline(sp::selected(), 2.6, Qt::SolidLine);
    }

    QRectF rect_;
    QString name_, detail_;
    bool input_;
    NodeFate fate_ = NodeFate::NotRun;
    int computes_ = 0;
    bool checkpoint_ = false, dimmed_ = false, current_ = false, related_ = false;
    bool selected_ = false, backwarded_ = false;
};

namespace {

class EdgeItem : public QGraphicsPathItem {
  public:
    explicit EdgeItem(const QPainterPath& path) : QGraphicsPathItem(path) {
        setPen(QPen(QColor(0x80, 0x86, 0x90), 1.1));
        setZValue(-1);
        if (path.elementCount() > 0) {
            const QPointF tip = path.pointAtPercent(1);
            const double angle = path.angleAtPercent(1) * M_PI / 180;
            const QPointF back(-std::cos(angle) * 7, std::sin(angle) * 7);
            const QPointF side(std::sin(angle) * 3.2, std::cos(angle) * 3.2);
            arrow_ << tip << tip + back + side << tip + back - side;
        }
    }
    QRectF boundingRect() const override {
        return QGraphicsPathItem::boundingRect().united(arrow_.boundingRect());
    }
    void paint(QPainter* p, const QStyleOptionGraphicsItem* o, QWidget* w) override {
        QGraphicsPathItem::paint(p, o, w);
        p->setPen(Qt::NoPen);
        p->setBrush(pen().color());
        p->drawPolygon(arrow_);
    }

  private:
    QPolygonF arrow_;
};

}  // namespace

GraphView::GraphView(QWidget* parent) : QGraphicsView(parent) {
    setScene(new QGraphicsScene(this));
    setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    setDragMode(QGraphicsView::ScrollHandDrag);
    setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
    setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
    setBackgroundBrush(QColor(0xfd, 0xfd, 0xfc));
    setToolTip(QString());
    setObjectName(QStringLiteral("graphView"));
}

GraphView::~GraphView() = default;

void GraphView::setSelection(NodeSelection* selection) {
    if (selection_) disconnect(selection_, nullptr, this, nullptr);
    selection_ = selection;
    if (selection_) {
        connect(selection_, &NodeSelection::changed, this, &GraphView::onSelectionChanged);
        onSelectionChanged(selection_->node());
    }
}

void GraphView::setTrace(std::shared_ptr<const ScheduleTrace> trace) {
    trace_ = std::move(trace);
    if (!trace_) {
        ++layout_job_;
        scene()->clear();
        items_.clear();
        laid_graph_.reset();
        laid_out_ = false;
        return;
    }
    uses_ = node_uses(*trace_->graph, trace_->plan.schedule);
    if (laid_graph_ == trace_->graph && laid_out_) {
        recolor();
        return;
    }
    startLayout();
}

void GraphView::startLayout() {
    laid_out_ = false;
    const quint64 job = ++layout_job_;
    auto graph = trace_->graph;
    LayoutRequest request;
    request.sizes = graph_view_sizes(*graph);  // fonts: on the GUI thread
    request.edges = network_edges(*graph);
    QPointer<GraphView> self(this);
    QThreadPool::globalInstance()->start([self, job, graph, request = std::move(request)] {
        GraphLayout layout = layout_with_dot(request);
        QMetaObject::invokeMethod(
            qApp,
            [self, job, graph, layout = std::move(layout)]() mutable {
                if (!self || job != self->layout_job_) return;  // stale or gone
                self->laid_graph_ = graph;
                self->applyLayout(job, std::move(layout));
            },
            Qt::QueuedConnection);
    });
}

void GraphView::applyLayout(quint64 job, GraphLayout layout) {
    (void)job;
    if (!layout.error.isEmpty()) {
        emit layoutFailed(layout.error);
        return;
    }
    layout_ = std::move(layout);
    scene()->clear();
    items_.clear();
    const Graph& g = *laid_graph_;
    const int inputs = static_cast<int>(g.inputs().size());
    for (size_t k = 0; k < layout_.edges.size(); ++k)
        if (!layout_.edges[k].isEmpty()) scene()->addItem(new EdgeItem(layout_.edges[k]));
    for (int v = 0; v < static_cast<int>(layout_.boxes.size()); ++v) {
        const bool input = v < inputs;
        GraphNodeItem* item;
        if (input) {
            const Value& val = g.value(g.inputs()[size_t(v)]);
            item = new GraphNodeItem(layout_.boxes[size_t(v)], to_qstring(val.name),
                                     short_bytes(val.bytes), true);
            item->setToolTip(QStringLiteral("<b>%1</b> — graph input<br>%2, %3<br>always live")
                                 .arg(to_qstring(val.name).toHtmlEscaped(),
                                      to_qstring(format_type(val.dtype, val.shape)),
                                      short_bytes(val.bytes)));
        } else {
            const NodeId n = v - inputs;
            const Node& node = g.node(n);
            const Value& val = g.value(node.output);
            item = new GraphNodeItem(
                layout_.boxes[size_t(v)], to_qstring(node.name),
                QStringLiteral("%1 · %2").arg(to_qstring(std::string(op_name(node.op))),
                                              short_bytes(val.bytes)),
                false);
        }
        item->setData(0, v - inputs);  // node id (negative for graph inputs)
        scene()->addItem(item);
        items_.push_back(item);
    }
    scene()->setSceneRect(layout_.bounds.adjusted(-20, -20, 20, 20));
    laid_out_ = true;
    recolor();
    fitAll();
    emit layoutReady();
}

void GraphView::recolor() {
    if (!laid_out_ || !trace_) return;
    const Graph& g = *laid_graph_;
    const int inputs = static_cast<int>(g.inputs().size());
    std::vector<uint8_t> checkpoint(size_t(g.num_nodes()), 0);
    for (NodeId c : trace_->plan.checkpoints)
        if (c >= 0 && c < g.num_nodes()) checkpoint[size_t(c)] = 1;
    const CostModel& costs = trace_->costs;
    for (NodeId n = 0; n < g.num_nodes() && size_t(n) < uses_.size(); ++n) {
        GraphNodeItem* item = items_[size_t(inputs + n)];
        const NodeUse& u = uses_[size_t(n)];
        item->fate_ = u.fate;
        item->computes_ = u.computes;
        item->checkpoint_ = checkpoint[size_t(n)] != 0;
        const Node& node = g.node(n);
        const Value& val = g.value(node.output);
        QString fate = QString::fromLatin1(node_fate_name(u.fate));
        if (u.fate == NodeFate::Recomputed)
            fate += QStringLiteral(" (computed %1 times)").arg(u.computes);
        item->setToolTip(
            QStringLiteral("<b>%1</b> — %2<br>output %3, %4<br>forward %5 ms · backward %6 ms"
                           "<br><i>%7</i>: %8%9")
                .arg(to_qstring(node.name).toHtmlEscaped(),
                     to_qstring(std::string(op_name(node.op))),
                     to_qstring(format_type(val.dtype, val.shape)), short_bytes(val.bytes),
                     costs.size() ? ms_text(costs.forward_ms(n)) : QStringLiteral("–"),
                     costs.size() ? ms_text(costs.backward_ms(n)) : QStringLiteral("–"),
                     to_qstring(trace_->spec).toHtmlEscaped(), fate,
                     checkpoint[size_t(n)] ? QStringLiteral(", a checkpoint") : QString()));
        item->update();
    }
    viewport()->update();
}

void GraphView::setStepState(const ScheduleState* state, int current,
                             const std::vector<int>& related) {
    if (!laid_out_) return;
    if (stepping_ != (state != nullptr)) {
        stepping_ = state != nullptr;
        viewport()->update();  // the legend gains or loses teach mode's entries
    }
    const Graph& g = *laid_graph_;
    const int inputs = static_cast<int>(g.inputs().size());
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        GraphNodeItem* item = items_[size_t(inputs + n)];
        const bool live = state && size_t(g.node(n).output) < state->live.size() &&
                          state->live[size_t(g.node(n).output)];
        item->dimmed_ = state && !live;
        item->backwarded_ =
            state && size_t(n) < state->backwarded.size() && state->backwarded[size_t(n)];
        item->current_ = state && n == current;
        item->related_ = state && std::find(related.begin(), related.end(), n) != related.end();
        item->update();
    }
    if (state && current >= 0 && current < g.num_nodes())
        ensureVisible(items_[size_t(inputs + current)], 60, 60);
}

bool GraphView::waitForLayout(int timeout_ms) {
    if (laid_out_ || !trace_) return laid_out_;
    QEventLoop loop;
    QTimer::singleShot(timeout_ms, &loop, &QEventLoop::quit);
    connect(this, &GraphView::layoutReady, &loop, &QEventLoop::quit);
    connect(this, &GraphView::layoutFailed, &loop, &QEventLoop::quit);
    loop.exec();
    return laid_out_;
}

QRectF GraphView::nodeRect(int node) const {
    if (!laid_out_ || !laid_graph_) return {};
    const size_t v = laid_graph_->inputs().size() + size_t(node);
    return v < layout_.boxes.size() ? layout_.boxes[v] : QRectF();
}

NodeFate GraphView::fateOf(int node) const {
    return node >= 0 && size_t(node) < uses_.size() ? uses_[size_t(node)].fate : NodeFate::NotRun;
}

void GraphView::onSelectionChanged(int node) {
    selected_ = node;
    if (!laid_out_) return;
    const int inputs = static_cast<int>(laid_graph_->inputs().size());
    for (size_t v = 0; v < items_.size(); ++v) {
        const bool sel = static_cast<int>(v) - inputs == node && node >= 0;
        if (items_[v]->selected_ != sel) {
            items_[v]->selected_ = sel;
            items_[v]->update();
        }
    }
    if (node >= 0 && size_t(inputs + node) < items_.size())
        ensureVisible(items_[size_t(inputs + node)], 80, 80);
    viewport()->update();  // the legend's "selected node" entry
}

void GraphView::fitAll() {
    if (!laid_out_) return;
    // Fit the width; a tall network then scrolls, its text staying readable (never below 60 %).
    const QRectF r = scene()->sceneRect();
    const double sx = viewport()->width() / r.width(), sy = viewport()->height() / r.height();
    double s = std::min(sx, sy);
    if (s < 0.6) s = std::min(std::max(sx, 0.6), 1.0);
    s = std::min(s, 1.4);
    resetTransform();
    scale(s, s);
    centerOn(r.center().x(), r.top());
    verticalScrollBar()->setValue(verticalScrollBar()->minimum());
}

void GraphView::zoomBy(double factor) {
    const double current = transform().m11();
    const double target = std::clamp(current * factor, 0.05, 6.0);
    scale(target / current, target / current);
}

void GraphView::wheelEvent(QWheelEvent* event) {
    if (event->modifiers() & Qt::ControlModifier || !(event->modifiers() & Qt::ShiftModifier)) {
        zoomBy(std::pow(1.0015, event->angleDelta().y()));
        event->accept();
        return;
    }
    QGraphicsView::wheelEvent(event);
}

void GraphView::keyPressEvent(QKeyEvent* event) {
    if (event->key() == Qt::Key_Plus || event->key() == Qt::Key_Equal) return zoomBy(1.25);
    if (event->key() == Qt::Key_Minus) return zoomBy(0.8);
    if (event->key() == Qt::Key_0) return fitAll();
    QGraphicsView::keyPressEvent(event);
}

void GraphView::mousePressEvent(QMouseEvent* event) {
    press_pos_ = event->pos();
    QGraphicsView::mousePressEvent(event);
}

void GraphView::mouseReleaseEvent(QMouseEvent* event) {
    QGraphicsView::mouseReleaseEvent(event);
    if ((event->pos() - press_pos_).manhattanLength() > 4 || event->button() != Qt::LeftButton)
        return;
    for (QGraphicsItem* it : items(event->pos())) {
        if (auto* node = dynamic_cast<GraphNodeItem*>(it)) {
            const int id = node->data(0).toInt();
            if (id >= 0 && selection_) selection_->select(id);
            return;
        }
    }
}

// ---- the legend ------------------------------------------------------------------------------

enum class LegendSwatch { Box, DashedBox, Dimmed, Pill, Diamond, Corner, Outline, CurrentOutline };

struct GraphLegendEntry {
    LegendSwatch swatch;
    QColor color;
    QString text;
};

namespace {

QFont legend_font() {
    QFont f = QApplication::font();
    f.setPointSizeF(8.5);
    return f;
}

constexpr double kSwatchW = 18, kSwatchGap = 6, kEntryGap = 16, kPad = 8;

// A small copy of what the drawing shows, in `r`.
void paint_swatch(QPainter& p, const GraphLegendEntry& e, const QRectF& r) {
    const QColor border(0x55, 0x5b, 0x66);
    const QRectF box = r.adjusted(0, 2, 0, -2);
    switch (e.swatch) {
        case LegendSwatch::Box:
        case LegendSwatch::DashedBox:
        case LegendSwatch::Dimmed: {
            QPen pen(e.swatch == LegendSwatch::Dimmed ? QColor(0xbb, 0xbb, 0xbb) : border);
            if (e.swatch == LegendSwatch::DashedBox) pen.setStyle(Qt::DashLine);
            p.setPen(pen);
            p.setBrush(e.color);
            p.drawRoundedRect(box, 3, 3);
            break;
        }
        case LegendSwatch::Pill:
            p.setPen(border);
            p.setBrush(e.color);
            p.drawRoundedRect(box, box.height() / 2, box.height() / 2);
            break;
        case LegendSwatch::Diamond: {
            const QPointF c = box.center();
            QPolygonF d;
            d << c + QPointF(0, -5) << c + QPointF(5, 0) << c + QPointF(0, 5) << c + QPointF(-5, 0);
            p.setPen(Qt::NoPen);
            p.setBrush(e.color);
            p.drawPolygon(d);
            break;
        }
        case LegendSwatch::Corner: {
            p.setPen(border);
            p.setBrush(Qt::white);
            p.drawRoundedRect(box, 3, 3);
            QPolygonF tri;
            tri << box.topRight() << box.topRight() + QPointF(-8, 0)
                << box.topRight() + QPointF(0, 8);
            p.setPen(Qt::NoPen);
            p.setBrush(e.color);
            p.drawPolygon(tri);
            break;
        }
        case LegendSwatch::Outline:
        case LegendSwatch::CurrentOutline:
            p.setPen(QPen(e.color, e.swatch == LegendSwatch::Outline ? 2.4 : 3.0));
            p.setBrush(Qt::white);
            p.drawRoundedRect(box.adjusted(1.5, 1.5, -1.5, -1.5), 3, 3);
            break;
    }
}

// Lays out (and with a painter, paints) the title on a line of its own, then the entries left to
// right, wrapping before `max_width` (0: one entry a line). Returns the size used.
QSizeF flow_legend(QPainter* p, const QString& title, const std::vector<GraphLegendEntry>& entries,
                   QPointF origin, double max_width) {
    const QFont font = legend_font();
    QFont bold = font;
    bold.setBold(true);
    const QFontMetricsF fm(font), fb(bold);
    const double row = std::ceil(fm.height()) + 6;
    double x = origin.x(), y = origin.y(), used_w = 0;
    if (!title.isEmpty()) {
        const double w = fb.horizontalAdvance(title);
        if (p) {
            p->setFont(bold);
            p->setPen(Qt::black);
            p->drawText(QRectF(x, y, w + 2, row), Qt::AlignVCenter | Qt::AlignLeft, title);
        }
        used_w = w;
        y += row;
    }
    double line_x = 0;
    bool line_open = false;
    for (const GraphLegendEntry& e : entries) {
        const double text_w = fm.horizontalAdvance(e.text);
        const double w = kSwatchW + kSwatchGap + text_w;
        if (line_open && line_x + kEntryGap + w > max_width) {
            y += row;
            line_x = 0;
            line_open = false;
        }
        const double at = line_open ? line_x + kEntryGap : 0;
        if (p) {
            paint_swatch(*p, e, QRectF(x + at, y + 3, kSwatchW, row - 6));
            p->setFont(font);
            p->setPen(Qt::black);
            p->drawText(QRectF(x + at + kSwatchW + kSwatchGap, y, text_w + 2, row),
                        Qt::AlignVCenter | Qt::AlignLeft, e.text);
        }
        line_x = at + w;
        line_open = true;
        used_w = std::max(used_w, line_x);
    }
    if (line_open) y += row;
    return {used_w, y - origin.y()};
}

QString elided_title(const QString& title, double width) {
    QFont bold = legend_font();
    bold.setBold(true);
    return QFontMetricsF(bold).elidedText(title, Qt::ElideMiddle, width);
}

}  // namespace

QString GraphView::legendTitle() const {
    if (!trace_) return {};
    return QStringLiteral("%1 on %2")
        .arg(to_qstring(trace_->spec), to_qstring(trace_->graph->name()));
}

std::vector<GraphLegendEntry> GraphView::legendEntries() const {
    std::vector<GraphLegendEntry> out = {
        {LegendSwatch::Box, sp::kept(), QStringLiteral("kept for the backward")},
        {LegendSwatch::Box, sp::recomputed(), QStringLiteral("recomputed (×n: computed n times)")},
        {LegendSwatch::DashedBox, sp::freed(),
         QStringLiteral("freed early, never saved (no backward reads it)")},
    };
    bool not_run = false;
    for (const NodeUse& u : uses_) not_run |= u.fate == NodeFate::NotRun;
    if (not_run)
        out.push_back({LegendSwatch::Box, sp::fate_color(NodeFate::NotRun),
                       QStringLiteral("not run (not in the schedule)")});
    out.push_back({LegendSwatch::Pill, sp::input(), QStringLiteral("graph input (always live)")});
    if (trace_ && !trace_->plan.checkpoints.empty())
        out.push_back({LegendSwatch::Diamond, QColor(0x1d, 0x5e, 0x2a),
                       QStringLiteral("checkpoint of the plan")});
    if (stepping_) {
        out.push_back({LegendSwatch::Dimmed, QColor(0xfa, 0xfa, 0xfa),
                       QStringLiteral("not in memory at this step")});
        out.push_back(
            {LegendSwatch::CurrentOutline, sp::current(), QStringLiteral("this step's node")});
        out.push_back({LegendSwatch::Corner, sp::backward(), QStringLiteral("backward done")});
    }
    if (selected_ >= 0)
        out.push_back({LegendSwatch::Outline, sp::selected(), QStringLiteral("selected node")});
    return out;
}

QStringList GraphView::legendLabels() const {
    QStringList out;
    for (const GraphLegendEntry& e : legendEntries()) out << e.text;
    return out;
}

double GraphView::legendHeight(double width) const {
    // The title takes one line whatever its length (exports elide it to the width).
    return flow_legend(nullptr, legendTitle().left(1), legendEntries(), QPointF(kPad, kPad),
                       std::max(0.0, width - 2 * kPad))
               .height() +
           2 * kPad;
}

void GraphView::drawForeground(QPainter* p, const QRectF& rect) {
    (void)rect;
    if (!laid_out_) return;
    p->save();
    p->resetTransform();
    p->setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
    // A box in the top-left corner, one entry a line.
    const auto entries = legendEntries();
    double widest = 0;
    for (const auto& e : entries)
        widest = std::max(widest, flow_legend(nullptr, {}, {e}, QPointF(0, 0), 0).width());
    const QString title = elided_title(legendTitle(), std::max(widest, 300.0));
    const QSizeF size = flow_legend(nullptr, title, entries, QPointF(0, 0), 0);
    const QRectF box(8, 8, size.width() + 2 * kPad, size.height() + 2 * kPad);
    p->setPen(QColor(0xcc, 0xcc, 0xcc));
    p->setBrush(QColor(255, 255, 255, 225));
    p->drawRoundedRect(box, 4, 4);
    flow_legend(p, title, entries, box.topLeft() + QPointF(kPad, kPad), 0);
    p->restore();
}

QString GraphView::exportImage(const QString& path, double scale) const {
    if (!laid_out_) return QStringLiteral("the graph is not laid out yet");
    const QRectF source = scene()->sceneRect();
    // The legend strip above the drawing, at least as wide as its widest entry.
    const auto entries = legendEntries();
    double widest = 0;
    for (const auto& e : entries)
        widest = std::max(widest, flow_legend(nullptr, {}, {e}, QPointF(0, 0), 0).width());
    const QString title = elided_title(legendTitle(), std::max(widest, source.width() - 2 * kPad));
    const double width = std::max(source.width(), widest + 2 * kPad);
    const double strip = legendHeight(width);
    const QSizeF logical(width, strip + source.height());
    const QSize size = (logical * scale).toSize();
    const QString suffix = QFileInfo(path).suffix().toLower();
    auto paint = [&](QPainter& p) {
        p.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
        p.fillRect(QRectF(QPointF(0, 0), QSizeF(size)), Qt::white);
        p.save();
        p.scale(scale, scale);
        flow_legend(&p, title, entries, QPointF(kPad, kPad), width - 2 * kPad);
        p.setPen(QColor(0xdd, 0xdd, 0xdd));
        p.drawLine(QPointF(0, strip - 0.5), QPointF(width, strip - 0.5));
        p.restore();
        const QRectF target((width - source.width()) / 2 * scale, strip * scale,
                            source.width() * scale, source.height() * scale);
        scene()->render(&p, target, source);
    };
    if (suffix == QLatin1String("png")) {
        QImage image(size, QImage::Format_ARGB32_Premultiplied);
        QPainter p(&image);
        paint(p);
        p.end();
        return image.save(path, "PNG") ? QString() : QStringLiteral("cannot write '%1'").arg(path);
    }
    if (suffix == QLatin1String("svg")) {
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(size);
        svg.setViewBox(QRect(QPoint(0, 0), size));
        svg.setResolution(96);
        QPainter p;
        if (!p.begin(&svg)) return QStringLiteral("cannot write '%1'").arg(path);
        paint(p);
        return {};
    }
    if (suffix == QLatin1String("pdf")) {
        QPdfWriter pdf(path);
        pdf.setResolution(96);
        pdf.setPageSize(QPageSize(QSizeF(size) * 72.0 / 96.0, QPageSize::Point));
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
        QPainter p;
        if (!p.begin(&pdf)) return QStringLiteral("cannot write '%1'").arg(path);
        paint(p);
        return {};
    }
    return QStringLiteral("cannot export to '%1': use .png, .svg or .pdf").arg(path);
}

}  // namespace rl::ui
