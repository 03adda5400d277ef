// Cancelling planning (engine/cancel.h): the solvers poll the flag of the thread's CancelScope
// between their long steps, so Ctrl-C (CLI) or a newer job (GUI) does not wait for a whole DP,
// portfolio or MILP. Each case raises the flag before planning: a solver that does not poll
// returns a plan, and the test fails.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/backend.h"
#include "engine/cancel.h"
#include "engine/networks/presets.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

TEST(CancelPlanning, WithoutAScopeNothingIsCancelled) {
    EXPECT_FALSE(cancel_requested());
    std::atomic<bool> flag{true};
    {
        const CancelScope scope(&flag);
        EXPECT_TRUE(cancel_requested());
        {
            std::atomic<bool> inner{false};
            const CancelScope nested(&inner);  // the innermost flag wins
            EXPECT_FALSE(cancel_requested());
        }
        EXPECT_TRUE(cancel_requested());  // and the outer one is back
    }
    EXPECT_FALSE(cancel_requested());
    const Graph g = load_network("mlp:depth=12,width=8,batch=4");
    EXPECT_NO_THROW(plan_with(g, CostModel{}, parse_spec("optimal:method=dp")));
}

TEST(CancelPlanning, TheChainDpThePortfolioAndTheMilpStopOnARaisedFlag) {
    const Graph g = load_network("mlp:depth=12,width=8,batch=4");
    std::atomic<bool> flag{false};
    const CancelScope scope(&flag);
    for (const char* spec : {"optimal:method=dp", "optimal", "optimal:method=milp,time_limit=5"}) {
        SCOPED_TRACE(spec);
        flag = false;
        EXPECT_NO_THROW(plan_with(g, CostModel{}, parse_spec(spec)));
        flag = true;
        EXPECT_THROW(plan_with(g, CostModel{}, parse_spec(spec)), Cancelled);
    }
}

TEST(CancelPlanning, ProfilingTheCostModelStopsOnARaisedFlag) {
    const Graph g = load_network("mlp:depth=4,width=8,batch=4");
    auto backend = make_backend("cpu", 1);
    std::atomic<bool> flag{true};
    {
        const CancelScope scope(&flag);
        EXPECT_THROW(CostModel::profiled(g, *backend, 1), Cancelled);
    }
    EXPECT_EQ(CostModel::profiled(g, *backend, 1).size(), static_cast<size_t>(g.num_nodes()));
}

}  // namespace
}  // namespace rl
