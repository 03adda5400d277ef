// `optimal:budget=BYTES[,method=auto|dp|rockmate|milp][,slots=N][,time_limit=S]` — the least
// recompute under a byte budget (a bound on simulate()'s peak_bytes).
//
// On a plan-only network (an abstract benchmark graph) it solves the general problem instead
// (strategies/abstract_plan.h): method auto or milp, or one of the general solvers' own (lns,
// greedy, split, chen, ondemand, dtr), which only such graphs take.
//
// Methods:
//  - dp ("rotor-dp"): Beaumont et al.'s dynamic program over the chain of blocks cut at the
//    segment boundaries (solvers/rotor.h, which states the class of schedules it searches and
//    the effect of the `slots` discretisation). Within that class it is exact on a fine enough
//    grid; it is not a proof of optimality over all schedules (a search over all of them can
//    find cheaper ones: tests/strategies/test_optimal_dp.cpp), so the plan is `Feasible` —
//    `Optimal` only when it recomputes nothing, which no schedule can beat.
//  - rockmate: the same chain DP over a menu of schedules per block (Zhao et al. 2023,
//    solvers/rockmate.h): each block may keep part of its tape and recompute the rest before its
//    backwards; blocks equal up to names share one menu search. Its class contains the DP's, so
//    on the same grid it is never worse; Plan::lower_bound_ms is the class's bound on the grid
//    (rockmate.h states exactly what it bounds).
//  - milp: Checkmate's MILP (solvers/checkmate.h, Jain et al. 2020) with `time_limit`
//    seconds: `Optimal` when CBC proves it, `Feasible` with its lower bound and gap otherwise.
//  - auto: the DP; then, where some block of the chain has more than one node (so Rockmate's
//    menus can differ from Rotor's all-or-nothing) and the chain has at most 400 blocks, rockmate,
//    kept when it is cheaper (or fits where the DP does not); then, with portfolio=1 (the default)
//    on networks of up to 1,000 nodes, the schedules of the other strategies: every point of the
//    parameter ranges of sqrt-n, periodic, revolve and policy, and sqrt-n, min-cut and dtr both at
//    this budget and at every point of their default budget sweeps (SweepOptions{}: 12 budgets from
//    their smallest feasible to none's peak), and dtr at thresholds above this budget whose peak
//    still fits it (a bisection: DTR's peak sits below its threshold); then, where the DP's class
//    is coarse — some block of the chain has more than one node, so the DP cannot choose inside it
//    — and the network is small (≤ 24 nodes, where the MILP is quick), the MILP, warm-started from
//    the best schedule so far. The cheapest plan whose simulated peak fits wins (ties keep the
//    earlier one).
// Why a portfolio: the DP is exact only within its class on its memory grid, and the MILP is too
// slow beyond small graphs; the heuristics find schedules outside the DP's class (a stage
// recomputed in part, a value dropped and recomputed later) and points that sit exactly at a
// budget the DP's rounding misses. tests/strategies/test_cross_strategy.cpp shows where: on
// every preset tried, some heuristic beats the DP alone at some budget. With the portfolio,
// `optimal` is never worse than any other strategy at the same budget or than any point of their
// default sweeps — by construction, not by proof: Plan::status is Optimal only for a plan that
// recomputes nothing or a MILP plan CBC proved optimal (over the MILP's class, checkmate.h);
// otherwise Feasible.
// The method used is Plan::method ("rotor-dp" / "milp" / "portfolio"), and is named in
// Plan::message too; a portfolio plan names the strategy spec whose schedule it is.
//
// Every DP plan is checked with simulate(). The DP's memory model follows engine/liveness.h
// exactly for its class and rounds up, so the simulated peak is within the budget; should it
// ever not be (a model error), the DP is re-run with the available memory lowered by the excess
// (rounded up to whole units) until the plan fits, and the message says how many retries it took.
//
// Without a budget the plan is for the midpoint between the smallest feasible budget and `none`'s
// peak. An unreachable budget gives an Infeasible plan naming the smallest feasible budget: the
// smallest the DP can meet (const + min_units · unit: the first budget at which the DP's table is
// finite) or, with the portfolio, the smallest peak any of its fixed candidates reaches or any of
// sqrt-n, min-cut and dtr reports as its own smallest feasible budget, whichever is lower.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>

