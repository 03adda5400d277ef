// The selected node beyond the graph, the matrix and the residuals: its instructions marked on the
// memory chart, listed (and jumped to) in teach mode, a click on the chart selecting a node; and
// the graph view's legend, on screen and in exports.
#include <gtest/gtest.h>

#include <QApplication>
#include <QFile>
#include <QImage>
#include <QLegend>
#include <QLegendMarker>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>

#include "analysis/explain.h"
#include "engine/networks/presets.h"
#include "ui/chart_math.h"
#include "ui/evaluation.h"
#include "ui/graph_view.h"
#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/node_marks.h"
#include "ui/node_selection.h"
#include "ui/results_model.h"
#include "ui/schedule_palette.h"
#include "ui/schedule_trace.h"
#include "ui/schedule_views.h"
#include "ui/teach_panel.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

const QString kNet = QStringLiteral("mlp:depth=6,width=16,batch=8");
const QString kRecomputing = QStringLiteral("sqrt-n:segments=2");

const RunSummary& planned() {
    static const RunSummary s = [] {
        RunRequest r;
        r.network = kNet;
        r.strategies = {QStringLiteral("none"), kRecomputing};
        return evaluate_all(r, false);
    }();
    return s;
}

// The legend entry of each mark kind is shown exactly when it has points.
void expect_legend_follows_marks(MemoryChart* chart) {
    QApplication::processEvents();  // the legend lays its entries out (and shows them) later
    for (MarkKind k : {MarkKind::Compute, MarkKind::Recompute, MarkKind::Backward}) {
        QScatterSeries* s = chart->markSeries(k);
        const auto markers = chart->chart()->legend()->markers(s);
        ASSERT_EQ(markers.size(), 1);
        EXPECT_EQ(markers[0]->isVisible(), s->count() > 0) << mark_kind_name(k);
    }
}

// A node the strategy computes more than once, and how many times.
std::pair<NodeId, int> recomputed_node(const ScheduleTrace& t) {
    const auto uses = node_uses(*t.graph, t.plan.schedule);
    for (NodeId n = 0; n < NodeId(uses.size()); ++n)
        if (uses[size_t(n)].computes > 1) return {n, uses[size_t(n)].computes};
    return {-1, 0};
}

TEST(UiNodeMarks, MarksAreTheNodesComputesRecomputesAndBackwardOnItsTimeline) {
    const StrategyResult& r = planned().results[1];
    ASSERT_TRUE(r.trace && r.predicted_timeline);
    const ScheduleTrace& t = *r.trace;
    const auto uses = node_uses(*t.graph, t.plan.schedule);
    bool some_recompute = false;
    for (NodeId n = 0; n < t.graph->num_nodes(); ++n) {
        std::vector<NodeMark> marks = node_marks(t.plan.schedule, n);
        int computes = 0, recomputes = 0, backwards = 0;
        long last = -1;
        for (const NodeMark& m : marks) {
            EXPECT_GT(m.instruction, last) << "in schedule order";
            last = m.instruction;
            const Instruction& ins = t.plan.schedule.code[size_t(m.instruction)];
            EXPECT_EQ(ins.target, n);
            EXPECT_EQ(ins.kind == InstrKind::Backward, m.kind == MarkKind::Backward);
            computes += m.kind == MarkKind::Compute;
            recomputes += m.kind == MarkKind::Recompute;
            backwards += m.kind == MarkKind::Backward;
        }
        EXPECT_EQ(computes + recomputes, uses[size_t(n)].computes) << t.graph->node(n).name;
        EXPECT_EQ(computes, uses[size_t(n)].computes > 0 ? 1 : 0);
        some_recompute |= recomputes > 0;
        // Every computed node here has a backward (an MLP: all reach the loss).
        EXPECT_EQ(backwards, 1) << t.graph->node(n).name;

        // Placed after the last event of each instruction (found here by a plain scan), on the
        // stretch of line the hover read-out attributes to that instruction.
        place_marks(marks, *r.predicted_timeline);
        const Timeline& tl = *r.predicted_timeline;
        for (const NodeMark& m : marks) {
            std::optional<size_t> at;
            for (size_t i = 0; i < tl.points.size(); ++i)
                if (tl.instruction[i] == m.instruction) at = i;
            if (!at) {
                // No event of its own: at the first event of a later instruction.
                std::optional<size_t> after;
                for (size_t i = 0; i < tl.points.size() && !after; ++i)
                    if (tl.instruction[i] > m.instruction) after = i;
                ASSERT_EQ(m.time_ms.has_value(), after.has_value());
                if (after) {
                    EXPECT_EQ(*m.time_ms, tl.points[*after].x);
                }
                continue;
            }
            ASSERT_TRUE(m.time_ms.has_value());
            EXPECT_GE(*m.time_ms, tl.points[*at].x);
            if (*at + 1 < tl.points.size()) {
                EXPECT_LE(*m.time_ms, tl.points[*at + 1].x);
            }
            EXPECT_EQ(m.bytes, tl.points[*at].y);
            if (*at + 1 < tl.points.size() && tl.points[*at + 1].x > tl.points[*at].x) {
                EXPECT_EQ(tl.instruction[index_at(tl.points, *m.time_ms)], m.instruction);
            }
        }
    }
    EXPECT_TRUE(some_recompute) << "the test needs a strategy that recomputes";
    EXPECT_TRUE(node_marks(t.plan.schedule, -1).empty());
    EXPECT_TRUE(node_marks(t.plan.schedule, t.graph->num_nodes()).empty());
}

