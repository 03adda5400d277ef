// File → Export plan: the menu item, the format the save dialog's choice means, and that the app
// writes byte for byte what `rematlab-cli export-plan` writes (one Qt-free function, two
// front-ends); a plan PyTorch cannot take is an error that leaves no file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <QAction>
#include <QFile>
#include <QMenu>
#include <QMenuBar>
#include <QTemporaryDir>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "analysis/plan_export.h"
#include "engine/networks/presets.h"
#include "ui/export_dialogs.h"
#include "ui/main_window.h"
#include "ui/schedule_trace.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

std::string slurp(const QString& path) {
    std::ifstream in(path.toStdString(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

TEST(UiPlanExport, FileMenuHasExportPlan) {
    MainWindow w(false);
    auto* action = w.findChild<QAction*>(QStringLiteral("exportPlanAction"));
    ASSERT_NE(action, nullptr);
    EXPECT_EQ(action->text(), QStringLiteral("Export &plan…"));
    bool in_file_menu = false;
    for (QAction* top : w.menuBar()->actions())
        if (top->menu() && top->menu()->actions().contains(action))
            in_file_menu = top->text() == QStringLiteral("&File");
    EXPECT_TRUE(in_file_menu);
}

TEST(UiPlanExport, FormatFollowsTheFilterAndTheExtension) {
    EXPECT_EQ(plan_format_for(QStringLiteral("a.py"), QStringLiteral("PyTorch module (*.py)")),
              PlanFormat::Torch);
    EXPECT_EQ(plan_format_for(QStringLiteral("a.py"), QStringLiteral("JAX policy (*.py)")),
              PlanFormat::Jax);
    EXPECT_EQ(plan_format_for(QStringLiteral("a.JSON"), QStringLiteral("JAX policy (*.py)")),
              PlanFormat::Json);
}

TEST(UiPlanExport, WritesWhatTheCliWrites) {
    const std::string net = "mlp:depth=8,width=16,batch=4";
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    for (const auto& [format, name] :
         {std::pair{PlanFormat::Torch, "torch"}, std::pair{PlanFormat::Jax, "jax"},
          std::pair{PlanFormat::Json, "json"}}) {
        SCOPED_TRACE(name);
        const QString gui = dir.filePath(QStringLiteral("gui_%1").arg(name));
        QString summary;
        ASSERT_EQ(write_plan_file(*trace_of(net, "sqrt-n"), net, gui, format, summary), QString());
        EXPECT_TRUE(summary.contains(QStringLiteral("exact"))) << summary.toStdString();
        const QString cli = dir.filePath(QStringLiteral("cli_%1").arg(name));
        const std::string cmd = std::string(REMATLAB_CLI_PATH) + " export-plan --network " + net +
                                " --strategy sqrt-n --format " + name + " --out " +
                                cli.toStdString() + " 2>/dev/null";
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
        EXPECT_EQ(slurp(gui), slurp(cli));
    }
}

TEST(UiPlanExport, RefusedPlanIsAnErrorAndNoFile) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("plan.py"));
    QString summary;
    const QString err = write_plan_file(*trace_of("vgg:width=9", "optimal:budget=1.83MiB"),
                                        "vgg:width=9", path, PlanFormat::Torch, summary);
    EXPECT_TRUE(err.contains(
        QStringLiteral("cannot export 'optimal:budget=1.83MiB' on 'vgg:width=9' for PyTorch")))
        << err.toStdString();
    EXPECT_FALSE(QFile::exists(path));
    // As JSON the same plan is written, saying why PyTorch cannot take it.
    const QString json = dir.filePath(QStringLiteral("plan.json"));
    EXPECT_EQ(write_plan_file(*trace_of("vgg:width=9", "optimal:budget=1.83MiB"), "vgg:width=9",
                              json, PlanFormat::Json, summary),
              QString());
    EXPECT_NE(slurp(json).find("\"exportable\": false"), std::string::npos);
}

}  // namespace
}  // namespace rl::ui
