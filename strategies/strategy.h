#pragma once
// A strategy turns a network (and a cost model) into a Plan: the schedule plus what kind of
// answer it is. One strategy per file, each registered under a stable name with a parameter
// schema (as Checkmate's solvers/strategy_*.py; KDE Step's solver factory).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/params.h"
#include "engine/schedule.h"
#include "solvers/plan.h"

namespace rl {

class Strategy {
  public:
    virtual ~Strategy() = default;
    virtual std::string_view name() const = 0;
    virtual std::string_view about() const = 0;
    virtual ParamSchema schema() const = 0;
    virtual Plan plan(const Graph& g, const CostModel& costs, const ParamValues& params) const = 0;
    // Whether it plans plan-only networks (Graph::plan_only: abstract benchmark graphs, whose
    // backward nodes are explicit and which have no Backward instructions). Strategies that
    // reason about forward/backward structure (segments, residuals, a chain) do not; plan_with
    // refuses them such a network with rl::NotApplicable.
    virtual bool plans_abstract() const { return false; }
    // For a sweep of a strategy without a `budget` parameter: the parameter settings that trace
    // its own memory/compute trade-off on `g` (sqrt-n's segment counts, periodic's k, every
    // policy). Budgeted strategies are swept over budgets instead; the default is no range.
    virtual std::vector<Spec> sweep_range(const Graph& g) const {
        (void)g;
        return {};
    }
};

// Whether a strategy takes a byte budget (a `budget` parameter of type Bytes).
bool is_budgeted(const Strategy& s);
// `s` with its `budget` argument set to `budget` bytes, in place of any it had.
Spec with_budget(Spec s, uint64_t budget);

// --- registry ---
void register_strategy(std::unique_ptr<Strategy> s);
std::vector<const Strategy*> strategies();  // in registration order
// Throws rl::Error listing the valid names for an unknown strategy.
const Strategy& find_strategy(std::string_view name);
// Parses a strategy spec and checks it against the strategy's schema, so that a typo fails
// before any long work (the CLI's and the window's command lines). Throws rl::Error naming the
// unknown strategy or key, or the bad value.
Spec checked_strategy_spec(std::string_view text);

// Parses "name:key=value,…", checks it against the strategy's schema, and plans. solve_ms is
// filled in. Throws rl::Error for a bad spec, rl::NotApplicable for a strategy that does not
// plan plan-only networks asked to plan one.
Plan plan_with(const Graph& g, const CostModel& costs, const Spec& spec);

}  // namespace rl
