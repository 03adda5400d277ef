// The memory-profiler views: category stacks against the simulator's and the executor's own
// totals and per-category peaks, the live set against the schedule it comes from, and the diff's
// byte accounting.
#include <gtest/gtest.h>

#include <set>

#include "analysis/memory_view.h"
#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

struct Case {
    const char* network;
    const char* strategy;
};

const Case kCases[] = {
    {"mlp:depth=6,width=8,batch=4", "none"},
    {"mlp:depth=6,width=8,batch=4", "sqrt-n"},
    {"mlp:depth=6,width=8,batch=4", "periodic:k=2"},
    {"transformer:layers=2,d_model=16,heads=2,seq=8,batch=2", "none"},
    {"transformer:layers=2,d_model=16,heads=2,seq=8,batch=2", "sqrt-n"},
    {"resnet:width=4,size=16,batch=1", "sqrt-n"},
    {"unet:depth=2,channels=4,size=8,batch=1", "sqrt-n"},
    {"unet:depth=2,channels=4,size=8,batch=1", "none"},
};

Plan plan_for(const Graph& g, const char* strategy) {
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    return plan_with(g, costs, parse_spec(strategy));
}

TEST(MemoryView, StacksSumToThePredictedTimelineAndMatchTheEnginesCategoryPeaks) {
    for (const Case& c : kCases) {
        SCOPED_TRACE(std::string(c.network) + " / " + c.strategy);
        const Graph g = load_network(c.network);
        const Plan plan = plan_for(g, c.strategy);
        const Simulation sim = simulate(g, plan.schedule, CostModel{});
        const MemoryReplay r = replay_memory(g, plan.schedule);
        ASSERT_EQ(r.stacks.size(), sim.timeline.size());
        std::array<uint64_t, kNumCategories> peak{};
        for (size_t i = 0; i < r.stacks.size(); ++i) {
            ASSERT_EQ(r.bytes_at(static_cast<long>(i)), sim.timeline[i].bytes) << "event " << i;
            ASSERT_EQ(r.event_instruction[i], sim.timeline[i].instruction) << "event " << i;
            std::array<uint64_t, kNumCategories> by_cat{};
            for (int k = 0; k < kNumMemoryKinds; ++k)
                by_cat[static_cast<size_t>(engine_category(static_cast<MemoryKind>(k)))] +=
                    r.stacks[i][static_cast<size_t>(k)];
            for (size_t k = 0; k < by_cat.size(); ++k) peak[k] = std::max(peak[k], by_cat[k]);
        }
        EXPECT_EQ(peak, sim.peak_by_category);
        EXPECT_EQ(r.peak_bytes, sim.peak_bytes);
        EXPECT_EQ(r.event_instruction[static_cast<size_t>(r.peak_event)], sim.peak_instruction);
        // The last event leaves nothing live.
        EXPECT_EQ(r.bytes_at(static_cast<long>(r.stacks.size()) - 1), 0u);
    }
}

TEST(MemoryView, RecomputedBytesAppearExactlyWhenTheScheduleRecomputes) {
    for (const Case& c : kCases) {
        SCOPED_TRACE(std::string(c.network) + " / " + c.strategy);
        const Graph g = load_network(c.network);
        const Plan plan = plan_for(g, c.strategy);
        const Simulation sim = simulate(g, plan.schedule, CostModel{});
        const MemoryReplay r = replay_memory(g, plan.schedule);
        uint64_t most = 0;
        for (const KindBytes& k : r.stacks)
            most = std::max(most, k[static_cast<size_t>(MemoryKind::Recomputed)]);
        if (sim.recomputes == 0)
            EXPECT_EQ(most, 0u);
        else
            EXPECT_GT(most, 0u);
        // Before the first recompute, nothing is under "recomputed".
        long first_recompute = -1;
        std::vector<int> computes(static_cast<size_t>(g.num_nodes()), 0);
        for (size_t i = 0; i < plan.schedule.size() && first_recompute < 0; ++i) {
            const Instruction& ins = plan.schedule.code[i];
            if (ins.kind == InstrKind::Compute && ++computes[static_cast<size_t>(ins.target)] > 1)
                first_recompute = static_cast<long>(i);
        }
        for (size_t e = 0; e < r.stacks.size(); ++e)
            if (first_recompute < 0 ||
                (r.event_instruction[e] >= 0 && r.event_instruction[e] < first_recompute)) {
                ASSERT_EQ(r.stacks[e][static_cast<size_t>(MemoryKind::Recomputed)], 0u);
            }
    }
}

