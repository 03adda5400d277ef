// The methods for the general problem: every schedule valid and within budget under the
// independent simulator; the MILP's optimum equal to an exhaustive search over the same class of
// schedules on tiny graphs; warm starts and limits honoured.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/errors.h"
#include "graphs.h"
#include "solvers/general/checkmate_general.h"
#include "solvers/general/heuristics.h"
#include "solvers/general/solve.h"

namespace rl::general {
namespace {

using testing::random_dag;
using testing::train_chain;

// Every schedule in the MILP's class (each stage: a subset of earlier nodes recomputed in node
// order, then the stage's node), enumerated; frees at the last read; checked by
// simulate_general. optimum(budget) is the cheapest within the budget (+inf when none fits).
class Exhaustive {
  public:
    explicit Exhaustive(const AbstractGraph& g, int max_computations = 0) {
        const int n = g.size();
        std::vector<std::pair<int, int>> slots;  // (stage, node) that may be recomputed
        for (int t = 1; t < n; ++t)
            for (int i = 0; i < t; ++i)
                if (!g.succs[static_cast<size_t>(i)].empty()) slots.emplace_back(t, i);
        EXPECT_LE(slots.size(), 22u) << "graph too large for the exhaustive search";
        for (uint64_t mask = 0; mask < (1ull << slots.size()); ++mask) {
            std::vector<int32_t> computes;
            size_t k = 0;
            for (int t = 0; t < n; ++t) {
                for (; k < slots.size() && slots[k].first == t; ++k)
                    if (mask >> k & 1) computes.push_back(slots[k].second);
                computes.push_back(t);
            }
            try {
                const GeneralSimulation sim =
                    simulate_general(g, schedule_from_computations(g, computes), max_computations);
                points_.emplace_back(sim.peak_bytes, sim.total_duration);
            } catch (const ScheduleError&) {
            }
        }
    }
    double optimum(uint64_t budget) const {
        double best = std::numeric_limits<double>::infinity();
        for (const auto& [peak, total] : points_)
            if (peak <= budget) best = std::min(best, total);
        return best;
    }

  private:
    std::vector<std::pair<uint64_t, double>> points_;
};

double exhaustive_optimum(const AbstractGraph& g, uint64_t budget, int max_computations = 0) {
    return Exhaustive(g, max_computations).optimum(budget);
}

void expect_valid_within_budget(const GeneralProblem& p, const SolveResult& r,
                                const std::string& what) {
    ASSERT_TRUE(r.found) << what << ": " << r.message;
    // Independent re-simulation, not the solver's own figures.
    const GeneralSimulation sim = simulate_general(*p.graph, r.schedule, p.max_computations);
    EXPECT_LE(sim.peak_bytes, p.budget) << what;
    EXPECT_EQ(sim.total_duration, r.sim.total_duration) << what;
    EXPECT_GE(sim.total_duration, p.graph->total_duration()) << what;
    EXPECT_LE(r.lower_bound, sim.total_duration + 1e-9 * sim.total_duration) << what;
}

TEST(GeneralSolvers, EveryMethodReturnsValidSchedulesWithinBudget) {
    int found = 0, tried = 0;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
        for (const AbstractGraph& g : {random_dag(12 + static_cast<int>(seed) * 2, seed),
                                       train_chain(3 + static_cast<int>(seed))}) {
            const uint64_t peak = peak_no_remat(g);
            for (double frac : {0.9, 0.8, 0.7, 0.6}) {
                GeneralProblem p{&g, static_cast<uint64_t>(std::floor(frac * peak)), 0};
                for (const std::string method :
                     {"dtr", "greedy", "split", "chen", "ondemand", "milp"}) {
                    SolveOptions opt;
                    opt.method = method;
                    opt.time_limit_s = 2;
                    const SolveResult r = solve_general(p, opt);
                    ++tried;
                    if (!r.found) {
                        EXPECT_FALSE(r.message.empty()) << g.name << " " << method;
                        continue;
                    }
                    ++found;
                    std::string what = g.name;
                    what.append(" ").append(method).append(" at ").append(std::to_string(frac));
                    expect_valid_within_budget(p, r, what);
                }
            }
        }
    }
    EXPECT_GT(found, tried / 2);  // the methods do find schedules on most of these
}

TEST(GeneralSolvers, MilpOptimumEqualsExhaustiveSearch) {
    int compared = 0, feasible = 0, with_recomputation = 0;
    for (uint32_t seed = 1; seed <= 8; ++seed) {
        const AbstractGraph g = random_dag(6, seed, 3);
        const uint64_t peak = peak_no_remat(g);
        const Exhaustive all(g);
        for (double frac : {1.0, 0.9, 0.8, 0.7, 0.6, 0.5}) {
            const auto budget = static_cast<uint64_t>(std::floor(frac * peak));
            GeneralProblem p{&g, budget, 0};
            MilpOptions mo;
            mo.time_limit_s = 600;  // a guard: a slow machine must still prove the optimum
            const MilpResult r = solve_checkmate_milp(p, mo);
            const double reference = all.optimum(budget);
            ++compared;
            if (std::isinf(reference)) {
                EXPECT_FALSE(r.found) << g.name << " budget " << budget;
                continue;
            }
            ++feasible;
            ASSERT_TRUE(r.found) << g.name << " budget " << budget;
            ASSERT_TRUE(r.proven_optimal) << g.name;
            const GeneralSimulation sim =
                simulate_general(g, schedule_from_computations(g, r.computes));
            EXPECT_LE(sim.peak_bytes, budget);
            EXPECT_DOUBLE_EQ(sim.total_duration, reference) << g.name << " budget " << budget;
            EXPECT_NEAR(g.total_duration() * (1 + r.objective_tdi), reference, 1e-6 * reference);
            if (reference > g.total_duration()) ++with_recomputation;
        }
    }
    // A training chain (explicit backward nodes) small enough to enumerate.
    const AbstractGraph chain = train_chain(3, 10, 2);
    const Exhaustive chain_all(chain);
    for (uint64_t budget = peak_no_remat(chain); budget >= 20; budget -= 4) {
        GeneralProblem p{&chain, budget, 0};
        const MilpResult r = solve_checkmate_milp(p, MilpOptions{});
        const double reference = chain_all.optimum(budget);
        ++compared;
        if (std::isinf(reference)) {
            EXPECT_FALSE(r.found) << "budget " << budget;
            continue;
        }
        ++feasible;
        if (reference > chain.total_duration()) ++with_recomputation;
        ASSERT_TRUE(r.found && r.proven_optimal) << "budget " << budget;
        EXPECT_DOUBLE_EQ(
            simulate_general(chain, schedule_from_computations(chain, r.computes)).total_duration,
            reference)
            << "budget " << budget;
    }
    // The cases cover infeasible budgets, plain orders and optima that recompute.
    EXPECT_GE(compared, 30);
    EXPECT_GE(feasible, 10);
    EXPECT_GE(with_recomputation, 5);
}

TEST(GeneralSolvers, ComputationLimitIsHonoured) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
        const AbstractGraph g = random_dag(6, seed + 20, 3);
        const auto budget = static_cast<uint64_t>(0.7 * static_cast<double>(peak_no_remat(g)));
        GeneralProblem p{&g, budget, 2};
        const MilpResult r = solve_checkmate_milp(p, MilpOptions{});
        const double reference = exhaustive_optimum(g, budget, 2);
        if (std::isinf(reference)) {
            EXPECT_FALSE(r.found);
            continue;
        }
        ASSERT_TRUE(r.found);
        const GeneralSimulation sim =
            simulate_general(g, schedule_from_computations(g, r.computes), 2);
        EXPECT_DOUBLE_EQ(sim.total_duration, reference);
        for (int32_t c : sim.computations_per_node) EXPECT_LE(c, 2);
    }
}

