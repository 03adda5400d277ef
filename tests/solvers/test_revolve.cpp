// revolve (Griewank & Walther 2000): the closed form against an independent dynamic program and
// an exhaustive search of Griewank's model, the action schedules against a slot-counting
// simulation, and the plans on `chain:l=…` against the convention of solvers/revolve.h
// (Computes = t(l,s) + 2: t advances, the last layer once, the loss once).
#include "solvers/revolve.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/graph_algorithms.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

constexpr int kMaxL = 200;
constexpr int kMaxS = 10;
constexpr long kInf = std::numeric_limits<long>::max() / 4;

// p[l][s]: fewest advances to reverse l steps from a stored x_0 with s slots (x_0's included),
// over Griewank's recursive schedules. The first stored state after x_0 is x_j: j advances reach
// it, the last l−j steps are reversed from x_j with the s−1 other slots, and then the first j from
// x_0 with all s. p[1][0] = 0: one step is turned from the working state, which needs no slot;
// more steps need a slot to come back to. With s = 1 this is "advance to x_{l-1}, turn, redo":
// j = l−1 and the right part p[1][0].
std::vector<std::vector<long>> recursive_dp(int max_l, int max_s) {
    std::vector<std::vector<long>> p(static_cast<size_t>(max_l) + 1,
                                     std::vector<long>(static_cast<size_t>(max_s) + 1, kInf));
    for (int s = 0; s <= max_s; ++s) p[1][static_cast<size_t>(s)] = 0;
    for (int l = 2; l <= max_l; ++l)
        for (int s = 1; s <= max_s; ++s) {
            long best = kInf;
            for (int j = 1; j < l; ++j) {
                const long right = p[static_cast<size_t>(l - j)][static_cast<size_t>(s - 1)];
                const long left = p[static_cast<size_t>(j)][static_cast<size_t>(s)];
                if (right < kInf && left < kInf) best = std::min(best, j + right + left);
            }
            p[static_cast<size_t>(l)][static_cast<size_t>(s)] = best;
        }
    return p;
}

// Exhaustive search over every action sequence of Griewank's model (not only recursive ones),
// by 0-1 breadth-first search: state = (stored set, working state or none, next step to turn).
long exhaustive_min_advances(int l, int s) {
    const int none = l;  // "no working state"
    auto key = [&](unsigned mask, int working, int next) {
        return (static_cast<long>(mask) * (l + 1) + working) * (l + 1) + next;
    };
    std::vector<long> dist(static_cast<size_t>(key((1u << l) - 1, l, l) + 1), kInf);
    std::deque<std::tuple<unsigned, int, int>> q;
    dist[static_cast<size_t>(key(1u, 0, l))] = 0;
    q.emplace_back(1u, 0, l);
    while (!q.empty()) {
        const auto [mask, w, next] = q.front();
        q.pop_front();
        const long d = dist[static_cast<size_t>(key(mask, w, next))];
        if (next == 0) return d;
        auto relax = [&](unsigned m2, int w2, int n2, long cost) {
            long& slot = dist[static_cast<size_t>(key(m2, w2, n2))];
            if (d + cost < slot) {
                slot = d + cost;
                if (cost == 0)
                    q.emplace_front(m2, w2, n2);
                else
                    q.emplace_back(m2, w2, n2);
            }
        };
        if (w != none && w + 1 < next) relax(mask, w + 1, next, 1);
        if (w != none && std::popcount(mask | (1u << w)) <= s) relax(mask | (1u << w), w, next, 0);
        if (w == next - 1) relax(mask, none, next - 1, 0);  // turn step `next`
        for (int i = 0; i < l; ++i)
            if ((mask >> i) & 1u) {
                relax(mask, i, next, 0);               // restore
                relax(mask & ~(1u << i), w, next, 0);  // release
            }
    }
    return kInf;
}

struct ActionCheck {
    long advances = 0;
    long max_slots = 0;
    std::string error;
};