#include "engine/cancel.h"
#include "engine/errors.h"
#include "engine/liveness.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "solvers/offload_chain.h"
#include "solvers/offload_pass.h"
#include "solvers/rockmate.h"
#include "solvers/rotor.h"
#include "strategies/abstract_plan.h"
#include "strategies/builtin.h"
#include "strategies/sweep_specs.h"

#if __has_include("solvers/checkmate.h")
#include "solvers/checkmate.h"
#define REMATLAB_HAVE_CHECKMATE 1
#endif

namespace rl {

namespace {

constexpr int kAutoMilpMaxNodes = 24;
// Rockmate's DP table is the chain DP's size again (S²/2 · slots floats: 1 GB at 1,000 stages):
// auto runs it up to 400 stages (a 96-layer GPT has 195), method=rockmate at any size.
constexpr int kAutoRockmateMaxStages = 400;
constexpr int kPortfolioMaxNodes = 1000;

// A schedule of another strategy, simulated.
struct Candidate {
    Spec spec;
    Plan plan;
    uint64_t peak = 0;
    double recompute_ms = 0;
};

// The portfolio's candidates that do not depend on the budget, and the budgeted strategies to
// run at the budget itself.
struct Portfolio {
    std::vector<Candidate> fixed;
    std::vector<Spec> budgeted;  // base specs: with_budget() gives the spec at a budget
    uint64_t min_budget = UINT64_MAX;

    void add(const Graph& g, const CostModel& costs, const Spec& spec) {
        throw_if_cancelled();  // Ctrl-C between candidates: hundreds on a large network
        Candidate c;
        c.spec = spec;
        try {
            c.plan = plan_with(g, costs, spec);
        } catch (const Error&) {  // a strategy that refuses this network is no candidate
            return;
        }
        if (c.plan.status == PlanStatus::Infeasible) return;
        SimulateOptions opt;
        opt.record_timeline = false;
        const Simulation sim = simulate(g, c.plan.schedule, costs, opt);
        c.peak = sim.peak_bytes;
        c.recompute_ms = sim.recompute_ms;
        fixed.push_back(std::move(c));
    }

