#pragma once
// A layered drawing of the network for the graph view, laid out by Graphviz's `dot` (Gansner et
// al., "A technique for drawing directed graphs", 1993) through its C library — not a layout
// engine of our own. The caller sizes the boxes; dot ranks them top to bottom, orders each rank
// to reduce crossings, places them without overlap and routes the edges as splines.
//
// Graphviz keeps global state and is not reentrant, so layouts are serialised by a mutex; call it
// from a worker thread (GraphView does), never the GUI thread for a large network.
#include <QPainterPath>
#include <QRectF>
#include <QSizeF>
#include <QString>
#include <utility>
#include <vector>

namespace rl {
class Graph;
}

namespace rl::ui {

struct LayoutRequest {
    std::vector<QSizeF> sizes;               // per vertex, in pixels (1 px = 1 Graphviz point)
    std::vector<std::pair<int, int>> edges;  // from, to (vertex indices)
    double node_sep = 14, rank_sep = 22;     // pixels between boxes of a rank / between ranks
    bool left_to_right = false;              // rankdir=LR instead of TB
    // dot's crossing-minimisation effort (its mclimit); < 0: dot's default (1).
    double crossing_effort = -1;
    bool curved = true;  // splines=spline; false: polyline edges (cheaper to route)
};

struct GraphLayout {
    std::vector<QRectF> boxes;        // per vertex, y pointing down
    std::vector<QPainterPath> edges;  // per request edge, from tail to head
    QRectF bounds;
    double layout_ms = 0;
    QString error;  // "" on success
};

// Lays out `request` with dot. Thread-safe (serialised). Never throws: a failure is in `error`.
GraphLayout layout_with_dot(const LayoutRequest& request);

// The vertices the graph view draws: the graph inputs first, then the nodes.
int vertex_of_value_source(const Graph& g, int value);  // input index, or inputs + producer
std::vector<std::pair<int, int>> network_edges(const Graph& g);

}  // namespace rl::ui
