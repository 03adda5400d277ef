#include "strategies/sweep_specs.h"

#include <algorithm>

#include "engine/errors.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "strategies/strategy.h"

namespace rl {

std::vector<Spec> sweep_specs(const Graph& g, const CostModel& costs, const Spec& base,
                              const SweepOptions& opt,
                              std::vector<std::optional<uint64_t>>* budgets) {
    const Strategy& strategy = find_strategy(base.name);
    std::vector<Spec> specs;
    std::vector<std::optional<uint64_t>> bs;
    const std::vector<Spec> range = strategy.sweep_range(g);
    const bool budget_sweep = is_budgeted(strategy) && !has_arg(base, "budget");
    if (!range.empty() && base.args.empty() && !(budget_sweep && !opt.budget_list.empty())) {
        specs = range;
        bs.assign(specs.size(), std::nullopt);
    } else if (budget_sweep) {
        std::vector<uint64_t> list = opt.budget_list;
        if (list.empty()) {
            const Plan tiny = plan_with(g, costs, with_budget(base, 1));
            uint64_t lo = 1;
            if (tiny.status == PlanStatus::Infeasible) {
                if (!tiny.min_feasible_budget)
                    throw Error("sweep of '" + format_spec(base) +
                                "': the strategy does not report its smallest feasible budget; "
                                "give the budgets with --budget-list");
                lo = *tiny.min_feasible_budget;
            }
            SimulateOptions so;
            so.record_timeline = false;
            const uint64_t hi = std::max(
                lo,
                simulate(g, plan_with(g, costs, Spec{"none", {}}).schedule, costs, so).peak_bytes);
            const int n = std::max(1, opt.budgets);
            for (int i = 0; i < n; ++i) {
                const double f = n == 1 ? 1.0 : static_cast<double>(i) / (n - 1);
                list.push_back(lo + static_cast<uint64_t>(f * static_cast<double>(hi - lo)));
            }
            list.erase(std::unique(list.begin(), list.end()), list.end());
        }
        for (uint64_t b : list) {
            specs.push_back(with_budget(base, b));
            bs.emplace_back(b);
        }
    } else {
        specs.push_back(base);
        bs.emplace_back(std::nullopt);
    }
    if (budgets) *budgets = std::move(bs);
    return specs;
}

}  // namespace rl
