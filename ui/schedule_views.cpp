#include "ui/schedule_views.h"

#include "ui/graph_view.h"
#include "ui/memory_chart.h"
#include "ui/node_marks.h"
#include "ui/node_selection.h"
#include "ui/qt_text.h"
#include "ui/residuals_panel.h"
#include "ui/schedule_matrix.h"
#include "ui/schedule_trace.h"
#include "ui/teach_panel.h"

namespace rl::ui {

QString export_schedule_view(const QString& chart, const std::vector<StrategyResult>& results,
                             const QString& path, QSize size) {
    std::shared_ptr<const ScheduleTrace> trace;
    for (const StrategyResult& r : results)
        if (r.trace) {
            trace = r.trace;
            break;
        }
    if (!trace) {
        QString why;
        for (const StrategyResult& r : results)
            why += QStringLiteral("; %1: %2").arg(r.spec, r.message);
        return QStringLiteral("no strategy could be planned, so there is no schedule to draw") +
               why;
    }
    if (chart == QLatin1String("schedule"))
        return export_schedule_matrix(trace, path, size,
                                      QStringLiteral("Schedule matrix — %1 on %2")
                                          .arg(QString::fromStdString(trace->spec),
                                               QString::fromStdString(trace->graph->name())));
    GraphView view;
    view.setAttribute(Qt::WA_DontShowOnScreen);
    view.resize(size);
    view.show();
    view.setTrace(trace);
    if (!view.waitForLayout(120000)) return QStringLiteral("the graph layout did not finish");
    return view.exportImage(path, 1.0);
}

ScheduleViews::ScheduleViews(GraphView* graph, ScheduleMatrixView* matrix,
                             ResidualsPanel* residuals, TeachPanel* teach, QObject* parent)
    : QObject(parent),
      graph_(graph),
      matrix_(matrix),
      residuals_(residuals),
      teach_(teach),
      selection_(new NodeSelection(this)) {
    graph_->setSelection(selection_);
    matrix_->setSelection(selection_);
    residuals_->setSelection(selection_);
    connect(teach_, &TeachPanel::leftStrategyChanged, this, &ScheduleViews::setCurrent);
    connect(teach_, &TeachPanel::stepped, this, &ScheduleViews::onStepped);
    // A new layout drops the step marks: draw them again.
    connect(graph_, &GraphView::layoutReady, this, &ScheduleViews::onStepped);
    connect(selection_, &NodeSelection::changed, this, &ScheduleViews::onSelectionChanged);
}

void ScheduleViews::setMemoryChart(MemoryChart* chart) {
    if (memory_) disconnect(memory_, nullptr, this, nullptr);
    memory_ = chart;
    if (memory_)
        connect(memory_, &MemoryChart::instructionClicked, this, &ScheduleViews::selectInstruction);
    updateMarks();
}

void ScheduleViews::selectInstruction(int index, long instruction) {
    if (index < 0 || size_t(index) >= results_.size() || !results_[size_t(index)].trace) return;
    const ScheduleTrace& t = *results_[size_t(index)].trace;
    const NodeId node = instruction_node(*t.graph, t.plan.schedule, instruction);
    if (node < 0) return;
    setCurrent(index);
    selection_->select(node);
    if (teaching_ && teach_->trace() == results_[size_t(index)].trace)
        teach_->seek(instruction + 1);
}

void ScheduleViews::onSelectionChanged(int node) {
    teach_->setSelectedNode(node);
    if (teaching_ && node >= 0) teach_->seekNextOfNode();
    updateMarks();
}

void ScheduleViews::updateMarks() {
    if (!memory_) return;
    const int node = selection_->node();
    if (current_ < 0 || node < 0 || !results_[size_t(current_)].trace) {
        memory_->clearNodeMarks();
        return;
    }
    const ScheduleTrace& t = *results_[size_t(current_)].trace;
    if (node >= t.graph->num_nodes()) {
        memory_->clearNodeMarks();
        return;
    }
    memory_->setNodeMarks(current_, QString::fromStdString(t.graph->node(node).name),
                          node_marks(t.plan.schedule, node));
}

void ScheduleViews::setResults(const std::vector<StrategyResult>& results) {
    QString spec = current_ >= 0 && size_t(current_) < results_.size()
                       ? results_[size_t(current_)].spec
                       : QString();
    // The selection is kept by name: the same id in another network is another node.
    std::string selected;
    if (selection_->node() >= 0 && current_ >= 0 && size_t(current_) < results_.size() &&
        results_[size_t(current_)].trace) {
        const Graph& g = *results_[size_t(current_)].trace->graph;
        if (selection_->node() < g.num_nodes()) selected = g.node(selection_->node()).name;
    }
    results_ = results;
    int pick = -1;
    for (size_t i = 0; i < results_.size(); ++i)
        if (results_[i].trace && (pick < 0 || results_[i].spec == spec)) {
            if (results_[i].spec == spec || pick < 0) pick = int(i);
            if (results_[i].spec == spec) break;
        }
    current_ = pick;
    teach_->setResults(results_);
    if (current_ >= 0 && teach_->leftStrategy() != current_)
        teach_->setStrategies(current_, teach_->rightStrategy());
    show();
    if (selection_->node() >= 0) {
        int same = -1;
        if (current_ >= 0 && !selected.empty())
            if (const auto n = results_[size_t(current_)].trace->graph->find_node(selected))
                same = static_cast<int>(*n);
        selection_->select(same);
    }
}

bool ScheduleViews::selectByName(const QString& name) {
    if (current_ < 0 || !results_[size_t(current_)].trace) return false;
    const Graph& g = *results_[size_t(current_)].trace->graph;
    const QString wanted = name.trimmed();
    if (wanted.isEmpty()) return false;
    if (const auto n = g.find_node(wanted.toStdString())) {
        selection_->select(static_cast<int>(*n));
        return true;
    }
    int found = -1;
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        if (to_qstring(g.node(n).name).contains(wanted, Qt::CaseInsensitive)) {
            if (found >= 0) return false;  // ambiguous
            found = static_cast<int>(n);
        }
    if (found < 0) return false;
    selection_->select(found);
    return true;
}

QStringList ScheduleViews::nodeNames() const {
    QStringList out;
    if (current_ < 0 || !results_[size_t(current_)].trace) return out;
    const Graph& g = *results_[size_t(current_)].trace->graph;
    for (NodeId n = 0; n < g.num_nodes(); ++n) out << to_qstring(g.node(n).name);
    return out;
}

void ScheduleViews::setCurrent(int index) {
    if (index < 0 || size_t(index) >= results_.size() || !results_[size_t(index)].trace) return;
    if (index == current_) return;
    current_ = index;
    if (teach_->leftStrategy() != index) teach_->setStrategies(index, teach_->rightStrategy());
    show();
    emit currentChanged(index);
}

void ScheduleViews::show() {
    const auto trace = current_ >= 0 ? results_[size_t(current_)].trace : nullptr;
    graph_->setTrace(trace);
    matrix_->setTrace(trace);
    residuals_->setTrace(trace);
    teach_->setSelectedNode(selection_->node());
    updateMarks();
    onStepped();
}

void ScheduleViews::setTeaching(bool on) {
    teaching_ = on;
    onStepped();
}

void ScheduleViews::onStepped() {
    const Explanation* e = teach_->explanation();
    if (!teaching_ || !teach_->state() || teach_->trace() != graph_->traceShared()) {
        graph_->setStepState(nullptr, -1, {});
        matrix_->setCurrentInstruction(-1);
        if (memory_cursor) memory_cursor(-1, std::nullopt);
        return;
    }
    graph_->setStepState(teach_->state(), e ? e->node : -1, e ? e->related : std::vector<NodeId>{});
    matrix_->setCurrentInstruction(e ? e->index : -1);
    if (memory_cursor) {
        std::optional<double> t;
        const StrategyResult& r = results_[size_t(current_)];
        if (e && r.predicted_timeline) t = instruction_time(*r.predicted_timeline, e->index);
        if (!e) t = 0.0;
        memory_cursor(current_, t);
    }
}

}  // namespace rl::ui
