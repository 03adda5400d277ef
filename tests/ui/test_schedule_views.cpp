// The schedule views offscreen: the graph view's layout of every preset, the matrix, the shared
// selection, and their exports.
#include <gtest/gtest.h>

#include <QFile>
#include <QImage>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QWheelEvent>
#include <cmath>

#include "engine/networks/presets.h"
#include "ui/graph_layout.h"
#include "ui/graph_view.h"
#include "ui/node_selection.h"
#include "ui/schedule_matrix.h"
#include "ui/schedule_trace.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

void expect_no_overlap(const GraphLayout& layout, const std::string& what) {
    for (size_t i = 0; i < layout.boxes.size(); ++i) {
        EXPECT_TRUE(layout.bounds.adjusted(-1, -1, 1, 1).contains(layout.boxes[i]))
            << what << " box " << i;
        for (size_t j = i + 1; j < layout.boxes.size(); ++j) {
            // Touching edges are fine; any shared area is an overlap.
            const QRectF both = layout.boxes[i].intersected(layout.boxes[j]);
            EXPECT_FALSE(both.width() > 0.5 && both.height() > 0.5)
                << what << ": boxes " << i << " and " << j << " overlap";
        }
    }
}

TEST(UiGraphView, LaysOutEveryPresetWithoutOverlappingBoxes) {
    for (const PresetInfo& p : presets()) {
        const Graph g = build_preset(Spec{p.name, {}});
        LayoutRequest request;
        request.sizes = graph_view_sizes(g);
        request.edges = network_edges(g);
        const GraphLayout layout = layout_with_dot(request);
        ASSERT_TRUE(layout.error.isEmpty()) << p.name << ": " << layout.error.toStdString();
        ASSERT_EQ(layout.boxes.size(), g.inputs().size() + size_t(g.num_nodes())) << p.name;
        ASSERT_EQ(layout.edges.size(), request.edges.size()) << p.name;
        for (size_t i = 0; i < layout.boxes.size(); ++i) {
            EXPECT_NEAR(layout.boxes[i].width(), request.sizes[i].width(), 1.0) << p.name;
            EXPECT_NEAR(layout.boxes[i].height(), request.sizes[i].height(), 1.0) << p.name;
        }
        expect_no_overlap(layout, p.name);
        // Layered top to bottom: every edge goes down.
        for (const auto& [from, to] : request.edges)
            EXPECT_LT(layout.boxes[size_t(from)].center().y(),
                      layout.boxes[size_t(to)].center().y())
                << p.name << " edge " << from << "->" << to;
    }
}

TEST(UiGraphView, ColoursFollowThePlanAndRelayoutOnlyForANewNetwork) {
    GraphView view;
    view.resize(900, 700);
    view.show();
    QSignalSpy ready(&view, &GraphView::layoutReady);
    const auto none = trace_of("mlp:depth=4,width=8,batch=4", "none");
    view.setTrace(none);
    ASSERT_TRUE(ready.wait(60000));
    EXPECT_TRUE(view.isLaidOut());
    const Graph& g = *none->graph;
    const auto uses = node_uses(g, none->plan.schedule);
    for (NodeId n = 0; n < g.num_nodes(); ++n) EXPECT_EQ(view.fateOf(n), uses[size_t(n)].fate);
    // Same network, another plan: recoloured at once, no new layout.
    auto periodic = std::make_shared<ScheduleTrace>(*none);
    periodic->plan = plan_with(g, none->costs, parse_spec("sqrt-n:segments=2"));
    view.setTrace(periodic);
    EXPECT_TRUE(view.isLaidOut());
    EXPECT_EQ(ready.count(), 1);
    bool recomputed = false;
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        recomputed = recomputed || view.fateOf(n) == NodeFate::Recomputed;
    EXPECT_TRUE(recomputed);
}