// Walks an action list under Griewank's rules.
ActionCheck check_actions(const std::vector<revolve::Action>& acts, int64_t l, int64_t s) {
    using K = revolve::Action::Kind;
    ActionCheck c;
    std::set<int64_t> slots;
    int64_t working = 0, next_turn = l;
    bool has_working = true;
    for (size_t n = 0; n < acts.size() && c.error.empty(); ++n) {
        const auto& a = acts[n];
        const std::string at = " at action " + std::to_string(n);
        switch (a.kind) {
            case K::Advance:
                if (!has_working || a.index <= working || a.index >= next_turn)
                    c.error = "bad advance" + at;
                c.advances += a.index - working;
                working = a.index;
                break;
            case K::Store:
                if (!has_working || a.index != working || slots.count(a.index))
                    c.error = "bad store" + at;
                slots.insert(a.index);
                break;
            case K::Restore:
                if (!slots.count(a.index)) c.error = "restore of a state not in a slot" + at;
                working = a.index;
                has_working = true;
                break;
            case K::Release:
                if (!slots.erase(a.index)) c.error = "release of an empty slot" + at;
                break;
            case K::Turn:
                if (a.index != next_turn || !has_working || working != a.index - 1)
                    c.error = "bad turn" + at;
                --next_turn;
                has_working = false;
                break;
        }
        c.max_slots = std::max(c.max_slots, static_cast<long>(slots.size()));
        if (static_cast<int64_t>(slots.size()) > s) c.error = "more than s slots" + at;
    }
    if (c.error.empty() && next_turn != 0) c.error = "not every step was turned";
    if (c.error.empty() && !slots.empty()) c.error = "slots left occupied";
    return c;
}

TEST(RevolveClosedForm, HandValues) {
    EXPECT_EQ(revolve::beta(2, 2), 6u);  // C(4,2)
    EXPECT_EQ(revolve::beta(3, 0), 1u);
    EXPECT_EQ(revolve::beta(3, -1), 0u);
    EXPECT_EQ(revolve::beta(10, 10), 184756u);  // C(20,10)
    EXPECT_EQ(revolve::beta(40, 1000), revolve::kSaturated);
    EXPECT_EQ(revolve::repetition(4, 2), 2);
    EXPECT_EQ(revolve::min_advances(4, 2), 4);  // the worked example of revolve.h
    EXPECT_EQ(revolve::min_advances(1, 1), 0);
    for (int64_t l = 1; l <= kMaxL; ++l) {
        // One slot: advance to x_{l-1}, turn, restart from x_0 — (l−1) + (l−2) + … + 0.
        EXPECT_EQ(revolve::min_advances(l, 1), l * (l - 1) / 2) << "l=" << l;
        // A slot for every state but the last: each step advanced once, the last turned.
        EXPECT_EQ(revolve::min_advances(l, std::max<int64_t>(1, l - 1)), l - 1) << "l=" << l;
    }
}

TEST(RevolveClosedForm, EqualsTheRecursiveDynamicProgramForEveryLAndS) {
    const auto p = recursive_dp(kMaxL, kMaxS);
    for (int l = 1; l <= kMaxL; ++l)
        for (int s = 1; s <= kMaxS; ++s)
            ASSERT_EQ(revolve::min_advances(l, s),
                      p[static_cast<size_t>(l)][static_cast<size_t>(s)])
                << "l=" << l << " s=" << s;
}

TEST(RevolveClosedForm, EqualsAnExhaustiveSearchOfGriewanksModelOnSmallChains) {
    for (int l = 1; l <= 9; ++l)
        for (int s = 1; s <= 4; ++s)
            EXPECT_EQ(revolve::min_advances(l, s), exhaustive_min_advances(l, s))
                << "l=" << l << " s=" << s;
}

TEST(RevolveActions, EverySchedulePlaysByTheRulesWithTheMinimalAdvances) {
    for (int64_t l = 1; l <= kMaxL; ++l)
        for (int64_t s = 1; s <= kMaxS; ++s) {
            const ActionCheck c = check_actions(revolve::actions(l, s), l, s);
            ASSERT_TRUE(c.error.empty()) << c.error << " (l=" << l << " s=" << s << ")";
            ASSERT_EQ(c.advances, revolve::min_advances(l, s)) << "l=" << l << " s=" << s;
            ASSERT_LE(c.max_slots, s);
        }
    // Many slots: the recursion is deep (one frame per stored state) and stores everything.
    const ActionCheck big = check_actions(revolve::actions(5000, 5000), 5000, 5000);
    EXPECT_TRUE(big.error.empty()) << big.error;
    EXPECT_EQ(big.advances, 4999);
}

