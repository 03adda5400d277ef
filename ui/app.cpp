#include "ui/app.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QEventLoop>
#include <QRegularExpression>
#include <QTimer>
#include <cstdio>
#include <cstring>
#include <optional>

#include "engine/errors.h"
#include "engine/gemm.h"
#include "engine/networks/presets.h"
#include "engine/params.h"
#include "strategies/strategy.h"
#include "ui/chart_export.h"
#include "ui/evaluation.h"
#include "ui/graph_view.h"
#include "ui/main_window.h"
#include "ui/memory_chart.h"
#include "ui/node_selection.h"
#include "ui/results_model.h"
#include "ui/schedule_matrix.h"
#include "ui/schedule_views.h"
#include "ui/sweeps.h"
#include "ui/teach_panel.h"

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

// The command line's network and strategy specs checked before any window opens or any work
// starts, as rematlab-cli checks them: an unknown strategy or key, a bad value or a bad preset
// parameter is an error naming it (exit 1). The window used to drop such a strategy from the list
// and keep a preset's default for such a parameter without a word. A network file is read by the
// window, which shows what is wrong with it.
QString check_specs(const QCommandLineParser& args) {
    if (args.isSet(QStringLiteral("strategies"))) {
        const QStringList specs = split_strategy_list(args.value(QStringLiteral("strategies")));
        if (specs.isEmpty())
            return QStringLiteral("--strategies: the list is empty; give at least one strategy");
        for (const QString& text : specs) {
            try {
                (void)checked_strategy_spec(text.toStdString());
            } catch (const std::exception& e) {
                return QStringLiteral("--strategies: '%1': %2")
                    .arg(text, QString::fromUtf8(e.what()));
            }
        }
    }
    if (args.isSet(QStringLiteral("network"))) {
        const std::string spec = args.value(QStringLiteral("network")).toStdString();
        try {
            if (is_preset_spec(spec)) (void)build_preset(parse_spec(spec));
        } catch (const std::exception& e) {
            return QStringLiteral("--network: %1").arg(QString::fromUtf8(e.what()));
        }
    }
    return {};
}

// A whole number of at least `min` for --name, or an error saying so.
std::optional<long> count_arg(const QCommandLineParser& args, const char* name, long min,
                              QString* error) {
    const QString key = QString::fromLatin1(name);
    if (!args.isSet(key)) return std::nullopt;
    bool ok = false;
    const long v = args.value(key).toLong(&ok);
    if (!ok || v < min) {
        *error = QStringLiteral("--%1: expected a whole number of at least %2, got '%3'")
                     .arg(key)
                     .arg(min)
                     .arg(args.value(key));
        return std::nullopt;
    }
    return v;
}

const char* const kDefaultStrategies = "none,sqrt-n,periodic";
const char* const kDefaultNetwork = "mlp:depth=32,width=256,batch=1024";

// The sweeps of the export's strategies, predicted with the cost model of the same kind as the
// points (profiled when they ran, analytic when --no-run).
std::vector<SweepCurve> sweep_for_export(const RunRequest& request, const RunSummary& summary,
                                         int points, bool measure) {
    const Graph g = load_network(request.network.toStdString());
    bool executed = measure;
    for (const auto& r : summary.results) executed = executed || r.executed;
    EvaluateOptions eo;
    eo.threads = request.threads;
    eo.cap = request.cap;
    eo.execute = executed;
    eo.link = link_of(request.link_gbps);
    Evaluator evaluator(g, request.network.toStdString(), eo);
    SweepRequest sr;
    sr.network = request.network;
    for (const QString& spec : request.strategies) {
        const QString base = spec_without_budget(spec);
        if (!sr.strategies.contains(base)) sr.strategies << base;
        if (base.section(QLatin1Char(':'), 0, 0) == QLatin1String("optimal") &&
            sr.frontier_spec.isEmpty())
            sr.frontier_spec = base;
    }
    sr.points = points;
    sr.execute = measure;
    return run_sweeps(g, evaluator, sr).curves;
}