    Portfolio(const Graph& g, const CostModel& costs) {
        for (const Strategy* s : strategies()) {
            if (s->name() == "optimal" || s->name() == "none") continue;
            const std::string name(s->name());
            add(g, costs, Spec{name, {}});
            const std::vector<Spec> range = s->sweep_range(g);
            for (const Spec& spec : range) add(g, costs, spec);
            if (!is_budgeted(*s)) continue;
            // Its default budget sweep. A strategy with its own range sweeps that when given no
            // argument, so the base names one of its other parameters at its default.
            Spec base{name, {}};
            if (!range.empty())
                for (const ParamSpec& p : s->schema())
                    if (p.key != "budget" && !p.default_value.empty()) {
                        base.args.emplace_back(p.key, p.default_value);
                        break;
                    }
            budgeted.push_back(base);
            std::vector<std::optional<uint64_t>> budgets;
            std::vector<Spec> specs;
            try {
                specs = sweep_specs(g, costs, base, SweepOptions{}, &budgets);
            } catch (const Error&) {  // no smallest feasible budget reported: no sweep
                continue;
            }
            for (const Spec& spec : specs) add(g, costs, spec);
            if (!budgets.empty() && budgets.front())
                min_budget = std::min(min_budget, *budgets.front());
        }
        for (const Candidate& c : fixed) min_budget = std::min(min_budget, c.peak);
    }
};

std::string ms_text(double ms) {
    std::ostringstream o;
    o.precision(3);
    o << std::fixed << ms << " ms";
    return o.str();
}

std::string bytes_text(uint64_t b) {
    return format_bytes(b) + " (" + std::to_string(b) + " bytes)";
}

class OptimalStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "optimal"; }
    std::string_view about() const override {
        return "least recompute under a byte budget: Rotor's chain DP (Beaumont et al. 2019) "
               "over the network's blocks, with Rockmate's menus of block schedules (Zhao et "
               "al. 2023), or Checkmate's MILP (Jain et al. 2020)";
    }
    ParamSchema schema() const override {
        return {
            {"budget",
             ParamType::Bytes,
             "",
             "peak-memory budget in bytes (e.g. 64MiB); default: midway between the smallest "
             "feasible budget and none's peak (on an abstract benchmark graph: 0.9 x the peak "
             "without recomputation)",
             {},
             1},
            {"method",
             ParamType::Choice,
             "auto",
             "auto: the chain DP, then Rockmate's menus where blocks have inner structure, plus "
             "the MILP on small such networks; dp: Rotor's DP; rockmate: the chain DP over "
             "menus of block schedules (Zhao et al. 2023); milp: Checkmate's MILP. On an "
             "abstract benchmark graph (plan-only) the general problem's solvers "
             "(solvers/general/solve.h): auto, milp, and for such graphs only lns, greedy, "
             "split, chen, ondemand, dtr",
             {"auto", "dp", "rockmate", "milp", "lns", "greedy", "split", "chen", "ondemand",
              "dtr"}},
            {"slots",
             ParamType::Int,
             "500",
             "memory units of the DP's grid between 0 and none's peak (finer: closer to the "
             "class optimum, slower)",
             {},
             1,
             1000000},
            {"time_limit", ParamType::Float, "10", "MILP time limit in seconds", {}},
            {"offload",
             ParamType::Int,
             "0",
             "1: host memory as a third choice beside keep and recompute: on a chain network "
             "(mlp, chain) the exact keep/offload/recompute DP (solvers/offload_chain.h, after "
             "POFO, Beaumont et al. 2021); on other networks the MILP with offload "
             "(solvers/checkmate.h) where the MILP runs (up to 24 nodes, or method=milp), and "
             "the greedy offload pass over plans that keep more (solvers/offload_pass.h); "
             "priced with the cost model's host link (--link-gbps), the plan of least "
             "recompute + stall time wins",
             {},
             0,
             1},
            {"portfolio",
             ParamType::Int,
             "1",
             "method=auto, networks up to 1000 nodes: 1 also tries the other strategies' "
             "schedules (their parameter ranges, their budget sweeps, and at this budget) and "
             "keeps the cheapest that fits",
             {},
             0,
             1},
        };
    }

    bool plans_abstract() const override { return true; }

