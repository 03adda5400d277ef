// Strategies against each other on the same network and cost model:
//  1. At every budget of a sweep (from `optimal`'s smallest feasible budget to `none`'s peak)
//     and at the peak of every other strategy's point, `optimal`'s predicted recompute cost is
//     at most that of every other strategy whose simulated peak fits the same budget: every
//     point of their own sweeps (sqrt-n segments and budgets, periodic k, revolve slots, every
//     policy, min-cut and dtr budgets) and each budgeted one run at that budget. The DP alone
//     does not achieve this (its class and its memory grid miss schedules the heuristics find);
//     the test prints where, and `optimal`'s portfolio (strategies/optimal.cpp) closes it.
//  2. On chains, the chain DP and the MILP find the same optimal cost wherever the DP's class
//     contains the optimum, and the MILP's cost is that of an exhaustive search over all valid
//     schedules at every budget (where it is below the DP's, the DP's class misses the optimum).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "analysis/sweep.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/exhaustive.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

struct Point {
    std::string spec;
    uint64_t peak = 0;
    double recompute_ms = 0;
};

Simulation sim_of(const Graph& g, const CostModel& costs, const Schedule& s) {
    SimulateOptions o;
    o.record_timeline = false;
    return simulate(g, s, costs, o);
}

std::optional<Point> point_of(const Graph& g, const CostModel& costs, const Spec& spec) {
    const Plan p = plan_with(g, costs, spec);
    if (p.status == PlanStatus::Infeasible) return std::nullopt;
    EXPECT_NO_THROW(validate(g, p.schedule)) << format_spec(spec);
    const Simulation sim = sim_of(g, costs, p.schedule);
    if (p.budget) {
        EXPECT_LE(sim.peak_bytes, *p.budget) << format_spec(spec);
    }
    return Point{format_spec(spec), sim.peak_bytes, sim.recompute_ms};
}

// Every point of every other strategy's sweeps, with a coarser budget grid (6 points) than the
// one `optimal`'s portfolio uses, so that the budgets differ from the portfolio's own.
std::vector<Point> others_points(const Graph& g, const CostModel& costs) {
    SweepOptions so;
    so.budgets = 6;
    std::vector<Spec> specs;
    for (const Strategy* s : strategies()) {
        if (s->name() == "optimal") continue;
        const std::string name(s->name());
        specs.push_back(Spec{name, {}});
        for (const Spec& sp : sweep_specs(g, costs, Spec{name, {}}, so, nullptr))
            specs.push_back(sp);
    }
    // sqrt-n's greedy budget variant, swept over budgets (its plain sweep is its segment range).
    for (const Spec& sp : sweep_specs(g, costs, Spec{"sqrt-n", {{"segments", "0"}}}, so, nullptr))
        specs.push_back(sp);
    std::vector<Point> out;
    for (const Spec& sp : specs)
        if (auto p = point_of(g, costs, sp)) out.push_back(*p);
    return out;
}

Spec at_budget(const std::string& spec, uint64_t budget) {
    Spec s = parse_spec(spec);
    s.args.emplace_back("budget", std::to_string(budget));
    return s;
}

struct Outcome {
    int budgets = 0, dp_beaten = 0;
};

Outcome check_network(const std::string& net) {
    SCOPED_TRACE(net);
    Outcome o;
    const Graph g = load_network(net);
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const std::vector<Point> others = others_points(g, costs);
    const Plan tiny = plan_with(g, costs, at_budget("optimal", 1));
    EXPECT_EQ(tiny.status, PlanStatus::Infeasible);
    if (!tiny.min_feasible_budget) {
        ADD_FAILURE() << "optimal names no smallest feasible budget";
        return o;
    }
    const uint64_t lo = *tiny.min_feasible_budget;
    const uint64_t hi = sim_of(g, costs, plan_with(g, costs, Spec{"none", {}}).schedule).peak_bytes;
    EXPECT_LE(lo, hi);
    // No other strategy reaches below optimal's smallest feasible budget.
    for (const Point& q : others) EXPECT_GE(q.peak, lo) << q.spec;

    std::vector<uint64_t> budgets;
    for (int i = 0; i <= 5; ++i) budgets.push_back(lo + (hi - lo) * static_cast<uint64_t>(i) / 5);
    for (const Point& q : others) budgets.push_back(q.peak);  // the tightest budget for each
    std::sort(budgets.begin(), budgets.end());
    budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());

    for (const uint64_t b : budgets) {
        SCOPED_TRACE("budget " + std::to_string(b));
        const Plan p = plan_with(g, costs, at_budget("optimal", b));
        EXPECT_NE(p.status, PlanStatus::Infeasible) << p.message;
        if (p.status == PlanStatus::Infeasible) continue;
        EXPECT_NO_THROW(validate(g, p.schedule));
        const Simulation s = sim_of(g, costs, p.schedule);
        EXPECT_LE(s.peak_bytes, b);
        // Optimal is claimed only where it is proven: nothing recomputed, or CBC's proof.
        if (p.status == PlanStatus::Optimal) {
            EXPECT_TRUE(s.recomputes == 0 || p.method == "milp") << p.method << ": " << p.message;
        }
        const double eps = 1e-9 * std::max(1.0, s.recompute_ms);
        std::vector<Point> here = others;
        for (const char* spec : {"sqrt-n", "min-cut", "dtr"})
            if (auto q = point_of(g, costs, at_budget(spec, b))) here.push_back(*q);
        for (const Point& q : here) {
            if (q.peak > b) continue;
            EXPECT_LE(s.recompute_ms, q.recompute_ms + eps)
                << "optimal (" << p.method << ") is beaten by " << q.spec << " (peak " << q.peak
                << ")";
        }
        // The finding: the chain DP alone, without the portfolio.
        const Plan dp = plan_with(g, costs, at_budget("optimal:method=dp", b));
        double dp_ms = INFINITY;
        if (dp.status != PlanStatus::Infeasible) dp_ms = sim_of(g, costs, dp.schedule).recompute_ms;
        ++o.budgets;
        o.dp_beaten += std::any_of(here.begin(), here.end(), [&](const Point& q) {
            return q.peak <= b && q.recompute_ms < dp_ms - eps;
        });
    }
    std::printf("%s: %zu other points; the DP alone is beaten at %d of %d budgets\n", net.c_str(),
                others.size(), o.dp_beaten, o.budgets);
    return o;
}

