// A run over the memory cap fails with what it did up to there: the measured timeline up to the
// failing allocation, the failing instruction, and the allocation that failed. The partial
// timeline is checked against the simulator's prediction (one memory model, events line up).
#include <gtest/gtest.h>

#include <string>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

struct CapCase {
    const char* network;
    const char* strategy;
};

// The first simulated event whose bytes exceed `cap`: the allocation the run must fail at.
size_t first_over(const Simulation& sim, uint64_t cap) {
    size_t k = 0;
    while (k < sim.timeline.size() && sim.timeline[k].bytes <= cap) ++k;
    return k;
}

TEST(CapFailure, CarriesTheMeasuredTimelineUpToTheFailingInstruction) {
    const CapCase cases[] = {{"mlp:depth=6,width=8,batch=4", "none"},
                             {"mlp:depth=6,width=8,batch=4", "sqrt-n"},
                             {"mlp:depth=8,width=16,batch=4", "periodic:k=2"},
                             {"transformer:layers=1,seq=4,batch=1", "sqrt-n"},
                             {"unet:depth=2,size=8,channels=4,batch=1", "none"}};
    auto backend = make_cpu_backend(1);
    int checked = 0;
    for (const CapCase& c : cases) {
        SCOPED_TRACE(std::string(c.network) + " " + c.strategy);
        const Graph g = load_network(c.network);
        const Plan plan = plan_with(g, CostModel{}, parse_spec(c.strategy));
        const Simulation sim = simulate(g, plan.schedule, CostModel{});
        ASSERT_GT(sim.timeline.size(), 4u);
        // The set-up's bytes (parameters, inputs) fit; caps from just over them to just under
        // the peak fail at different instructions.
        uint64_t setup = 0;
        for (const SimPoint& p : sim.timeline)
            if (p.instruction < 0)
                setup = std::max(setup, p.bytes);
            else
                break;
        ASSERT_GT(sim.peak_bytes, setup + 1);
        for (const uint64_t cap : {setup + (sim.peak_bytes - setup) / 3,
                                   setup + (sim.peak_bytes - setup) * 2 / 3, sim.peak_bytes - 1}) {
            SCOPED_TRACE("cap " + std::to_string(cap));
            const size_t k = first_over(sim, cap);
            ASSERT_LT(k, sim.timeline.size());
            ASSERT_GT(k, 0u);
            ExecuteOptions opt;
            opt.cap = cap;
            try {
                execute(g, plan.schedule, *backend, RunData::seeded(g), opt);
                ADD_FAILURE() << "the run did not exceed the cap";
                continue;
            } catch (const CapExceeded& e) {
                const CapExceeded::Details* d = e.details();
                ASSERT_NE(d, nullptr);
                EXPECT_EQ(d->cap, cap);
                EXPECT_EQ(d->instruction, sim.timeline[k].instruction);
                EXPECT_NE(
                    std::string(e.what()).find("instruction " + std::to_string(d->instruction)),
                    std::string::npos)
                    << e.what();
                // The allocation that failed: what the prediction adds at that event.
                EXPECT_EQ(d->live, sim.timeline[k - 1].bytes);
                EXPECT_EQ(d->requested, sim.timeline[k].bytes - sim.timeline[k - 1].bytes);
                EXPECT_GT(d->live + d->requested, cap);
                // The measured events up to the failure, each equal to the prediction.
                ASSERT_EQ(d->timeline.size(), k);
                for (size_t i = 0; i < k; ++i) {
                    EXPECT_EQ(d->timeline[i].bytes, sim.timeline[i].bytes) << "event " << i;
                    EXPECT_EQ(d->timeline[i].instruction, sim.timeline[i].instruction)
                        << "event " << i;
                    EXPECT_LE(d->timeline[i].bytes, cap);
                }
                EXPECT_LE(d->timeline.back().instruction, d->instruction);
                ++checked;
            }
        }
    }
    EXPECT_EQ(checked, 15);
}

// Without a timeline recorded, the error still names the instruction and the allocation.
TEST(CapFailure, WithoutARecordedTimelineStillNamesTheAllocation) {
    const Graph g = load_network("mlp:depth=6,width=8,batch=4");
    const Plan plan = plan_with(g, CostModel{}, parse_spec("none"));
    const Simulation sim = simulate(g, plan.schedule, CostModel{});
    auto backend = make_cpu_backend(1);
    ExecuteOptions opt;
    opt.cap = sim.peak_bytes - 1;
    opt.record_timeline = false;
    try {
        execute(g, plan.schedule, *backend, RunData::seeded(g), opt);
        FAIL() << "the run did not exceed the cap";
    } catch (const CapExceeded& e) {
        ASSERT_NE(e.details(), nullptr);
        EXPECT_TRUE(e.details()->timeline.empty());
        EXPECT_GE(e.details()->instruction, 0);
        EXPECT_EQ(e.details()->live + e.details()->requested, sim.peak_bytes);
    }
}

}  // namespace
}  // namespace rl