TEST(UiNodeMarks, InstructionNodeAndNextInstructionWrapAround) {
    const ScheduleTrace& t = *planned().results[1].trace;
    const Schedule& s = t.plan.schedule;
    for (long i = 0; i < long(s.size()); ++i) {
        const Instruction& ins = s.code[size_t(i)];
        const NodeId n = instruction_node(*t.graph, s, i);
        if (ins.kind == InstrKind::Free)
            EXPECT_EQ(n, t.graph->value(ins.target).producer);
        else
            EXPECT_EQ(n, ins.target);
    }
    EXPECT_EQ(instruction_node(*t.graph, s, -1), -1);
    EXPECT_EQ(instruction_node(*t.graph, s, long(s.size())), -1);
    const auto [node, computes] = recomputed_node(t);
    ASSERT_GE(node, 0);
    const std::vector<NodeMark> marks = node_marks(s, node);
    ASSERT_GE(marks.size(), 3u);
    EXPECT_EQ(next_instruction_of(s, node, 0), marks[0].instruction);
    EXPECT_EQ(next_instruction_of(s, node, marks[0].instruction + 1), marks[1].instruction);
    // Past the last one: back to the first.
    EXPECT_EQ(next_instruction_of(s, node, marks.back().instruction + 1), marks[0].instruction);
    EXPECT_EQ(next_instruction_of(s, -1, 0), -1);
}

struct Window {
    MainWindow w{false};
    int index = -1;  // the recomputing strategy's row
    Window() {
        w.resize(1400, 900);
        w.show();
        QSignalSpy plan(&w, &MainWindow::planReady);
        w.setNetworkSpec(kNet);
        w.setBudget(std::nullopt);  // sqrt-n plans by its segments
        w.setStrategies({QStringLiteral("none"), kRecomputing});
        while (plan.wait(kWaitMs)) {
            const auto& results = w.resultsModel()->results();
            index = -1;
            for (size_t i = 0; i < results.size(); ++i)
                if (results[i].spec == kRecomputing && results[i].trace) index = int(i);
            if (index >= 0 && results.size() == 2 && w.network().spec == kNet) break;
        }
        w.scheduleViews()->setCurrent(index);
    }
    const ScheduleTrace& trace() const { return *w.resultsModel()->results()[size_t(index)].trace; }
};

