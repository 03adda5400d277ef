// `optimal:budget=BYTES[,method=auto|dp|milp][,slots=N][,time_limit=S]` — the least recompute
// under a byte budget (a bound on simulate()'s peak_bytes).
//
// Methods:
//  - dp ("rotor-dp"): Beaumont et al.'s dynamic program over the chain of blocks cut at the
//    segment boundaries (strategies/rotor.h, which states the class of schedules it searches and
//    the effect of the `slots` discretisation). Within that class it is exact on a fine enough
//    grid; it is not a proof of optimality over all schedules (a search over all of them can
//    find cheaper ones: tests/strategies/test_optimal_dp.cpp), so the plan is `Feasible` —
//    `Optimal` only when it recomputes nothing, which no schedule can beat.
//  - milp: Checkmate's MILP (strategies/checkmate.h, Jain et al. 2020) with `time_limit`
//    seconds: `Optimal` when CBC proves it, `Feasible` with its lower bound and gap otherwise.
//  - auto: the DP; and where the DP's class is coarse — some block of the chain has more than one
//    node, so the DP cannot choose inside it — and the network is small (≤ 24 nodes, where the
//    MILP is quick), the MILP too; the cheaper plan that fits wins.
// The method used is Plan::method ("rotor-dp" / "milp"), and is named in Plan::message too.
//
// Every DP plan is checked with simulate(). The DP's memory model follows engine/liveness.h
// exactly for its class and rounds up, so the simulated peak is within the budget; should it
// ever not be (a model error), the DP is re-run with the available memory lowered by the excess
// (rounded up to whole units) until the plan fits, and the message says how many retries it took.
//
// Without a budget the plan is for the midpoint between the smallest budget the DP can meet and
// `none`'s peak. An unreachable budget gives an Infeasible plan naming the smallest budget the DP
// can meet (const + min_units · unit: the first budget at which the DP's table is finite).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "engine/liveness.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "strategies/builtin.h"
#include "strategies/rotor.h"

#if __has_include("strategies/checkmate.h")
#include "strategies/checkmate.h"
#define REMATLAB_HAVE_CHECKMATE 1
#endif

namespace rl {

namespace {

constexpr int kAutoMilpMaxNodes = 24;

std::string bytes_text(uint64_t b) {
    return format_bytes(b) + " (" + std::to_string(b) + " bytes)";
}

class OptimalStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "optimal"; }
    std::string_view about() const override {
        return "least recompute under a byte budget: Rotor's chain DP (Beaumont et al. 2019) "
               "over the network's blocks, or Checkmate's MILP (Jain et al. 2020)";
    }
    ParamSchema schema() const override {
        return {
            {"budget",
             ParamType::Bytes,
             "",
             "peak-memory budget in bytes (e.g. 64MiB); default: midway between the smallest "
             "feasible budget and none's peak",
             {},
             1},
            {"method",
             ParamType::Choice,
             "auto",
             "auto: the chain DP, plus the MILP on small networks whose blocks have inner "
             "structure; dp: Rotor's DP; milp: Checkmate's MILP",
             {"auto", "dp", "milp"}},
            {"slots",
             ParamType::Int,
             "500",
             "memory units of the DP's grid between 0 and none's peak (finer: closer to the "
             "class optimum, slower)",
             {},
             1,
             1000000},
            {"time_limit", ParamType::Float, "10", "MILP time limit in seconds", {}},
        };
    }

    Plan plan(const Graph& g, const CostModel& costs, const ParamValues& params) const override {
        std::vector<NodeId> first;
        const RotorChain chain = rotor_chain(g, costs, &first);
        const uint64_t unit = rotor_unit(chain, static_cast<int32_t>(params.get_int("slots")));
        const RotorSolver dp(chain, unit, rotor_max_units(chain, unit));
        const uint64_t none_peak = chain.constant + chain.span;
        const int32_t min_units = dp.min_units();
        const uint64_t dp_min_budget =
            min_units < 0
                ? none_peak
                : std::min(none_peak, chain.constant + unit * static_cast<uint64_t>(min_units));
        const uint64_t budget = params.has("budget")
                                    ? params.get_bytes("budget")
                                    : dp_min_budget + (none_peak - dp_min_budget) / 2;
        const std::string method = params.get_string("method");

        bool multi_node_block = false;
        for (size_t k = 0; k < first.size(); ++k) {
            const NodeId end = k + 1 < first.size() ? first[k + 1] : g.num_nodes();
            multi_node_block = multi_node_block || end - first[k] > 1;
        }
        const bool use_milp =
            method == "milp" || (method == "auto" && multi_node_block &&
                                 g.num_nodes() <= kAutoMilpMaxNodes && have_milp());

        Plan best;
        if (method != "milp") {
            best = plan_dp(g, costs, chain, first, dp, budget, dp_min_budget);
            best.method = "rotor-dp";
        }
        if (use_milp) {
            Plan milp = plan_milp(g, costs, budget, params.get_float("time_limit"));
            if (method == "milp" || better(g, costs, milp, best)) best = std::move(milp);
        }
        best.budget = budget;
        return best;
    }

  private:
    static bool have_milp() {
#ifdef REMATLAB_HAVE_CHECKMATE
        return true;
#else
        return false;
#endif
    }

    // Whether `a` is a better answer than `b`: feasible where b is not, or less recompute.
    static bool better(const Graph& g, const CostModel& costs, const Plan& a, const Plan& b) {
        if (a.status == PlanStatus::Infeasible) return false;
        if (b.status == PlanStatus::Infeasible) return true;
        SimulateOptions opt;
        opt.record_timeline = false;
        const double ca = simulate(g, a.schedule, costs, opt).recompute_ms;
        const double cb = simulate(g, b.schedule, costs, opt).recompute_ms;
        return ca < cb - 1e-9 * std::max(1.0, cb);
    }

    static Plan plan_milp(const Graph& g, const CostModel& costs, uint64_t budget,
                          double time_limit) {
#ifdef REMATLAB_HAVE_CHECKMATE
        Plan p = checkmate_plan(g, costs, budget, time_limit);
        p.message = "method: milp. " + p.message;
        return p;
#else
        (void)g;
        (void)costs;
        (void)time_limit;
        Plan p;
        p.status = PlanStatus::Infeasible;
        p.budget = budget;
        p.message =
            "method: milp is not available in this build (strategies/checkmate.h); "
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