TEST(RevolveActions, WorkedExampleOfTheHeader) {
    using K = revolve::Action::Kind;
    const std::vector<revolve::Action> expected = {
        {K::Store, 0},   {K::Advance, 2}, {K::Store, 2}, {K::Advance, 3},
        {K::Turn, 4},    {K::Restore, 2}, {K::Turn, 3},  {K::Release, 2},
        {K::Restore, 0}, {K::Advance, 1}, {K::Store, 1}, {K::Turn, 2},
        {K::Release, 1}, {K::Restore, 0}, {K::Turn, 1},  {K::Release, 0}};
    EXPECT_EQ(revolve::actions(4, 2), expected);
}

// The largest number of layer outputs live at once (the input x and the loss excluded).
long max_live_layer_outputs(const Graph& g, const Schedule& s) {
    std::vector<uint8_t> live(static_cast<size_t>(g.num_values()), 0);
    long count = 0, most = 0;
    const NodeId loss = g.loss_node();
    for (const Instruction& ins : s.code) {
        if (ins.kind == InstrKind::Compute && ins.target != loss) {
            live[static_cast<size_t>(g.node(ins.target).output)] = 1;
            most = std::max(most, ++count);
        } else if (ins.kind == InstrKind::Free && g.value(ins.target).producer != loss &&
                   live[static_cast<size_t>(ins.target)]) {
            live[static_cast<size_t>(ins.target)] = 0;
            --count;
        }
    }
    return most;
}

TEST(RevolveChain, ComputeCountIsTheClosedFormPlusTwoForEveryLAndS) {
    for (int l = 1; l <= kMaxL; ++l) {
        const Graph g = load_network("chain:l=" + std::to_string(l) + ",width=2,batch=1");
        ASSERT_EQ(g.num_nodes(), l + 1);
        ASSERT_EQ(static_cast<int>(segment_boundaries(g).size()), l);
        for (int s = 1; s <= kMaxS; ++s) {
            const Plan p =
                plan_with(g, CostModel{}, parse_spec("revolve:slots=" + std::to_string(s)));
            ASSERT_EQ(p.status, PlanStatus::Optimal);
            long computes = 0, loss_computes = 0;
            for (const Instruction& ins : p.schedule.code)
                if (ins.kind == InstrKind::Compute) {
                    ++computes;
                    loss_computes += ins.target == g.loss_node();
                }
            const long t = revolve::min_advances(l, s);
            ASSERT_EQ(computes, t + 2) << "l=" << l << " s=" << s;
            ASSERT_EQ(loss_computes, 1);
            ASSERT_NO_THROW(validate(g, p.schedule)) << "l=" << l << " s=" << s;
            // s−1 stored states besides x_0, the working state, the one being computed.
            ASSERT_LE(max_live_layer_outputs(g, p.schedule), s + 1) << "l=" << l << " s=" << s;
        }
    }
}

TEST(RevolveChain, DefaultSlotsAreCeilSqrtOfTheStages) {
    for (const auto& [l, s] : std::vector<std::pair<int, int>>{{9, 3}, {10, 4}, {1, 1}, {2, 2}}) {
        const Graph g = load_network("chain:l=" + std::to_string(l) + ",width=2,batch=1");
        const Plan p = plan_with(g, CostModel{}, parse_spec("revolve"));
        long computes = 0;
        for (const Instruction& ins : p.schedule.code) computes += ins.kind == InstrKind::Compute;
        EXPECT_EQ(computes, revolve::min_advances(l, s) + 2) << "l=" << l;
    }
}

TEST(RevolveChain, SweepRunsFromOneSlotToEveryStage) {
    const Graph g = load_network("chain:l=40,width=2,batch=1");
    const std::vector<Spec> range = find_strategy("revolve").sweep_range(g);
    ASSERT_GE(range.size(), 10u);
    int64_t previous = 0;
    for (const Spec& spec : range) {
        ASSERT_EQ(spec.args.size(), 1u);
        const int64_t s = std::stoll(spec.args[0].second);
        EXPECT_GT(s, previous);
        previous = s;
    }
    EXPECT_EQ(range.front().args[0].second, "1");
    EXPECT_EQ(range.back().args[0].second, "40");
}

