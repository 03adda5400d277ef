// The window is usable at 1024×700 (issue 15): no page of the results area, shown or hidden, sets
// the window's minimum width above 1024 px. A QStackedWidget's minimum is the widest of all its
// pages, so one wide toolbar on a page the user never opens made the window 1128 px at least. The
// setup panel beside them is not clipped either.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QSignalSpy>
#include <QTabWidget>

#include "ui/main_window.h"
#include "ui/results_area.h"
#include "ui/results_model.h"
#include "ui/setup_panel.h"
#include "ui_test_util.h"

namespace rl::ui {
namespace {

using namespace testing;

TEST(UiMinimumWidth, EveryTabFitsA1024PixelScreen) {
    MainWindow w(false);
    QSignalSpy plan(&w, &MainWindow::planReady);
    w.setNetworkSpec(QStringLiteral("resmlp:depth=4,width=64,batch=32"));
    // Long specs: the strategy combos of the memory breakdown page list them.
    w.setStrategies(
        {QStringLiteral("none"), QStringLiteral("sqrt-n"),
         QStringLiteral("policy:regions=blocks,policy=dots_with_no_batch_dims_saveable"),
         QStringLiteral("periodic:k=2")});
    w.resize(1024, 700);
    w.show();
    ASSERT_TRUE(plan.wait(kWaitMs));
    while (plan.wait(300)) {
    }
    ASSERT_GE(w.resultsModel()->rowCount(), 4);
    auto* tabs = w.resultsArea()->findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    ASSERT_GE(tabs->count(), 6);
    for (const bool teaching : {false, true}) {
        w.showTeachMode(teaching);
        for (int i = 0; i < tabs->count(); ++i) {
            SCOPED_TRACE(tabs->tabText(i).toStdString() + (teaching ? ", teach mode" : ""));
            w.resultsArea()->showPage(i);
            QCoreApplication::processEvents();
            EXPECT_LE(w.minimumSizeHint().width(), 1024);
            EXPECT_LE(w.width(), 1024) << "the window grew past the screen";
            EXPECT_LE(w.resultsArea()->minimumSizeHint().width(), w.resultsArea()->width())
                << "the page is clipped at 1024 px";
            EXPECT_GE(w.setupPanel()->width(), w.setupPanel()->minimumSizeHint().width())
                << "the setup panel is clipped at its right edge";
        }
    }
}

}  // namespace
}  // namespace rl::ui