TEST(MemoryView, MeasuredTimelineHasTheSameStacksAndTheAllocatorsCategoryPeaks) {
    for (const char* strategy : {"none", "sqrt-n", "periodic:k=2"}) {
        SCOPED_TRACE(strategy);
        const Graph g = load_network("mlp:depth=6,width=8,batch=4");
        const Plan plan = plan_for(g, strategy);
        const MemoryReplay r = replay_memory(g, plan.schedule);
        auto backend = make_backend("cpu", 1);
        const Execution run = execute(g, plan.schedule, *backend, RunData::seeded(g));
        const std::vector<KindBytes> stacks = measured_stacks(r, run.timeline);
        ASSERT_EQ(stacks.size(), run.timeline.size());
        std::array<uint64_t, kNumCategories> peak{};
        for (size_t i = 0; i < stacks.size(); ++i) {
            ASSERT_EQ(total_bytes(stacks[i]), run.timeline[i].bytes);
            std::array<uint64_t, kNumCategories> by_cat{};
            for (int k = 0; k < kNumMemoryKinds; ++k)
                by_cat[static_cast<size_t>(engine_category(static_cast<MemoryKind>(k)))] +=
                    stacks[i][static_cast<size_t>(k)];
            for (size_t k = 0; k < by_cat.size(); ++k) peak[k] = std::max(peak[k], by_cat[k]);
        }
        // The allocator counted its categories itself, from real allocations.
        EXPECT_EQ(peak, run.peak_by_category);
        EXPECT_EQ(run.peak_bytes, r.peak_bytes);
    }
}

TEST(MemoryView, AForeignMeasuredTimelineIsRejectedNamingThePoint) {
    const Graph g = load_network("mlp:depth=6,width=8,batch=4");
    const MemoryReplay none = replay_memory(g, plan_for(g, "none").schedule);
    const Plan sq = plan_for(g, "sqrt-n");
    auto backend = make_backend("cpu", 1);
    const Execution run = execute(g, sq.schedule, *backend, RunData::seeded(g));
    try {
        measured_stacks(none, run.timeline);
        FAIL() << "a sqrt-n run was accepted as none's";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("not this schedule's run"), std::string::npos)
            << e.what();
    }
}

TEST(MemoryView, LiveSetAddsUpIsSortedAndItsFatesAreTrueOfTheSchedule) {
    for (const Case& c : kCases) {
        SCOPED_TRACE(std::string(c.network) + " / " + c.strategy);
        const Graph g = load_network(c.network);
        const Plan plan = plan_for(g, c.strategy);
        const Schedule& s = plan.schedule;
        const MemoryReplay r = replay_memory(g, s);
        long first_backward = -1;
        for (size_t i = 0; i < s.size() && first_backward < 0; ++i)
            if (s.code[i].kind == InstrKind::Backward) first_backward = static_cast<long>(i);
        for (long i = 0; i < static_cast<long>(s.size()); ++i) {
            const LiveSet set = live_set_at(g, s, r, i);
            uint64_t sum = 0;
            std::set<std::string> names;
            for (size_t t = 0; t < set.tensors.size(); ++t) {
                const LiveTensor& x = set.tensors[t];
                sum += x.bytes;
                ASSERT_TRUE(names.insert(x.name).second) << x.name << " twice";
                if (t > 0) {
                    ASSERT_GE(set.tensors[t - 1].bytes, x.bytes);
                }
                ASSERT_TRUE(x.freed_at < 0 || x.freed_at >= i) << x.name;
                ASSERT_LE(x.since, i) << x.name;
                if (x.kind == MemoryKind::SavedActivations || x.kind == MemoryKind::Recomputed) {
                    const ValueId v = *g.find_value(x.name);
                    const NodeId p = g.value(v).producer;
                    // It was made by a Compute of its producer.
                    ASSERT_EQ(s.code[static_cast<size_t>(x.since)].kind, InstrKind::Compute);
                    ASSERT_EQ(s.code[static_cast<size_t>(x.since)].target, p);
                    int before = 0;
                    for (long j = 0; j < x.since; ++j)
                        before += s.code[static_cast<size_t>(j)].kind == InstrKind::Compute &&
                                  s.code[static_cast<size_t>(j)].target == p;
                    ASSERT_EQ(x.fate == TensorFate::Recomputed, before > 0) << x.name;
                    if (x.fate == TensorFate::FreedThenRecomputed) {
                        ASSERT_GT(x.recomputed_at, x.freed_at);
                        ASSERT_EQ(s.code[static_cast<size_t>(x.recomputed_at)].target, p);
                        ASSERT_EQ(s.code[static_cast<size_t>(x.recomputed_at)].kind,
                                  InstrKind::Compute);
                    }
                    if (x.fate == TensorFate::Kept) {
                        ASSERT_TRUE(x.freed_at < 0 || x.freed_at > first_backward) << x.name;
                    }
                    if (x.fate == TensorFate::Freed) {
                        ASSERT_LT(x.freed_at, first_backward) << x.name;
                    }
                }
            }
            ASSERT_EQ(sum, set.bytes) << "instruction " << i;
            ASSERT_EQ(set.bytes, r.bytes_at(r.highest_event_of(i)));
        }
        // At the peak, the live set is the peak.
        EXPECT_EQ(live_set_at_peak(g, s, r).bytes, r.peak_bytes);
    }
}