TEST(RevolveChain, EnoughSlotsIsPlainBackpropAndFewSlotsSaveActivations) {
    const Graph g = load_network("chain:l=32,width=16,batch=64");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Simulation none = simulate(g, plan_with(g, costs, parse_spec("none")).schedule, costs);
    const Simulation all =
        simulate(g, plan_with(g, costs, parse_spec("revolve:slots=32")).schedule, costs);
    EXPECT_EQ(all.recomputes, 0);
    EXPECT_EQ(all.activation_peak_bytes(), none.activation_peak_bytes());
    const uint64_t layer = g.output_of(0).bytes;
    for (int s : {1, 2, 4, 8}) {
        const Simulation sim = simulate(
            g, plan_with(g, costs, parse_spec("revolve:slots=" + std::to_string(s))).schedule,
            costs);
        EXPECT_EQ(sim.recomputes, revolve::min_advances(32, s) + 2 - 33);
        // At most s+1 layer outputs and the scalar loss.
        EXPECT_LE(sim.activation_peak_bytes(),
                  static_cast<uint64_t>(s + 1) * layer + g.output_of(g.loss_node()).bytes);
        EXPECT_LT(sim.activation_peak_bytes(), none.activation_peak_bytes());
    }
}

TEST(RevolveExecute, PredictedPeakEqualsMeasuredAndGradientsMatchNone) {
    auto backend = make_cpu_backend(1);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"chain:l=9,width=8,batch=2", "revolve:slots=1"},
        {"chain:l=9,width=8,batch=2", "revolve:slots=2"},
        {"chain:l=13,width=8,batch=2", "revolve:slots=3"},
        {"mlp:depth=5,width=8,batch=2", "revolve:slots=2"},
        {"mlp:depth=4,width=8,batch=2,act=tanh", "revolve:slots=1"},
        {"mlp:depth=4,width=8,batch=2,act=gelu", "revolve:slots=3"},
        {"resmlp:depth=4,width=8,batch=2", "revolve:slots=2"},
        {"transformer:layers=2,d_model=8,heads=2,seq=3,batch=1,vocab=5", "revolve:slots=1"},
        {"transformer:layers=3,d_model=8,heads=2,seq=3,batch=1,vocab=5", "revolve:slots=2"},
    };
    for (const auto& [net, spec] : cases) {
        SCOPED_TRACE(net + " " + spec);
        const Graph g = load_network(net);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        const RunData data = RunData::seeded(g);
        const Plan p = plan_with(g, costs, parse_spec(spec));
        ASSERT_NO_THROW(validate(g, p.schedule));
        const Simulation sim = simulate(g, p.schedule, costs);
        const Execution run = execute(g, p.schedule, *backend, data);
        EXPECT_EQ(sim.peak_bytes, run.peak_bytes);
        EXPECT_GT(sim.recomputes, 0);
        const Execution ref =
            execute(g, plan_with(g, costs, parse_spec("none")).schedule, *backend, data);
        ASSERT_EQ(ref.param_grads.size(), run.param_grads.size());
        for (size_t i = 0; i < ref.param_grads.size(); ++i)
            EXPECT_EQ(0, std::memcmp(ref.param_grads[i].data(), run.param_grads[i].data(),
                                     ref.param_grads[i].size() * sizeof(float)))
                << g.param(static_cast<ParamId>(i)).name;
    }
}

TEST(RevolveStages, OtherNetworksAdvanceStagesTheMinimalNumberOfTimes) {
    // On a network cut into k stages, a stage's end is computed once per advance through it, and
    // the last stage's once more in the first turn; turns recompute stage interiors, and ends
    // only when their backward reads their own output, which no end of these presets does.
    for (const std::string net : {"resmlp:depth=5,width=8,batch=2",
                                  "transformer:layers=3,d_model=8,heads=2,seq=3,batch=1,vocab=5"}) {
        const Graph g = load_network(net);
        const auto ends = revolve::stage_ends(g);
        const auto k = static_cast<int64_t>(ends.size());
        ASSERT_GE(k, 3);
        for (int64_t s = 1; s <= 4; ++s) {
            const Plan p =
                plan_with(g, CostModel{}, parse_spec("revolve:slots=" + std::to_string(s)));
            EXPECT_EQ(p.status, PlanStatus::Heuristic);
            ASSERT_NO_THROW(validate(g, p.schedule));
            const LivenessTables t(g);
            long end_computes = 0;
            bool self_reading = false;
            for (NodeId e : ends) self_reading |= t.residual_output[static_cast<size_t>(e)] != 0;
            ASSERT_FALSE(self_reading) << net << ": no stage end here reads its own output";
            for (const Instruction& ins : p.schedule.code)
                if (ins.kind == InstrKind::Compute &&
                    std::binary_search(ends.begin(), ends.end(), ins.target))
                    ++end_computes;
            EXPECT_EQ(end_computes, revolve::min_advances(k, s) + 1) << net << " s=" << s;
        }
    }
}

}  // namespace
}  // namespace rl
