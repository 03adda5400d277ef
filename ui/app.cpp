#include "ui/app.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QEventLoop>
#include <QRegularExpression>
#include <QTimer>
#include <cstdio>
#include <cstring>

#include "engine/errors.h"
#include "ui/chart_export.h"
#include "ui/evaluation.h"
#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/results_model.h"

namespace rl::ui {

namespace {

constexpr int kExitUserError = 1;
constexpr int kExitUsage = 2;

int fail(int code, const QString& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "rematlab: error: %s\n", message.toLocal8Bit().constData());
    return code;
}

bool parse_size(const QString& text, QSize* out) {
    static const QRegularExpression re(QStringLiteral("^(\\d{2,5})[xX×](\\d{2,5})$"));
    const auto m = re.match(text.trimmed());
    if (!m.hasMatch()) return false;
    *out = QSize(m.captured(1).toInt(), m.captured(2).toInt());
    return true;
}

bool headless(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (!std::strcmp(argv[i], "--export") || !std::strcmp(argv[i], "--screenshot")) return true;
    return false;
}

const char* const kDefaultStrategies = "none,sqrt-n,periodic";
const char* const kDefaultNetwork = "mlp:depth=32,width=256,batch=1024";

int export_mode(const QCommandLineParser& args) {
    const QString out = args.value(QStringLiteral("out"));
    if (out.isEmpty()) return fail(kExitUsage, QStringLiteral("--export needs --out FILE"));
    ChartKind kind;
    try {
        kind = parse_chart_kind(args.value(QStringLiteral("chart")));
    } catch (const std::exception& e) {
        return fail(kExitUsage, QString::fromStdString(e.what()));
    }
    QSize size(1600, 900);
    if (args.isSet(QStringLiteral("size")) &&
        !parse_size(args.value(QStringLiteral("size")), &size))
        return fail(kExitUsage, QStringLiteral("--size: expected WIDTHxHEIGHT, e.g. 1600x900"));
    RunRequest request;
    request.network = args.isSet(QStringLiteral("network")) ? args.value(QStringLiteral("network"))
                                                            : QString::fromLatin1(kDefaultNetwork);
    request.strategies = split_strategy_list(args.isSet(QStringLiteral("strategies"))
                                                 ? args.value(QStringLiteral("strategies"))
                                                 : QString::fromLatin1(kDefaultStrategies));
    if (request.strategies.isEmpty())
        return fail(kExitUsage, QStringLiteral("--strategies: the list is empty"));
    bool ok = true;
    request.threads = args.value(QStringLiteral("threads")).toInt(&ok);
    if (!ok || request.threads < 1)
        return fail(kExitUsage, QStringLiteral("--threads: expected a positive number"));
    RunSummary summary;
    try {
        summary = evaluate_all(request, !args.isSet(QStringLiteral("no-run")));
    } catch (const std::exception& e) {
        return fail(kExitUserError, QString::fromStdString(e.what()));
    }
    ExportInput in;
    in.results = summary.results;
    in.baseline_ms = summary.baseline_total_ms;
    for (const auto& r : summary.results)
        if (r.budget) in.budget = r.budget;
    in.title = (kind == ChartKind::Memory ? QStringLiteral("Memory over time — %1")
                                          : QStringLiteral("Peak memory vs recompute time — %1"))
                   .arg(request.network);
    const QString err = export_chart(kind, in, out, size);
    if (!err.isEmpty()) return fail(kExitUserError, err);
    for (const auto& r : summary.results)
        if (r.failed())
            std::fprintf(stderr, "rematlab: warning: %s: %s\n", r.spec.toLocal8Bit().constData(),
                         r.message.toLocal8Bit().constData());
    std::printf("wrote %s\n", out.toLocal8Bit().constData());
    return 0;
}

int screenshot_mode(const QCommandLineParser& args) {
    const QString out = args.value(QStringLiteral("screenshot"));
    QSize size(1480, 920);
    if (args.isSet(QStringLiteral("size")) &&
        !parse_size(args.value(QStringLiteral("size")), &size))
        return fail(kExitUsage, QStringLiteral("--size: expected WIDTHxHEIGHT, e.g. 1480x920"));
    MainWindow window(false);
    window.resize(size);
    if (args.isSet(QStringLiteral("network")))
        window.setNetworkSpec(args.value(QStringLiteral("network")));
    if (args.isSet(QStringLiteral("strategies")))
        window.setStrategies(split_strategy_list(args.value(QStringLiteral("strategies"))));
    if (args.isSet(QStringLiteral("threads")))
        window.setThreads(args.value(QStringLiteral("threads")).toInt());
    window.show();
    QEventLoop loop;
    QObject::connect(&window, &MainWindow::runCompleted, &loop, &QEventLoop::quit);
    QTimer::singleShot(0, &window, [&window] { window.startRun(); });
    loop.exec();
    // Let the charts take their final data and lay out before the grab.
    window.memoryChart()->flush();
    window.paretoChart()->flush();
    QApplication::processEvents();
    if (args.isSet(QStringLiteral("tab")))
        window.findChild<QTabWidget*>()->setCurrentIndex(args.value(QStringLiteral("tab")).toInt());
    QApplication::processEvents();
    if (!window.grab().save(out))
        return fail(kExitUserError, QStringLiteral("cannot write '%1'").arg(out));
    std::printf("wrote %s\n", out.toLocal8Bit().constData());
    if (!window.messageText().isEmpty())
        std::fprintf(stderr, "rematlab: note: the window shows: %s\n",
                     window.messageText().toLocal8Bit().constData());
    return 0;
}

}  // namespace

