#pragma once
// Shared by the GUI tests: how long a test waits for the worker thread, the small network most
// of them run, waiting for the planner to settle, and a schedule trace made without a window.
#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QString>

#include <memory>
#include <string>

#include "engine/cost_model.h"
#include "engine/networks/presets.h"
#include "engine/params.h"
#include "strategies/strategy.h"
#include "ui/main_window.h"
#include "ui/schedule_trace.h"

namespace rl::ui::testing {

inline constexpr int kWaitMs = 120000;  // generous: the suite shares 2 cores with other builds
inline const QString kSmall = QStringLiteral("mlp:depth=6,width=32,batch=16");

// Waits for the window's next plan, then until no further plan arrives for half a second.
inline void settle(MainWindow& w) {
    QSignalSpy plan(&w, &MainWindow::planReady);
    ASSERT_TRUE(plan.wait(kWaitMs));
    while (plan.wait(500)) {
    }
}

// The trace of `strategy` on `network` under the analytic cost model, as the window makes it.
inline std::shared_ptr<const ScheduleTrace> trace_of(const std::string& network,
                                                     const std::string& strategy) {
    auto g = std::make_shared<const Graph>(load_network(network));
    CostModel costs = CostModel::analytic(*g, DeviceRates{});
    Plan plan = plan_with(*g, costs, parse_spec(strategy));
    return make_trace(g, strategy, std::move(plan), std::move(costs));
}

}  // namespace rl::ui::testing
