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
    // On a plan-only network: every node once in order, each output freed after its last read.
    bool plans_abstract() const override { return true; }
    Plan plan(const Graph& g, const CostModel&, const ParamValues&) const override {
        Plan p;
        p.schedule = backprop_schedule(g);
        p.status = PlanStatus::Feasible;  // a plain baseline: no budget, no search
        return p;
    }
};

}  // namespace

std::unique_ptr<Strategy> make_none_strategy() {
    return std::make_unique<NoneStrategy>();
}

}  // namespace rl