TEST(GeneralSolvers, WarmStartIsAcceptedAndNeverWorsened) {
    const AbstractGraph g = train_chain(8, 10, 2);
    GeneralProblem p{&g, static_cast<uint64_t>(0.6 * static_cast<double>(peak_no_remat(g))), 0};
    const HeuristicResult h = eviction_heuristic(p, EvictionRule::Dtr);
    ASSERT_TRUE(h.found) << h.message;
    const double heuristic_total =
        simulate_general(g, schedule_from_computations(g, h.computes)).total_duration;
    MilpOptions mo;
    mo.warm_start = &h.computes;
    mo.time_limit_s = 600;  // a guard
    const MilpResult r = solve_checkmate_milp(p, mo);
    EXPECT_TRUE(r.warm_started);
    ASSERT_TRUE(r.found);
    const GeneralSimulation sim = simulate_general(g, schedule_from_computations(g, r.computes));
    EXPECT_LE(sim.peak_bytes, p.budget);
    EXPECT_LE(sim.total_duration, heuristic_total);
}

TEST(GeneralSolvers, BudgetBelowAnyScheduleSaysSo) {
    const AbstractGraph g = train_chain(4);
    GeneralProblem p{&g, min_feasible_peak_bound(g) - 1, 0};
    SolveOptions opt;
    opt.time_limit_s = 5;
    const SolveResult r = solve_general(p, opt);
    EXPECT_FALSE(r.found);
    EXPECT_NE(r.message.find("no schedule exists"), std::string::npos) << r.message;
    // Said at once: neither the MILP nor the search is tried on a budget nothing can meet.
    EXPECT_FALSE(r.milp_attempted);
    EXPECT_EQ(r.lns_windows, 0);
    opt.method = "nonsense";
    EXPECT_THROW((void)solve_general(p, opt), Error);
}

TEST(GeneralSolvers, NoBudgetPressureMeansNoRecomputation) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
        const AbstractGraph g = random_dag(25, seed);
        GeneralProblem p{&g, peak_no_remat(g), 0};
        for (const std::string method : {"dtr", "greedy", "split", "milp"}) {
            SolveOptions opt;
            opt.method = method;
            const SolveResult r = solve_general(p, opt);
            ASSERT_TRUE(r.found) << method;
            EXPECT_DOUBLE_EQ(r.sim.total_duration, g.total_duration()) << method;
        }
    }
}

}  // namespace
}  // namespace rl::general