    Plan plan(const Graph& g, const CostModel& costs, const ParamValues& params) const override {
        const std::string asked = params.get_string("method");
        if (g.plan_only()) {
            if (asked == "dp" || asked == "rockmate")
                throw NotApplicable("optimal:method=" + asked +
                                    " plans a chain of blocks with "
                                    "Backward instructions; network '" +
                                    g.name() +
                                    "' is an abstract benchmark graph: use method=auto, milp, "
                                    "lns, greedy, split, chen, ondemand or dtr");
            return plan_abstract(g,
                                 params.has("budget")
                                     ? std::optional<uint64_t>(params.get_bytes("budget"))
                                     : std::nullopt,
                                 asked, params.get_float("time_limit"));
        }
        if (is_general_only_method(asked))
            throw Error("optimal:method=" + asked +
                        " solves the general problem of abstract benchmark graphs only; on "
                        "this network use method=auto, dp, rockmate or milp");
        std::vector<NodeId> first;
        const RotorChain chain = rotor_chain(g, costs, &first);
        const uint64_t unit = rotor_unit(chain, static_cast<int32_t>(params.get_int("slots")));
        const RotorSolver dp(chain, unit, rotor_max_units(chain, unit));
        const uint64_t none_peak = chain.constant + chain.span;
        const uint64_t dp_min_budget = dp.min_budget();
        const std::string method = params.get_string("method");
        const bool use_portfolio = method == "auto" && params.get_int("portfolio") != 0 &&
                                   g.num_nodes() <= kPortfolioMaxNodes;
        std::optional<Portfolio> portfolio;
        uint64_t min_budget = dp_min_budget;
        if (use_portfolio) {
            portfolio.emplace(g, costs);
            min_budget = std::min(min_budget, portfolio->min_budget);
        }
        const uint64_t budget = params.has("budget") ? params.get_bytes("budget")
                                                     : min_budget + (none_peak - min_budget) / 2;

        bool multi_node_block = false;
        for (size_t k = 0; k < first.size(); ++k) {
            const NodeId end = k + 1 < first.size() ? first[k + 1] : g.num_nodes();
            multi_node_block = multi_node_block || end - first[k] > 1;
        }
        const bool use_milp =
            method == "milp" || (method == "auto" && multi_node_block &&
                                 g.num_nodes() <= kAutoMilpMaxNodes && have_milp());

        Plan best;
        if (method == "dp" || method == "auto") {
            best = plan_dp(g, costs, chain, first, dp, budget, dp_min_budget);
            best.method = "rotor-dp";
        }
        // Rockmate's class contains Rotor's: where no block has inner structure its menus are
        // empty and it can only repeat the DP, so auto runs it only where some block has.
        if (method == "rockmate" ||
            (method == "auto" && multi_node_block &&
             static_cast<int>(chain.stages.size()) <= kAutoRockmateMaxStages)) {
            throw_if_cancelled();
            RockmateOptions ro;
            ro.slots = static_cast<int32_t>(params.get_int("slots"));
            adopt(g, costs, rockmate_plan(g, costs, budget, ro), method == "rockmate", "rockmate",
                  best);
        }
        if (portfolio)
            take_best_candidate(g, costs, *portfolio, budget, none_peak, min_budget, best);
        if (use_milp) {
            // Warm-started from the best plan so far, so CBC starts with an incumbent.
            throw_if_cancelled();
            Plan milp =
                plan_milp(g, costs, budget, params.get_float("time_limit"),
                          best.status == PlanStatus::Infeasible || best.schedule.code.empty()
                              ? nullptr
                              : &best.schedule);
            adopt(g, costs, std::move(milp), method == "milp", "the MILP", best);
        }
        if (params.get_int("offload") != 0) {
            throw_if_cancelled();
            // Where the chain DP with offload does not apply: plans that keep more, with their
            // kept values offloaded down to the budget (solvers/offload_pass.h). Made only then.
            auto keep_more = [&] {
                std::vector<Schedule> out{backprop_schedule(g)};
                if (budget < none_peak)
                    for (int k = 1; k <= 3; ++k) {
                        const uint64_t b =
                            budget + (none_peak - budget) * static_cast<uint64_t>(k) / 4;
                        Plan p = plan_dp(g, costs, chain, first, dp, b, dp_min_budget);
                        if (p.status != PlanStatus::Infeasible)
                            out.push_back(std::move(p.schedule));
                    }
                return out;
            };
            plan_offload(g, costs, budget, keep_more,
                         have_milp() && (method == "milp" || g.num_nodes() <= kAutoMilpMaxNodes),
                         params.get_float("time_limit"), best);
        }
        best.budget = budget;
        return best;
    }

