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
#include "ui/schedule_palette.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

namespace sp = schedule_palette;

namespace {

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

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
    QString s = q(format_bytes(bytes));
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
        const double w = std::max(name.horizontalAdvance(q(val.name)),
                                  detail.horizontalAdvance(short_bytes(val.bytes)));
        out.emplace_back(std::ceil(w + 18), 30);
    }
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const Node& node = g.node(n);
        const Value& val = g.value(node.output);
        const double s = scale(val.bytes);
        const QString line2 =
            QStringLiteral("%1 · %2").arg(q(std::string(op_name(node.op))), short_bytes(val.bytes));
        // Room for the checkpoint diamond on the left and the "×3" badge on the right.
        const double text = std::max(name.horizontalAdvance(q(node.name)) + 24,
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
            item = new GraphNodeItem(layout_.boxes[size_t(v)], q(val.name), short_bytes(val.bytes),
                                     true);
            item->setToolTip(QStringLiteral("<b>%1</b> — graph input<br>%2, %3<br>always live")
                                 .arg(q(val.name).toHtmlEscaped(),
                                      q(format_type(val.dtype, val.shape)),
                                      short_bytes(val.bytes)));
        } else {
            const NodeId n = v - inputs;
            const Node& node = g.node(n);
            const Value& val = g.value(node.output);
            item = new GraphNodeItem(layout_.boxes[size_t(v)], q(node.name),
                                     QStringLiteral("%1 · %2").arg(q(std::string(op_name(node.op))),
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
                .arg(q(node.name).toHtmlEscaped(), q(std::string(op_name(node.op))),
                     q(format_type(val.dtype, val.shape)), short_bytes(val.bytes),
                     costs.size() ? ms_text(costs.forward_ms(n)) : QStringLiteral("–"),
                     costs.size() ? ms_text(costs.backward_ms(n)) : QStringLiteral("–"),
                     q(trace_->spec).toHtmlEscaped(), fate,
                     checkpoint[size_t(n)] ? QStringLiteral(", a checkpoint") : QString()));
        item->update();
    }
    viewport()->update();
}

void GraphView::setStepState(const ScheduleState* state, int current,
                             const std::vector<int>& related) {
    if (!laid_out_) return;
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

void GraphView::drawForeground(QPainter* p, const QRectF& rect) {
    (void)rect;
    if (!laid_out_) return;
    p->save();
    p->resetTransform();
    QFont f = QApplication::font();
    f.setPointSizeF(8.5);
    p->setFont(f);
    const QFontMetrics fm(f);
    struct Entry {
        QColor color;
        QString text;
        bool dashed;
    };
    const std::vector<Entry> entries = {
        {sp::kept(), QStringLiteral("kept for the backward"), false},
        {sp::recomputed(), QStringLiteral("recomputed (×count)"), false},
        {sp::freed(), QStringLiteral("freed early (no backward reads it)"), true},
        {sp::input(), QStringLiteral("graph input"), false},
    };
    int w = 0;
    for (const Entry& e : entries) w = std::max(w, fm.horizontalAdvance(e.text));
    const int row = fm.height() + 4;
    QRect box(8, 8, w + 36, row * int(entries.size() + (trace_ ? 1 : 0)) + 8);
    p->setPen(QColor(0xcc, 0xcc, 0xcc));
    p->setBrush(QColor(255, 255, 255, 225));
    p->drawRoundedRect(box, 4, 4);
    int y = box.top() + 6;
    if (trace_) {
        QFont b = f;
        b.setBold(true);
        p->setFont(b);
        p->setPen(Qt::black);
        p->drawText(QRect(box.left() + 8, y, w + 24, row), Qt::AlignVCenter,
                    fm.elidedText(q(trace_->spec), Qt::ElideRight, w + 24));
        p->setFont(f);
        y += row;
    }
    for (const Entry& e : entries) {
        QPen pen(QColor(0x55, 0x5b, 0x66));
        if (e.dashed) pen.setStyle(Qt::DashLine);
        p->setPen(pen);
        p->setBrush(e.color);
        p->drawRoundedRect(QRect(box.left() + 8, y + 3, 16, row - 6), 3, 3);
        p->setPen(Qt::black);
        p->drawText(QRect(box.left() + 30, y, w + 4, row), Qt::AlignVCenter, e.text);
        y += row;
    }
    p->restore();
}

QString GraphView::exportImage(const QString& path, double scale) const {
    if (!laid_out_) return QStringLiteral("the graph is not laid out yet");
    const QRectF source = scene()->sceneRect();
    const QSize size = (source.size() * scale).toSize();
    const QString suffix = QFileInfo(path).suffix().toLower();
    auto paint = [&](QPainter& p) {
        p.setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing);
        p.fillRect(QRectF(QPointF(0, 0), QSizeF(size)), Qt::white);
        scene()->render(&p, QRectF(QPointF(0, 0), QSizeF(size)), source);
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