int export_mode(const QCommandLineParser& args) {
    const QString out = args.value(QStringLiteral("out"));
    if (out.isEmpty()) return fail(kExitUsage, QStringLiteral("--export needs --out FILE"));
    // The schedule views (matrix, graph) draw one strategy's plan: the first that planned.
    const QString chart_name = args.value(QStringLiteral("chart"));
    const bool schedule_view =
        chart_name == QLatin1String("schedule") || chart_name == QLatin1String("graph");
    ChartKind kind = ChartKind::Memory;
    try {
        if (!schedule_view) kind = parse_chart_kind(chart_name);
    } catch (const std::exception& e) {
        return fail(kExitUsage,
                    QString::fromStdString(e.what()) + QStringLiteral(" (or schedule, graph)"));
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
    QString error;
    request.threads = static_cast<int>(count_arg(args, "threads", 1, &error).value_or(1));
    const auto sweep_points = count_arg(args, "sweep", 2, &error);
    if (!error.isEmpty()) return fail(kExitUsage, error);
    bool ok = true;
    if (args.isSet(QStringLiteral("link-gbps"))) {
        request.link_gbps = args.value(QStringLiteral("link-gbps")).toDouble(&ok);
        if (!ok || !(request.link_gbps > 0))
            return fail(kExitUsage,
                        QStringLiteral("--link-gbps: expected a positive bandwidth in GB/s"));
    }
    RunSummary summary;
    std::vector<SweepCurve> sweeps;
    try {
        summary = evaluate_all(request, !args.isSet(QStringLiteral("no-run")));
        if (sweep_points)
            sweeps = sweep_for_export(request, summary, static_cast<int>(*sweep_points),
                                      args.isSet(QStringLiteral("sweep-measure")));
    } catch (const std::exception& e) {
        return fail(kExitUserError, QString::fromStdString(e.what()));
    }
    if (schedule_view) {
        const QString err = export_schedule_view(chart_name, summary.results, out, size);
        if (!err.isEmpty()) return fail(kExitUserError, err);
        std::printf("wrote %s\n", out.toLocal8Bit().constData());
        return 0;
    }
    ExportInput in;
    in.sweeps = std::move(sweeps);
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
        if (r.failed() || r.status == QLatin1String("cap exceeded"))
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
    QString error;
    const auto threads = count_arg(args, "threads", 1, &error);
    const auto teach = count_arg(args, "teach", 0, &error);
    const auto select = count_arg(args, "select", 0, &error);
    const auto tab = count_arg(args, "tab", 0, &error);
    const auto sweep_points = count_arg(args, "sweep", 2, &error);
    if (!error.isEmpty()) return fail(kExitUsage, error);
    MainWindow window(false);
    auto* tabs = window.findChild<QTabWidget*>();
    if (tab && *tab >= tabs->count())
        return fail(kExitUsage, QStringLiteral("--tab: expected 0 to %1 (%2 is the first, %3 the "
                                               "last), got %4")
                                    .arg(tabs->count() - 1)
                                    .arg(tabs->tabText(0), tabs->tabText(tabs->count() - 1))
                                    .arg(*tab));
    window.resize(size);
    if (args.isSet(QStringLiteral("network")))
        window.setNetworkSpec(args.value(QStringLiteral("network")));
    if (args.isSet(QStringLiteral("strategies")))
        window.setStrategies(split_strategy_list(args.value(QStringLiteral("strategies"))));
    if (threads) window.setThreads(static_cast<int>(*threads));
    if (args.isSet(QStringLiteral("link-gbps"))) {
        bool ok = false;
        const double gbps = args.value(QStringLiteral("link-gbps")).toDouble(&ok);
        if (!ok || !(gbps > 0)) {
            std::fprintf(stderr,
                         "rematlab: error: --link-gbps: expected a positive bandwidth in GB/s\n");
            return kExitUsage;
        }
        window.setLinkGbps(gbps);
    }
    window.show();
    if (args.isSet(QStringLiteral("open-session"))) {
        // A saved session, as it reopens (nothing is run): wait for its results to show.
        QEventLoop loop;
        QObject::connect(&window, &MainWindow::planReady, &loop, &QEventLoop::quit);
        QObject::connect(&window, &MainWindow::networkFailed, &loop, &QEventLoop::quit);
        const QString err = window.openSession(args.value(QStringLiteral("open-session")));
        if (!err.isEmpty()) return fail(kExitUserError, err);
        if (window.missingNetwork().isEmpty()) loop.exec();  // else restored at once
    } else {
        QEventLoop loop;
        QObject::connect(&window, &MainWindow::runCompleted, &loop, &QEventLoop::quit);
        QTimer::singleShot(0, &window, [&window] { window.startRun(); });
        loop.exec();
    }
    if (sweep_points) {
        window.setSweepPoints(static_cast<int>(*sweep_points));
        window.setSweepExecutes(args.isSet(QStringLiteral("sweep-measure")));
        QEventLoop sweep_loop;
        QObject::connect(&window, &MainWindow::sweepCompleted, &sweep_loop, &QEventLoop::quit);
        QTimer::singleShot(0, &window, [&window] { window.startSweep(); });
        sweep_loop.exec();
    }
    // Let the charts take their final data and lay out before the grab.
    window.memoryChart()->flush();
    window.paretoChart()->flush();
    QApplication::processEvents();
    if (tab) tabs->setCurrentIndex(static_cast<int>(*tab));
    if (teach) {
        // Teach mode at instruction N: the last ticked strategy on the left, the first beside it.
        const int count = window.resultsModel()->rowCount();
        window.showTeachMode(true);
        window.scheduleViews()->setCurrent(count - 1);
        window.teachPanel()->setStrategies(count - 1, count > 1 ? 0 : -1);
        window.teachPanel()->seek(*teach);
    }
    if (select) window.scheduleViews()->selection()->select(static_cast<int>(*select));
    window.graphView()->waitForLayout(60000);
    QApplication::processEvents();
    window.memoryChart()->flush();  // the selected node's marks
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
        {QStringLiteral("teach"),
         QStringLiteral("--screenshot: teach mode after N instructions (the last strategy, the "
                        "first beside it)"),
         QStringLiteral("N")},
        {QStringLiteral("select"), QStringLiteral("--screenshot: select node N in the views"),
         QStringLiteral("N")},
        // Not "--session": QApplication takes that one (X11 session management).
        {QStringLiteral("open-session"),
         QStringLiteral("--screenshot: open this saved session instead of running"),
         QStringLiteral("FILE")},
        {QStringLiteral("tab"), QStringLiteral("chart tab for --screenshot (0 memory, 1 Pareto)"),
         QStringLiteral("N")},
        {QStringLiteral("export"), QStringLiteral("headless: write --chart to --out and exit")},
        {QStringLiteral("chart"), QStringLiteral("memory, pareto, schedule (the matrix) or graph"),
         QStringLiteral("KIND"), QStringLiteral("memory")},
        {QStringLiteral("out"), QStringLiteral("file to export: .png .svg .pdf .csv .json"),
         QStringLiteral("FILE")},
        {QStringLiteral("size"), QStringLiteral("image size, e.g. 1600x900"),
         QStringLiteral("WxH")},
        {QStringLiteral("threads"), QStringLiteral("CPU threads for the kernels"),
         QStringLiteral("N"), QStringLiteral("1")},
        {QStringLiteral("no-run"), QStringLiteral("--export: plan and predict only")},
        {QStringLiteral("link-gbps"),
         QStringLiteral("bandwidth of the device-host link offloads cross, GB/s each way"),
         QStringLiteral("GBPS")},
        {QStringLiteral("sweep"),
         QStringLiteral("Pareto: also sweep each strategy over N budgets (and its own range) and "
                        "draw the curves and the optimal frontier"),
         QStringLiteral("N")},
        {QStringLiteral("sweep-measure"),
         QStringLiteral("--sweep: run every point too and draw the measured curves")},
        {QStringLiteral("gemm"),
         QStringLiteral("GEMM library for the kernels: auto (the calibrated fastest), eigen, "
                        "openblas or blis; also REMATLAB_GEMM (rematlab-cli gemm lists them)"),
         QStringLiteral("NAME")},
    });
    if (!args.parse(QApplication::arguments()))
        return fail(kExitUsage, args.errorText() + QStringLiteral("; run 'rematlab --help'"));
    if (args.isSet(QStringLiteral("help"))) args.showHelp(0);
    if (args.isSet(QStringLiteral("version"))) args.showVersion();
    if (args.isSet(QStringLiteral("gemm"))) {
        try {
            rl::select_gemm(args.value(QStringLiteral("gemm")).toStdString());
        } catch (const rl::Error& e) {
            return fail(kExitUsage, QStringLiteral("--gemm: ") + QString::fromStdString(e.what()));
        }
    }

    if (const QString err = check_specs(args); !err.isEmpty()) return fail(kExitUserError, err);
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
