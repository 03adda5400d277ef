#include "ui/export_dialogs.h"

#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QSpinBox>
#include <algorithm>

#include "engine/atomic_file.h"
#include "engine/networks/presets.h"
#include "ui/graph_view.h"
#include "ui/results_area.h"
#include "ui/schedule_matrix.h"
#include "ui/schedule_trace.h"
#include "ui/session.h"
#include "ui/setup_panel.h"

namespace rl::ui {

ExportDialogs::ExportDialogs(const ResultsArea* results, const GraphView* graph,
                             const SetupPanel* setup, WriteChart write_chart,
                             QWidget* dialog_parent)
    : QObject(dialog_parent),
      results_(results),
      graph_(graph),
      setup_(setup),
      write_chart_(std::move(write_chart)),
      parent_(dialog_parent) {}

void ExportDialogs::report(const QString& path, const QString& error, const QString& what) {
    if (error.isEmpty())
        emit exported(what.isEmpty() ? QStringLiteral("Exported %1").arg(path)
                                     : QStringLiteral("Exported %1 to %2").arg(what, path));
    else
        emit failed(MessageWidget::Kind::Error, error.toHtmlEscaped());
}

void ExportDialogs::exportChart() {
    QDialog dialog(parent_);
    dialog.setWindowTitle(QStringLiteral("Export chart"));
    auto* form = new QFormLayout(&dialog);
    auto* chart = new QComboBox;
    chart->addItem(QStringLiteral("Memory timeline"));
    chart->addItem(QStringLiteral("Pareto: memory vs recompute"));
    chart->addItem(QStringLiteral("Graph (the whole drawing, with its legend)"));
    chart->setCurrentIndex(
        results_->currentPageWidget() == graph_ ? 2 : std::min(results_->currentPage(), 1));
    chart->setToolTip(QStringLiteral(
        "Which chart to export; the graph is drawn whole, one pixel per point, whatever the size"));
    auto* width = new QSpinBox;
    width->setRange(100, 20000);
    width->setValue(1600);
    width->setSuffix(QStringLiteral(" px"));
    width->setToolTip(QStringLiteral("Width of the exported chart"));
    auto* height = new QSpinBox;
    height->setRange(100, 20000);
    height->setValue(900);
    height->setSuffix(QStringLiteral(" px"));
    height->setToolTip(QStringLiteral("Height of the exported chart"));
    form->addRow(QStringLiteral("Chart"), chart);
    form->addRow(QStringLiteral("Width"), width);
    form->addRow(QStringLiteral("Height"), height);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel);
    form->addRow(buttons);
    connect(buttons, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    connect(chart, &QComboBox::currentIndexChanged, &dialog, [width, height](int i) {
        width->setEnabled(i != 2);
        height->setEnabled(i != 2);
    });
    width->setEnabled(chart->currentIndex() != 2);
    height->setEnabled(chart->currentIndex() != 2);
    if (dialog.exec() != QDialog::Accepted) return;
    const int which = chart->currentIndex();
    const QString names[] = {QStringLiteral("memory.png"), QStringLiteral("pareto.png"),
                             QStringLiteral("graph.png")};
    const QString path = QFileDialog::getSaveFileName(
        parent_, QStringLiteral("Export chart"), names[which],
        which == 2 ? QStringLiteral("PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)")
                   : QStringLiteral("PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf);;"
                                    "CSV data (*.csv)"));
    if (path.isEmpty()) return;
    QString err;
    if (which == 2) {
        err = graph_->isLaidOut()
                  ? graph_->exportImage(path, 1.0)
                  : QStringLiteral("Plan a strategy and wait for the graph to be laid out first.");
    } else {
        err = write_chart_(which == 0 ? ChartKind::Memory : ChartKind::Pareto, path,
                           QSize(width->value(), height->value()));
    }
    report(path, err, QString());
}

void ExportDialogs::exportData() {
    const QString path = QFileDialog::getSaveFileName(
        parent_, QStringLiteral("Export data"), QStringLiteral("results.csv"),
        QStringLiteral("CSV table (*.csv);;JSON (*.json)"));
    if (path.isEmpty()) return;
    const QString err = write_chart_(ChartKind::Pareto, path, QSize(800, 600));
    report(path, err, QString());
}

void ExportDialogs::exportNetwork() {
    const QString path = QFileDialog::getSaveFileName(
        parent_, QStringLiteral("Export network"), QStringLiteral("network.dot"),
        QStringLiteral("Graphviz DOT (*.dot);;RematLab network JSON (*.json)"));
    if (path.isEmpty()) return;
    try {
        const ScheduleTrace* t = graph_->trace();
        if (t)
            export_network(*t->graph, path);
        else
            export_network(load_network(setup_->networkSpec().toStdString()), path);
        report(path, {}, QStringLiteral("the network"));
    } catch (const std::exception& e) {
        report(path, QString::fromUtf8(e.what()), QStringLiteral("the network"));
    }
}

void ExportDialogs::exportSchedule() {
    const auto trace = graph_->traceShared();
    if (!trace) {
        emit failed(MessageWidget::Kind::Warning,
                    QStringLiteral("Plan a strategy first: there is no schedule yet."));
        return;
    }
    const QString path = QFileDialog::getSaveFileName(
        parent_, QStringLiteral("Export schedule"), QStringLiteral("schedule.json"),
        QStringLiteral("Schedule JSON (*.json);;Matrix image (*.png *.svg *.pdf);;"
                       "Matrix CSV (*.csv)"));
    if (path.isEmpty()) return;
    QString err;
    try {
        if (path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive))
            export_schedule(*trace, path);
        else
            err = export_schedule_matrix(trace, path, QSize(1600, 900));
    } catch (const std::exception& e) {
        err = QString::fromUtf8(e.what());
    }
    report(path, err, QStringLiteral("the schedule"));
}