TEST(UiNodeMarks, SelectingANodeMarksItOnTheMemoryChartAndInTeachMode) {
    Window win;
    ASSERT_GE(win.index, 0);
    MainWindow& w = win.w;
    const auto [node, computes] = recomputed_node(win.trace());
    ASSERT_GE(node, 0);
    const QString name = QString::fromStdString(win.trace().graph->node(node).name);
    w.scheduleViews()->selection()->select(node);
    MemoryChart* chart = w.memoryChart();
    chart->flush();
    EXPECT_EQ(chart->markedTrack(), win.index);
    EXPECT_EQ(chart->markSeries(MarkKind::Compute)->count(), 1);
    EXPECT_EQ(chart->markSeries(MarkKind::Recompute)->count(), computes - 1);
    EXPECT_EQ(chart->markSeries(MarkKind::Backward)->count(), 1);
    EXPECT_TRUE(chart->markSeries(MarkKind::Recompute)->name().contains(name));
    expect_legend_follows_marks(chart);
    // The marks sit at the instructions' times, in schedule order.
    const auto& marks = chart->nodeMarks();
    ASSERT_EQ(marks.size(), size_t(computes + 1));
    for (size_t i = 1; i < marks.size(); ++i) EXPECT_LE(*marks[i - 1].time_ms, *marks[i].time_ms);

    // Teach mode lists them; while shown, a selection jumps to the node's next instruction.
    TeachPanel* teach = w.teachPanel();
    EXPECT_EQ(teach->selectedNode(), node);
    EXPECT_TRUE(teach->nodeLine().contains(name)) << teach->nodeLine().toStdString();
    EXPECT_TRUE(teach->nodeLine().contains(QStringLiteral("recompute")));
    w.showTeachMode(true);
    teach->seek(0);
    w.scheduleViews()->selection()->select(-1);
    w.scheduleViews()->selection()->select(node);
    ASSERT_NE(teach->explanation(), nullptr);
    EXPECT_EQ(teach->explanation()->index, marks[0].instruction);
    EXPECT_TRUE(teach->seekNextOfNode());
    EXPECT_EQ(teach->explanation()->index, marks[1].instruction);
    EXPECT_EQ(teach->explanation()->node, node);

    // Another strategy shown: the marks follow it; no selection: none.
    w.scheduleViews()->setCurrent(1 - win.index);
    chart->flush();
    EXPECT_EQ(chart->markedTrack(), 1 - win.index);
    EXPECT_EQ(chart->markSeries(MarkKind::Recompute)->count(), 0);  // none recomputes nothing
    EXPECT_EQ(chart->markSeries(MarkKind::Compute)->count(), 1);
    expect_legend_follows_marks(chart);
    w.scheduleViews()->selection()->select(-1);
    chart->flush();
    EXPECT_EQ(chart->markSeries(MarkKind::Compute)->count(), 0);
    EXPECT_EQ(chart->markSeries(MarkKind::Backward)->count(), 0);
    expect_legend_follows_marks(chart);
}

TEST(UiNodeMarks, ClickingAnInstructionInTheMemoryChartSelectsItsNode) {
    Window win;
    ASSERT_GE(win.index, 0);
    MainWindow& w = win.w;
    w.showTeachMode(true);
    const auto [node, computes] = recomputed_node(win.trace());
    ASSERT_GE(node, 0);
    MemoryChart* chart = w.memoryChart();
    // Where the recompute is drawn: mark it, read the point, then select something else.
    w.scheduleViews()->selection()->select(node);
    chart->flush();
    ASSERT_GE(chart->markSeries(MarkKind::Recompute)->count(), 1);
    const QPointF value = chart->markSeries(MarkKind::Recompute)->at(0);
    long recompute = -1;
    for (const NodeMark& m : chart->nodeMarks())
        if (m.kind == MarkKind::Recompute && recompute < 0) recompute = m.instruction;
    const NodeId other = node == 0 ? 1 : 0;
    w.scheduleViews()->selection()->select(other);
    w.teachPanel()->seek(0);
    chart->flush();

    const QPointF at = chart->chart()->mapToPosition(value, chart->markSeries(MarkKind::Compute));
    const auto hit = chart->instructionAt(at);
    ASSERT_TRUE(hit.has_value());
    EXPECT_EQ(hit->first, win.index);
    EXPECT_EQ(hit->second, recompute);
    EXPECT_FALSE(chart->instructionAt(QPointF(-50, -50)).has_value()) << "outside the plot";

    const double x0 = chart->timeAxis()->min(), x1 = chart->timeAxis()->max();
    QSignalSpy clicked(chart, &MemoryChart::instructionClicked);
    const QPoint view = chart->mapFromScene(chart->chart()->mapToScene(at));
    QTest::mouseClick(chart->viewport(), Qt::LeftButton, {}, view);
    // A click is emitted after the double-click interval (a double-click only resets the zoom).
    ASSERT_TRUE(clicked.wait(2000));
    ASSERT_EQ(clicked.count(), 1);
    EXPECT_EQ(w.scheduleViews()->selection()->node(), node);
    EXPECT_EQ(w.graphView()->selectedNode(), node);
    EXPECT_EQ(w.scheduleViews()->current(), win.index);
    // Teach mode stands at the clicked instruction itself, not the node's first one.
    ASSERT_NE(w.teachPanel()->explanation(), nullptr);
    EXPECT_EQ(w.teachPanel()->explanation()->index, recompute);
    // A click is not a zoom.
    EXPECT_EQ(chart->timeAxis()->min(), x0);
    EXPECT_EQ(chart->timeAxis()->max(), x1);
}