  private:
    // `candidate` becomes the plan when its method was asked for (`forced`) or when it is better;
    // otherwise, while nothing fits, `best` keeps the smaller feasible budget it names.
    static void adopt(const Graph& g, const CostModel& costs, Plan candidate, bool forced,
                      const char* who, Plan& best) {
        if (forced || better(g, costs, candidate, best)) {
            best = std::move(candidate);
        } else if (best.status == PlanStatus::Infeasible && candidate.min_feasible_budget &&
                   best.min_feasible_budget &&
                   *candidate.min_feasible_budget < *best.min_feasible_budget) {
            best.min_feasible_budget = candidate.min_feasible_budget;
            best.message += std::string("; ") + who + " names a smaller one: " + candidate.message;
        }
    }

    // DTR evicts when memory would pass its threshold, and its peak can sit well below it; nor is
    // its recompute monotone in the threshold: a higher threshold can give a schedule that fits a
    // lower budget with less recompute (found by tests/strategies/test_cross_strategy.cpp on a
    // U-Net: dtr at 171,600 bytes peaked at 167,856 with less recompute than dtr at 167,856).
    // So, besides its run at the budget, the portfolio bisects the thresholds between the budget
    // and none's peak for the highest one whose simulated peak still fits, keeping every run that
    // fits as a candidate (8 halvings).
    static void add_dtr_above(const Graph& g, const CostModel& costs, Portfolio& pf,
                              const Spec& base, uint64_t budget, uint64_t none_peak) {
        uint64_t lo = budget, hi = none_peak;  // peak(lo) fits (or dtr failed there), hi: unknown
        for (int i = 0; i < 8 && hi > lo + 1; ++i) {
            const uint64_t mid = lo + (hi - lo) / 2;
            const size_t before = pf.fixed.size();
            pf.add(g, costs, with_budget(base, mid));
            const bool fits = pf.fixed.size() > before && pf.fixed.back().peak <= budget;
            if (pf.fixed.size() > before && !fits) pf.fixed.pop_back();  // over the budget: useless
            (fits ? lo : hi) = mid;
        }
    }

    // Replaces `best` by the cheapest candidate of the portfolio that fits `budget`, if cheaper.
    static void take_best_candidate(const Graph& g, const CostModel& costs, Portfolio& pf,
                                    uint64_t budget, uint64_t none_peak, uint64_t min_budget,
                                    Plan& best) {
        for (const Spec& base : pf.budgeted) {
            pf.add(g, costs, with_budget(base, budget));
            if (base.name == "dtr") add_dtr_above(g, costs, pf, base, budget, none_peak);
        }
        SimulateOptions opt;
        opt.record_timeline = false;
        double best_ms = std::numeric_limits<double>::infinity();
        if (best.status != PlanStatus::Infeasible)
            best_ms = simulate(g, best.schedule, costs, opt).recompute_ms;
        const Candidate* winner = nullptr;
        for (const Candidate& c : pf.fixed)
            if (c.peak <= budget &&
                c.recompute_ms < (winner ? winner->recompute_ms : best_ms) -
                                     1e-9 * std::max(1.0, best_ms == INFINITY ? 1.0 : best_ms))
                winner = &c;
        if (!winner) {
            if (best.status == PlanStatus::Infeasible) {
                best.min_feasible_budget = min_budget;
                best.message = "The budget of " + bytes_text(budget) +
                               " cannot be met: the smallest feasible budget found (by the chain "
                               "DP, the MILP where it ran, and the other strategies' schedules) "
                               "is " +
                               bytes_text(min_budget) + "; raise the budget to at least that";
            }
            return;
        }
        std::ostringstream m;
        m << "method: portfolio. The schedule of `" << format_spec(winner->spec)
          << "` fits the budget with less recompute (" << winner->recompute_ms
          << " ms, predicted peak " << winner->peak << " bytes) than ";
        if (best.status == PlanStatus::Infeasible)
            m << "the chain DP or MILP could find (none within the budget)";
        else
            m << (best.method.empty() ? "the solver" : best.method) << "'s plan (" << best_ms
              << " ms)";
        m << ". Not proven optimal. [" << best.method << ": " << best.message << "]";
        Plan p = winner->plan;
        p.method = "portfolio";
        p.status = winner->recompute_ms == 0 ? PlanStatus::Optimal : PlanStatus::Feasible;
        p.min_feasible_budget.reset();
        // A solver's bound holds over its own class (rockmate's, the MILP's); the winner lies
        // outside it, so it bounds nothing here (the message below still quotes it).
        p.lower_bound_ms.reset();
        p.bound_class.clear();
        p.gap.reset();
        p.message = m.str();
        best = std::move(p);
    }

