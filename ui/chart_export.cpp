#include "ui/chart_export.h"

#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>
#include <QPageSize>
#include <QPainter>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QTextStream>
#include <QWidget>

#include "engine/errors.h"
#include "ui/memory_chart.h"
#include "ui/results_model.h"

namespace rl::ui {

ChartKind parse_chart_kind(const QString& text) {
    if (text == QLatin1String("memory")) return ChartKind::Memory;
    if (text == QLatin1String("pareto")) return ChartKind::Pareto;
    throw Error("--chart: unknown chart '" + text.toStdString() + "'; use memory or pareto");
}

namespace {

QString write_text(const QString& path, const QByteArray& bytes) {
    QSaveFile f(path);  // a temporary file renamed at commit: never half a file
    if (!f.open(QIODevice::WriteOnly))
        return QStringLiteral("cannot write '%1': %2").arg(path, f.errorString());
    f.write(bytes);
    if (!f.commit()) return QStringLiteral("cannot write '%1': %2").arg(path, f.errorString());
    return {};
}

QByteArray timelines_csv(const std::vector<StrategyResult>& results) {
    QByteArray out = "strategy,kind,time_ms,bytes,instruction,what\n";
    auto quote = [](QString s) {
        if (s.contains(',') || s.contains('"')) s = '"' + s.replace("\"", "\"\"") + '"';
        return s;
    };
    for (const StrategyResult& r : results) {
        for (const auto& [kind, tl] : {std::pair{"predicted", r.predicted_timeline},
                                       std::pair{"measured", r.measured_timeline}}) {
            if (!tl) continue;
            for (size_t i = 0; i < tl->points.size(); ++i) {
                const int32_t ins = tl->instruction[i];
                QString what;
                if (r.instruction_text && ins >= 0 &&
                    static_cast<size_t>(ins) < r.instruction_text->size())
                    what = (*r.instruction_text)[static_cast<size_t>(ins)];
                out += quote(r.spec).toUtf8() + ',' + kind + ',' +
                       QByteArray::number(tl->points[i].x, 'g', 10) + ',' +
                       QByteArray::number(static_cast<qulonglong>(tl->points[i].y)) + ',' +
                       QByteArray::number(ins) + ',' + quote(what).toUtf8() + '\n';
            }
        }
    }
    return out;
}

}  // namespace

QString render_widget(QWidget* widget, const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    const QSize size = widget->size();
    if (suffix == QLatin1String("png")) {
        QImage image(size, QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::white);
        {
            QPainter p(&image);
            p.setRenderHint(QPainter::Antialiasing);
            p.setRenderHint(QPainter::TextAntialiasing);
            widget->render(&p);
        }
        if (!image.save(path, "PNG")) return QStringLiteral("cannot write '%1'").arg(path);
        return {};
    }
    if (suffix == QLatin1String("svg")) {
        QSvgGenerator svg;
        svg.setFileName(path);
        svg.setSize(size);
        svg.setViewBox(QRect(QPoint(0, 0), size));
        svg.setResolution(96);  // else viewers scale it by 4/3
        svg.setTitle(QStringLiteral("RematLab chart"));
        QPainter p;
        if (!p.begin(&svg)) return QStringLiteral("cannot write '%1'").arg(path);
        p.setRenderHint(QPainter::Antialiasing);
        widget->render(&p);
        p.end();
        return QFileInfo(path).size() > 0 ? QString()
                                          : QStringLiteral("cannot write '%1'").arg(path);
    }
    if (suffix == QLatin1String("pdf")) {
        QPdfWriter pdf(path);
        pdf.setResolution(96);
        pdf.setPageSize(QPageSize(QSizeF(size) * 72.0 / 96.0, QPageSize::Point));
        pdf.setPageMargins(QMarginsF(0, 0, 0, 0));
        pdf.setTitle(QStringLiteral("RematLab chart"));
        pdf.setCreator(QStringLiteral("RematLab"));
        QPainter p;
        if (!p.begin(&pdf)) return QStringLiteral("cannot write '%1'").arg(path);
        p.setRenderHint(QPainter::Antialiasing);
        widget->render(&p);
        p.end();
        return {};
    }
    return QStringLiteral("cannot export to '%1': use a .png, .svg or .pdf file name").arg(path);
}

QString export_chart(ChartKind kind, const ExportInput& input, const QString& path, QSize size) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    ResultsModel model;
    model.setResults(input.results, input.baseline_ms);
    if (suffix == QLatin1String("csv"))
        return write_text(path, kind == ChartKind::Memory ? timelines_csv(input.results)
                                                          : model.toCsv().toUtf8());
    if (suffix == QLatin1String("json")) return write_text(path, model.toJson());
    if (suffix != QLatin1String("png") && suffix != QLatin1String("svg") &&
        suffix != QLatin1String("pdf"))
        return QStringLiteral("cannot export to '%1': use .png, .svg, .pdf, .csv or .json")
            .arg(path);
    if (size.width() < 100 || size.height() < 100 || size.width() > 20000 || size.height() > 20000)
        return QStringLiteral("export size %1×%2 is out of range (100 to 20000 pixels)")
            .arg(size.width())
            .arg(size.height());

    std::unique_ptr<QChartView> view;
    if (kind == ChartKind::Memory) {
        auto chart = std::make_unique<MemoryChart>();
        chart->setResults(input.results);
        chart->setBudget(input.budget);
        chart->setShowPredicted(input.show_predicted);
        chart->setShowMeasured(input.show_measured);
        view = std::move(chart);
    } else {
        auto chart = std::make_unique<ParetoChart>();
        chart->setModel(&model);
        chart->setSweeps(input.sweeps);
        chart->setBudget(input.budget);
        view = std::move(chart);
    }
    if (!input.title.isEmpty()) view->chart()->setTitle(input.title);
    view->setAttribute(Qt::WA_DontShowOnScreen);
    view->setFrameShape(QFrame::NoFrame);
    view->resize(size);
    view->show();  // lays the chart out at this size (never on screen)
    QCoreApplication::sendPostedEvents();
    if (auto* m = dynamic_cast<MemoryChart*>(view.get())) m->flush();
    if (auto* p = dynamic_cast<ParetoChart*>(view.get())) p->flush();
    QCoreApplication::sendPostedEvents();
    return render_widget(view.get(), path);
}

}  // namespace rl::ui
