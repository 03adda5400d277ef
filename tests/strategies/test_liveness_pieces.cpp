// Liveness::resume (engine/liveness.h), which the solvers use to measure a piece of a schedule
// with the engine's rules (solvers/rotor.cpp): walking a schedule's tail from the state its head
// left must give, byte for byte, what the whole walk gives over that tail. Every strategy on
// every preset, cut before Computes and Backwards all along, with the in-place rule on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/liveness.h"
#include "engine/networks/presets.h"
#include "strategies/strategy.h"
#include "strategies/test_networks.h"

namespace rl {
namespace {

// Live bytes in all and per category after every event, and at every kernel.
class Recorder final : public MemoryVisitor {
  public:
    uint64_t live = 0;
    std::array<uint64_t, kNumCategories> by_category{};
    std::vector<uint64_t> events;  // live bytes after each event
    uint64_t activation_peak = 0;
    void allocate(BufferRef b, uint64_t bytes) override {
        live += bytes;
        by_category[static_cast<size_t>(b.category)] += bytes;
        activation_peak = std::max(activation_peak, by_category[size_t(Category::Activations)]);
        events.push_back(live);
    }
    void release(BufferRef b, uint64_t bytes) override {
        live -= bytes;
        by_category[static_cast<size_t>(b.category)] -= bytes;
        events.push_back(live);
    }
    void hand_over(BufferRef, BufferRef, uint64_t) override { events.push_back(live); }
    void run_kernel(const Instruction&, bool) override { events.push_back(live); }
};

void expect_tails_match(const Graph& g, const Schedule& s, bool in_place) {
    const LivenessTables t(g);
    // The whole walk: the state before every instruction, and the events from there on.
    Recorder whole;
    Liveness live(g, t, s, in_place);
    live.begin(whole);
    std::vector<size_t> first_event(s.size() + 1);
    std::vector<std::array<uint64_t, kNumCategories>> before(s.size());
    std::vector<LiveStart> starts(s.size());
    NodeId done_from = kNoId;
    for (size_t i = 0; i < s.size(); ++i) {
        first_event[i] = whole.events.size();
        before[i] = whole.by_category;
        for (ValueId v = 0; v < g.num_values(); ++v)
            if (live.activation_live(v) && !g.value(v).is_input())
                starts[i].activations.push_back(v);
        starts[i].backwards_done_from = done_from;
        live.step(static_cast<long>(i), whole);
        if (s.code[i].kind == InstrKind::Backward) done_from = s.code[i].target;
    }
    first_event[s.size()] = whole.events.size();

    // Every cut on small schedules; about 150 spread over the larger ones.
    const size_t stride = std::max<size_t>(1, s.size() / 150);
    for (size_t cut = 0; cut < s.size(); cut += stride) {
        if (s.code[cut].kind == InstrKind::Free)
            continue;  // Frees belong to the instruction before
        Schedule tail;
        tail.code.assign(s.code.begin() + static_cast<long>(cut), s.code.end());
        Recorder piece;
        Liveness walk(g, t, tail, in_place);
        walk.resume(starts[cut], piece);
        ASSERT_EQ(piece.by_category, before[cut]) << "state before instruction " << cut;
        piece.events.clear();
        for (size_t i = 0; i < tail.size(); ++i) walk.step(static_cast<long>(i), piece);
        const std::vector<uint64_t> expected(
            whole.events.begin() + static_cast<long>(first_event[cut]), whole.events.end());
        ASSERT_EQ(piece.events, expected) << "tail from instruction " << cut;
    }
}

TEST(LivenessPieces, ATailResumedFromItsStateWalksLikeTheWholeSchedule) {
    for (const std::string& net : testing::small_networks()) {
        const Graph g = load_network(net);
        for (const std::string& spec : testing::strategy_specs()) {
            SCOPED_TRACE(net + " / " + spec);
            const Plan plan = plan_with(g, CostModel{}, parse_spec(spec));
            ASSERT_NE(plan.status, PlanStatus::Infeasible) << plan.message;
            expect_tails_match(g, plan.schedule, true);
            expect_tails_match(g, plan.schedule, false);
        }
    }
}

// The in-place rule off charges every Compute its output: more activation bytes on a network whose
// relu runs in place under `none` (the linear's output and the relu's are both charged).
TEST(LivenessPieces, InPlaceOffIsTheUpperBound) {
    const Graph g = load_network("mlp:depth=4,width=8,batch=2");
    const Plan none = plan_with(g, CostModel{}, parse_spec("none"));
    const LivenessTables t(g);
    uint64_t peak[2] = {0, 0};
    for (int on = 0; on < 2; ++on) {
        Recorder r;
        Liveness live(g, t, none.schedule, on == 1);
        live.begin(r);
        for (size_t i = 0; i < none.schedule.size(); ++i) live.step(static_cast<long>(i), r);
        peak[on] = r.activation_peak;
    }
    EXPECT_GT(peak[0], peak[1]);
}

}  // namespace
}  // namespace rl