// Pixels of exactly `c` in rows [top, bottom) of `img`.
int count_colour(const QImage& img, QColor c, int top, int bottom) {
    int n = 0;
    for (int y = std::max(0, top); y < std::min(bottom, img.height()); ++y)
        for (int x = 0; x < img.width(); ++x) n += img.pixelColor(x, y).rgb() == c.rgb();
    return n;
}

TEST(UiGraphView, TheLegendIsOnScreenAndInExports) {
    // `none` recomputes nothing: orange in the export can only be the legend's.
    const StrategyResult& none = planned().results[0];
    ASSERT_TRUE(none.trace);
    GraphView view;
    view.resize(900, 700);
    view.show();
    view.setTrace(none.trace);
    ASSERT_TRUE(view.waitForLayout(kWaitMs));
    const QStringList labels = view.legendLabels();
    for (const char* want : {"kept", "recomputed", "freed early", "graph input"}) {
        bool found = false;
        for (const QString& l : labels) found |= l.startsWith(QLatin1String(want));
        EXPECT_TRUE(found) << want << " in " << labels.join(QStringLiteral(" | ")).toStdString();
    }
    EXPECT_FALSE(labels.contains(QStringLiteral("selected node")));
    NodeSelection selection;
    view.setSelection(&selection);
    selection.select(2);
    EXPECT_TRUE(view.legendLabels().contains(QStringLiteral("selected node")));
    selection.select(-1);

    QTemporaryDir dir;
    const QString png = dir.filePath(QStringLiteral("g.png"));
    ASSERT_EQ(view.exportImage(png, 1.0), QString());
    const QImage img(png);
    const QRectF scene = view.scene()->sceneRect();
    const double strip = view.legendHeight(std::max(double(img.width()), scene.width()));
    EXPECT_GT(strip, 30);
    EXPECT_EQ(img.height(), int(scene.height() + strip));
    EXPECT_GE(img.width(), int(scene.width()));
    const QColor orange = schedule_palette::recomputed(), green = schedule_palette::kept();
    EXPECT_GT(count_colour(img, orange, 0, int(strip)), 20) << "the legend's swatch";
    EXPECT_EQ(count_colour(img, orange, int(strip), img.height()), 0) << "no node recomputed";
    EXPECT_GT(count_colour(img, green, int(strip), img.height()), 0) << "kept nodes drawn";

    const QString svg = dir.filePath(QStringLiteral("g.svg"));
    ASSERT_EQ(view.exportImage(svg, 1.0), QString());
    QFile f(svg);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    const QByteArray bytes = f.readAll();
    EXPECT_TRUE(bytes.contains("kept for the backward"));
    EXPECT_TRUE(bytes.contains("graph input"));
}

}  // namespace
}  // namespace rl::ui