// mlp:depth=2 (block0.fc 0, block0.act 1, block1.fc 2, block1.act 3, loss 4) with block0.fc and
// block0.act recomputed for block1.fc's backward: the one case whose live set is read by hand.
TEST(MemoryView, HandCheckedLiveSetAtARecomputeServedBackward) {
    const Graph g = build_preset(parse_spec("mlp:depth=2,width=4,batch=2"));
    ScheduleBuilder b(g);
    for (NodeId n = 0; n < 5; ++n) b.compute(n);
    b.backward(4);
    b.backward(3);
    b.compute(0);
    b.compute(1);
    b.backward(2);
    b.backward(1);
    b.backward(0);
    const Schedule s = b.finish();
    validate(g, s);
    long bw = -1, recompute_act = -1, first_act = -1;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s.code[i].kind == InstrKind::Backward && s.code[i].target == 2)
            bw = static_cast<long>(i);
        if (s.code[i].kind == InstrKind::Compute && s.code[i].target == 1)
            (first_act < 0 ? first_act : recompute_act) = static_cast<long>(i);
    }
    ASSERT_GE(bw, 0);
    ASSERT_GE(recompute_act, 0);
    const MemoryReplay r = replay_memory(g, s);
    const LiveSet set = live_set_at(g, s, r, bw);
    const LiveTensor* act = nullptr;
    const LiveTensor* weight = nullptr;
    for (const LiveTensor& t : set.tensors) {
        if (t.name == "block0.act") act = &t;
        if (t.name == "block1.fc.weight") weight = &t;
    }
    ASSERT_NE(act, nullptr);
    EXPECT_EQ(act->kind, MemoryKind::Recomputed);
    EXPECT_EQ(act->fate, TensorFate::Recomputed);
    EXPECT_EQ(act->since, recompute_act);
    EXPECT_EQ(act->bytes, 2u * 4u * 4u);  // batch × width floats
    ASSERT_NE(weight, nullptr);
    EXPECT_EQ(weight->fate_text(), "kept (whole run)");
    EXPECT_EQ(act->fate_text().rfind(
                  "recomputed at #" + std::to_string(recompute_act) + ", freed at #", 0),
              0u)
        << act->fate_text();
    // In the forward, block0.act's first copy is freed and recomputed later.
    const LiveSet fwd = live_set_at(g, s, r, first_act);
    bool seen = false;
    for (const LiveTensor& t : fwd.tensors)
        if (t.name == "block0.act") {
            seen = true;
            EXPECT_EQ(t.fate, TensorFate::FreedThenRecomputed);
            EXPECT_EQ(t.recomputed_at, recompute_act);
        }
    EXPECT_TRUE(seen);
    EXPECT_THROW(live_set_at(g, s, r, static_cast<long>(s.size())), Error);
    EXPECT_THROW(live_set_at(g, s, r, -1), Error);
}

TEST(MemoryView, DiffOfPeaksAccountsForEveryByte) {
    for (const char* net :
         {"mlp:depth=8,width=16,batch=8", "transformer:layers=2,d_model=16,heads=2,seq=8,batch=2",
          "unet:depth=2,channels=4,size=8,batch=1"}) {
        SCOPED_TRACE(net);
        const Graph g = load_network(net);
        const Plan none = plan_for(g, "none");
        const Plan sq = plan_for(g, "sqrt-n");
        const MemoryReplay rn = replay_memory(g, none.schedule);
        const MemoryReplay rs = replay_memory(g, sq.schedule);
        const LiveSet a = live_set_at_peak(g, none.schedule, rn);
        const LiveSet b = live_set_at_peak(g, sq.schedule, rs);
        const LiveSetDiff d = diff_live_sets(a, b);
        uint64_t only_a = 0, only_b = 0;
        for (const auto& e : d.only_a) {
            only_a += e.bytes_a;
            EXPECT_EQ(e.bytes_b, 0u);
        }
        for (const auto& e : d.only_b) {
            only_b += e.bytes_b;
            EXPECT_EQ(e.bytes_a, 0u);
        }
        EXPECT_EQ(d.delta, static_cast<int64_t>(a.bytes) - static_cast<int64_t>(b.bytes));
        EXPECT_EQ(d.delta, static_cast<int64_t>(only_a) - static_cast<int64_t>(only_b));
        EXPECT_EQ(a.bytes, d.common_bytes + only_a);
        EXPECT_EQ(b.bytes, d.common_bytes + only_b);
        // Parameters are held by both.
        for (const auto& e : d.only_a) EXPECT_NE(e.kind_a, MemoryKind::Parameters) << e.name;
        // A diff with itself is empty.
        const LiveSetDiff same = diff_live_sets(a, a);
        EXPECT_TRUE(same.only_a.empty());
        EXPECT_TRUE(same.only_b.empty());
        EXPECT_EQ(same.common_bytes, a.bytes);
    }
}

}  // namespace
}  // namespace rl
