// `sqrt-n`: Chen, Xu, Zhang, Guestrin (2016), "Training Deep Nets with Sublinear Memory Cost".
//
// Segment boundaries are the articulation points of the network that cut its node order
// (engine/graph_algorithms.h). Without a budget, about sqrt(n) segments of equal activation bytes
// are checkpointed (n = number of candidate boundaries): memory O(sqrt(n)), one extra forward.
// With `budget=BYTES`, Chen's greedy variant (their Algorithm 1 / §4.2): walk the nodes summing
// output bytes and place a checkpoint at the first boundary where the sum passes a threshold x;
// x is swept, every resulting schedule is simulated, and the one with the least predicted
// recompute whose peak fits the budget wins. If none fits, the plan is infeasible and names the
// smallest peak the sweep reached.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "engine/graph_algorithms.h"
#include "engine/liveness.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "solvers/segments.h"
#include "strategies/builtin.h"

namespace rl {

namespace {

std::vector<NodeId> greedy_checkpoints(const Graph& g, const std::vector<NodeId>& candidates,
                                       double threshold) {
    std::vector<NodeId> out;
    double sum = 0;
    size_t next = 0;
    for (NodeId n = 0; n < g.num_nodes() && next < candidates.size(); ++n) {
        sum += static_cast<double>(g.output_of(n).bytes);
        if (candidates[next] != n) continue;
        ++next;
        if (sum > threshold) {
            out.push_back(n);
            sum = 0;
        }
    }
    return out;
}

class SqrtNStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "sqrt-n"; }
    std::string_view about() const override {
        return "Chen et al. 2016: checkpoint ~sqrt(n) segment boundaries (articulation points); "
               "with budget=, the greedy variant under a byte budget";
    }
    ParamSchema schema() const override {
        return {
            {"segments",
             ParamType::Int,
             "0",
             "number of segments (0: about sqrt of the number of boundaries)",
             {},
             0,
             1000000},
            {"budget",
             ParamType::Bytes,
             "",
             "peak-memory budget in bytes (e.g. 64MiB): the greedy variant",
             {},
             1},
        };
    }

    // Segment counts from 1 (no checkpoint) to one segment per boundary, thinned to about 24
    // points spread geometrically.
    std::vector<Spec> sweep_range(const Graph& g) const override {
        const int n = static_cast<int>(segment_boundaries(g).size()) + 1;
        std::vector<Spec> out;
        int last = 0;
        for (double k = 1; k <= n; k *= 1.2) {
            const int segments = static_cast<int>(std::lround(k));
            if (segments == last) continue;
            last = segments;
            out.push_back(Spec{"sqrt-n", {{"segments", std::to_string(segments)}}});
        }
        if (last != n) out.push_back(Spec{"sqrt-n", {{"segments", std::to_string(n)}}});
        return out;
    }

    Plan plan(const Graph& g, const CostModel& costs, const ParamValues& params) const override {
        const std::vector<NodeId> candidates = segment_boundaries(g);
        Plan p;
        p.status = PlanStatus::Heuristic;
        if (!params.has("budget")) {
            int segments = static_cast<int>(params.get_int("segments"));
            if (segments == 0)
                segments = static_cast<int>(
                    std::lround(std::sqrt(static_cast<double>(candidates.size() + 1))));
            p.checkpoints = even_checkpoints(g, candidates, segments);
            p.schedule = segment_schedule(g, p.checkpoints);
            return p;
        }
        const uint64_t budget = params.get_bytes("budget");
        p.budget = budget;
        // Thresholds: every distinct cumulative-bytes step is a possible x; a geometric grid
        // covers them without simulating thousands of near-identical schedules.
        std::set<std::vector<NodeId>> tried;
        const double total = static_cast<double>(g.activation_bytes());
        double smallest = 1;
        for (const Node& n : g.nodes())
            smallest = std::max(smallest, static_cast<double>(g.value(n.output).bytes) * 0.5);
        const LivenessTables tables(g);
        SimulateOptions opt;
        opt.record_timeline = false;
        uint64_t best_peak = std::numeric_limits<uint64_t>::max();
        double best_cost = std::numeric_limits<double>::infinity();
        bool found = false;
        auto consider = [&](std::vector<NodeId> cps) {
            if (!tried.insert(cps).second) return;
            Schedule s = segment_schedule(g, cps);
            const Simulation sim = simulate(g, tables, s, costs, opt);
            best_peak = std::min(best_peak, sim.peak_bytes);
            if (sim.peak_bytes > budget) return;
            // Least recompute first; between equal costs, the lower peak.
            const double cost = sim.recompute_ms + 1e-12 * static_cast<double>(sim.peak_bytes) +
                                static_cast<double>(sim.recomputes) * 1e-9;
            if (!found || cost < best_cost) {
                found = true;
                best_cost = cost;
                p.schedule = std::move(s);
                p.checkpoints = std::move(cps);
            }
        };
        consider({});  // no checkpoint at all: plain backprop, if it fits
        for (double x = smallest; x < total * 2; x *= 1.25)
            consider(greedy_checkpoints(g, candidates, x));
        for (int k = 2; k <= static_cast<int>(candidates.size()) + 1; k = k < 16 ? k + 1 : k * 2)
            consider(even_checkpoints(g, candidates, k));
        if (!found) {
            p.status = PlanStatus::Infeasible;
            p.min_feasible_budget = best_peak;
            p.message = "sqrt-n cannot meet the budget of " + format_bytes(budget) + " (" +
                        std::to_string(budget) +
                        " bytes) on this network: the smallest peak it "
                        "reaches is " +
                        format_bytes(best_peak) + " (" + std::to_string(best_peak) +
                        " bytes); raise the budget to at least that";
        }
        return p;
    }
};

}  // namespace

std::unique_ptr<Strategy> make_sqrt_n_strategy() {
    return std::make_unique<SqrtNStrategy>();
}

}  // namespace rl
