#include "ui/graph_layout.h"

#include <gvc.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include "engine/graph.h"

extern "C" {
// The dot layout plugin, linked in (see ui/CMakeLists.txt) and registered as a builtin, so that
// Graphviz needs no plugin configuration file.
extern gvplugin_library_t gvplugin_dot_layout_LTX_library;
}

namespace rl::ui {

namespace {

std::mutex& graphviz_mutex() {
    static std::mutex m;
    return m;
}

// One context for the process: creating one loads plugins, which is not free.
GVC_t* context() {
    static GVC_t* gvc = [] {
        static lt_symlist_t builtins[] = {{"gvplugin_dot_layout_LTX_library",
                                           static_cast<void*>(&gvplugin_dot_layout_LTX_library)},
                                          {nullptr, nullptr}};
        return gvContextPlugins(builtins, 0);
    }();
    return gvc;
}

void set(void* obj, const char* name, const std::string& value) {
    agsafeset(obj, const_cast<char*>(name), const_cast<char*>(value.c_str()),
              const_cast<char*>(""));
}

std::string inches(double px) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", px / 72.0);
    return buf;
}

// A Graphviz graph and, once computed, its layout: both freed on every way out of
// layout_with_dot, an exception (std::bad_alloc in the vectors or paths) included.
class DotGraph {
  public:
    explicit DotGraph(GVC_t* gvc)
        : gvc_(gvc), g_(agopen(const_cast<char*>("network"), Agdirected, nullptr)) {}
    ~DotGraph() {
        if (laid_out_) gvFreeLayout(gvc_, g_);
        if (g_) agclose(g_);
    }
    DotGraph(const DotGraph&) = delete;
    DotGraph& operator=(const DotGraph&) = delete;

    Agraph_t* get() const { return g_; }
    // Runs the layout engine; false when it failed.
    bool layout(const char* engine) {
        laid_out_ = gvLayout(gvc_, g_, engine) == 0;
        return laid_out_;
    }

  private:
    GVC_t* gvc_;
    Agraph_t* g_;
    bool laid_out_ = false;
};

}  // namespace

int vertex_of_value_source(const Graph& g, int value) {
    const Value& v = g.value(value);
    if (v.is_input()) {
        const auto& in = g.inputs();
        for (size_t i = 0; i < in.size(); ++i)
            if (in[i] == value) return static_cast<int>(i);
        return -1;
    }
    return static_cast<int>(g.inputs().size()) + v.producer;
}

std::vector<std::pair<int, int>> network_edges(const Graph& g) {
    std::vector<std::pair<int, int>> out;
    const int inputs = static_cast<int>(g.inputs().size());
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        for (ValueId u : g.node(n).inputs)
            out.emplace_back(vertex_of_value_source(g, u), inputs + n);
    return out;
}

GraphLayout layout_with_dot(const LayoutRequest& request) {
    GraphLayout out;
    const auto t0 = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(graphviz_mutex());
    GVC_t* gvc = context();
    if (!gvc) {
        out.error = QStringLiteral("Graphviz could not start");
        return out;
    }
    DotGraph graph(gvc);
    Agraph_t* g = graph.get();
    if (!g) {
        out.error = QStringLiteral("Graphviz could not create a graph");
        return out;
    }
    set(g, "rankdir", request.left_to_right ? "LR" : "TB");
    set(g, "nodesep", inches(request.node_sep));
    set(g, "ranksep", inches(request.rank_sep));
    set(g, "splines", request.curved ? "spline" : "polyline");
    double effort = request.crossing_effort;
    if (effort < 0) effort = 1.0;  // fewer passes did not pay (docs/benchmarks.md)
    if (request.sizes.size() > 500) {
        // Network simplex (ranking and x placement) stops after half its default iterations:
        // every iterate is a feasible placement (no overlap), only less compact; this halves a
        // 2,000-node layout.
        set(g, "nslimit", "0.5");
        set(g, "nslimit1", "0.5");
    }
    if (effort != 1.0) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", effort);
        set(g, "mclimit", buf);
    }
    const size_t n = request.sizes.size();
    std::vector<Agnode_t*> nodes(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "v%zu", i);
        nodes[i] = agnode(g, name, 1);
        set(nodes[i], "shape", "box");
        set(nodes[i], "fixedsize", "true");
        set(nodes[i], "label", "");
        set(nodes[i], "width", inches(request.sizes[i].width()));
        set(nodes[i], "height", inches(request.sizes[i].height()));
    }
    std::vector<Agedge_t*> edges;
    edges.reserve(request.edges.size());
    for (const auto& [from, to] : request.edges) {
        if (from < 0 || to < 0 || size_t(from) >= n || size_t(to) >= n) {
            edges.push_back(nullptr);
            continue;
        }
        // A second edge between the same pair (an op reading one value twice) is drawn once.
        Agedge_t* e = agedge(g, nodes[size_t(from)], nodes[size_t(to)], nullptr, 1);
        set(e, "arrowhead", "none");
        edges.push_back(e);
    }
    if (!graph.layout("dot")) {
        out.error = QStringLiteral("Graphviz's dot layout failed");
        return out;
    }
    const boxf bb = GD_bb(g);
    const double top = bb.UR.y;
    auto flip = [&](pointf p) { return QPointF(p.x - bb.LL.x, top - p.y); };
    out.boxes.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const QPointF c = flip(ND_coord(nodes[i]));
        const double w = ND_width(nodes[i]) * 72.0, h = ND_height(nodes[i]) * 72.0;
        out.boxes[i] = QRectF(c.x() - w / 2, c.y() - h / 2, w, h);
    }
    out.edges.resize(edges.size());
    for (size_t k = 0; k < edges.size(); ++k) {
        Agedge_t* e = edges[k];
        if (!e || !ED_spl(e) || ED_spl(e)->size < 1) continue;
        const bezier& bz = ED_spl(e)->list[0];
        if (bz.size < 1) continue;
        QPainterPath path(flip(bz.list[0]));
        for (int j = 1; j + 2 < bz.size; j += 3)
            path.cubicTo(flip(bz.list[j]), flip(bz.list[j + 1]), flip(bz.list[j + 2]));
        if (bz.eflag) path.lineTo(flip(bz.ep));
        // dot routes an edge between the pair of nodes it joins; with tail and head swapped
        // (a back edge) the path runs head to tail.
        if (aghead(e) != nodes[size_t(request.edges[k].second)]) path = path.toReversed();
        out.edges[k] = path;
    }
    out.bounds = QRectF(0, 0, bb.UR.x - bb.LL.x, bb.UR.y - bb.LL.y);
    out.layout_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace rl::ui
