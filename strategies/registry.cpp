#include <chrono>
#include <mutex>

#include "engine/errors.h"
#include "strategies/builtin.h"
#include "strategies/strategy.h"

namespace rl {

namespace {

std::vector<std::unique_ptr<Strategy>>& registry() {
    static std::vector<std::unique_ptr<Strategy>> r;
    static std::once_flag once;
    std::call_once(once, [] {
        r.push_back(make_none_strategy());
        r.push_back(make_sqrt_n_strategy());
        r.push_back(make_periodic_strategy());
        r.push_back(make_optimal_strategy());
        r.push_back(make_min_cut_strategy());
        r.push_back(make_dtr_strategy());
        r.push_back(make_revolve_strategy());
        r.push_back(make_policy_strategy());
    });
    return r;
}

}  // namespace

void register_strategy(std::unique_ptr<Strategy> s) {
    for (const auto& existing : registry())
        if (existing->name() == s->name())
            throw Error("a strategy named '" + std::string(s->name()) + "' is already registered");
    registry().push_back(std::move(s));
}

std::vector<const Strategy*> strategies() {
    std::vector<const Strategy*> out;
    for (const auto& s : registry()) out.push_back(s.get());
    return out;
}

const Strategy& find_strategy(std::string_view name) {
    std::string names;
    for (const auto& s : registry()) {
        if (s->name() == name) return *s;
        names += (names.empty() ? "" : ", ") + std::string(s->name());
    }
    throw Error("unknown strategy '" + std::string(name) + "'; valid strategies: " + names +
                " (see `rematlab-cli strategies`)");
}

Spec checked_strategy_spec(std::string_view text) {
    Spec spec = parse_spec(text);
    (void)ParamValues::resolve(find_strategy(spec.name).schema(), spec);
    return spec;
}

bool is_budgeted(const Strategy& s) {
    for (const ParamSpec& p : s.schema())
        if (p.key == "budget" && p.type == ParamType::Bytes) return true;
    return false;
}

Spec with_budget(Spec s, uint64_t budget) {
    std::erase_if(s.args, [](const auto& a) { return a.first == "budget"; });
    s.args.emplace_back("budget", std::to_string(budget));
    return s;
}

Plan plan_with(const Graph& g, const CostModel& costs, const Spec& spec) {
    const Strategy& s = find_strategy(spec.name);
    const ParamValues params = ParamValues::resolve(s.schema(), spec);
    if (g.plan_only() && !s.plans_abstract()) {
        throw NotApplicable("strategy '" + std::string(s.name()) + "' does not apply to network '" +
                            g.name() +
                            "': it plans the Backward instructions of a network with kernels, "
                            "and an abstract benchmark graph has its backward nodes explicit; "
                            "use none, or optimal:method=auto|milp|lns|greedy|split|chen|"
                            "ondemand|dtr (the general problem's solvers)");
    }
    const auto t0 = std::chrono::steady_clock::now();
    Plan p = s.plan(g, costs, params);
    p.solve_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return p;
}

}  // namespace rl
