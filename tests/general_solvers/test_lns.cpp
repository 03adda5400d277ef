// The large-neighbourhood search over the Checkmate MILP (solvers/general/lns_general.h) and the
// pinned recompute-on-demand baseline: every schedule valid and within budget under the
// independent simulator, never worse than the warm start, equal to the whole MILP's optimum
// where CBC proves it, Phase 1 reaching the budget from a schedule over it, and a cancel or a
// time limit stopping it with a valid schedule.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "engine/cancel.h"
#include "graphs.h"
#include "solvers/general/checkmate_general.h"
#include "solvers/general/heuristics.h"
#include "solvers/general/lns_general.h"
#include "solvers/general/solve.h"

namespace rl::general {
namespace {

using testing::random_dag;
using testing::train_chain;

double duration_of(const AbstractGraph& g, const std::vector<int32_t>& computes, int limit = 0) {
    return simulate_general(g, schedule_from_computations(g, computes), limit).total_duration;
}

// A baseline schedule within budget to start from (the first that fits), or empty.
std::vector<int32_t> baseline(const GeneralProblem& p) {
    for (const bool inputs : {false, true}) {
        const HeuristicResult h = greedy_interval_split(p, inputs);
        if (h.found) return h.computes;
    }
    for (const EvictionRule rule : {EvictionRule::Dtr, EvictionRule::FarthestNextUse}) {
        const HeuristicResult h = eviction_heuristic(p, rule);
        if (h.found) return h.computes;
    }
    const HeuristicResult h = chen_sqrt_n(p);
    if (h.found) return h.computes;
    return {};
}

// A budget `frac` of the way from the largest node with its inputs (below which nothing fits) to
// the peak without recomputation.
uint64_t budget_between(const AbstractGraph& g, double frac) {
    const auto lo = static_cast<double>(min_feasible_peak_bound(g));
    const auto hi = static_cast<double>(peak_no_remat(g));
    return static_cast<uint64_t>(lo + frac * (hi - lo));
}

// A search whose path depends on no clock: windows stop at a CBC node limit and grow whenever
// CBC proves them, so a loaded CI machine ends where an idle one does. The wall-clock limits
// are guards only (far above what these graphs take).
LnsOptions reproducible(int initial_window) {
    LnsOptions opt;
    opt.time_limit_s = 600;
    opt.window_time_limit_s = 120;
    opt.window_node_limit = 5000;
    opt.max_windows = 400;
    opt.initial_window = initial_window;
    return opt;
}

std::vector<int32_t> identity_order(const AbstractGraph& g) {
    std::vector<int32_t> order(static_cast<size_t>(g.size()));
    for (int32_t v = 0; v < g.size(); ++v) order[static_cast<size_t>(v)] = v;
    return order;
}

// The stage matrices of an in-class schedule satisfy the MILP's rows: a node computed in stage t
// has each input computed earlier in the stage or live entering it, and an output live entering
// stage t + 1 was live entering t or computed in t. (live_at_stage_starts once dropped an output
// freed after a recomputation of the next stage, so incumbents broke the first row.)
TEST(GeneralLns, StageMatricesSatisfyTheMilpRows) {
    int checked = 0;
    for (uint32_t seed = 1; seed <= 6; ++seed) {
        const AbstractGraph g = random_dag(30, seed, 6);
        for (double frac : {0.9, 0.75, 0.6, 0.45, 0.3}) {
            GeneralProblem p{&g, budget_between(g, frac), 0};
            const std::vector<int32_t> start = baseline(p);
            if (start.empty()) continue;
            const std::vector<int32_t> order = canonical_stage_order(g, start);
            const StageMatrices m = stage_matrices(g, order);
            const auto n = static_cast<size_t>(g.size());
            for (size_t t = 0; t < n; ++t) {
                for (size_t k = 0; k <= t; ++k) {
                    if (!(k == t || m.r[t][k])) continue;
                    for (int32_t i : g.preds[k])
                        EXPECT_TRUE(m.r[t][static_cast<size_t>(i)] ||
                                    m.s[t][static_cast<size_t>(i)])
                            << g.name << " stage " << t << " computes " << k << " without input "
                            << i;
                }
                if (t + 1 < n)
                    for (size_t i = 0; i <= t; ++i)
                        if (m.s[t + 1][i]) {
                            EXPECT_TRUE(i == t || m.s[t][i] || m.r[t][i]);
                        }
            }
            ++checked;
        }
    }
    EXPECT_GT(checked, 6);
}

TEST(GeneralLns, SchedulesFitAndAreNeverWorseThanTheWarmStart) {
    int improved = 0, runs = 0;
    for (uint32_t seed = 1; seed <= 5; ++seed) {
        const AbstractGraph g = random_dag(40, seed, 6);
        for (double frac : {0.9, 0.7, 0.5}) {
            GeneralProblem p{&g, budget_between(g, frac), 0};
            const std::vector<int32_t> start = baseline(p);
            if (start.empty()) continue;
            const double start_total = duration_of(g, start);
            LnsOptions opt = reproducible(6);
            opt.max_windows = 12;
            opt.seed = seed;
            const LnsResult r = lns_improve(p, start, opt);
            ASSERT_TRUE(r.found) << g.name << " at " << frac << ": " << r.message;
            const GeneralSimulation sim =
                simulate_general(g, schedule_from_computations(g, r.computes));
            EXPECT_LE(sim.peak_bytes, p.budget) << g.name;
            EXPECT_DOUBLE_EQ(sim.total_duration, r.total_duration) << g.name;
            EXPECT_LE(sim.total_duration, start_total) << g.name << " at " << frac;
            EXPECT_GE(sim.total_duration, g.total_duration());
            if (sim.total_duration < start_total) ++improved;
            ++runs;
        }
    }
    EXPECT_GE(runs, 4);
    EXPECT_GT(improved, 0);  // the search does improve on the baselines somewhere
}

// On graphs the whole MILP proves, the search (its window grows to every stage) ends at the
// same optimum; it never goes below it, as its schedules are in the MILP's class.
TEST(GeneralLns, AgreesWithTheMilpWhereTheMilpProvesTheOptimum) {
    int compared = 0, with_recomputation = 0;
    for (uint32_t seed = 1; seed <= 6; ++seed) {
        const AbstractGraph g = random_dag(14, seed, 4);
        for (double frac : {0.6, 0.3}) {
            GeneralProblem p{&g, budget_between(g, frac), 0};
            MilpOptions mo;
            mo.time_limit_s = 120;  // a guard: CBC proves these in well under a second
            const MilpResult exact = solve_checkmate_milp(p, mo);
            if (!exact.found || !exact.proven_optimal) continue;
            const double optimum = duration_of(g, exact.computes);
            const std::vector<int32_t> start = baseline(p);
            if (start.empty()) continue;
            const LnsResult r = lns_improve(p, start, reproducible(3));
            ASSERT_TRUE(r.found) << r.message;
            EXPECT_NEAR(r.total_duration, optimum, 1e-9 * optimum) << g.name << " at " << frac;
            ++compared;
            if (optimum > g.total_duration()) ++with_recomputation;
        }
    }
    EXPECT_GE(compared, 6);
    EXPECT_GE(with_recomputation, 3);  // not only the trivial optimum
}

// Phase 1: from the order without recomputation, over the budget, to a schedule within it
// wherever the whole MILP shows one exists.
TEST(GeneralLns, Phase1ReachesTheBudgetFromAScheduleOverIt) {
    int reached = 0;
    for (uint32_t seed = 1; seed <= 6; ++seed) {
        const AbstractGraph g = random_dag(18, seed, 5);
        GeneralProblem p{&g, budget_between(g, 0.3), 0};
        const std::vector<int32_t> start = identity_order(g);
        if (stage_excess(g, schedule_from_computations(g, start), p.budget) == 0) continue;
        // Where the whole MILP finds a schedule (its memory model is the search's).
        MilpOptions mo;
        mo.time_limit_s = 120;  // a guard, as above
        if (!solve_checkmate_milp(p, mo).found) continue;
        // It ends as soon as a window over every stage is proven.
        const LnsResult r = lns_improve(p, start, reproducible(4));
        ASSERT_TRUE(r.found) << g.name << ": " << r.message;
        const GeneralSimulation sim =
            simulate_general(g, schedule_from_computations(g, r.computes));
        EXPECT_LE(sim.peak_bytes, p.budget);
        ++reached;
    }
    EXPECT_GE(reached, 3);
}

TEST(GeneralLns, CancelAndTimeLimitStopItWithAValidSchedule) {
    const AbstractGraph g = train_chain(60);
    GeneralProblem p{&g, 0, 0};
    std::vector<int32_t> start;
    // The tightest budget a baseline meets, with recomputation: the search has work to do.
    for (double frac = 0.1; frac <= 1 && start.empty(); frac += 0.05) {
        p.budget = budget_between(g, frac);
        start = baseline(p);
    }
    ASSERT_FALSE(start.empty());
    ASSERT_GT(duration_of(g, start), g.total_duration());
    // Raised before it starts: the (canonical) start comes back at once.
    std::atomic<bool> stop{true};
    LnsOptions opt;
    opt.time_limit_s = 60;
    opt.cancel = &stop;
    LnsResult r = lns_improve(p, start, opt);
    EXPECT_TRUE(r.interrupted);
    EXPECT_EQ(r.windows, 0);
    ASSERT_TRUE(r.found);
    EXPECT_LE(simulate_general(g, schedule_from_computations(g, r.computes)).peak_bytes, p.budget);
    // The engine's cancel scope (the GUI's and the CLI's mechanism) stops it too.
    {
        std::atomic<bool> scope_flag{true};
        CancelScope scope(&scope_flag);
        opt.cancel = nullptr;
        r = lns_improve(p, start, opt);
        EXPECT_TRUE(r.interrupted);
        EXPECT_EQ(r.windows, 0);
    }
    // Raised from another thread while it runs, through solve_general.
    stop = false;
    SolveOptions so;
    so.method = "lns";
    so.time_limit_s = 120;
    so.cancel = &stop;
    const auto t0 = std::chrono::steady_clock::now();
    std::thread raiser([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        stop = true;
    });
    const SolveResult sr = solve_general(p, so);
    raiser.join();
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(took, 30);  // one window's limit past the cancel, not the 120 s
    EXPECT_TRUE(sr.interrupted);
    ASSERT_TRUE(sr.found) << sr.message;
    EXPECT_LE(simulate_general(g, sr.schedule).peak_bytes, p.budget);
    // A time limit: stops near it with a valid schedule.
    so.cancel = nullptr;
    so.time_limit_s = 1.5;
    const auto t1 = std::chrono::steady_clock::now();
    const SolveResult tr = solve_general(p, so);
    const double took_t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    EXPECT_LT(took_t, 15);
    ASSERT_TRUE(tr.found);
    EXPECT_LE(simulate_general(g, tr.schedule).peak_bytes, p.budget);
    EXPECT_FALSE(tr.interrupted);
}

// The new methods through solve_general on a training graph and a random one: valid, within
// budget, and lns/auto never worse than the best baseline.
TEST(GeneralLns, OnDemandAndLnsThroughSolveGeneral) {
    for (const AbstractGraph& g : {train_chain(10), random_dag(50, 3, 6)}) {
        for (double frac : {0.6, 0.3}) {
            GeneralProblem p{&g, budget_between(g, frac), 0};
            double best_baseline = std::numeric_limits<double>::infinity();
            for (const std::string method : {"dtr", "greedy", "split", "chen", "ondemand"}) {
                SolveOptions so;
                so.method = method;
                const SolveResult r = solve_general(p, so);
                if (!r.found) continue;
                EXPECT_LE(simulate_general(g, r.schedule).peak_bytes, p.budget) << method;
                best_baseline = std::min(best_baseline, r.sim.total_duration);
            }
            for (const std::string method : {"lns", "auto"}) {
                SolveOptions so;
                so.method = method;
                so.time_limit_s = 2;
                const SolveResult r = solve_general(p, so);
                if (!std::isfinite(best_baseline) && !r.found) continue;
                ASSERT_TRUE(r.found) << g.name << " " << method << ": " << r.message;
                const GeneralSimulation sim = simulate_general(g, r.schedule);
                EXPECT_LE(sim.peak_bytes, p.budget) << method;
                EXPECT_LE(sim.total_duration, best_baseline) << g.name << " " << method;
                EXPECT_LE(r.lower_bound, sim.total_duration * (1 + 1e-9));
            }
        }
    }
}

}  // namespace
}  // namespace rl::general