int run_app(int argc, char** argv) {
    if (headless(argc, argv) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("RematLab"));
    QApplication::setOrganizationName(QStringLiteral("RematLab"));
    QApplication::setApplicationVersion(QStringLiteral(REMATLAB_VERSION));
    QApplication::setStyle(QStringLiteral("Fusion"));

    QCommandLineParser args;
    args.setApplicationDescription(
        QStringLiteral("RematLab: compare gradient checkpointing strategies, live.\n"
                       "Without options it opens the window on the last (or a default) network."));
    args.addHelpOption();
    args.addVersionOption();
    args.addOptions({
        {{QStringLiteral("n"), QStringLiteral("network")},
         QStringLiteral("preset with parameters (mlp:depth=32) or a network .json file"),
         QStringLiteral("SPEC")},
        {{QStringLiteral("s"), QStringLiteral("strategies")},
         QStringLiteral("strategy specs separated by ';' or ','"),
         QStringLiteral("LIST")},
        {QStringLiteral("screenshot"),
         QStringLiteral("run, then save the window as an image and exit"), QStringLiteral("FILE")},
        {QStringLiteral("tab"), QStringLiteral("chart tab for --screenshot (0 memory, 1 Pareto)"),
         QStringLiteral("N")},
        {QStringLiteral("export"), QStringLiteral("headless: write --chart to --out and exit")},
        {QStringLiteral("chart"), QStringLiteral("memory or pareto"), QStringLiteral("KIND"),
         QStringLiteral("memory")},
        {QStringLiteral("out"), QStringLiteral("file to export: .png .svg .pdf .csv .json"),
         QStringLiteral("FILE")},
        {QStringLiteral("size"), QStringLiteral("image size, e.g. 1600x900"),
         QStringLiteral("WxH")},
        {QStringLiteral("threads"), QStringLiteral("CPU threads for the kernels"),
         QStringLiteral("N"), QStringLiteral("1")},
        {QStringLiteral("no-run"), QStringLiteral("--export: plan and predict only")},
    });
    if (!args.parse(QApplication::arguments()))
        return fail(kExitUsage, args.errorText() + QStringLiteral("; run 'rematlab --help'"));
    if (args.isSet(QStringLiteral("help"))) args.showHelp(0);
    if (args.isSet(QStringLiteral("version"))) args.showVersion();

    if (args.isSet(QStringLiteral("export"))) return export_mode(args);
    if (args.isSet(QStringLiteral("screenshot"))) return screenshot_mode(args);

    MainWindow window;
    if (args.isSet(QStringLiteral("network")))
        window.setNetworkSpec(args.value(QStringLiteral("network")));
    if (args.isSet(QStringLiteral("strategies")))
        window.setStrategies(split_strategy_list(args.value(QStringLiteral("strategies"))));
    window.show();
    return QApplication::exec();
}

}  // namespace rl::ui
