// The Checkmate MILP (strategies/checkmate.h) against an exhaustive search over every valid
// schedule of small hand-built DAGs.
//
// The search is Dijkstra over states (backwards done, set of live activations, loss computed):
// from a state a schedule may Compute any node whose inputs are live, Free any live activation,
// or run the next Backward in canonical order when its residuals are live. Memory follows the
// rules of engine/liveness.h, derived here from the graph (gradients live from the first
// consumer's backward to the producer's; parameter gradients from the owner's backward on). The
// schedules it returns are checked with simulate(), so a wrong derivation fails the test rather
// than passing silently.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <queue>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/liveness.h"
#include "engine/simulator.h"
#include "strategies/checkmate.h"

namespace rl {
namespace {

// --- small DAGs, activations large against parameters (a tall batch over narrow layers) ---

Attrs out_features(int64_t n) {
    return Attrs{{"out_features", n}};
}

NodeId node(Graph& g, const std::string& name, OpKind op, const std::vector<ValueId>& ins,
            Attrs attrs = {}) {
    return g.add_node(name, op, ins, std::move(attrs));
}
ValueId out(const Graph& g, NodeId n) {
    return g.node(n).output;
}

Graph chain_graph() {  // 8 nodes: linear/tanh alternating, widths varying
    Graph g("chain");
    ValueId x = g.add_input("x", DType::F32, {32, 4});
    const int64_t widths[] = {8, 6, 12, 4};
    for (int i = 0; i < 4; ++i) {
        const NodeId l =
            node(g, "l" + std::to_string(i), OpKind::Linear, {x}, out_features(widths[i]));
        x = out(g, l);
        if (i < 3) x = out(g, node(g, "t" + std::to_string(i), OpKind::Tanh, {x}));
    }
    node(g, "loss", OpKind::SumSquares, {x});
    g.finalize();
    return g;
}

Graph diamond_graph() {  // 9 nodes: one value feeding two branches that rejoin
    Graph g("diamond");
    const ValueId x = g.add_input("x", DType::F32, {32, 4});
    const NodeId a = node(g, "a", OpKind::Linear, {x}, out_features(8));
    const NodeId r = node(g, "r", OpKind::Relu, {out(g, a)});
    const NodeId b1 = node(g, "b1", OpKind::Linear, {out(g, r)}, out_features(12));
    const NodeId c1 = node(g, "c1", OpKind::Tanh, {out(g, b1)});
    const NodeId b2 = node(g, "b2", OpKind::Linear, {out(g, r)}, out_features(12));
    const NodeId c2 = node(g, "c2", OpKind::Gelu, {out(g, b2)});
    const NodeId s = node(g, "s", OpKind::Add, {out(g, c1), out(g, c2)});
    const NodeId o = node(g, "o", OpKind::Linear, {out(g, s)}, out_features(4));
    node(g, "loss", OpKind::SumSquares, {out(g, o)});
    g.finalize();
    return g;
}

Graph skip_graph() {  // 9 nodes: two residual blocks
    Graph g("skip");
    const ValueId x = g.add_input("x", DType::F32, {32, 4});
    const NodeId l0 = node(g, "l0", OpKind::Linear, {x}, out_features(8));
    const NodeId a0 = node(g, "a0", OpKind::Relu, {out(g, l0)});
    const NodeId l1 = node(g, "l1", OpKind::Linear, {out(g, a0)}, out_features(8));
    const NodeId a1 = node(g, "a1", OpKind::Tanh, {out(g, l1)});
    const NodeId s1 = node(g, "s1", OpKind::Add, {out(g, a0), out(g, a1)});
    const NodeId l2 = node(g, "l2", OpKind::Linear, {out(g, s1)}, out_features(8));
    const NodeId a2 = node(g, "a2", OpKind::Gelu, {out(g, l2)});
    const NodeId s2 = node(g, "s2", OpKind::Add, {out(g, s1), out(g, a2)});
    node(g, "loss", OpKind::SumSquares, {out(g, s2)});
    g.finalize();
    return g;
}

Graph attention_graph() {  // 10 nodes: q, k, v, scores, softmax, context, projection, residual
    Graph g("attention");
    const ValueId x = g.add_input("x", DType::F32, {2, 8, 4});
    const NodeId q = node(g, "q", OpKind::Linear, {x}, out_features(8));
    const NodeId k = node(g, "k", OpKind::Linear, {x}, out_features(8));
    const NodeId v = node(g, "v", OpKind::Linear, {x}, out_features(8));
    const NodeId sc = node(g, "scores", OpKind::MatMul, {out(g, q), out(g, k)},
                           Attrs{{"transpose_b", int64_t{1}}, {"alpha", 0.35}});
    const NodeId p = node(g, "probs", OpKind::Softmax, {out(g, sc)});
    const NodeId ctx = node(g, "ctx", OpKind::MatMul, {out(g, p), out(g, v)});
    const NodeId o = node(g, "proj", OpKind::Linear, {out(g, ctx)}, out_features(8));
    const NodeId r = node(g, "res", OpKind::Add, {out(g, o), out(g, v)});
    const NodeId a = node(g, "act", OpKind::Gelu, {out(g, r)});
    node(g, "loss", OpKind::SumSquares, {out(g, a)});
    g.finalize();
    return g;
}

// --- the exhaustive search ---

class Exhaustive {
  public:
    Exhaustive(const Graph& g, const CostModel& costs) : g_(g), costs_(costs), t_(g) {
        n_ = g.num_nodes();
        for (NodeId b = n_ - 1; b >= 0; --b)
            if (g.needs_backward(b)) order_.push_back(b);
        base_ = static_cast<double>(g.param_bytes() + g.input_bytes());
        for (NodeId j = 0; j < n_; ++j) {
            uint32_t m = 0;
            for (ValueId in : g.node(j).inputs)
                if (!g.value(in).is_input()) m |= 1u << g.value(in).producer;
            input_mask_.push_back(m);
        }
        auto first_accumulator = [&](ValueId v) {  // the last consumer: its backward runs first
            NodeId c = -1;
            for (NodeId k : g.value(v).consumers) c = std::max(c, k);
            return c;
        };
        for (NodeId b : order_) {
            double grads = 0;
            for (NodeId p = 0; p < n_; ++p) {
                const Value& v = g.output_of(p);
                if (v.requires_grad && !v.consumers.empty() &&
                    first_accumulator(g.node(p).output) > b && p <= b)
                    grads += static_cast<double>(v.bytes);
            }
            for (const Param& prm : g.params())
                if (prm.owner > b) grads += static_cast<double>(prm.bytes);
            grads_before_.push_back(grads);
            const Node& nd = g.node(b);
            double extra = b == g.loss_node() ? static_cast<double>(g.output_of(b).bytes) : 0;
            std::vector<ValueId> ins = nd.inputs;
            std::sort(ins.begin(), ins.end());
            ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
            uint32_t residuals = 0;
            for (size_t i = 0; i < nd.inputs.size(); ++i)
                if (((t_.residual_inputs[static_cast<size_t>(b)] >> i) & 1u) &&
                    !g.value(nd.inputs[i]).is_input())
                    residuals |= 1u << g.value(nd.inputs[i]).producer;
            if (t_.residual_output[static_cast<size_t>(b)]) residuals |= 1u << b;
            residual_mask_.push_back(residuals);
            for (ValueId in : ins)
                if (g.value(in).requires_grad && first_accumulator(in) == b)
                    extra += static_cast<double>(g.value(in).bytes);
            for (ParamId prm : nd.params) extra += static_cast<double>(g.param(prm).bytes);
            extra += static_cast<double>(t_.bwd_workspace[static_cast<size_t>(b)]);
            extra_.push_back(extra);
        }
    }

