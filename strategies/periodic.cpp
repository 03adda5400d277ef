// `periodic:k=K`: a checkpoint at every K-th segment boundary — what PyTorch's
// checkpoint_sequential does with segments of K layers (here K boundaries).
#include <algorithm>
#include <cmath>

#include "engine/graph_algorithms.h"
#include "solvers/segments.h"
#include "strategies/builtin.h"

namespace rl {

namespace {

class PeriodicStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "periodic"; }
    std::string_view about() const override {
        return "checkpoint every k-th segment boundary (torch checkpoint_sequential)";
    }
    ParamSchema schema() const override {
        return {{"k", ParamType::Int, "4", "keep every k-th boundary", {}, 1, 1000000}};
    }
    // k from 1 (every boundary kept) to the number of boundaries (one checkpoint), about 24
    // values spread geometrically.
    std::vector<Spec> sweep_range(const Graph& g) const override {
        const int n = std::max<int>(1, static_cast<int>(segment_boundaries(g).size()));
        std::vector<Spec> out;
        int last = 0;
        for (double k = 1; k <= n; k *= 1.2) {
            const int kk = static_cast<int>(std::lround(k));
            if (kk == last) continue;
            last = kk;
            out.push_back(Spec{"periodic", {{"k", std::to_string(kk)}}});
        }
        if (last != n) out.push_back(Spec{"periodic", {{"k", std::to_string(n)}}});
        return out;
    }

    Plan plan(const Graph& g, const CostModel&, const ParamValues& params) const override {
        const std::vector<NodeId> candidates = segment_boundaries(g);
        const auto k = static_cast<size_t>(params.get_int("k"));
        Plan p;
        p.status = PlanStatus::Heuristic;
        for (size_t i = k - 1; i < candidates.size(); i += k)
            p.checkpoints.push_back(candidates[i]);
        p.schedule = segment_schedule(g, p.checkpoints);
        return p;
    }
};

}  // namespace

std::unique_ptr<Strategy> make_periodic_strategy() {
    return std::make_unique<PeriodicStrategy>();
}

}  // namespace rl
