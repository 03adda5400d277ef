#include "ui/residuals_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include "engine/units.h"
#include "ui/node_selection.h"
#include "ui/palette.h"
#include "ui/qt_text.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

namespace {

const char* source_name(ResidualSource s) {
    switch (s) {
        case ResidualSource::Argument:
            return "argument";
        case ResidualSource::Output:
            return "output";
        case ResidualSource::Named:
            return "named";
    }
    return "";
}

}  // namespace

ResidualsPanel::ResidualsPanel(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("residualsPanel"));
    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(6, 6, 6, 6);
    header_ = new QLabel;
    header_->setWordWrap(true);
    v->addWidget(header_);
    table_ = new QTableWidget(0, 5);
    table_->setHorizontalHeaderLabels({QStringLiteral("value"), QStringLiteral("type"),
                                       QStringLiteral("bytes"), QStringLiteral("kind"),
                                       QStringLiteral("origin")});
    table_->verticalHeader()->hide();
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    table_->setAlternatingRowColors(true);
    table_->horizontalHeader()->setStretchLastSection(true);
    table_->verticalHeader()->setDefaultSectionSize(22);
    table_->setToolTip(QStringLiteral(
        "What the forward keeps for the backward (like jax.ad_checkpoint.print_saved_residuals); "
        "click a node's output to select it in the graph view"));
    v->addWidget(table_, 1);
    total_ = new QLabel;
    v->addWidget(total_);
    connect(table_, &QTableWidget::itemSelectionChanged, this, [this] {
        if (updating_ || !selection_) return;
        const auto rows = table_->selectionModel()->selectedRows();
        if (rows.isEmpty()) return;
        const int node = row_node_[size_t(rows.front().row())];
        if (node >= 0) selection_->select(node);
    });
}

void ResidualsPanel::setSelection(NodeSelection* selection) {
    if (selection_) disconnect(selection_, nullptr, this, nullptr);
    selection_ = selection;
    if (selection_)
        connect(selection_, &NodeSelection::changed, this, &ResidualsPanel::onSelectionChanged);
}

void ResidualsPanel::setTrace(std::shared_ptr<const ScheduleTrace> trace) {
    trace_ = std::move(trace);
    updating_ = true;
    table_->setRowCount(0);
    row_node_.clear();
    residuals_ = SavedResiduals{};
    if (!trace_) {
        header_->setText(QStringLiteral("Plan a strategy to see what it saves for the backward."));
        total_->clear();
        updating_ = false;
        return;
    }
    const Graph& g = *trace_->graph;
    ResidualOptions ro;
    try {
        ro.names = checkpoint_names(parse_spec(trace_->spec));
    } catch (const std::exception&) {
    }
    residuals_ = saved_residuals(g, trace_->plan.schedule, ro);
    const bool policy = trace_->spec.rfind("policy", 0) == 0;
    header_->setText(
        QStringLiteral("<b>%1</b> saves %2 values for the backward%3")
            .arg(to_qstring(trace_->spec).toHtmlEscaped())
            .arg(residuals_.rows.size())
            .arg(policy ? QStringLiteral(" (its policy decides which residuals of each remat "
                                         "region are saved; the rest are recomputed)")
                        : QStringLiteral(" — read off its schedule; policy strategies choose "
                                         "this list by their policy")));
    table_->setRowCount(int(residuals_.rows.size()));
    for (size_t i = 0; i < residuals_.rows.size(); ++i) {
        const SavedResidual& r = residuals_.rows[i];
        const auto node = g.find_node(r.value);
        row_node_.push_back(node && r.source != ResidualSource::Argument ? *node : -1);
        auto* bytes = new QTableWidgetItem(bytes_text(r.bytes));
        bytes->setData(Qt::UserRole, qulonglong(r.bytes));
        bytes->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        bytes->setToolTip(QStringLiteral("%1 bytes").arg(r.bytes));
        table_->setItem(int(i), 0, new QTableWidgetItem(to_qstring(r.value)));
        table_->setItem(int(i), 1, new QTableWidgetItem(to_qstring(r.type)));
        table_->setItem(int(i), 2, bytes);
        table_->setItem(int(i), 3,
                        new QTableWidgetItem(QString::fromLatin1(source_name(r.source))));
        table_->setItem(int(i), 4, new QTableWidgetItem(to_qstring(r.origin)));
    }
    table_->resizeColumnsToContents();
    total_->setText(QStringLiteral("Total: <b>%1</b> (%2 bytes)")
                        .arg(bytes_text(residuals_.total_bytes))
                        .arg(residuals_.total_bytes));
    updating_ = false;
    if (selection_) onSelectionChanged(selection_->node());
}

void ResidualsPanel::onSelectionChanged(int node) {
    updating_ = true;
    table_->clearSelection();
    for (size_t i = 0; i < row_node_.size(); ++i)
        if (row_node_[i] == node && node >= 0) {
            table_->selectRow(int(i));
            table_->scrollToItem(table_->item(int(i), 0));
            break;
        }
    updating_ = false;
}

QString ResidualsPanel::text() const {
    return to_qstring(format_saved_residuals(residuals_));
}

}  // namespace rl::ui
