// Exports: valid PNG / SVG / PDF / CSV from the same chart code as the window, in-process and
// through `rematlab --export` and `rematlab-cli export`; and a 100,000-point timeline decimated
// to the plot's width.
#include <gtest/gtest.h>

#include <QFile>
#include <QImage>
#include <QLineSeries>
#include <QProcess>
#include <QTemporaryDir>
#include <QValueAxis>
#include <cmath>

#include "ui/chart_export.h"
#include "ui/chart_math.h"
#include "ui/evaluation.h"
#include "ui/memory_chart.h"

namespace rl::ui {
namespace {

QByteArray read_all(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void expect_valid_image(const QString& path, QSize size) {
    const QByteArray bytes = read_all(path);
    ASSERT_GT(bytes.size(), 1000) << path.toStdString();
    if (path.endsWith(".png")) {
        EXPECT_TRUE(bytes.startsWith("\x89PNG\r\n\x1a\n"));
        const QImage img(path);
        EXPECT_EQ(img.size(), size);
    } else if (path.endsWith(".svg")) {
        EXPECT_TRUE(bytes.startsWith("<?xml"));
        EXPECT_TRUE(bytes.contains("<svg"));
        EXPECT_TRUE(bytes.contains(QByteArray("width=\"") + QByteArray::number(size.width())));
        EXPECT_TRUE(bytes.trimmed().endsWith("</svg>"));
    } else if (path.endsWith(".pdf")) {
        EXPECT_TRUE(bytes.startsWith("%PDF-"));
        EXPECT_TRUE(bytes.trimmed().endsWith("%%EOF"));
    }
}

const RunSummary& small_run() {
    static const RunSummary s = [] {
        RunRequest r;
        r.network = QStringLiteral("mlp:depth=6,width=32,batch=16");
        r.strategies = {QStringLiteral("none"), QStringLiteral("periodic:k=2")};
        return evaluate_all(r, true);
    }();
    return s;
}

TEST(UiExport, WritesValidPngSvgPdfAndCsv) {
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    ExportInput in;
    in.results = small_run().results;
    in.baseline_ms = small_run().baseline_total_ms;
    ASSERT_EQ(in.results.size(), 2u);
    ASSERT_TRUE(in.results[1].executed);
    const QSize size(900, 560);
    for (const char* ext : {"png", "svg", "pdf"}) {
        for (ChartKind kind : {ChartKind::Memory, ChartKind::Pareto}) {
            const QString path = dir.filePath(
                QStringLiteral("%1.%2").arg(kind == ChartKind::Memory ? "memory" : "pareto", ext));
            EXPECT_EQ(export_chart(kind, in, path, size), QString());
            expect_valid_image(path, size);
        }
    }
    const QString csv = dir.filePath(QStringLiteral("memory.csv"));
    EXPECT_EQ(export_chart(ChartKind::Memory, in, csv, size), QString());
    EXPECT_TRUE(read_all(csv).startsWith("strategy,kind,time_ms,bytes,instruction,what\n"));
    EXPECT_TRUE(read_all(csv).contains("periodic:k=2,measured,"));
    const QString table = dir.filePath(QStringLiteral("pareto.csv"));
    EXPECT_EQ(export_chart(ChartKind::Pareto, in, table, size), QString());
    EXPECT_TRUE(read_all(table).startsWith("Strategy,Status,"));
    const QString json = dir.filePath(QStringLiteral("results.json"));
    EXPECT_EQ(export_chart(ChartKind::Pareto, in, json, size), QString());
    EXPECT_TRUE(read_all(json).contains("\"measured_peak_bytes\""));
    // Errors are messages, not crashes.
    EXPECT_NE(export_chart(ChartKind::Memory, in, dir.filePath("x.bmpx"), size), QString());
    EXPECT_NE(export_chart(ChartKind::Memory, in, dir.filePath("no/such/dir/x.png"), size),
              QString());
}

TEST(UiExport, HeadlessExportFromBothBinaries) {
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString png = dir.filePath(QStringLiteral("pareto.png"));
    QProcess gui;
    gui.start(QStringLiteral(REMATLAB_GUI_PATH),
              {"--export", "--network", "mlp:depth=4,width=16,batch=8", "--strategies",
               "none,periodic:k=2", "--chart", "pareto", "--size", "800x500", "--out", png});
    ASSERT_TRUE(gui.waitForFinished(120000));
    EXPECT_EQ(gui.exitCode(), 0) << gui.readAllStandardError().toStdString();
    expect_valid_image(png, QSize(800, 500));

    const QString svg = dir.filePath(QStringLiteral("memory.svg"));
    QProcess cli;
    cli.start(QStringLiteral(REMATLAB_CLI_PATH),
              {"export", "--network", "mlp:depth=4,width=16,batch=8", "--strategies", "none",
               "--chart", "memory", "--out", svg});
    ASSERT_TRUE(cli.waitForFinished(120000));
    EXPECT_EQ(cli.exitCode(), 0) << cli.readAllStandardError().toStdString();
    expect_valid_image(svg, QSize(1600, 900));

    QProcess bad;
    bad.start(QStringLiteral(REMATLAB_CLI_PATH),
              {"export", "--network", dir.filePath("missing.json"), "--out", png});
    ASSERT_TRUE(bad.waitForFinished(120000));
    EXPECT_EQ(bad.exitCode(), 1);
    EXPECT_TRUE(bad.readAllStandardError().contains("missing.json"));
}

// The window's command line is checked as rematlab-cli's is, before any window or run: an unknown
// strategy, key or value, or a bad preset parameter, is an error that names it (exit 1); a
// malformed option value is a usage error (exit 2). Nothing is written. The window used to drop
// such a strategy and keep the preset's default without a word, and exit 0.
TEST(UiCommandLine, BadSpecsAndValuesAreRefusedBeforeAnyWindow) {
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString png = dir.filePath(QStringLiteral("shot.png"));
    struct Case {
        QStringList args;
        int code;
        std::vector<const char*> said;
    };
    const std::vector<Case> cases = {
        {{"-s", "none;bogus"}, 1, {"--strategies", "'bogus'", "valid strategies: none"}},
        {{"-s", "sqrt-n:foo=1"}, 1, {"unknown parameter 'foo'", "segments, budget"}},
        {{"-s", "periodic:k=0"}, 1, {"'k'", "out of range"}},
        {{"-s", ";"}, 1, {"--strategies: the list is empty"}},
        {{"-n", "mlp:depth=abc"}, 1, {"--network", "'depth'", "not an integer"}},
        {{"-n", "bogusnet"}, 1, {"unknown network preset 'bogusnet'", "valid presets: mlp"}},
        {{"--tab", "99"}, 2, {"--tab: expected 0 to", "got 99"}},
        {{"--threads", "0"}, 2, {"--threads", "at least 1"}},
        {{"--teach", "x"}, 2, {"--teach", "got 'x'"}},
        {{"--select", "-1"}, 2, {"--select"}},
    };
    for (const Case& c : cases) {
        QProcess gui;
        gui.start(QStringLiteral(REMATLAB_GUI_PATH),
                  QStringList{"--network", "mlp:depth=3,width=8,batch=4"} + c.args +
                      QStringList{"--screenshot", png});
        ASSERT_TRUE(gui.waitForFinished(60000)) << c.args.join(' ').toStdString();
        const std::string err = gui.readAllStandardError().toStdString();
        EXPECT_EQ(gui.exitCode(), c.code) << c.args.join(' ').toStdString() << ": " << err;
        for (const char* words : c.said)
            EXPECT_NE(err.find(words), std::string::npos) << words << " in: " << err;
        EXPECT_FALSE(QFile::exists(png)) << c.args.join(' ').toStdString();
    }
    // Without --screenshot too: the window does not open on a bad list.
    QProcess gui;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("QT_QPA_PLATFORM"), QStringLiteral("offscreen"));
    gui.setProcessEnvironment(env);
    gui.start(QStringLiteral(REMATLAB_GUI_PATH), {"--strategies", "none,bogus"});
    ASSERT_TRUE(gui.waitForFinished(60000)) << "the window opened on a bad strategy list";
    EXPECT_EQ(gui.exitCode(), 1);
    EXPECT_TRUE(gui.readAllStandardError().contains("unknown strategy 'bogus'"));
}

TEST(UiMemoryChart, HundredThousandPointsAreDecimatedToThePlotWidth) {
    auto tl = std::make_shared<Timeline>();
    for (int i = 0; i < 100000; ++i) {
        tl->points.push_back({i * 0.01, 1e6 + 5e5 * std::sin(i * 0.001) + (i == 77777 ? 9e6 : 0)});
        tl->instruction.push_back(i / 3);
    }
    StrategyResult r;
    r.name = r.spec = QStringLiteral("none");
    r.planned = r.executed = true;
    r.measured_timeline = tl;
    MemoryChart chart;
    chart.resize(1000, 600);
    chart.show();
    chart.setResults({r});
    chart.flush();
    const int n = chart.measuredSeries(0)->count();
    EXPECT_GT(n, 100);
    EXPECT_LE(n, 4 * 1000 + 2);
    double top = 0;
    for (const QPointF& p : chart.measuredSeries(0)->points()) top = std::max(top, p.y());
    EXPECT_NEAR(top * 1024 * 1024, 1e6 + 5e5 * std::sin(77.777) + 9e6, 1.0);  // the spike survives
    EXPECT_FALSE(chart.hoverText(500.0).isEmpty());
}

// The axis names the unit its numbers are in, for every size of network: a 772-byte network's
// chart read "live memory (MiB)" over values in bytes, because the title was only rewritten when
// the unit changed from the one the chart started with.
TEST(UiMemoryChart, TheBytesAxisNamesTheUnitOfItsNumbers) {
    for (const double peak : {772.0, 45.2 * 1024, 3.5 * 1024 * 1024, 40.0 * 1024 * 1024 * 1024}) {
        auto tl = std::make_shared<Timeline>();
        tl->points = {{0.0, 0.0}, {1.0, peak}, {2.0, 0.0}};
        tl->instruction = {0, 1, 2};
        StrategyResult r;
        r.name = r.spec = QStringLiteral("none");
        r.planned = r.executed = true;
        r.measured_timeline = tl;
        MemoryChart chart;
        chart.resize(800, 500);
        chart.show();
        chart.setResults({r});
        chart.flush();
        const ByteUnit unit = byte_unit_for(static_cast<uint64_t>(peak));
        EXPECT_EQ(chart.bytesAxis()->titleText(),
                  QStringLiteral("live memory (%1)").arg(QString::fromLatin1(unit.name)))
            << peak;
        double top = 0;
        for (const QPointF& p : chart.measuredSeries(0)->points()) top = std::max(top, p.y());
        EXPECT_NEAR(top * unit.divisor, peak, 1e-6 * peak) << peak;  // the numbers are in it
        EXPECT_GE(top, 1.0) << peak;
        EXPECT_LT(top, 1024.0) << peak;
    }
}

}  // namespace
}  // namespace rl::ui
