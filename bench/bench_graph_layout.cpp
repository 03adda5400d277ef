// Graph view layout (results in docs/benchmarks.md): Graphviz's dot over networks of about 2,000
// nodes, the size the issue asks to lay out in under 2 s off the GUI thread. The boxes are sized
// as the graph view sizes them (graph_view_sizes), so this measures the layout the view waits for.
#include <benchmark/benchmark.h>

#include <QApplication>

#include "engine/networks/presets.h"
#include "ui/graph_layout.h"
#include "ui/graph_view.h"

namespace rl::ui {
namespace {

void layout_network(benchmark::State& state, const char* spec, double effort = -1,
                    bool curved = true) {
    const Graph g = load_network(spec);
    LayoutRequest request;
    request.crossing_effort = effort;
    request.curved = curved;
    request.sizes = graph_view_sizes(g);
    request.edges = network_edges(g);
    for (auto _ : state) {
        const GraphLayout layout = layout_with_dot(request);
        if (!layout.error.isEmpty()) state.SkipWithError(layout.error.toUtf8().constData());
        benchmark::DoNotOptimize(layout.bounds);
    }
    state.counters["nodes"] = g.num_nodes();
}

// 77 pre-norm transformer blocks: 2,006 nodes with residual and attention branches.
void BM_LayoutTransformer2000(benchmark::State& state) {
    layout_network(state, "transformer:layers=77");
}
BENCHMARK(BM_LayoutTransformer2000)->Unit(benchmark::kMillisecond)->Iterations(3);

// Alternatives to the defaults: less crossing reduction, straight-segment (polyline) edges.
void BM_LayoutTransformer2000LowEffort(benchmark::State& state) {
    layout_network(state, "transformer:layers=77", 0.1);
}
BENCHMARK(BM_LayoutTransformer2000LowEffort)->Unit(benchmark::kMillisecond)->Iterations(3);
void BM_LayoutTransformer2000Polyline(benchmark::State& state) {
    layout_network(state, "transformer:layers=77", -1, false);
}
BENCHMARK(BM_LayoutTransformer2000Polyline)->Unit(benchmark::kMillisecond)->Iterations(3);

// A 1,000-block MLP: a 2,001-node chain.
void BM_LayoutMlp2000(benchmark::State& state) {
    layout_network(state, "mlp:depth=1000,width=16,batch=4");
}
BENCHMARK(BM_LayoutMlp2000)->Unit(benchmark::kMillisecond)->Iterations(3);

// ResNet-50's bottleneck blocks at their default small sizes, for a branching CNN.
void BM_LayoutResnet50(benchmark::State& state) {
    layout_network(state, "resnet:depth=50");
}
BENCHMARK(BM_LayoutResnet50)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace rl::ui

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);  // font metrics for the box sizes
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