    static bool have_milp() {
#ifdef REMATLAB_HAVE_CHECKMATE
        return true;
#else
        return false;
#endif
    }

    // Whether `a` is a better answer than `b`: feasible where b is not, or less recompute.
    // Compared by what a plan adds to the step: recomputation, and the compute stream's waits
    // for copies (0 without offload).
    static bool better(const Graph& g, const CostModel& costs, const Plan& a, const Plan& b) {
        if (a.status == PlanStatus::Infeasible) return false;
        if (b.status == PlanStatus::Infeasible) return true;
        SimulateOptions opt;
        opt.record_timeline = false;
        const Simulation sa = simulate(g, a.schedule, costs, opt);
        const Simulation sb = simulate(g, b.schedule, costs, opt);
        const double ca = sa.recompute_ms + sa.stall_ms, cb = sb.recompute_ms + sb.stall_ms;
        return ca < cb - 1e-9 * std::max(1.0, cb);
    }

    // offload=1: the chain DP with offload (solvers/offload_chain.h) beside the plan so far.
    static void plan_offload(const Graph& g, const CostModel& costs, uint64_t budget,
                             const std::function<std::vector<Schedule>()>& keep_more,
                             bool with_milp, double time_limit, Plan& best) {
        std::string why;
        const auto chain = offload_chain(g, costs, &why);
        auto note = [&](const std::string& s) {
            best.message += (best.message.empty() ? "" : "; ") + s;
        };
        if (!chain) {
            if (with_milp) plan_offload_milp(g, costs, budget, time_limit, best);
            plan_offload_pass(g, costs, budget, keep_more(), why, best);
            return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        const auto sol = solve_offload_chain(*chain, budget);
        if (!sol) {
            note("offload=1: no keep/offload/recompute assignment of the chain fits " +
                 bytes_text(budget));
            return;
        }
        Plan p;
        p.schedule = offload_chain_schedule(g, *chain, sol->choices);
        p.status = PlanStatus::Feasible;
        p.budget = budget;
        p.method = "offload-dp";
        int kept = 0, offloaded = 0, recomputed = 0;
        for (size_t i = 0; i < sol->choices.size(); ++i) {
            const ValueChoice c = sol->choices[i];
            kept += c == ValueChoice::Keep;
            offloaded += c == ValueChoice::Offload;
            recomputed += c == ValueChoice::Recompute;
            if (c != ValueChoice::Recompute) p.checkpoints.push_back(static_cast<NodeId>(i));
        }
        p.solve_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        const Simulation sim = simulate(g, p.schedule, costs);
        if (sim.peak_bytes > budget) {  // the model is an upper bound: never expected
            note("offload=1: the offload DP's plan peaks at " + bytes_text(sim.peak_bytes) +
                 ", over the budget; not used");
            return;
        }
        p.message = "method: offload-dp (keep " + std::to_string(kept) + ", offload " +
                    std::to_string(offloaded) + ", recompute " + std::to_string(recomputed) +
                    " of the chain's values; exact within its class, solvers/offload_chain.h); "
                    "predicted stall " +
                    ms_text(sim.stall_ms) + " for " + format_bytes(sim.offloaded_bytes) +
                    " offloaded in " + ms_text(sim.transfer_ms) + " of copies";
        const std::string before = best.method;
        if (better(g, costs, p, best)) {
            best = std::move(p);
        } else {
            note("offload=1: the offload DP's best (" + std::to_string(offloaded) +
                 " values offloaded) costs no less than " +
                 (before.empty() ? std::string("this plan") : before) + "'s");
        }
    }

    // Not a chain: each schedule of `keep_more` with its kept values offloaded down to the
    // budget by the greedy pass; the cheapest that fits competes with the plan so far.
    static void plan_offload_pass(const Graph& g, const CostModel& costs, uint64_t budget,
                                  const std::vector<Schedule>& keep_more, const std::string& why,
                                  Plan& best) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = cheapest_offloaded(g, costs, budget, keep_more);
        const std::string what = "offload=1 (" + why +
                                 ", so no exact offload DP: the greedy offload pass of "
                                 "solvers/offload_pass.h over plans that keep more)";
        if (!r) {
            best.message += (best.message.empty() ? "" : "; ") + what +
                            ": no plan with offloads fits the budget";
            return;
        }
        Plan p;
        p.schedule = r->schedule;
        p.status = PlanStatus::Heuristic;
        p.budget = budget;
        p.method = "offload-pass";
        const Simulation& sim = r->sim;
        p.solve_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        p.message = "method: " + what + ": " + std::to_string(r->offloaded.size()) +
                    " values offloaded, " + format_bytes(sim.offloaded_bytes) +
                    ", predicted stall " + ms_text(sim.stall_ms);
        if (better(g, costs, p, best))
            best = std::move(p);
        else
            best.message += (best.message.empty() ? "" : "; ") + what +
                            ": its best costs no less than this plan";
    }