TEST(UiSelection, SelectingANodeInOneViewSelectsItInTheOthers) {
    const auto trace = trace_of("mlp:depth=4,width=8,batch=4", "sqrt-n:segments=2");
    NodeSelection selection;
    GraphView graph;
    ScheduleMatrixView matrix;
    graph.setSelection(&selection);
    matrix.setSelection(&selection);
    graph.resize(800, 900);
    matrix.resize(900, 500);
    graph.show();
    matrix.show();
    QSignalSpy ready(&graph, &GraphView::layoutReady);
    graph.setTrace(trace);
    matrix.setTrace(trace);
    ASSERT_TRUE(ready.wait(60000));
    QCoreApplication::processEvents();

    // A click on a matrix column selects the node in the graph view.
    const int node = 3;
    QTest::mouseClick(&matrix, Qt::LeftButton, {}, matrix.cellRect(2, node).center());
    EXPECT_EQ(selection.node(), node);
    EXPECT_EQ(graph.selectedNode(), node);
    EXPECT_EQ(matrix.selectedNode(), node);

    // A click on a box in the graph view selects it in the matrix.
    const int other = 5;
    graph.centerOn(graph.nodeRect(other).center());
    const QPoint at = graph.mapFromScene(graph.nodeRect(other).center());
    QTest::mouseClick(graph.viewport(), Qt::LeftButton, {}, at);
    EXPECT_EQ(selection.node(), other);
    EXPECT_EQ(matrix.selectedNode(), other);
    EXPECT_EQ(graph.selectedNode(), other);
}

TEST(UiScheduleMatrix, CellsMatchTheEngineAndExport) {
    const auto trace = trace_of("mlp:depth=4,width=8,batch=4", "sqrt-n:segments=2");
    ScheduleMatrixView matrix;
    matrix.resize(1000, 600);
    matrix.setTrace(trace);
    const ScheduleMatrix m = schedule_matrix(*trace->graph, trace->plan.schedule);
    EXPECT_EQ(matrix.matrix().cells, m.cells);
    // Geometry round-trips: the centre of a cell is that cell.
    for (int s : {0, m.stages / 2, m.stages - 1})
        for (int n : {0, m.nodes / 2, m.nodes - 1})
            EXPECT_EQ(matrix.cellAt(matrix.cellRect(s, n).center()), QPoint(n, s));
    EXPECT_TRUE(matrix.cellText(0, 0).contains(QStringLiteral("computed")));

    QTemporaryDir dir;
    for (const char* name : {"m.png", "m.svg", "m.json", "m.csv"}) {
        const QString path = dir.filePath(QString::fromLatin1(name));
        EXPECT_EQ(export_schedule_matrix(trace, path, QSize(900, 500)), QString()) << name;
        EXPECT_GT(QFile(path).size(), 100) << name;
    }
    QFile json(dir.filePath(QStringLiteral("m.json")));
    ASSERT_TRUE(json.open(QIODevice::ReadOnly));
    EXPECT_EQ(json.readAll().toStdString(), schedule_matrix_json(*trace->graph, m));
    EXPECT_FALSE(
        export_schedule_matrix(trace, dir.filePath(QStringLiteral("m.txt")), QSize(900, 500))
            .isEmpty());
}

TEST(UiScheduleMatrix, CliExportsTheMatrixAndTheGraphHeadless) {
    QTemporaryDir dir;
    for (const char* chart : {"schedule", "graph"}) {
        const QString png = dir.filePath(QStringLiteral("%1.png").arg(QLatin1String(chart)));
        QProcess cli;
        cli.start(QStringLiteral(REMATLAB_CLI_PATH),
                  {"export", "--network", "mlp:depth=4,width=16,batch=8", "--strategies",
                   "sqrt-n:segments=2", "--chart", chart, "--size", "900x500", "--out", png});
        ASSERT_TRUE(cli.waitForFinished(120000));
        EXPECT_EQ(cli.exitCode(), 0) << chart << ": " << cli.readAllStandardError().toStdString();
        const QImage image(png);
        EXPECT_FALSE(image.isNull()) << chart;
        if (QLatin1String(chart) == QLatin1String("schedule")) {
            EXPECT_EQ(image.size(), QSize(900, 500));
        }
    }
    const QString json = dir.filePath(QStringLiteral("m.json"));
    QProcess cli;
    cli.start(QStringLiteral(REMATLAB_CLI_PATH),
              {"export", "--network", "mlp:depth=4,width=16,batch=8", "--strategies", "none",
               "--chart", "schedule", "--out", json});
    ASSERT_TRUE(cli.waitForFinished(120000));
    EXPECT_EQ(cli.exitCode(), 0) << cli.readAllStandardError().toStdString();
    QFile f(json);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    EXPECT_TRUE(f.readAll().contains("rematlab-schedule-matrix"));
}

