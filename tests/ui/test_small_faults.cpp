// The smaller faults of issue 15, each where a test can hold it: static tooltips over hover
// read-outs, a double-click that also selected, HTML escaped twice, the frontier drawn as measured,
// a selection kept by index across networks.
#include <gtest/gtest.h>

#include <QApplication>
#include <QAreaSeries>
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineSeries>
#include <QScatterSeries>
#include <QSignalSpy>
#include <QTest>
#include <QTextDocument>
#include <QTreeWidget>
#include <QValueAxis>

#include "analysis/evaluate.h"
#include "engine/networks/presets.h"
#include "engine/units.h"
#include "strategies/strategy.h"
#include "ui/evaluation.h"
#include "ui/graph_view.h"
#include "ui/memory_chart.h"
#include "ui/memory_profiler.h"
#include "ui/message_widget.h"
#include "ui/node_selection.h"
#include "ui/palette.h"
#include "ui/pareto_chart.h"
#include "ui/residuals_panel.h"
#include "ui/results_model.h"
#include "ui/schedule_matrix.h"
#include "ui/schedule_trace.h"
#include "ui/schedule_views.h"
#include "ui/sweeps.h"
#include "ui/teach_panel.h"

namespace rl::ui {
namespace {

std::vector<StrategyResult> run_results(const std::string& net,
                                        const std::vector<std::string>& specs) {
    auto g = std::make_shared<const Graph>(load_network(net));
    EvaluateOptions eo;
    eo.execute = true;
    Evaluator ev(*g, net, eo);
    std::vector<StrategyResult> out;
    for (const std::string& s : specs)
        out.push_back(to_result(*g, ev.costs(), ev.evaluate(parse_spec(s)), g));
    return out;
}

// Qt shows a widget's static tooltip ~0.7 s after the mouse stops, over the charts' own hover
// read-out: the charts carry their help as What's This instead.
TEST(UiCharts, WithAHoverReadoutHaveNoStaticTooltip) {
    MemoryChart memory;
    ParetoChart pareto;
    ScheduleMatrixView matrix;
    for (QWidget* w : std::initializer_list<QWidget*>{&memory, &pareto, &matrix}) {
        EXPECT_TRUE(w->toolTip().isEmpty()) << w->metaObject()->className();
        EXPECT_FALSE(w->whatsThis().isEmpty()) << w->metaObject()->className();
    }
}

// A double-click resets the zoom; it does not also select the instruction under it. A single
// click still does, once the double-click interval has passed.
TEST(UiMemoryChart, DoubleClickResetsZoomWithoutSelecting) {
    const auto results = run_results("mlp:depth=6,width=8,batch=4", {"sqrt-n"});
    MemoryChart chart;
    chart.resize(900, 500);
    chart.setResults(results);
    chart.show();
    chart.flush();
    const QRectF plot = chart.chart()->plotArea();
    std::optional<QPoint> at;
    for (double fx = 0.3; fx < 0.9 && !at; fx += 0.05)
        for (double fy = 0.05; fy < 1.0 && !at; fy += 0.02) {
            const QPointF p(plot.left() + plot.width() * fx, plot.top() + plot.height() * fy);
            if (chart.instructionAt(p)) at = chart.mapFromScene(chart.chart()->mapToScene(p));
        }
    ASSERT_TRUE(at.has_value());
    QSignalSpy clicked(&chart, &MemoryChart::instructionClicked);
    QTest::mouseClick(chart.viewport(), Qt::LeftButton, {}, *at);
    QTest::mouseDClick(chart.viewport(), Qt::LeftButton, {}, *at);
    QTest::mouseRelease(chart.viewport(), Qt::LeftButton, {}, *at);  // as a real double-click
    QTest::qWait(QApplication::doubleClickInterval() + 300);
    EXPECT_EQ(clicked.count(), 0);
    QTest::mouseClick(chart.viewport(), Qt::LeftButton, {}, *at);
    EXPECT_TRUE(clicked.wait(2000));
    EXPECT_EQ(clicked.count(), 1);
}

// Error text is escaped once by its caller; the message shows the quotes, not "&quot;".
TEST(UiMessageWidget, EscapedErrorTextShowsItsQuotesOnce) {
    MessageWidget m;
    const QString error = QStringLiteral("node \"block0.fc\": width must be > 0 & even");
    m.showMessage(MessageWidget::Kind::Error, error.toHtmlEscaped());
    QLabel* label = nullptr;
    for (QLabel* l : m.findChildren<QLabel*>())
        if (l->text() == error.toHtmlEscaped()) label = l;
    ASSERT_NE(label, nullptr);
    EXPECT_EQ(label->textFormat(), Qt::RichText);
    QTextDocument shown;
    shown.setHtml(label->text());
    EXPECT_EQ(shown.toPlainText(), error);
}

// The optimal frontier is predicted: its markers are hollow like every predicted point, not
// filled like measured ones.
TEST(UiParetoChart, TheFrontierIsDrawnWithPredictedMarkers) {
    ParetoChart pareto;
    SweepCurve f;
    f.spec = QStringLiteral("optimal");
    f.name = QStringLiteral("optimal");
    f.frontier = true;
    f.samples = {{QStringLiteral("optimal:budget=1000"), {1.0, 4000}, std::nullopt},
                 {QStringLiteral("optimal:budget=2000"), {0.5, 6000}, std::nullopt}};
    pareto.setSweeps({f});
    pareto.flush();
    int frontier_markers = 0;
    for (QAbstractSeries* s : pareto.chart()->series()) {
        auto* scatter = qobject_cast<QScatterSeries*>(s);
        if (!scatter || scatter->count() != 2) continue;
        ++frontier_markers;
        EXPECT_EQ(scatter->brush().color(), QColor(Qt::white)) << "filled = measured";
    }
    EXPECT_EQ(frontier_markers, 1);
}

// A strategy shown twice is labelled by its full spec, defaults spelled out, in the table, the
// Pareto legend and the memory chart: "periodic" next to "periodic:k=2" read as if it were the
// only periodic. A strategy shown once keeps its short spec.
TEST(UiLabels, InstancesOfOneStrategyShowTheirFullSpec) {
    std::string k_default;
    for (const ParamSpec& p : find_strategy("periodic").schema())
        if (p.key == "k") k_default = p.default_value;
    ASSERT_FALSE(k_default.empty());
    ASSERT_NE(k_default, "2");
    const QString second = QStringLiteral("periodic:k=") + QString::fromStdString(k_default);
    const auto results =
        run_results("mlp:depth=6,width=8,batch=4", {"periodic:k=2", "periodic", "sqrt-n"});
    ASSERT_EQ(results[1].spec, QStringLiteral("periodic"));

    ResultsModel model;
    model.setResults(results);
    auto cell = [&](int row) {
        return model.data(model.index(row, ResultsModel::Strategy), Qt::DisplayRole).toString();
    };
    EXPECT_EQ(cell(0), QStringLiteral("periodic:k=2"));
    EXPECT_EQ(cell(1), second);
    EXPECT_EQ(cell(2), QStringLiteral("sqrt-n"));

    ParetoChart pareto;
    pareto.setModel(&model);
    pareto.flush();
    const QStringList names = pareto.seriesNames();
    EXPECT_TRUE(names.contains(second + QStringLiteral(" (predicted)")))
        << names.join(", ").toStdString();
    EXPECT_FALSE(names.contains(QStringLiteral("periodic (predicted)")));
    EXPECT_TRUE(names.contains(QStringLiteral("sqrt-n (predicted)")));

    MemoryChart memory;
    memory.setResults(results);
    EXPECT_EQ(memory.measuredSeries(1)->name(), second);
    EXPECT_EQ(memory.measuredSeries(2)->name(), QStringLiteral("sqrt-n"));
    // A result update of one row keeps its label.
    memory.setResult(1, results[1]);
    memory.flush();
    EXPECT_EQ(memory.measuredSeries(1)->name(), second);

    // Alone, periodic keeps its short spec.
    model.setResults({results[1]});
    EXPECT_EQ(cell(0), QStringLiteral("periodic"));
}

// The budget slider's top is plain backprop's exact peak, which no rounded size parses back
// to, so the run's spec carries it in bytes ("sqrt-n:budget=702713936"). Labels show it as a
// size, marked '≈' where rounded; the table's Strategy column leaves it to the Budget column.
TEST(UiLabels, ABudgetInBytesIsShownAsASize) {
    EXPECT_EQ(readable_budget(QStringLiteral("sqrt-n:budget=702713936")),
              QStringLiteral("sqrt-n:budget≈670MiB"));
    EXPECT_EQ(readable_budget(QStringLiteral("periodic:k=2,budget=1048576")),
              QStringLiteral("periodic:k=2,budget=1.00MiB"));
    EXPECT_EQ(readable_budget(QStringLiteral("optimal:budget=1000")),
              QStringLiteral("optimal:budget=1000"));  // under 1 KiB bytes read as they are
    EXPECT_EQ(readable_budget(QStringLiteral("optimal:budget=2MiB")),
              QStringLiteral("optimal:budget=2MiB"));
    EXPECT_EQ(readable_budget(QStringLiteral("none")), QStringLiteral("none"));

    const std::string net = "mlp:depth=6,width=37,batch=7";
    const uint64_t peak = run_results(net, {"none"})[0].predicted_peak;
    ASSERT_GT(peak, 1024u);
    const std::string size = format_bytes(peak);
    ASSERT_NE(parse_bytes(std::string(size).erase(size.find(' '), 1)), peak)
        << "the network's peak should not be a round size, or this tests nothing";
    const auto results = run_results(net, {"sqrt-n:budget=" + std::to_string(peak), "none"});
    ASSERT_TRUE(results[0].executed);
    const QString shown =
        QStringLiteral("sqrt-n:budget≈") + QString::fromStdString(size).remove(QLatin1Char(' '));

    MemoryChart memory;
    memory.setResults(results);
    memory.flush();
    EXPECT_EQ(memory.measuredSeries(0)->name(), shown);

    ResultsModel model;
    model.setResults(results);
    EXPECT_EQ(model.data(model.index(0, ResultsModel::Strategy), Qt::DisplayRole).toString(),
              QStringLiteral("sqrt-n"));
    EXPECT_EQ(model.data(model.index(0, ResultsModel::Budget), Qt::DisplayRole).toString(),
              bytes_text(peak));

    ParetoChart pareto;
    pareto.setModel(&model);
    pareto.flush();
    EXPECT_TRUE(pareto.seriesNames().contains(shown + QStringLiteral(" (predicted)")))
        << pareto.seriesNames().join(", ").toStdString();
}

// The Memory tab's instruction-index axis: the predicted and the measured timeline are the same
// events, so on it their lines coincide point for point; on the time axis they do not.
TEST(UiMemoryChart, OnTheInstructionAxisPredictedAndMeasuredLineUp) {
    for (const char* net : {"mlp:depth=6,width=8,batch=4", "transformer:layers=1,seq=4,batch=1"}) {
        SCOPED_TRACE(net);
        const auto results = run_results(net, {"sqrt-n", "none"});
        MemoryChart chart;
        chart.resize(1600, 600);
        chart.setResults(results);
        chart.show();
        chart.flush();
        for (int k = 0; k < 2; ++k) {
            ASSERT_TRUE(results[size_t(k)].executed);
            const auto& tl = *results[size_t(k)].measured_timeline;
            const auto& pl = *results[size_t(k)].predicted_timeline;
            ASSERT_EQ(tl.points.size(), pl.points.size());
            bool same_x = true;
            for (size_t i = 0; i < tl.points.size(); ++i)
                same_x &= tl.points[i].x == pl.points[i].x;
            EXPECT_FALSE(same_x) << "on the time axis measured and predicted differ";
        }
        chart.setInstructionAxis(true);
        chart.flush();
        EXPECT_TRUE(chart.instructionAxis());
        EXPECT_EQ(chart.timeAxis()->titleText(), QStringLiteral("instruction"));
        for (int k = 0; k < 2; ++k) {
            const QList<QPointF> m = chart.measuredSeries(k)->points();
            const QList<QPointF> p = chart.predictedSeries(k)->points();
            ASSERT_FALSE(m.isEmpty());
            EXPECT_EQ(m, p) << "strategy " << k;
            // The last instruction runs at x = instructions - 1; the releases after it at
            // x = instructions.
            double xmax = 0;
            for (const QPointF& q : m) xmax = std::max(xmax, q.x());
            EXPECT_EQ(xmax, double(results[size_t(k)].instructions));
            EXPECT_GE(chart.timeAxis()->max(), xmax);
        }
        // The hover read-out names the instruction under the cursor on both lines.
        const auto& events = results[0].predicted_timeline->instruction;
        const long at = events[events.size() / 2];
        ASSERT_GE(at, 0);
        const QString text = chart.hoverText(double(at) + 0.5);
        EXPECT_TRUE(text.contains(QStringLiteral("instruction %1").arg(at))) << text.toStdString();
        EXPECT_GE(text.count(QStringLiteral("#%1 ").arg(at)), 2) << text.toStdString();
        // Back on the time axis: the measured line is in ms again.
        chart.setInstructionAxis(false);
        chart.flush();
        EXPECT_NE(chart.measuredSeries(0)->points(), chart.predictedSeries(0)->points());
    }
}

// A new network keeps the selected node by name, or clears it: node 3 of another network is
// another node.
TEST(UiScheduleViews, SelectionFollowsTheNodeNameAcrossANetworkChange) {
    GraphView graph;
    ScheduleMatrixView matrix;
    ResidualsPanel residuals;
    TeachPanel teach;
    ScheduleViews views(&graph, &matrix, &residuals, &teach);
    views.setResults(run_results("mlp:depth=4,width=8,batch=4", {"sqrt-n"}));
    const auto mlp = run_results("mlp:depth=4,width=8,batch=4", {"sqrt-n"});
    const NodeId act = *mlp[0].trace->graph->find_node("block2.act");
    views.selection()->select(act);
    // The same network again (a re-plan): the same node.
    views.setResults(mlp);
    EXPECT_EQ(views.selection()->node(), act);
    // A deeper mlp with an extra input-side node would move ids; resmlp has no block2.act.
    const auto other = run_results("resmlp:depth=2,width=8,batch=4", {"sqrt-n"});
    ASSERT_FALSE(other[0].trace->graph->find_node("block2.act").has_value());
    views.setResults(other);
    EXPECT_EQ(views.selection()->node(), -1) << "another network's node " << act;
    // Back to an mlp: nothing is selected (the name was lost with the selection).
    views.setResults(mlp);
    EXPECT_EQ(views.selection()->node(), -1);
    // A name both networks have stays selected, under its new id.
    const auto deep = run_results("mlp:depth=6,width=8,batch=4", {"sqrt-n"});
    views.selection()->select(*mlp[0].trace->graph->find_node("loss"));
    views.setResults(deep);
    EXPECT_EQ(views.selection()->node(), *deep[0].trace->graph->find_node("loss"));
    EXPECT_NE(*deep[0].trace->graph->find_node("loss"), *mlp[0].trace->graph->find_node("loss"));
}

// Find a node by name: exact, else the one node whose name contains the text; the selection is
// the views' shared one, so the graph and the matrix follow.
TEST(UiScheduleViews, FindANodeByNameSelectsItEverywhere) {
    GraphView graph;
    ScheduleMatrixView matrix;
    ResidualsPanel residuals;
    TeachPanel teach;
    ScheduleViews views(&graph, &matrix, &residuals, &teach);
    EXPECT_FALSE(views.selectByName(QStringLiteral("loss"))) << "no network yet";
    const auto mlp = run_results("mlp:depth=4,width=8,batch=4", {"sqrt-n"});
    views.setResults(mlp);
    const Graph& g = *mlp[0].trace->graph;
    ASSERT_EQ(views.nodeNames().size(), g.num_nodes());
    EXPECT_TRUE(views.selectByName(QStringLiteral("block2.act")));
    EXPECT_EQ(views.selection()->node(), *g.find_node("block2.act"));
    EXPECT_EQ(graph.selectedNode(), *g.find_node("block2.act"));
    EXPECT_TRUE(views.selectByName(QStringLiteral("  LOSS ")));  // part of a name, any case
    EXPECT_EQ(views.selection()->node(), *g.find_node("loss"));
    EXPECT_FALSE(views.selectByName(QStringLiteral("block")));  // several match
    EXPECT_FALSE(views.selectByName(QStringLiteral("conv")));   // none does
    EXPECT_EQ(views.selection()->node(), *g.find_node("loss")) << "a failed find keeps it";
}

}  // namespace
}  // namespace rl::ui