    // offload=1 where the MILP runs: the MILP with offload (solvers/checkmate.h), warm-started
    // from the plan so far when it has no copies (the recompute-only plans are in its class).
    static void plan_offload_milp(const Graph& g, const CostModel& costs, uint64_t budget,
                                  double time_limit, Plan& best) {
#ifdef REMATLAB_HAVE_CHECKMATE
        throw_if_cancelled();
        CheckmateOptions opt;
        opt.time_limit_s = time_limit;
        opt.offload = true;
        opt.find_min_budget = false;
        if (best.status != PlanStatus::Infeasible && !best.schedule.code.empty())
            opt.initial = &best.schedule;
        CheckmateStats st;
        Plan p = checkmate_plan(g, costs, budget, opt, &st);
        if (p.status == PlanStatus::Infeasible) {
            best.message += (best.message.empty() ? "" : "; ") +
                            std::string("offload=1: the MILP with offload found no plan (") +
                            p.message + ")";
            return;
        }
        const Simulation sim = simulate(g, p.schedule, costs);
        p.solve_ms = st.solve_s * 1e3;
        p.message = std::string(
                        "method: milp-offload (the MILP with keep / offload / "
                        "recompute per value and stage, solvers/checkmate.h; ") +
                    (st.proven_optimal ? "proven optimal within its class"
                                       : "not proven optimal in the time limit") +
                    "): " + std::to_string(sim.offloads) + " offloads, " +
                    format_bytes(sim.offloaded_bytes) + ", predicted stall " +
                    ms_text(sim.stall_ms) + ", recompute " + ms_text(sim.recompute_ms);
        const std::string before = best.method;
        if (better(g, costs, p, best))
            best = std::move(p);
        else
            best.message += (best.message.empty() ? "" : "; ") +
                            std::string("offload=1: the MILP with offload costs no less than ") +
                            (before.empty() ? std::string("this plan") : before) + "'s";
#else
        (void)g;
        (void)costs;
        (void)budget;
        (void)time_limit;
        (void)best;
#endif
    }

    static Plan plan_milp(const Graph& g, const CostModel& costs, uint64_t budget,
                          double time_limit, const Schedule* initial) {
#ifdef REMATLAB_HAVE_CHECKMATE
        CheckmateOptions opt;
        opt.time_limit_s = time_limit;
        opt.initial = initial;
        Plan p = checkmate_plan(g, costs, budget, opt);
        p.message = "method: milp. " + p.message;
        return p;
#else
        (void)g;
        (void)costs;
        (void)time_limit;
        (void)initial;
        Plan p;
        p.status = PlanStatus::Infeasible;
        p.budget = budget;
        p.message =
            "method: milp is not available in this build (solvers/checkmate.h); "
            "use method=dp";
        return p;
#endif
    }