    struct Result {
        bool found = false;
        double value = 0;  // recompute ms (min_cost) or peak bytes (min_peak)
        Schedule schedule;
    };

    // Least recompute time with every instruction's peak <= budget.
    Result min_cost(uint64_t budget) const { return search(static_cast<double>(budget), false); }
    // Least peak over all schedules (a bottleneck shortest path).
    Result min_peak() const { return search(std::numeric_limits<double>::infinity(), true); }

  private:
    size_t key(int k, bool loss, uint32_t mask) const {
        return ((static_cast<size_t>(k) * 2 + (loss ? 1 : 0)) << n_) | mask;
    }
    double live(int k, uint32_t mask) const {
        double bytes =
            base_ +
            (k < static_cast<int>(order_.size()) ? grads_before_[static_cast<size_t>(k)] : 0);
        for (NodeId i = 0; i < n_; ++i)
            if ((mask >> i) & 1u) bytes += static_cast<double>(g_.output_of(i).bytes);
        return bytes;
    }

    Result search(double budget, bool minimise_peak) const {
        const size_t states = (order_.size() + 1) * 2 << n_;
        std::vector<double> dist(states, std::numeric_limits<double>::infinity());
        std::vector<size_t> parent(states, 0);
        std::vector<Instruction> via(states, Instruction{InstrKind::Free, -1});
        using Item = std::pair<double, size_t>;
        std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
        const size_t start = key(0, false, 0);
        dist[start] = minimise_peak ? live(0, 0) : 0;
        queue.push({dist[start], start});
        const auto K = static_cast<int>(order_.size());
        size_t goal = states;
        while (!queue.empty()) {
            const auto [d, s] = queue.top();
            queue.pop();
            if (d > dist[s]) continue;
            const uint32_t mask = static_cast<uint32_t>(s & ((size_t{1} << n_) - 1));
            const size_t hi = s >> n_;
            const int k = static_cast<int>(hi / 2);
            const bool loss = hi % 2 != 0;
            if (k == K) {
                goal = s;
                break;
            }
            const double now = live(k, mask);
            auto relax = [&](size_t to, double peak, double cost, Instruction ins) {
                if (peak > budget) return;
                const double nd = minimise_peak ? std::max(d, peak) : d + cost;
                if (nd < dist[to]) {
                    dist[to] = nd;
                    parent[to] = s;
                    via[to] = ins;
                    queue.push({nd, to});
                }
            };
            for (NodeId j = 0; j < n_; ++j) {
                const uint32_t bit = 1u << j;
                if (mask & bit) {
                    relax(key(k, loss, mask & ~bit), now, 0, {InstrKind::Free, g_.node(j).output});
                } else if ((mask & input_mask_[static_cast<size_t>(j)]) ==
                           input_mask_[static_cast<size_t>(j)]) {
                    const double peak =
                        now + static_cast<double>(g_.output_of(j).bytes) +
                        static_cast<double>(t_.fwd_workspace[static_cast<size_t>(j)]);
                    relax(key(k, loss || j == g_.loss_node(), mask | bit), peak,
                          costs_.forward_ms(j), {InstrKind::Compute, j});
                }
            }
            const uint32_t need = residual_mask_[static_cast<size_t>(k)];
            if (loss && (mask & need) == need)
                relax(key(k + 1, loss, mask), now + extra_[static_cast<size_t>(k)], 0,
                      {InstrKind::Backward, order_[static_cast<size_t>(k)]});
        }
        Result r;
        if (goal == states) return r;
        r.found = true;
        std::vector<Instruction> code;
        for (size_t s = goal; s != start; s = parent[s]) code.push_back(via[s]);
        std::reverse(code.begin(), code.end());
        r.schedule.code = code;
        double first_forward = 0;
        for (NodeId j = 0; j < n_; ++j) first_forward += costs_.forward_ms(j);
        r.value = minimise_peak ? dist[goal] : dist[goal] - first_forward;
        return r;
    }

