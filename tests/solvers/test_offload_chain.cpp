// Offload beside recompute (solvers/offload_chain.h): the chain program against an exhaustive
// search over every keep / offload / recompute assignment under the same model; its schedules
// against the engine (valid, the simulator's time equal to the model's, its peak within the
// model's, measured == predicted on both pools, gradients bitwise equal to `none`); and the
// validator's copy rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/schedule.h"
#include "engine/simulator.h"
#include "solvers/offload_chain.h"
#include "solvers/offload_pass.h"

namespace rl {
namespace {

using Choices = std::vector<ValueChoice>;

// A random chain of n nodes: sizes, costs and which residuals each backward reads.
OffloadChain random_chain(int32_t n, uint32_t seed, double gbps) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> size(1, 8), coin(0, 1);
    std::uniform_real_distribution<double> ms(0.05, 2.0);
    OffloadChain c;
    c.n = n;
    for (int32_t i = 0; i < n; ++i) {
        const uint64_t b = i == n - 1 ? 4 : 4096u * static_cast<uint64_t>(size(rng));
        c.bytes.push_back(b);
        c.grad_bytes.push_back(i == n - 1 ? 0 : b);
        c.fwd_ms.push_back(ms(rng));
        c.bwd_ms.push_back(2 * ms(rng));
        c.reads_in.push_back(i > 0 && (coin(rng) || i == n - 1) ? 1 : 0);
        c.reads_out.push_back(i < n - 1 ? static_cast<uint8_t>(coin(rng)) : 0);
        c.has_backward.push_back(1);
        c.param_grad_bytes.push_back(1024u * static_cast<uint64_t>(size(rng)));
    }
    c.const_fwd = 10000;
    c.const_bwd = 20000;
    c.link.to_host_gbps = c.link.to_device_gbps = gbps;
    c.link.latency_us = 5;
    return c;
}

// The least time over every assignment whose model peak fits (nullopt: none fits).
std::optional<double> exhaustive(const OffloadChain& c, uint64_t budget, bool allow_offload) {
    const size_t m = static_cast<size_t>(c.n - 1);
    Choices ch(m, ValueChoice::Keep);
    const int base = allow_offload ? 3 : 2;
    size_t total = 1;
    for (size_t k = 0; k < m; ++k) total *= static_cast<size_t>(base);
    std::optional<double> best;
    for (size_t code = 0; code < total; ++code) {
        size_t x = code;
        for (size_t k = 0; k < m; ++k) {
            const int d = static_cast<int>(x % static_cast<size_t>(base));
            x /= static_cast<size_t>(base);
            ch[k] = d == 0   ? ValueChoice::Keep
                    : d == 1 ? ValueChoice::Recompute
                             : ValueChoice::Offload;
        }
        const ChainCost cost = offload_chain_evaluate(c, ch);
        if (cost.peak <= budget && (!best || cost.ms < *best)) best = cost.ms;
    }
    return best;
}

TEST(OffloadChain, ProgramEqualsExhaustiveSearch) {
    int compared = 0, offloading = 0;
    for (int32_t n : {3, 5, 7, 9}) {  // up to 8 values with a choice
        for (uint32_t seed = 1; seed <= 4; ++seed) {
            for (double gbps : {0.001, 0.5, 25.0}) {
                const OffloadChain c = random_chain(n, seed * 31 + static_cast<uint32_t>(n), gbps);
                const uint64_t hi = offload_chain_evaluate(
                                        c, Choices(static_cast<size_t>(n - 1), ValueChoice::Keep))
                                        .peak;
                const uint64_t lo = std::min(c.const_fwd, c.const_bwd);
                for (int k = 0; k <= 8; ++k) {
                    const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(k) / 8;
                    for (bool allow : {true, false}) {
                        const auto want = exhaustive(c, budget, allow);
                        const auto got = solve_offload_chain(c, budget, allow);
                        ASSERT_EQ(want.has_value(), got.has_value())
                            << "n=" << n << " seed=" << seed << " budget=" << budget;
                        if (!want) continue;
                        ++compared;
                        EXPECT_NEAR(got->cost.ms, *want, 1e-9 * std::max(1.0, *want))
                            << "n=" << n << " seed=" << seed << " gbps=" << gbps
                            << " budget=" << budget << " offload=" << allow;
                        EXPECT_LE(got->cost.peak, budget);
                        for (ValueChoice x : got->choices) {
                            if (!allow) {
                                EXPECT_NE(x, ValueChoice::Offload);
                            }
                            offloading += x == ValueChoice::Offload;
                        }
                    }
                }
            }
        }
    }
    EXPECT_GT(compared, 200);
    EXPECT_GT(offloading, 0);  // the search did exercise offloading
}

TEST(OffloadChain, OffloadHelpsWithBandwidthAndVanishesWithout) {
    const OffloadChain slow = random_chain(9, 7, 1e-6);
    OffloadChain fast = slow;
    fast.link.to_host_gbps = fast.link.to_device_gbps = 1e6;
    const uint64_t none_peak = offload_chain_evaluate(slow, Choices(8, ValueChoice::Keep)).peak;
    const uint64_t tight = offload_chain_min_peak(slow, false);
    ASSERT_LT(tight, none_peak);
    const uint64_t budget = tight + (none_peak - tight) / 4;
    const auto recompute_only = solve_offload_chain(slow, budget, false);
    const auto with_slow = solve_offload_chain(slow, budget, true);
    const auto with_fast = solve_offload_chain(fast, budget, true);
    ASSERT_TRUE(recompute_only && with_slow && with_fast);
    // Near-zero bandwidth: offloading never pays, the plan is the recompute-only one.
    EXPECT_DOUBLE_EQ(with_slow->cost.ms, recompute_only->cost.ms);
    for (ValueChoice x : with_slow->choices) EXPECT_NE(x, ValueChoice::Offload);
    // A fast link: strictly less time than recomputing, by offloading.
    EXPECT_LT(with_fast->cost.ms, recompute_only->cost.ms);
    bool offloads = false;
    for (ValueChoice x : with_fast->choices) offloads = offloads || x == ValueChoice::Offload;
    EXPECT_TRUE(offloads);
}

Graph mlp(int depth) {
    return build_preset(parse_spec("mlp:depth=" + std::to_string(depth) + ",width=48,batch=16"));
}

CostModel costs_for(const Graph& g, double gbps) {
    DeviceRates rates;
    rates.gflops = 50;
    rates.gbps = 20;
    CostModel m = CostModel::analytic(g, rates);
    TransferRates link;
    link.to_host_gbps = link.to_device_gbps = gbps;
    m.set_transfer(link);
    return m;
}

// Every assignment of a small mlp: valid schedules whose simulated time equals the model's and
// whose simulated peak is within the model's.
TEST(OffloadChain, SchedulesMatchTheEngine) {
    const Graph g = mlp(3);  // 7 nodes: 6 values with a choice, 729 assignments
    for (double gbps : {0.01, 1.0, 25.0}) {
        const CostModel costs = costs_for(g, gbps);
        const auto c = offload_chain(g, costs);
        ASSERT_TRUE(c.has_value());
        const size_t m = static_cast<size_t>(c->n - 1);
        Choices ch(m);
        size_t total = 1;
        for (size_t k = 0; k < m; ++k) total *= 3;
        for (size_t code = 0; code < total; ++code) {
            size_t x = code;
            for (size_t k = 0; k < m; ++k, x /= 3) ch[k] = static_cast<ValueChoice>(x % 3);
            const Schedule s = offload_chain_schedule(g, *c, ch);
            ASSERT_NO_THROW(validate(g, s)) << to_text(g, s);
            const Simulation sim = simulate(g, s, costs);
            const ChainCost model = offload_chain_evaluate(*c, ch);
            EXPECT_NEAR(sim.total_ms(), model.ms, 1e-9 * std::max(1.0, model.ms)) << to_text(g, s);
            EXPECT_NEAR(sim.stall_ms, model.stall_ms, 1e-9 * std::max(1.0, model.ms));
            EXPECT_LE(sim.peak_bytes, model.peak) << to_text(g, s);
        }
    }
}

std::vector<std::vector<float>> grads_of(const Graph& g, const Schedule& s, Execution* out) {
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    Execution e = execute(g, s, *backend, data);
    std::vector<std::vector<float>> grads = e.param_grads;
    if (out) *out = std::move(e);
    return grads;
}

// The two invariants with offload, executed on the CPU backend: measured == predicted on the
// device and on the host, to the byte, and gradients bitwise equal to `none`.
TEST(OffloadChain, ExecutedInvariants) {
    const Graph g = mlp(4);
    const CostModel costs = costs_for(g, 25.0);
    const auto c = offload_chain(g, costs);
    ASSERT_TRUE(c.has_value());
    const auto reference = grads_of(g, backprop_schedule(g), nullptr);
    const size_t m = static_cast<size_t>(c->n - 1);
    std::vector<Choices> cases = {Choices(m, ValueChoice::Offload)};
    Choices mixed(m);
    for (size_t k = 0; k < m; ++k) mixed[k] = static_cast<ValueChoice>((k * 7 + 1) % 3);
    cases.push_back(mixed);
    const uint64_t none_peak = offload_chain_evaluate(*c, Choices(m, ValueChoice::Keep)).peak;
    const uint64_t lo = offload_chain_min_peak(*c);
    for (int k = 0; k <= 3; ++k)
        if (auto sol =
                solve_offload_chain(*c, lo + (none_peak - lo) * static_cast<uint64_t>(k) / 3))
            cases.push_back(sol->choices);
    int with_host = 0;
    for (const Choices& ch : cases) {
        const Schedule s = offload_chain_schedule(g, *c, ch);
        const Simulation sim = simulate(g, s, costs);
        Execution e;
        const auto grads = grads_of(g, s, &e);
        EXPECT_EQ(e.peak_bytes, sim.peak_bytes);
        EXPECT_EQ(e.host_peak_bytes, sim.host_peak_bytes);
        EXPECT_EQ(e.offloaded_bytes, sim.offloaded_bytes);
        EXPECT_EQ(e.prefetched_bytes, sim.prefetched_bytes);
        EXPECT_EQ(e.offloads, sim.offloads);
        ASSERT_EQ(grads.size(), reference.size());
        for (size_t p = 0; p < grads.size(); ++p)
            EXPECT_EQ(0, std::memcmp(grads[p].data(), reference[p].data(),
                                     grads[p].size() * sizeof(float)))
                << "parameter " << g.param(static_cast<ParamId>(p)).name;
        with_host += sim.host_peak_bytes > 0;
    }
    EXPECT_GE(with_host, 2);
}

// The validator's copy rules, each naming the instruction.
TEST(OffloadSchedule, ValidatorRejectsUnsafeCopies) {
    const Graph g = mlp(2);  // fc0 act0 fc1 act1 loss
    const ValueId act0 = g.node(1).output;
    auto expect_error = [&](const Schedule& s, long at, const std::string& words) {
        try {
            validate(g, s);
            ADD_FAILURE() << "accepted:\n" << to_text(g, s);
        } catch (const ScheduleError& e) {
            EXPECT_EQ(e.index(), at) << e.what();
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
        }
    };
    const Schedule base = backprop_schedule(g);
    // Insert instructions after the first compute of act0 (index 1).
    auto with = [&](std::vector<Instruction> extra, size_t at) {
        Schedule s = base;
        s.code.insert(s.code.begin() + static_cast<long>(at), extra.begin(), extra.end());
        return s;
    };
    // Freeing act0's device buffer while its offload is in flight.
    {
        Schedule s = with({{InstrKind::Offload, act0}, {InstrKind::Free, act0}}, 2);
        expect_error(s, 3, "offload has not completed");
    }
    // Reading act0 (compute fc1) while it is on the host.
    {
        Schedule s = with({{InstrKind::Offload, act0}, {InstrKind::Wait, act0}}, 2);
        expect_error(s, 5, "offloaded to the host");
    }
    // Reading act0 while its prefetch is in flight.
    {
        Schedule s = with(
            {{InstrKind::Offload, act0}, {InstrKind::Wait, act0}, {InstrKind::Prefetch, act0}}, 2);
        expect_error(s, 6, "prefetch has not completed");
    }
    // Prefetching what was never offloaded; waiting with nothing in flight.
    expect_error(with({{InstrKind::Prefetch, act0}}, 2), 2, "never offloaded");
    expect_error(with({{InstrKind::Wait, act0}}, 2), 2, "no copy of it is in flight");
    // Reading act0 before its prefetch completed (fc1 at 6, after the moved free of fc0).
    {
        Schedule s = base;
        s.code.insert(s.code.begin() + 2, {InstrKind::Offload, act0});
        s.code.insert(s.code.begin() + 3, {InstrKind::Wait, act0});
        s.code.insert(s.code.begin() + 4, {InstrKind::Prefetch, act0});
        expect_error(s, 6, "prefetch has not completed");
    }
    // A schedule ending with a copy in flight: act0's last Free replaced by an Offload.
    {
        Schedule s = base;
        bool replaced = false;
        for (size_t i = s.size(); i-- > 0 && !replaced;)
            if (s.code[i].kind == InstrKind::Free && s.code[i].target == act0) {
                s.code[i] = {InstrKind::Offload, act0};
                replaced = true;
            }
        ASSERT_TRUE(replaced);
        expect_error(s, static_cast<long>(s.size()), "in flight; wait for it");
    }
    // And the legal form passes: offload, wait, prefetch, wait, then read.
    {
        Schedule s = with({{InstrKind::Offload, act0},
                           {InstrKind::Wait, act0},
                           {InstrKind::Prefetch, act0},
                           {InstrKind::Wait, act0}},
                          2);
        EXPECT_NO_THROW(validate(g, s)) << to_text(g, s);
    }
}

// The offload pass (solvers/offload_pass.h) on networks that are not chains: every gap of
// `none`'s schedule offloaded at once, executed with both pools as predicted and none's
// gradients; and the greedy pass lowering the peak to a budget.
TEST(OffloadPass, EveryGapOnPresets) {
    for (const char* spec : {"transformer:layers=2,seq=32,batch=2",
                             "resnet:depth=18,width=8,size=16", "mlp:depth=3,width=32,batch=64"}) {
        const Graph g = build_preset(parse_spec(spec));
        const Schedule none = backprop_schedule(g);
        const auto gaps = offload_gaps(g, none);
        ASSERT_FALSE(gaps.empty()) << spec;
        const Schedule s = insert_offloads(g, none, gaps);
        ASSERT_NO_THROW(validate(g, s)) << spec << "\n" << to_text(g, s);
        const CostModel costs = costs_for(g, 25.0);
        const Simulation sim = simulate(g, s, costs);
        const Simulation base = simulate(g, none, costs);
        EXPECT_EQ(sim.offloads, static_cast<long>(gaps.size()));
        EXPECT_LT(sim.peak_bytes, base.peak_bytes) << spec;
        Execution e;
        const auto grads = grads_of(g, s, &e);
        const auto reference = grads_of(g, none, nullptr);
        EXPECT_EQ(e.peak_bytes, sim.peak_bytes) << spec;
        EXPECT_EQ(e.host_peak_bytes, sim.host_peak_bytes) << spec;
        for (size_t p = 0; p < grads.size(); ++p)
            EXPECT_EQ(0, std::memcmp(grads[p].data(), reference[p].data(),
                                     grads[p].size() * sizeof(float)))
                << spec << " " << g.param(static_cast<ParamId>(p)).name;
        // The greedy pass: a budget between the two peaks is met.
        const uint64_t budget = (sim.peak_bytes + base.peak_bytes) / 2;
        const auto r = offload_to_budget(g, none, costs, budget);
        ASSERT_TRUE(r.has_value()) << spec;
        EXPECT_LE(simulate(g, r->schedule, costs).peak_bytes, budget);
        EXPECT_FALSE(r->offloaded.empty());
        EXPECT_LT(r->offloaded.size(), gaps.size() + 1);
    }
}

}  // namespace
}  // namespace rl