// Small sizes with a batch large enough that activations matter.
TEST(CrossStrategy, OptimalIsNeverBeatenOnChains) {
    for (const char* net : {"mlp:depth=8,width=16,batch=128", "chain:l=10,width=16,batch=128"})
        check_network(net);
}

TEST(CrossStrategy, OptimalIsNeverBeatenOnBlocksAndDags) {
    for (const char* net :
         {"resmlp:depth=2,width=8,batch=64",
          "transformer:layers=1,d_model=16,heads=2,seq=8,batch=4,vocab=8",
          "resnet:depth=18,width=4,size=8,batch=4", "unet:depth=2,channels=4,size=8,batch=4"})
        check_network(net);
}

// --- the chain DP against the MILP ---------------------------------------------------------

Graph hand_chain(const std::string& name, const std::vector<std::pair<OpKind, int64_t>>& layers) {
    Graph g(name, 3);
    ValueId x = g.add_input("x", DType::F32, {24, 3});  // activations outweigh weights
    int i = 0;
    for (const auto& [op, out] : layers) {
        Attrs a;
        if (op == OpKind::Linear) a = Attrs{{"out_features", out}};
        x = g.node(g.add_node("n" + std::to_string(i++), op, std::vector<ValueId>{x}, a)).output;
    }
    g.add_node("loss", OpKind::SumSquares, std::vector<ValueId>{x});
    g.finalize();
    return g;
}

TEST(CrossStrategy, ChainDpAndMilpFindTheSameOptimum) {
    using K = OpKind;
    const std::vector<Graph> chains = {
        hand_chain("linear", {{K::Linear, 6},
                              {K::Linear, 2},
                              {K::Linear, 9},
                              {K::Linear, 4},
                              {K::Linear, 7},
                              {K::Linear, 3}}),
        hand_chain("mixed", {{K::Linear, 8},
                             {K::Relu, 0},
                             {K::Linear, 3},
                             {K::Tanh, 0},
                             {K::Linear, 10},
                             {K::Gelu, 0},
                             {K::Linear, 5},
                             {K::Sigmoid, 0}}),
    };
    int equal = 0, milp_cheaper = 0, total = 0;
    for (const Graph& g : chains) {
        SCOPED_TRACE(g.name());
        ASSERT_LE(g.num_nodes(), 11);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        // Over all valid schedules under the engine's rules (in-place forwards included, which
        // the MILP models and the DP's memory accounting does not).
        const Exhaustive search(g, costs);
        // An exact memory grid for the DP (slots above span/gcd): its class optimum.
        const std::string dp_spec = "optimal:method=dp,slots=1000000";
        const Plan tiny = plan_with(g, costs, at_budget(dp_spec, 1));
        ASSERT_TRUE(tiny.min_feasible_budget);
        const uint64_t lo = *tiny.min_feasible_budget;
        const uint64_t hi =
            sim_of(g, costs, plan_with(g, costs, Spec{"none", {}}).schedule).peak_bytes;
        ASSERT_LT(lo, hi);
        for (int i = 0; i <= 4; ++i) {
            const uint64_t b = lo + (hi - lo) * static_cast<uint64_t>(i) / 4;
            SCOPED_TRACE("budget " + std::to_string(b));
            const Plan dp = plan_with(g, costs, at_budget(dp_spec, b));
            const Plan milp =
                plan_with(g, costs, at_budget("optimal:method=milp,time_limit=600", b));
            ASSERT_NE(dp.status, PlanStatus::Infeasible) << dp.message;
            ASSERT_EQ(milp.status, PlanStatus::Optimal) << milp.message;
            EXPECT_EQ(dp.method, "rotor-dp");
            EXPECT_EQ(milp.method, "milp");
            const Simulation ds = sim_of(g, costs, dp.schedule),
                             ms = sim_of(g, costs, milp.schedule);
            EXPECT_LE(ds.peak_bytes, b);
            EXPECT_LE(ms.peak_bytes, b);
            const Exhaustive::Result all = search.min_cost(b);
            ASSERT_TRUE(all.found);
            // The MILP's proven optimum is the optimum over all valid schedules…
            EXPECT_NEAR(ms.recompute_ms, all.value, 1e-9);
            // …which the DP reaches exactly when its class contains it, and never beats.
            EXPECT_GE(ds.recompute_ms, all.value - 1e-9);
            if (i == 4) {
                EXPECT_EQ(ds.recompute_ms, 0.0) << "at none's peak nothing is recomputed";
            }
            ++total;
            if (std::abs(ds.recompute_ms - ms.recompute_ms) <= 1e-9)
                ++equal;
            else
                ++milp_cheaper;
        }
    }
    std::printf("DP vs MILP on chains: equal at %d of %d budgets, the MILP cheaper at %d\n", equal,
                total, milp_cheaper);
}

}  // namespace
}  // namespace rl
