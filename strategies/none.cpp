// `none`: ordinary backprop. Every activation is kept until its last use, which the schedule
// builder finds: a value that no backward reads is freed as soon as its consumers have run.
#include "strategies/builtin.h"

namespace rl {

namespace {

class NoneStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "none"; }
    std::string_view about() const override {
        return "keep every activation the backward needs; free each after its last use";
    }
    ParamSchema schema() const override { return {}; }
    Plan plan(const Graph& g, const CostModel&, const ParamValues&) const override {
        ScheduleBuilder b(g);
        for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);
        for (NodeId n = g.num_nodes() - 1; n >= 0; --n)
            if (g.needs_backward(n)) b.backward(n);
        Plan p;
        p.schedule = b.finish();
        p.status = PlanStatus::Feasible;  // a plain baseline: no budget, no search
        return p;
    }
};

}  // namespace

std::unique_ptr<Strategy> make_none_strategy() {
    return std::make_unique<NoneStrategy>();
}

}  // namespace rl
