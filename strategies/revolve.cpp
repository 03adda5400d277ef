// `revolve:slots=s`: Griewank & Walther's binomial checkpointing. The solver core (closed form,
// actions, schedule) is solvers/revolve.h; this file is the registered strategy.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "engine/liveness.h"
#include "solvers/revolve.h"
#include "strategies/builtin.h"

namespace rl::revolve {

namespace {

// One node per stage, one op kind, equal output bytes and forward cost, and a backward that reads
// only the stage's input: Griewank's homogeneous chain, where fewest advances is least time.
bool homogeneous_chain(const Graph& g, const CostModel& costs, const std::vector<NodeId>& ends) {
    const LivenessTables t(g);
    for (size_t i = 0; i < ends.size(); ++i) {
        const NodeId n = ends[i];
        if (n != static_cast<NodeId>(i)) return false;
        const Node& node = g.node(n);
        const Node& ref = g.node(ends[0]);
        if (node.op != ref.op || g.output_of(n).bytes != g.output_of(ends[0]).bytes) return false;
        if (costs.size() == static_cast<size_t>(g.num_nodes()) &&
            costs.forward_ms(n) != costs.forward_ms(ends[0]))
            return false;
        if (t.residual_output[static_cast<size_t>(n)]) return false;
    }
    return true;
}

class RevolveStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "revolve"; }
    std::string_view about() const override {
        return "Griewank & Walther 2000 binomial checkpointing with s slots over the chain of "
               "segments: fewest forward evaluations on homogeneous chains";
    }
    ParamSchema schema() const override {
        return {{"slots",
                 ParamType::Int,
                 "0",
                 "checkpoint slots for stage states, the input's included (0: ceil(sqrt(stages)))",
                 {},
                 0,
                 1000000}};
    }
    // Slots from 1 (most recomputation) to the number of stages (none), about 24 values spread
    // geometrically.
    std::vector<Spec> sweep_range(const Graph& g) const override {
        const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(stage_ends(g).size()));
        std::vector<Spec> out;
        int64_t last = 0;
        for (double s = 1; s < static_cast<double>(k) * 1.2; s *= 1.2) {
            const int64_t ss = std::min(k, static_cast<int64_t>(std::lround(s)));
            if (ss == last) continue;
            last = ss;
            out.push_back(Spec{"revolve", {{"slots", std::to_string(ss)}}});
        }
        return out;
    }

    Plan plan(const Graph& g, const CostModel& costs, const ParamValues& params) const override {
        const std::vector<NodeId> ends = stage_ends(g);
        const auto k = static_cast<int64_t>(ends.size());
        int64_t s = params.get_int("slots");
        if (s == 0)
            s = std::max<int64_t>(
                1, static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(k)) - 1e-9)));
        Plan p;
        if (k == 0) {
            p.schedule = schedule(g, ends, {});
            p.status = PlanStatus::Heuristic;
            return p;
        }
        const std::vector<Action> acts = actions(k, s);
        for (const Action& a : acts)
            if (a.kind == Action::Kind::Store && a.index > 0)
                p.checkpoints.push_back(ends[static_cast<size_t>(a.index - 1)]);
        std::sort(p.checkpoints.begin(), p.checkpoints.end());
        p.checkpoints.erase(std::unique(p.checkpoints.begin(), p.checkpoints.end()),
                            p.checkpoints.end());
        p.schedule = schedule(g, ends, acts);
        p.status = homogeneous_chain(g, costs, ends) ? PlanStatus::Optimal : PlanStatus::Heuristic;
        return p;
    }
};

}  // namespace

}  // namespace rl::revolve

namespace rl {

std::unique_ptr<Strategy> make_revolve_strategy() {
    return std::make_unique<revolve::RevolveStrategy>();
}

}  // namespace rl
