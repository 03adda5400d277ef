#pragma once
// The network as a layered drawing (Graphviz's dot, ui/graph_layout.h), one box per node sized by
// its output bytes and coloured by what the selected strategy does with that output: kept for the
// backward, recomputed (×count), or freed early. Graph inputs are white. Hover for the node's op,
// shape, bytes and forward/backward cost; wheel to zoom, drag to pan, click to select (the
// selection is shared with the other schedule views through a NodeSelection). Teach mode dims the
// values not in memory at the current instruction and outlines the node it is about.
//
// A legend says what the colours and marks mean — the entries that occur in the drawing (kept,
// recomputed, freed early, graph input, checkpoint; the selection and teach mode's marks while
// shown): a box in the view's corner on screen, a strip above the drawing in exports.
//
// The layout runs on a worker thread and only when the network changes; a new strategy only
// recolours.
#include <QGraphicsView>
#include <QPointer>
#include <QSizeF>
#include <QStringList>
#include <memory>
#include <vector>

#include "analysis/explain.h"
#include "ui/graph_layout.h"

namespace rl::ui {

struct ScheduleTrace;
class NodeSelection;
class GraphNodeItem;
struct GraphLegendEntry;

// The box size of every vertex (graph inputs, then nodes), for a given font: wide enough for the
// name and the "op · bytes" line, taller and wider as the output grows (log scale).
std::vector<QSizeF> graph_view_sizes(const Graph& g);

class GraphView : public QGraphicsView {
    Q_OBJECT
  public:
    explicit GraphView(QWidget* parent = nullptr);
    ~GraphView() override;

    void setSelection(NodeSelection* selection);
    // The network and plan to draw; null clears. Lays out (off the GUI thread) only when the
    // network differs from the one drawn.
    void setTrace(std::shared_ptr<const ScheduleTrace> trace);
    const ScheduleTrace* trace() const { return trace_.get(); }
    const std::shared_ptr<const ScheduleTrace>& traceShared() const { return trace_; }
    // Teach mode: the state after some instructions, the node of the current instruction and the
    // nodes its sentence names. Null state: back to the plain colours.
    void setStepState(const ScheduleState* state, int current, const std::vector<int>& related);

    bool isLaidOut() const { return laid_out_; }
    // Runs an event loop until the layout in flight is drawn (tests, headless exports); false
    // on a timeout or a failed layout.
    bool waitForLayout(int timeout_ms);
    const GraphLayout& layout() const { return layout_; }
    // The box drawn for a node (scene coordinates), for tests.
    QRectF nodeRect(int node) const;
    NodeFate fateOf(int node) const;
    int selectedNode() const { return selected_; }

    void fitAll();
    void zoomBy(double factor);
    // The whole drawing at `scale` (1 = one scene pixel per image pixel) as PNG, SVG or PDF,
    // below a strip with the legend (the image is taller by legendHeight(width) × scale).
    QString exportImage(const QString& path, double scale = 1.0) const;
    // The legend's entries as shown now ("kept for the backward", …), for tests.
    QStringList legendLabels() const;
    // The height of the export's legend strip for a drawing `width` scene pixels wide.
    double legendHeight(double width) const;

  signals:
    void layoutReady();
    void layoutFailed(const QString& message);

  protected:
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void drawForeground(QPainter* painter, const QRectF& rect) override;
    void keyPressEvent(QKeyEvent* event) override;

  private:
    void startLayout();
    void applyLayout(quint64 job, GraphLayout layout);
    void recolor();
    void onSelectionChanged(int node);
    std::vector<GraphLegendEntry> legendEntries() const;
    QString legendTitle() const;

    std::shared_ptr<const ScheduleTrace> trace_;
    std::shared_ptr<const Graph> laid_graph_;  // the network the scene shows
    GraphLayout layout_;
    std::vector<GraphNodeItem*> items_;  // per vertex
    std::vector<NodeUse> uses_;
    QPointer<NodeSelection> selection_;
    int selected_ = -1;
    quint64 layout_job_ = 0;
    bool laid_out_ = false;
    bool stepping_ = false;  // teach mode's marks are drawn
    QPoint press_pos_;
};

}  // namespace rl::ui