    const Graph& g_;
    const CostModel& costs_;
    LivenessTables t_;
    int n_ = 0;
    std::vector<NodeId> order_;
    double base_ = 0;
    std::vector<uint32_t> input_mask_, residual_mask_;
    std::vector<double> grads_before_, extra_;
};

Schedule plain_backprop(const Graph& g) {
    ScheduleBuilder b(g);
    for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);
    for (NodeId n = g.num_nodes() - 1; n >= 0; --n)
        if (g.needs_backward(n)) b.backward(n);
    return b.finish();
}

CheckmateOptions quick() {
    CheckmateOptions o;
    o.time_limit_s = 20;  // far above what these graphs need; never reached in practice
    return o;
}

struct Named {
    std::string name;
    Graph (*build)();
};

class CheckmateSmallDag : public ::testing::TestWithParam<Named> {};

// The heart of it: at budgets from the least feasible peak to plain backprop's, the MILP's
// proven optimum equals the exhaustive optimum, and its plan simulates within the budget.
TEST_P(CheckmateSmallDag, MatchesExhaustiveSearchAcrossBudgets) {
    const Graph g = GetParam().build();
    ASSERT_LE(g.num_nodes(), 12);
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Exhaustive search(g, costs);
    const Exhaustive::Result lean = search.min_peak();
    ASSERT_TRUE(lean.found);
    const uint64_t lo = static_cast<uint64_t>(lean.value);
    // The search's memory rules agree with the engine's on its own answer.
    ASSERT_NO_THROW(validate(g, lean.schedule));
    ASSERT_EQ(simulate(g, lean.schedule, costs).peak_bytes, lo);
    const uint64_t hi = simulate(g, plain_backprop(g), costs).peak_bytes;
    ASSERT_LT(lo, hi) << "the graph must leave room for a trade-off";

    double previous_cost = std::numeric_limits<double>::infinity();
    for (const double f : {0.0, 0.2, 0.5, 0.8}) {
        const auto budget = lo + static_cast<uint64_t>(f * static_cast<double>(hi - lo));
        SCOPED_TRACE("budget " + std::to_string(budget));
        const Exhaustive::Result best = search.min_cost(budget);
        ASSERT_TRUE(best.found);
        const Simulation best_sim = simulate(g, best.schedule, costs);
        ASSERT_LE(best_sim.peak_bytes, budget);
        ASSERT_NEAR(best_sim.recompute_ms, best.value, 1e-12);

        CheckmateStats stats;
        const Plan p = checkmate_plan(g, costs, budget, quick(), &stats);
        ASSERT_EQ(p.status, PlanStatus::Optimal) << p.message;
        ASSERT_NO_THROW(validate(g, p.schedule));
        const Simulation sim = simulate(g, p.schedule, costs);
        EXPECT_LE(sim.peak_bytes, budget);
        EXPECT_NEAR(sim.recompute_ms, best.value, 1e-9);
        EXPECT_NEAR(stats.objective_ms, sim.recompute_ms, 1e-12);
        EXPECT_LE(stats.lower_bound_ms, sim.recompute_ms + 1e-9);
        // More memory never costs more time.
        EXPECT_LE(sim.recompute_ms, previous_cost + 1e-12);
        previous_cost = sim.recompute_ms;
    }
}

// Below the least feasible peak the plan is infeasible and names the least feasible peak of
// the exhaustive search, proven by the min-peak MILP (the plan at exactly that budget is checked
// by the sweep above, at f = 0). The skip graph is left out to keep the suite fast: its peak
// MILP takes seconds to prove.
TEST(Checkmate, InfeasibleBudgetNamesTheSmallestFeasibleOne) {
    for (Graph (*build)() : {chain_graph, diamond_graph, attention_graph}) {
        const Graph g = build();
        SCOPED_TRACE(g.name());
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        const auto lo = static_cast<uint64_t>(Exhaustive(g, costs).min_peak().value);
        const Plan p = checkmate_plan(g, costs, lo - 1, quick());
        ASSERT_EQ(p.status, PlanStatus::Infeasible);
        ASSERT_TRUE(p.min_feasible_budget);
        EXPECT_EQ(*p.min_feasible_budget, lo);
        EXPECT_NE(p.message.find(std::to_string(lo)), std::string::npos) << p.message;
        EXPECT_NE(p.message.find("over the MILP's class"), std::string::npos) << p.message;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Dags, CheckmateSmallDag,
    ::testing::Values(Named{"chain", chain_graph}, Named{"diamond", diamond_graph},
                      Named{"skip", skip_graph}, Named{"attention", attention_graph}),
    [](const ::testing::TestParamInfo<Named>& info) { return info.param.name; });

TEST(Checkmate, PlainBackpropWhenItFits) {
    const Graph g = skip_graph();
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const uint64_t peak = simulate(g, plain_backprop(g), costs).peak_bytes;
    const Plan p = checkmate_plan(g, costs, peak, 5.0);
    EXPECT_EQ(p.status, PlanStatus::Optimal);
    EXPECT_EQ(simulate(g, p.schedule, costs).recomputes, 0);
}

// Executed for real: the predicted peak is the measured one and the gradients are those of
// plain backprop, bit for bit.
TEST(Checkmate, ExecutedPlansMatchPredictionAndPlainGradients) {
    for (Graph (*build)() : {skip_graph, attention_graph}) {
        const Graph g = build();
        SCOPED_TRACE(g.name());
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        const auto lo = static_cast<uint64_t>(Exhaustive(g, costs).min_peak().value);
        const uint64_t hi = simulate(g, plain_backprop(g), costs).peak_bytes;
        const Plan p = checkmate_plan(g, costs, lo + (hi - lo) / 4, quick());
        ASSERT_NE(p.status, PlanStatus::Infeasible) << p.message;
        const Simulation sim = simulate(g, p.schedule, costs);
        EXPECT_GT(sim.recomputes, 0);

        auto backend = make_cpu_backend(1);
        const RunData data = RunData::seeded(g);
        const Execution run = execute(g, p.schedule, *backend, data);
        const Execution ref = execute(g, plain_backprop(g), *backend, data);
        EXPECT_EQ(run.peak_bytes, sim.peak_bytes);
        ASSERT_EQ(run.param_grads.size(), ref.param_grads.size());
        for (size_t i = 0; i < ref.param_grads.size(); ++i)
            EXPECT_EQ(0, std::memcmp(ref.param_grads[i].data(), run.param_grads[i].data(),
                                     ref.param_grads[i].size() * sizeof(float)));
    }
}

// Without forward stages the MILP is smaller but searches fewer schedules: never cheaper.
TEST(Checkmate, SingleForwardStageIsNeverBetter) {
    const Graph g = skip_graph();
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const auto lo = static_cast<uint64_t>(Exhaustive(g, costs).min_peak().value);
    const uint64_t hi = simulate(g, plain_backprop(g), costs).peak_bytes;
    CheckmateOptions one = quick();
    one.forward_stages = false;
    for (const uint64_t budget : {lo + (hi - lo) / 3, lo + 2 * (hi - lo) / 3}) {
        const Plan full = checkmate_plan(g, costs, budget, quick());
        const Plan single = checkmate_plan(g, costs, budget, one);
        ASSERT_EQ(full.status, PlanStatus::Optimal);
        if (single.status == PlanStatus::Infeasible) continue;
        EXPECT_LE(simulate(g, single.schedule, costs).peak_bytes, budget);
        EXPECT_GE(simulate(g, single.schedule, costs).recompute_ms + 1e-12,
                  simulate(g, full.schedule, costs).recompute_ms);
    }
}

}  // namespace
}  // namespace rl
