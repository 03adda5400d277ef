#include "solvers/general/solve.h"

#include <algorithm>
#include <chrono>

#include "engine/cancel.h"
#include "engine/errors.h"
#include "solvers/general/checkmate_general.h"
#include "solvers/general/heuristics.h"
#include "solvers/general/lns_general.h"

namespace rl::general {

double SolveResult::gap() const {
    const double total = sim.total_duration;
    return total > 0 ? std::max(0.0, (total - lower_bound) / total) : 0.0;
}

const std::vector<std::string>& solve_methods() {
    static const std::vector<std::string> names{"auto", "dtr",      "greedy", "split",
                                                "chen", "ondemand", "milp",   "lns"};
    return names;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Re-simulates a candidate; keeps it when valid, within budget and better than `best`.
bool offer(const GeneralProblem& p, const std::vector<int32_t>& computes, const std::string& source,
           double found_at_s, SolveResult& best) {
    const Schedule s = schedule_from_computations(*p.graph, computes);
    GeneralSimulation sim;
    try {
        sim = simulate_general(*p.graph, s, p.max_computations);
    } catch (const ScheduleError&) {
        return false;
    }
    if (sim.peak_bytes > p.budget) return false;
    if (best.found && sim.total_duration >= best.sim.total_duration) return false;
    best.found = true;
    best.schedule = s;
    best.sim = std::move(sim);
    best.source = source;
    best.time_to_best_s = found_at_s;
    return true;
}

// Phase 1's start when nothing fits: the baselines at budgets a little above the target (they
// succeed there), or the order without recomputation, whichever exceeds the target budget
// least (stage_excess; then the shorter).
std::vector<int32_t> least_excess_start(const GeneralProblem& p) {
    const AbstractGraph& g = *p.graph;
    std::vector<int32_t> best;
    double best_excess = 0, best_duration = 0;
    auto consider = [&](const std::vector<int32_t>& computes) {
        const Schedule s = schedule_from_computations(g, computes);
        GeneralSimulation sim;
        try {
            sim = simulate_general(g, s, p.max_computations);
        } catch (const ScheduleError&) {
            return;
        }
        const double excess = stage_excess(g, s, p.budget);
        if (best.empty() || excess < best_excess ||
            (excess == best_excess && sim.total_duration < best_duration)) {
            best = computes;
            best_excess = excess;
            best_duration = sim.total_duration;
        }
    };
    std::vector<int32_t> order(static_cast<size_t>(g.size()));
    for (int32_t v = 0; v < g.size(); ++v) order[static_cast<size_t>(v)] = v;
    consider(order);
    for (const bool recompute_inputs : {false, true}) {
        const HeuristicResult h = greedy_interval_split(p, recompute_inputs, /*best_effort=*/true);
        if (!h.computes.empty()) consider(h.computes);
    }
    for (const double above : {1.02, 1.05, 1.1, 1.2}) {
        GeneralProblem q = p;
        q.budget = static_cast<uint64_t>(static_cast<double>(p.budget) * above);
        for (const bool recompute_inputs : {false, true}) {
            const HeuristicResult h = greedy_interval_split(q, recompute_inputs);
            if (h.found) consider(h.computes);
        }
        for (const EvictionRule rule : {EvictionRule::FarthestNextUse, EvictionRule::Dtr})
            for (const bool pin : {false, true}) {
                const HeuristicResult h = eviction_heuristic(q, rule, pin);
                if (h.found) consider(h.computes);
            }
    }
    return best;
}

}  // namespace

SolveResult solve_general(const GeneralProblem& p, const SolveOptions& opt) {
    const auto& names = solve_methods();
    if (std::find(names.begin(), names.end(), opt.method) == names.end()) {
        std::string list;
        for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
        throw Error("unknown method '" + opt.method + "'; choose one of " + list);
    }
    const AbstractGraph& g = *p.graph;
    SolveResult best;
    best.method = opt.method;
    best.lower_bound = g.total_duration();
    const auto t0 = Clock::now();
    const bool all = opt.method == "auto" || opt.method == "milp" || opt.method == "lns";
    const bool run_milp = opt.method == "auto" || opt.method == "milp";
    const bool run_lns = opt.method == "auto" || opt.method == "lns";
    auto cancelled = [&] { return (opt.cancel && opt.cancel->load()) || cancel_requested(); };
    // Below what one node needs with its inputs no schedule exists, whatever a method tries:
    // say so at once (VGG16's train graph at 0.8 spent half of a 600 s limit in CBC before).
    const uint64_t floor_peak = min_feasible_peak_bound(g);
    if (p.budget < floor_peak) {
        best.message = "the budget " + std::to_string(p.budget) +
                       " bytes is below what one node needs with its inputs (" +
                       std::to_string(floor_peak) + " bytes): no schedule exists";
        best.solve_s = seconds_since(t0);
        return best;
    }
    std::string why;
    auto note = [&](const std::string& who, const std::string& msg) {
        if (!msg.empty()) why += (why.empty() ? "" : "; ") + who + ": " + msg;
    };
    std::vector<std::pair<std::string, EvictionRule>> rules;
    if (all || opt.method == "dtr") rules.emplace_back("dtr", EvictionRule::Dtr);
    if (all || opt.method == "greedy") rules.emplace_back("greedy", EvictionRule::FarthestNextUse);
    for (const auto& [name, rule] : rules) {
        const HeuristicResult h = eviction_heuristic(p, rule);
        if (h.found) {
            if (offer(p, h.computes, name, seconds_since(t0), best) && opt.on_improved)
                opt.on_improved(best);
        } else {
            note(name, h.message);
        }
    }
    if (all || opt.method == "ondemand") {
        std::string msg;
        for (const auto& [name, rule] : {std::pair{"Belady", EvictionRule::FarthestNextUse},
                                         std::pair{"DTR", EvictionRule::Dtr}}) {
            const HeuristicResult h = eviction_heuristic(p, rule, /*pin_inputs=*/true);
            if (h.found) {
                if (offer(p, h.computes, "ondemand", seconds_since(t0), best) && opt.on_improved)
                    opt.on_improved(best);
            } else {
                msg += std::string(msg.empty() ? "" : "; ") + name + ": " + h.message;
            }
        }
        note("ondemand", msg);
    }
    if (all || opt.method == "split") {
        for (const bool recompute_inputs : {false, true}) {
            const HeuristicResult h = greedy_interval_split(p, recompute_inputs);
            if (h.found) {
                if (offer(p, h.computes, "split", seconds_since(t0), best) && opt.on_improved)
                    opt.on_improved(best);
            } else if (recompute_inputs) {
                note("split", h.message);
            }
        }
    }
    if (all || opt.method == "chen") {
        const HeuristicResult h = chen_sqrt_n(p);
        if (h.found) {
            if (offer(p, h.computes, "chen", seconds_since(t0), best) && opt.on_improved)
                opt.on_improved(best);
        } else {
            note("chen", h.message);
        }
    }
    best.interrupted = cancelled();
    bool milp_infeasible = false;
    if (run_milp && !best.interrupted) {
        MilpOptions mo;
        // auto: half of what is left, the rest for the search from the MILP's incumbent.
        mo.time_limit_s =
            std::max(0.01, (opt.time_limit_s - seconds_since(t0)) * (run_lns ? 0.5 : 1.0));
        mo.log_level = opt.log_level;
        mo.node_limit = opt.node_limit;
        mo.cancel = opt.cancel;
        std::vector<int32_t> start;
        if (best.found) {
            for (const Instruction& ins : best.schedule.code)
                if (ins.kind == InstrKind::Compute) start.push_back(ins.target);
            mo.warm_start = &start;
        }
        const double milp_t0 = seconds_since(t0);
        const MilpResult r = solve_checkmate_milp(p, mo);
        best.interrupted = r.interrupted || (opt.cancel && opt.cancel->load());
        best.milp_columns = r.variables;
        best.milp_rows = r.constraints;
        best.milp_attempted = !r.too_large;
        if (r.found) {
            const bool improved = offer(p, r.computes, "milp", milp_t0 + r.time_to_best_s, best);
            (void)improved;
            // Optimal within the MILP's class; a baseline outside it may still be better.
            best.proven_optimal =
                r.proven_optimal &&
                best.sim.total_duration <=
                    g.total_duration() * (1 + r.objective_tdi) * (1 + 1e-9) + 1e-9;
        }
        if (!r.failure.empty()) {
            note("milp", r.failure + " during the solve; the other methods' schedules stand");
        } else if (r.too_large) {
            note("milp", "not attempted: the model has more than " +
                             std::to_string(mo.max_columns) + " columns");
        } else if (r.proven_infeasible) {
            milp_infeasible = true;
            note("milp", "proven infeasible: no schedule in the MILP's class fits the budget");
        } else if (!r.found) {
            note("milp", "no schedule found within the time limit");
        }
        // CBC's bound is on the TDI.
        best.lower_bound = std::max(best.lower_bound, g.total_duration() * (1 + r.lower_bound_tdi));
        if (r.proven_optimal && best.found)
            best.lower_bound = std::min(best.lower_bound, best.sim.total_duration);
    }
    const double lns_left = opt.time_limit_s - seconds_since(t0);
    // Not when the whole MILP proved that nothing in its class fits.
    const bool hopeless = !best.found && milp_infeasible;
    if (run_lns && !best.interrupted && !best.proven_optimal && !hopeless && lns_left > 0.05) {
        // From the best schedule so far, or, when nothing fits, from the order without
        // recomputation (Phase 1 of lns_general.h brings it within the budget).
        std::vector<int32_t> start;
        if (best.found) {
            for (const Instruction& ins : best.schedule.code)
                if (ins.kind == InstrKind::Compute) start.push_back(ins.target);
        } else {
            start = least_excess_start(p);
        }
        LnsOptions lo;
        lo.time_limit_s = lns_left;
        lo.log_level = opt.log_level;
        lo.cancel = opt.cancel;
        lo.seed = opt.seed;
        lo.window_node_limit = opt.node_limit;
        lo.max_windows = opt.max_windows;
        const double lns_t0 = seconds_since(t0);
        lo.on_improved = [&](const std::vector<int32_t>& computes, double at_s) {
            if (offer(p, computes, "lns", lns_t0 + at_s, best) && opt.on_improved)
                opt.on_improved(best);
        };
        const LnsResult lr = lns_improve(p, start, lo);
        if (lr.found) {
            if (offer(p, lr.computes, "lns", lns_t0 + lr.time_to_best_s, best) && opt.on_improved)
                opt.on_improved(best);
        } else {
            note("lns", lr.message);
        }
        best.lns_windows = lr.windows;
        best.interrupted = best.interrupted || lr.interrupted;
    }
    best.solve_s = seconds_since(t0);
    if (!best.found) best.message = why.empty() ? "no schedule found" : why;
    return best;
}

}  // namespace rl::general