    static Plan plan_dp(const Graph& g, const CostModel& costs, const RotorChain& chain,
                        const std::vector<NodeId>& first, const RotorSolver& dp, uint64_t budget,
                        uint64_t dp_min_budget) {
        Plan p;
        p.budget = budget;
        const uint64_t none_peak = chain.constant + chain.span;
        const uint64_t unit = dp.unit();
        int32_t units = -1;
        if (budget >= none_peak)
            units = dp.max_units();
        else if (budget >= chain.constant)
            units = static_cast<int32_t>(std::min<uint64_t>((budget - chain.constant) / unit,
                                                            static_cast<uint64_t>(dp.max_units())));
        auto infeasible = [&] {
            p.status = PlanStatus::Infeasible;
            p.min_feasible_budget = dp_min_budget;
            p.schedule = {};
            p.message = "method: rotor-dp. The budget of " + bytes_text(budget) +
                        " cannot be met by the chain DP on this network: the smallest budget it "
                        "can meet is " +
                        bytes_text(dp_min_budget) + " (parameters and inputs alone take " +
                        bytes_text(chain.constant) +
                        "); raise the budget to at least that, or try method=milp";
            return p;
        };
        const LivenessTables tables(g);
        SimulateOptions opt;
        opt.record_timeline = false;
        int retries = 0;
        for (;;) {
            // At none's peak or above, storing everything (a schedule of the class) fits.
            const bool store_all = budget >= none_peak && retries == 0;
            if (!store_all && (units < 0 || !std::isfinite(dp.cost(units)))) return infeasible();
            const std::vector<RotorOp> ops =
                store_all ? rotor_store_all(static_cast<int32_t>(chain.stages.size()))
                          : dp.sequence(units);
            Schedule s = rotor_schedule(g, first, ops);
            const Simulation sim = simulate(g, tables, s, costs, opt);
            if (sim.peak_bytes <= budget) {
                p.schedule = std::move(s);
                for (const RotorOp& op : ops)
                    if (op.kind == RotorOp::Forward) {
                        const auto next = static_cast<size_t>(op.last + 1);
                        p.checkpoints.push_back(first[next] - 1);
                    }
                std::sort(p.checkpoints.begin(), p.checkpoints.end());
                p.checkpoints.erase(std::unique(p.checkpoints.begin(), p.checkpoints.end()),
                                    p.checkpoints.end());
                p.status = sim.recomputes == 0 ? PlanStatus::Optimal : PlanStatus::Feasible;
                std::ostringstream m;
                m << "method: rotor-dp. "
                  << (sim.recomputes == 0
                          ? "Nothing is recomputed, which no schedule can beat"
                          : "Least recompute within Rotor's class of schedules (strategies/"
                            "rotor.h), not proven optimal over all schedules")
                  << "; " << chain.stages.size() << " stages, memory grid of " << unit
                  << " bytes; predicted peak " << sim.peak_bytes << " bytes, recompute "
                  << sim.recompute_ms << " ms";
                if (retries > 0)
                    m << "; the DP's memory model was off: " << retries
                      << " retries with less memory";
                p.message = m.str();
                return p;
            }
            // The model was off: lower the memory the DP may use by the excess and retry.
            ++retries;
            const uint64_t excess = sim.peak_bytes - budget;
            units -= static_cast<int32_t>(std::max<uint64_t>(1, (excess + unit - 1) / unit));
        }
    }
};

}  // namespace

std::unique_ptr<Strategy> make_optimal_strategy() {
    return std::make_unique<OptimalStrategy>();
}

}  // namespace rl