// The matrix zooms around the cell under the wheel, pans by whole cells (drag or panBy), stays
// inside the matrix, and a double-click shows it all again; a click still selects a column.
TEST(UiScheduleMatrix, ZoomsAroundThePointerAndPansInsideTheMatrix) {
    const auto trace = trace_of("mlp:depth=12,width=8,batch=4", "sqrt-n");
    NodeSelection selection;
    ScheduleMatrixView matrix;
    matrix.setSelection(&selection);
    matrix.resize(900, 500);
    matrix.show();
    matrix.setTrace(trace);
    QCoreApplication::processEvents();
    const QRect all = matrix.visibleCells();
    ASSERT_EQ(all, QRect(0, 0, matrix.matrix().nodes, matrix.matrix().stages));
    ASSERT_GT(all.width(), 20);
    ASSERT_GT(all.height(), 8);

    // Three wheel steps closer over a cell: about half as many cells each way, the same cell
    // still under the pointer, and it is drawn larger.
    const QPoint cell(all.width() * 2 / 3, all.height() / 3);
    const QPoint at = matrix.cellRect(cell.y(), cell.x()).center();
    const int small = matrix.cellRect(cell.y(), cell.x()).width();
    QWheelEvent wheel(at, matrix.mapToGlobal(at), QPoint(), QPoint(0, 3 * 120), Qt::NoButton,
                      Qt::NoModifier, Qt::NoScrollPhase, false);
    QCoreApplication::sendEvent(&matrix, &wheel);
    const QRect zoomed = matrix.visibleCells();
    EXPECT_NEAR(zoomed.width(), all.width() / std::pow(1.25, 3), 1.0);
    EXPECT_NEAR(zoomed.height(), all.height() / std::pow(1.25, 3), 1.0);
    EXPECT_EQ(matrix.cellAt(at), cell);
    EXPECT_GT(matrix.cellRect(cell.y(), cell.x()).width(), small);

    // Panning moves by whole cells and stops at the edges.
    matrix.panBy(2, 1);
    EXPECT_EQ(matrix.visibleCells().topLeft(), zoomed.topLeft() + QPoint(2, 1));
    matrix.panBy(-1000, -1000);
    EXPECT_EQ(matrix.visibleCells().topLeft(), QPoint(0, 0));
    matrix.panBy(1000, 1000);
    EXPECT_EQ(matrix.visibleCells().right(), all.right());
    EXPECT_EQ(matrix.visibleCells().bottom(), all.bottom());
    EXPECT_EQ(matrix.visibleCells().size(), zoomed.size());

    // A drag to the left shows columns further right.
    matrix.panBy(-1000, 0);
    const int before = matrix.visibleCells().x();
    const QRect c0 = matrix.cellRect(matrix.visibleCells().y(), before + 4);
    QTest::mousePress(&matrix, Qt::LeftButton, {}, c0.center());
    QMouseEvent move(QEvent::MouseMove, QPointF(c0.center() - QPoint(3 * c0.width(), 0)),
                     matrix.mapToGlobal(QPointF(c0.center() - QPoint(3 * c0.width(), 0))),
                     Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(&matrix, &move);
    QTest::mouseRelease(&matrix, Qt::LeftButton, {}, c0.center() - QPoint(3 * c0.width(), 0));
    EXPECT_GE(matrix.visibleCells().x(), before + 2);
    EXPECT_EQ(selection.node(), -1) << "a drag does not select";

    // A click on a zoomed cell selects its node.
    const QRect v = matrix.visibleCells();
    const int node = v.x() + v.width() / 2;
    QTest::mouseClick(&matrix, Qt::LeftButton, {}, matrix.cellRect(v.y(), node).center());
    EXPECT_EQ(selection.node(), node);

    // A double-click shows it all.
    QTest::mouseDClick(&matrix, Qt::LeftButton, {}, matrix.cellRect(v.y(), node).center());
    EXPECT_EQ(matrix.visibleCells(), all);
}

}  // namespace
}  // namespace rl::ui
