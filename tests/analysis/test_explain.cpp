// Teach mode's sentences, fates, matrix and stepping on a small schedule checked by hand.
#include <gtest/gtest.h>

#include "analysis/explain.h"
#include "engine/errors.h"
#include "engine/liveness.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/test_networks.h"

namespace rl {
namespace {

// mlp:depth=2 — block0.fc (0), block0.act (1), block1.fc (2), block1.act (3), loss (4); relu's
// backward reads its own output, linear's its input, the loss's its input. The plan drops
// block0.act (and block0.fc) after the forward and recomputes both for block1.fc's backward.
struct ExplainHandChecked : ::testing::Test {
    Graph g = build_preset(parse_spec("mlp:depth=2,width=4,batch=2"));
    Plan plan;
    Simulation sim;
    CostModel costs;

    void SetUp() override {
        ScheduleBuilder b(g);
        for (NodeId n = 0; n < 5; ++n) b.compute(n);
        b.backward(4);
        b.backward(3);
        b.compute(0);
        b.compute(1);
        b.backward(2);
        b.backward(1);
        b.backward(0);
        plan.schedule = b.finish();
        validate(g, plan.schedule);
        costs = CostModel::analytic(g, DeviceRates{});
        sim = simulate(g, plan.schedule, costs);
    }
    std::string why(long i) const { return ScheduleExplainer(g, plan, sim, costs).explain(i).why; }
};

TEST_F(ExplainHandChecked, TheScheduleIsTheOneCheckedByHand) {
    EXPECT_EQ(to_text(g, plan.schedule),
              " 0  compute block0.fc\n"
              " 1  compute block0.act\n"
              " 2  free block0.fc\n"
              " 3  compute block1.fc\n"
              " 4  free block0.act\n"
              " 5  compute block1.act\n"
              " 6  free block1.fc\n"
              " 7  compute loss\n"
              " 8  free loss\n"
              " 9  backward loss\n"
              "10  backward block1.act\n"
              "11  free block1.act\n"
              "12  compute block0.fc\n"
              "13  compute block0.act\n"
              "14  free block0.fc\n"
              "15  backward block1.fc\n"
              "16  backward block0.act\n"
              "17  free block0.act\n"
              "18  backward block0.fc\n");
}

TEST_F(ExplainHandChecked, RecomputeSaysWhichBackwardNeedsItAndWhereItStartsFrom) {
    const ScheduleExplainer ex(g, plan, sim, costs);
    const Explanation e = ex.explain(13);
    EXPECT_TRUE(e.recompute);
    EXPECT_EQ(e.what, "recompute block0.act");
    EXPECT_NE(e.why.find("block0.act is recomputed because the backward of block1.fc (#15) "
                         "reads it. block0.act was not kept (freed at #4). Recomputing it reads "
                         "block0.fc (recomputed at #12), costs "),
              std::string::npos)
        << e.why;
    EXPECT_NE(e.why.find(" and 32 B."), std::string::npos) << e.why;
    // block0.fc, which it reads, and block1.fc, whose backward reads it
    EXPECT_EQ(e.related, (std::vector<NodeId>{0, 2}));

    // block0.fc is recomputed only because recomputing block0.act reads it.
    EXPECT_NE(why(12).find("block0.fc is recomputed because recomputing block0.act (#13) reads "
                           "it; block0.act is needed by the backward of block1.fc (#15). "
                           "block0.fc was not kept (freed at #2). Recomputing it reads the "
                           "input x, costs "),
              std::string::npos)
        << why(12);
}

// With recompute times (a profile where the parameters leave the cache), a recompute that reads
// a kept value or an input costs its recompute time, as the simulator prices it, and says why;
// one that reads only just-recomputed values costs its forward time.
TEST_F(ExplainHandChecked, RecomputeCostIsTheSimulatorsPrice) {
    const CostModel timed =
        CostModel::from_times("profiled", {1, 2, 3, 4, 0.5}, {0, 0, 0, 0, 0}, {5, 6, 7, 8, 0.5});
    const Simulation timed_sim = simulate(g, plan.schedule, timed);
    EXPECT_DOUBLE_EQ(timed_sim.recompute_ms, 5 + 2);
    const ScheduleExplainer ex(g, plan, timed_sim, timed);
    const std::string fc = ex.explain(12).why, act = ex.explain(13).why;
    EXPECT_NE(fc.find("Recomputing it reads the input x, costs 5.00 ms (its kept inputs read from "
                      "memory; 1.00 ms in the forward) and 32 B."),
              std::string::npos)
        << fc;
    EXPECT_NE(act.find("reads block0.fc (recomputed at #12), costs 2.00 ms and 32 B."),
              std::string::npos)
        << act;
    // Times that differ below the sentence's precision get no remark.
    const CostModel close = CostModel::from_times("profiled", {1, 2, 3, 4, 0.5}, {0, 0, 0, 0, 0},
                                                  {1.001, 2, 3, 4, 0.5});
    const std::string same =
        ScheduleExplainer(g, plan, simulate(g, plan.schedule, close), close).explain(12).why;
    EXPECT_NE(same.find("reads the input x, costs 1.00 ms and 32 B."), std::string::npos) << same;
}

TEST_F(ExplainHandChecked, FreeSaysWhyEarlyOrNeverAgain) {
    EXPECT_NE(
        why(4).find("Freed to save memory: its last read for now was compute block1.fc "
                    "(#3); nothing reads block0.act again before it is recomputed at #13 for the "
                    "backward of block1.fc. Releases 32 B."),
        std::string::npos)
        << why(4);
    EXPECT_NE(why(6).find("Nothing reads block1.fc after compute block1.act (#5), so its 32 B are "
                          "released."),
              std::string::npos)
        << why(6);
    EXPECT_NE(why(8).find("Nothing reads loss's output (the loss's backward does not need it), "
                          "so its 4 B are released at once."),
              std::string::npos)
        << why(8);
    EXPECT_NE(why(17).find("Nothing reads block0.act after backward block0.act (#16)"),
              std::string::npos)
        << why(17);
}

TEST_F(ExplainHandChecked, BackwardSaysWhatItReadsAndWrites) {
    EXPECT_NE(why(15).find("Backward of block1.fc (linear): reads its input block0.act "
                           "(recomputed at #13); "
                           "adds into the gradient of block0.act; writes the gradients of "
                           "block1.fc.weight and block1.fc.bias; then its output gradient (32 B) "
                           "is released."),
              std::string::npos)
        << why(15);
    EXPECT_NE(why(10).find("reads its own output (kept since #5)"), std::string::npos) << why(10);
    EXPECT_NE(why(18).find("reads its input x (a graph input)"), std::string::npos) << why(18);
}

TEST_F(ExplainHandChecked, ForwardSaysWhetherItIsKept) {
    EXPECT_NE(why(1).find("It is not kept: freed at #4 once compute block1.fc (#3) has read it, "
                          "and recomputed at #13 for the backward of block1.fc."),
              std::string::npos)
        << why(1);
    EXPECT_NE(why(5).find("It is kept for the backward: the backward of loss reads it at #9."),
              std::string::npos)
        << why(5);
    EXPECT_NE(why(7).find("No backward reads it, so it is freed at #8."), std::string::npos)
        << why(7);
}

TEST_F(ExplainHandChecked, LiveBytesAndPeakFollowTheSimulation) {
    const ScheduleExplainer ex(g, plan, sim, costs);
    int peaks = 0;
    for (long i = 0; i < ex.size(); ++i) {
        const Explanation e = ex.explain(i);
        EXPECT_LE(e.live_bytes, sim.peak_bytes);
        peaks += e.at_peak;
    }
    EXPECT_EQ(peaks, 1);
    EXPECT_THROW(ex.explain(19), Error);
    EXPECT_EQ(explain_instruction(g, plan, sim, costs, 8).rfind("free loss: ", 0), 0u);
}

TEST_F(ExplainHandChecked, FatesAndMatrix) {
    const auto uses = node_uses(g, plan.schedule);
    EXPECT_EQ(uses[0].fate, NodeFate::Recomputed);
    EXPECT_EQ(uses[0].computes, 2);
    EXPECT_EQ(uses[1].fate, NodeFate::Recomputed);
    EXPECT_EQ(uses[2].fate, NodeFate::FreedEarly);
    EXPECT_EQ(uses[3].fate, NodeFate::Kept);
    EXPECT_EQ(uses[4].fate, NodeFate::FreedEarly);

    const ScheduleMatrix m = schedule_matrix(g, plan.schedule);
    ASSERT_EQ(m.stages, 6);  // the forward and five backward steps
    EXPECT_EQ(m.stage_names[0], "forward");
    EXPECT_EQ(m.stage_names[3], "backward block1.fc");
    EXPECT_EQ(m.stage_first[3], 12);
    EXPECT_EQ(m.stage_last[3], 15);
    EXPECT_EQ(m.stage_last[2], 11);  // backward block1.act and the free of what it read last
    using F = ScheduleMatrix;
    EXPECT_EQ(m.at(0, 1), F::Computed | F::Freed);
    EXPECT_EQ(m.at(3, 0), F::Recomputed | F::Freed);
    EXPECT_EQ(m.at(3, 1), F::Recomputed);
    EXPECT_EQ(m.at(3, 2), F::Backward);
    EXPECT_EQ(m.at(1, 3), F::Kept);
    EXPECT_EQ(m.at(2, 3), F::Kept | F::Backward | F::Freed);
    EXPECT_EQ(m.at(4, 1), F::Kept | F::Backward | F::Freed);
    EXPECT_EQ(m.stage_of(0), 0);
    EXPECT_EQ(m.stage_of(13), 3);
    EXPECT_EQ(m.stage_of(18), 5);
    EXPECT_NE(schedule_matrix_json(g, m).find("\"backward block1.fc\""), std::string::npos);
}

TEST_F(ExplainHandChecked, SteppingForwardAndBackReturnsToTheSameState) {
    ScheduleCursor c(g, plan.schedule);
    const ScheduleState start = c.state();
    for (long i = 0; i < c.size(); ++i) {
        ASSERT_TRUE(c.forward());
        ASSERT_EQ(c.state(), state_at(g, plan.schedule, i + 1)) << i;
    }
    EXPECT_FALSE(c.forward());
    while (c.back()) {
    }
    EXPECT_EQ(c.state(), start);
    c.seek(13);
    EXPECT_EQ(c.state(), state_at(g, plan.schedule, 13));
    EXPECT_TRUE(c.state().live[size_t(g.node(0).output)]);   // block0.fc recomputed at #12
    EXPECT_FALSE(c.state().live[size_t(g.node(1).output)]);  // block0.act not yet
    c.seek(3);
    EXPECT_EQ(c.state(), state_at(g, plan.schedule, 3));
}

// Every strategy on a few presets: every instruction has a sentence, and stepping to the end and
// back is the identity.
TEST(Explain, EveryStrategyOnPresetsHasASentencePerInstruction) {
    for (const char* net : {"mlp:depth=6,width=8,batch=4", "transformer:layers=1,seq=4,batch=1",
                            "unet:depth=2,size=8,channels=4,batch=1"}) {
        const Graph g = load_network(net);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        for (const char* spec : {"none", "sqrt-n", "periodic:k=2", "revolve", "policy",
                                 "policy:policy=nothing_saveable", "min-cut", "dtr"}) {
            const Plan plan = plan_with(g, costs, parse_spec(spec));
            if (plan.status == PlanStatus::Infeasible) continue;
            const Simulation sim = simulate(g, plan.schedule, costs);
            const ScheduleExplainer ex(g, plan, sim, costs);
            for (long i = 0; i < ex.size(); ++i) {
                const Explanation e = ex.explain(i);
                EXPECT_FALSE(e.what.empty()) << net << " " << spec << " #" << i;
                EXPECT_GT(e.why.size(), 20u) << net << " " << spec << " #" << i;
                if (e.recompute) {
                    EXPECT_EQ(e.what.rfind("recompute ", 0), 0u);
                }
            }
            ScheduleCursor c(g, plan.schedule);
            c.seek(c.size());
            EXPECT_EQ(c.state(), state_at(g, plan.schedule, c.size())) << net << " " << spec;
            c.seek(0);
            EXPECT_EQ(c.state(), state_at(g, plan.schedule, 0)) << net << " " << spec;
        }
    }
}

// The cursor's live set is engine/liveness's: under `none`, block0.act (relu) runs in place over
// block0.fc's output, so that output stops being live at the Compute, before its Free.
TEST(ExplainCursor, AnInputHandedToAnInPlaceOutputIsNotLive) {
    const Graph g = build_preset(parse_spec("mlp:depth=2,width=4,batch=2"));
    const Plan none = plan_with(g, CostModel{}, parse_spec("none"));
    const LivenessTables t(g);
    const Liveness live(g, t, none.schedule);
    long at = -1;
    for (size_t i = 0; i < none.schedule.size(); ++i)
        if (none.schedule.code[i].kind == InstrKind::Compute && none.schedule.code[i].target == 1)
            at = static_cast<long>(i);
    ASSERT_GE(at, 0);
    ASSERT_EQ(live.in_place_input(at), 0);  // block0.act takes block0.fc's buffer
    const auto fc = static_cast<size_t>(g.node(0).output),
               act = static_cast<size_t>(g.node(1).output);
    ScheduleCursor c(g, none.schedule);
    c.seek(at);
    EXPECT_TRUE(c.state().live[fc]);
    EXPECT_FALSE(c.state().live[act]);
    ASSERT_TRUE(c.forward());
    EXPECT_FALSE(c.state().live[fc]) << "handed to block0.act's output";
    EXPECT_TRUE(c.state().live[act]);
    EXPECT_EQ(c.state(), state_at(g, none.schedule, at + 1));
    ASSERT_TRUE(c.back());
    EXPECT_TRUE(c.state().live[fc]);
    EXPECT_FALSE(c.state().live[act]);
}

// Every strategy on every preset: after each instruction, stepping forward, the cursor's live set
// is the one a walk with engine/liveness holds; stepping back returns to the start.
TEST(ExplainCursor, LiveSetIsLivenessAfterEveryInstructionOfEveryStrategy) {
    class Quiet final : public MemoryVisitor {
        void allocate(BufferRef, uint64_t) override {}
        void release(BufferRef, uint64_t) override {}
        void run_kernel(const Instruction&, bool) override {}
    } quiet;
    for (const std::string& net : testing::small_networks()) {
        const Graph g = load_network(net);
        const LivenessTables t(g);
        for (const std::string& spec : testing::strategy_specs()) {
            SCOPED_TRACE(net + " / " + spec);
            const Plan plan = plan_with(g, CostModel{}, parse_spec(spec));
            ASSERT_NE(plan.status, PlanStatus::Infeasible) << plan.message;
            Liveness live(g, t, plan.schedule);
            live.begin(quiet);
            ScheduleCursor c(g, plan.schedule);
            const ScheduleState start = c.state();
            for (long i = 0; i < c.size(); ++i) {
                live.step(i, quiet);
                ASSERT_TRUE(c.forward());
                for (ValueId v = 0; v < g.num_values(); ++v)
                    ASSERT_EQ(c.state().live[static_cast<size_t>(v)] != 0, live.activation_live(v))
                        << g.value(v).name << " after #" << i;
            }
            while (c.back()) {
            }
            EXPECT_EQ(c.state(), start);
        }
    }
}

}  // namespace
}  // namespace rl
