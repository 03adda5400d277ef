#include "strategies/abstract_plan.h"

#include <algorithm>
#include <sstream>

#include "engine/cancel.h"
#include "engine/errors.h"
#include "engine/networks/abstract_network.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "solvers/general/solve.h"

namespace rl {

bool is_general_only_method(const std::string& method) {
    // solve's methods, less the two optimal has on every network (auto, milp).
    if (method == "auto" || method == "milp") return false;
    const auto& all = general::solve_methods();
    return std::find(all.begin(), all.end(), method) != all.end();
}

Plan plan_abstract(const Graph& g, const std::optional<uint64_t>& budget, const std::string& method,
                   double time_limit_s) {
    const general::AbstractGraph a = abstract_graph_of(g);
    general::GeneralProblem p;
    p.graph = &a;
    p.budget = budget ? *budget : general::budget_from_fraction(a, 0.9);
    general::SolveOptions opt;
    opt.method = method;
    opt.time_limit_s = time_limit_s;
    const general::SolveResult r = general::solve_general(p, opt);
    if (r.interrupted && !r.found) throw Cancelled();

    Plan plan;
    plan.budget = p.budget;
    plan.method = "general-" + (r.source.empty() ? method : r.source);
    const double sum = a.total_duration();
    if (!r.found) {
        plan.status = PlanStatus::Infeasible;
        const uint64_t bound = general::min_feasible_peak_bound(a);
        plan.message = "the general solvers (method " + method + ") found no schedule within " +
                       format_bytes(p.budget) + " (" + std::to_string(p.budget) + " bytes)" +
                       (r.message.empty() ? "" : ": " + r.message) +
                       "; no schedule can peak below " + format_bytes(bound) + " (" +
                       std::to_string(bound) +
                       " bytes: a node with its inputs), and the order "
                       "without recomputation peaks at " +
                       format_bytes(general::peak_no_remat(a)) + "; raise the budget";
        return plan;
    }
    // The same schedule in the network's ids: node i is node i; a Free names node i's output.
    for (const Instruction& ins : r.schedule.code) {
        if (ins.kind == InstrKind::Free)
            plan.schedule.code.push_back({InstrKind::Free, g.node(ins.target).output});
        else
            plan.schedule.code.push_back(ins);
    }
    // The independent check: the engine's liveness rules must charge what the general
    // simulator did, and the plan must fit its budget.
    SimulateOptions so;
    so.record_timeline = false;
    const Simulation sim = simulate(g, plan.schedule, CostModel{}, so);
    if (sim.peak_bytes != r.sim.peak_bytes || sim.peak_bytes > p.budget)
        throw Error("internal check failed: the general solvers' schedule for '" + g.name() +
                    "' peaks at " + std::to_string(r.sim.peak_bytes) +
                    " bytes by their simulator but " + std::to_string(sim.peak_bytes) +
                    " by the engine's (budget " + std::to_string(p.budget) + "); please report");
    plan.status = r.proven_optimal                      ? PlanStatus::Optimal
                  : r.sim.total_duration <= sum + 1e-12 ? PlanStatus::Optimal  // nothing recomputed
                  : r.source == "milp" || r.source == "lns" ? PlanStatus::Feasible
                                                            : PlanStatus::Heuristic;
    // Plan's bound is on the recompute time: total duration minus each node once.
    const double recompute = std::max(0.0, r.sim.total_duration - sum);
    const double bound = std::max(0.0, r.lower_bound - sum);
    plan.lower_bound_ms = bound;
    plan.gap = recompute > 0 ? (recompute - bound) / recompute : 0.0;
    plan.bound_class = r.milp_attempted && r.lower_bound > sum ? "milp" : "trivial";
    std::ostringstream m;
    m << "general problem, method " << method << " (best from " << r.source << "): total duration "
      << r.sim.total_duration << ", TDI " << 100.0 * general::tdi(a, r.sim.total_duration)
      << " %, peak " << r.sim.peak_bytes << " bytes within " << p.budget
      << " (the engine's simulator agrees); durations are "
      << "the graph's own units";
    plan.message = m.str();
    return plan;
}

}  // namespace rl
