#include "analysis/sweep.h"

namespace rl {

std::vector<SweepPoint> sweep(const Graph& g, Evaluator& evaluator, const Spec& base,
                              const SweepOptions& opt) {
    std::vector<std::optional<uint64_t>> budgets;
    const std::vector<Spec> specs = sweep_specs(g, evaluator.costs(), base, opt, &budgets);
    std::vector<SweepPoint> out;
    out.reserve(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        SweepPoint p;
        p.budget = budgets[i];
        p.eval = evaluator.evaluate(specs[i]);
        p.eval.predicted.timeline.clear();  // a sweep keeps the figures, not the timelines
        if (p.eval.measured) p.eval.measured->timeline.clear();
        out.push_back(std::move(p));
    }
    return out;
}

}  // namespace rl