PlanFormat plan_format_for(const QString& path, const QString& selected_filter) {
    if (path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive)) return PlanFormat::Json;
    if (selected_filter.startsWith(QLatin1String("JAX"))) return PlanFormat::Jax;
    return PlanFormat::Torch;
}

QString write_plan_file(const ScheduleTrace& trace, const std::string& network_spec,
                        const QString& path, PlanFormat format, QString& summary) {
    try {
        const PlanExport e =
            export_plan(*trace.graph, network_spec, trace.spec, trace.plan, trace.costs);
        write_file_atomically(path.toStdString(), {plan_text(*trace.graph, e, format)});
        summary = QString::fromStdString(plan_export_summary(e));
        return {};
    } catch (const std::exception& e) {
        return QString::fromUtf8(e.what());
    }
}

void ExportDialogs::exportPlan() {
    const auto trace = graph_->traceShared();
    if (!trace) {
        emit failed(MessageWidget::Kind::Warning,
                    QStringLiteral("Plan a strategy first: there is no plan yet."));
        return;
    }
    QString filter;
    const QString path = QFileDialog::getSaveFileName(
        parent_, QStringLiteral("Export plan of %1").arg(QString::fromStdString(trace->spec)),
        QStringLiteral("plan.py"),
        QStringLiteral("PyTorch module with apply(model) (*.py);;"
                       "JAX policy, save_only_these_names (*.py);;Plan JSON (*.json)"),
        &filter);
    if (path.isEmpty()) return;
    QString summary;
    const QString err = write_plan_file(*trace, setup_->networkSpec().toStdString(), path,
                                        plan_format_for(path, filter), summary);
    if (!err.isEmpty()) {
        emit failed(MessageWidget::Kind::Error, err.toHtmlEscaped());
        return;
    }
    emit exported(QStringLiteral("Exported the plan of %1 to %2 (%3)")
                      .arg(QString::fromStdString(trace->spec), path, summary));
}

}  // namespace rl::ui
