// `min-cut[:budget=BYTES][,recompute_dots=0|1][,offload=0|1]`: the saved set chosen by a minimum
// s-t cut between the forward and the backward, as compiler partitioners do — PyTorch functorch's
// min_cut_rematerialization_partition (Horace He's "min-cut optimal recomputation"; the same
// flow view appears in Checkmate, Jain et al. 2020, and Rockmate, Zhao et al. 2023).
//
// The flow network. Every node output v becomes two vertices v_in -> v_out:
//   v_in -> v_out   capacity bytes(v)·M      cut = v is SAVED (kept from the forward)
//   source -> v_in  capacity cost(v)         cut = v is RECOMPUTED in the backward (v_in on the
//                                            sink side); infinite for a matmul-like op
//                                            (OpDef::is_dot) unless recompute_dots=1: a dot
//                                            can only be saved, never recomputed
//   u_out -> v_in   infinite, for each input u of v's node: to recompute v, u must be
//                   available in the backward (saved or recomputed itself)
//   v_out -> sink   infinite, when some Backward reads v as a residual (LivenessTables)
// Graph inputs are always live in our memory model, so they get no vertices: reading one costs
// nothing and constrains nothing. A finite cut puts every residual on the sink side either
// saved (v_in on the source side, v_out on the sink side) or recomputed from values that are
// in turn saved or recomputed, back to the graph inputs. M exceeds the sum of all recompute
// costs (quantised to integers), so the cut minimises saved bytes first and, among equal-byte
// cuts, the recompute cost: keep relu(x) rather than x and a recompute of relu.
//
// Worked example (tests/strategies/test_min_cut.cpp builds it): x -> fc (linear, 128 B) ->
// {g = gelu(fc), s = sigmoid(fc)} -> m = add(g, s) -> loss = ½Σm². The backwards read fc (gelu
// reads its input), s (sigmoid reads its output) and m (the loss reads its input); every
// output is 128 B. fc is a dot, so it must be saved (128 B). s and m can be recomputed from fc
// at a small compute cost instead of 128 B each, so the minimum cut is {fc}: saved 128 B,
// recompute s, g, m in the backward — where `none` keeps fc, s and m (384 B).
//
// The schedule: the forward computes every node once; the backwards run in the canonical
// order, and just before each one its residuals that are not saved are recomputed (inputs
// first, depth-first from the saved values); a recomputed value stays until its last backward
// read (ScheduleBuilder places the Frees), so each is recomputed at most once.
//
// With budget=BYTES (a bound on the simulated peak): saved bytes are not the peak, so the
// budget is met by search. Starting from the cut above, repeatedly forbid saving the saved
// values that are live at the simulated peak (all saved values when the peak falls inside a
// recomputation) — largest bytes × instructions held per unit of recompute cost first, an
// eighth of them per round. A forbidden value's in->out edge becomes infinite, and a matmul
// feeding it is forbidden with it (otherwise it would just take its place in the cut: relu(fc)
// -> fc, same bytes); a forbidden dot may be recomputed. Re-solve, re-simulate, until no saved
// value is left to forbid or the peak has not improved for 8 rounds. Of all the points
// visited, the one with the least predicted recompute time whose peak fits wins. The points do
// not depend on the budget, so a smaller budget never gets a cheaper plan. If none fits, the
// plan is Infeasible and names the smallest peak visited.
//
// With offload=1 (and a budget): the points visited whose peak is over the budget, each with
// the values it keeps offloaded to the host down to the budget by the greedy pass of
// solvers/offload_pass.h, compete with the point chosen above; the least recompute + stall (the
// compute stream's waits for copies, as the cost model's host link prices them) wins.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

// g++ 12 -O2 warns -Wmaybe-uninitialized about a boost::optional inside Boost's max-flow code
// (a false positive: the optional is engaged before use). Silenced for this header only.
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__)  // clang has no such warning, and warns of the name
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#pragma GCC diagnostic pop

#include "engine/errors.h"
#include "engine/liveness.h"
#include "engine/ops/op.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "solvers/offload_pass.h"
#include "strategies/builtin.h"

namespace rl {

namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using FlowGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS,
    boost::property<boost::vertex_index_t, long,
                    boost::property<boost::vertex_color_t, boost::default_color_type,
                                    boost::property<boost::vertex_distance_t, long,
                                                    boost::property<boost::vertex_predecessor_t,
                                                                    Traits::edge_descriptor>>>>,
    boost::property<
        boost::edge_capacity_t, int64_t,
        boost::property<boost::edge_residual_capacity_t, int64_t,
                        boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

// The residual values each node's Backward reads (graph inputs left out: always live).
std::vector<std::vector<ValueId>> residual_values(const Graph& g, const LivenessTables& t) {
    std::vector<std::vector<ValueId>> out(static_cast<size_t>(g.num_nodes()));
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const auto ni = static_cast<size_t>(n);
        if (!t.needs_backward[ni]) continue;
        auto& r = out[ni];
        for_each_residual(g, t, n, [&](ValueId v) {
            if (!g.value(v).is_input()) r.push_back(v);
        });
        std::sort(r.begin(), r.end());
        r.erase(std::unique(r.begin(), r.end()), r.end());
    }
    return out;
}

class CutSolver {
  public:
    CutSolver(const Graph& g, const LivenessTables& t, const std::vector<double>& cost,
              bool recompute_dots)
        : g_(g), residuals_(residual_values(g, t)), recompute_dots_(recompute_dots) {
        const auto n = static_cast<size_t>(g.num_nodes());
        // Recompute costs quantised to 1..1000 (a zero would make a free recompute and a free
        // save indistinguishable); M exceeds their sum, so bytes dominate the cut.
        const double top = std::max(1e-30, *std::max_element(cost.begin(), cost.end()));
        cost_units_.resize(n);
        int64_t sum_units = 0;
        for (size_t i = 0; i < n; ++i) {
            cost_units_[i] = 1 + static_cast<int64_t>(std::floor(cost[i] / top * 999.0));
            sum_units += cost_units_[i];
        }
        byte_scale_ = sum_units + 1;
        // Keep every finite capacity sum below 2^61: coarsen bytes if the network is enormous.
        uint64_t total_bytes = 0;
        for (const Node& node : g.nodes()) total_bytes += g.value(node.output).bytes;
        const auto limit = static_cast<uint64_t>(int64_t{1} << 61) / 4;
        while (total_bytes / byte_shift_divisor() > limit / static_cast<uint64_t>(byte_scale_))
            ++byte_shift_;
        needed_.assign(n, 0);
        for (const auto& r : residuals_)
            for (ValueId v : r) needed_[static_cast<size_t>(g.value(v).producer)] = 1;
    }

    // Nodes whose outputs the cut saves, given the nodes whose outputs may not be saved.
    std::vector<uint8_t> saved(const std::vector<uint8_t>& forbidden) const {
        const int n = g_.num_nodes();
        const auto source = static_cast<size_t>(2 * n), sink = source + 1;
        FlowGraph fg(static_cast<size_t>(2 * n + 2));
        auto cap = boost::get(boost::edge_capacity, fg);
        auto rev = boost::get(boost::edge_reverse, fg);
        int64_t finite = 0;
        std::vector<std::pair<std::pair<size_t, size_t>, int64_t>> edges;
        const int64_t inf = -1;  // patched below once the finite total is known
        auto in = [](NodeId v) { return static_cast<size_t>(2 * v); };
        auto out = [](NodeId v) { return static_cast<size_t>(2 * v + 1); };
        for (NodeId v = 0; v < n; ++v) {
            const auto vi = static_cast<size_t>(v);
            const bool banned = op_def(g_.node(v).op).is_dot && !recompute_dots_ && !forbidden[vi];
            const int64_t save =
                forbidden[vi]
                    ? inf
                    : static_cast<int64_t>((g_.output_of(v).bytes + byte_shift_divisor() - 1) /
                                           byte_shift_divisor()) *
                          byte_scale_;
            const int64_t recompute = banned ? inf : cost_units_[vi];
            edges.push_back({{in(v), out(v)}, save});
            edges.push_back({{source, in(v)}, recompute});
            for (ValueId u : g_.node(v).inputs)
                if (!g_.value(u).is_input())
                    edges.push_back({{out(g_.value(u).producer), in(v)}, inf});
            if (needed_[vi]) edges.push_back({{out(v), sink}, inf});
            finite += (save > 0 ? save : 0) + (recompute > 0 ? recompute : 0);
        }
        const int64_t infinity = finite + 1;
        for (const auto& [uv, c] : edges) {
            const auto e = boost::add_edge(uv.first, uv.second, fg).first;
            const auto r = boost::add_edge(uv.second, uv.first, fg).first;
            cap[e] = c < 0 ? infinity : c;
            cap[r] = 0;
            rev[e] = r;
            rev[r] = e;
        }
        boost::boykov_kolmogorov_max_flow(fg, source, sink);

        // The source side of the cut: what the source still reaches in the residual network.
        auto residual = boost::get(boost::edge_residual_capacity, fg);
        std::vector<uint8_t> reach(static_cast<size_t>(2 * n + 2), 0);
        std::vector<size_t> stack{source};
        reach[source] = 1;
        while (!stack.empty()) {
            const size_t u = stack.back();
            stack.pop_back();
            for (auto [e, end] = boost::out_edges(u, fg); e != end; ++e) {
                const size_t w = boost::target(*e, fg);
                if (!reach[w] && residual[*e] > 0) {
                    reach[w] = 1;
                    stack.push_back(w);
                }
            }
        }
        std::vector<uint8_t> kept(static_cast<size_t>(n), 0);
        for (NodeId v = 0; v < n; ++v)
            kept[static_cast<size_t>(v)] = reach[in(v)] && !reach[out(v)];
        return kept;
    }

    const std::vector<std::vector<ValueId>>& residuals() const { return residuals_; }

  private:
    uint64_t byte_shift_divisor() const { return uint64_t{1} << byte_shift_; }

    const Graph& g_;
    std::vector<std::vector<ValueId>> residuals_;
    bool recompute_dots_;
    std::vector<int64_t> cost_units_;
    std::vector<uint8_t> needed_;
    int64_t byte_scale_ = 1;
    int byte_shift_ = 0;
};

// Forward once; before each Backward (canonical order), recompute its residuals that are not
// saved, depth-first from the saved values and the graph inputs.
Schedule build_schedule(const Graph& g, const std::vector<std::vector<ValueId>>& residuals,
                        const std::vector<uint8_t>& saved) {
    ScheduleBuilder b(g);
    const int n = g.num_nodes();
    for (NodeId v = 0; v < n; ++v) b.compute(v);
    std::vector<uint8_t> available(saved);
    std::vector<std::pair<NodeId, size_t>> stack;  // node, next input to look at
    auto ensure = [&](NodeId target) {
        if (available[static_cast<size_t>(target)]) return;
        stack.push_back({target, 0});
        while (!stack.empty()) {
            auto& [node, next] = stack.back();
            const auto& inputs = g.node(node).inputs;
            while (next < inputs.size() &&
                   (g.value(inputs[next]).is_input() ||
                    available[static_cast<size_t>(g.value(inputs[next]).producer)]))
                ++next;
            if (next < inputs.size()) {
                stack.push_back({g.value(inputs[next]).producer, 0});
                continue;
            }
            b.compute(node);
            available[static_cast<size_t>(node)] = 1;
            stack.pop_back();
        }
    };
    for (NodeId v = n - 1; v >= 0; --v) {
        if (!g.needs_backward(v)) continue;
        for (ValueId r : residuals[static_cast<size_t>(v)]) ensure(g.value(r).producer);
        b.backward(v);
    }
    return b.finish();
}

struct Point {
    std::vector<uint8_t> saved;
    Schedule schedule;
    uint64_t peak = 0;
    double recompute_ms = 0;
};

std::vector<NodeId> saved_nodes(const std::vector<uint8_t>& saved) {
    std::vector<NodeId> out;
    for (size_t i = 0; i < saved.size(); ++i)
        if (saved[i]) out.push_back(static_cast<NodeId>(i));
    return out;
}

class MinCutStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "min-cut"; }
    std::string_view about() const override {
        return "functorch-style min-cut partition: the saved set is a minimum cut between "
               "forward and backward (matmuls are saved, cheap ops recomputed); with budget=, "
               "more recompute for less memory";
    }
    ParamSchema schema() const override {
        return {
            {"budget",
             ParamType::Bytes,
             "",
             "peak-memory budget in bytes (e.g. 64MiB); none: the plain minimum cut",
             {},
             1},
            {"recompute_dots",
             ParamType::Int,
             "0",
             "1: matmul-like ops may be recomputed too (by default they are only saved)",
             {},
             0,
             1},
            {"offload",
             ParamType::Int,
             "0",
             "1 (with budget=): host memory beside recompute: the cuts that keep more than the "
             "budget allows, with what they keep offloaded down to it (solvers/offload_pass.h, "
             "priced with the cost model's host link, --link-gbps), compete with the budgeted "
             "cut; the plan of least recompute + stall time wins",
             {},
             0,
             1},
        };
    }

    Plan plan(const Graph& g, const CostModel& costs, const ParamValues& params) const override {
        const LivenessTables tables(g);
        const std::vector<double> cost = costs.forward_costs_for(g);
        const bool recompute_dots = params.get_int("recompute_dots") != 0;
        const CutSolver solver(g, tables, cost, recompute_dots);
        const auto n = static_cast<size_t>(g.num_nodes());
        std::vector<uint8_t> forbidden(n, 0);

        Plan p;
        p.status = PlanStatus::Heuristic;
        const bool offload = params.get_int("offload") != 0;
        if (!params.has("budget")) {
            if (offload)
                throw Error(
                    "min-cut:offload=1 needs a budget (budget=...): it offloads what the cut "
                    "keeps down to that budget");
            const std::vector<uint8_t> saved = solver.saved(forbidden);
            p.schedule = build_schedule(g, solver.residuals(), saved);
            p.checkpoints = saved_nodes(saved);
            return p;
        }

        const uint64_t budget = params.get_bytes("budget");
        p.budget = budget;
        SimulateOptions opt;
        opt.record_timeline = false;
        std::vector<Point> points;
        uint64_t best_peak = std::numeric_limits<uint64_t>::max();
        int since_improvement = 0;
        constexpr int kPatience = 8;
        while (since_improvement < kPatience) {
            Point pt;
            pt.saved = solver.saved(forbidden);
            pt.schedule = build_schedule(g, solver.residuals(), pt.saved);
            const Simulation sim = simulate(g, tables, pt.schedule, costs, opt);
            pt.peak = sim.peak_bytes;
            pt.recompute_ms = sim.recompute_ms;
            if (pt.peak < best_peak) {
                best_peak = pt.peak;
                since_improvement = 0;
            } else {
                ++since_improvement;
            }

            // Saved values live at the peak: the instance from its Compute to its Free.
            std::vector<long> computed_at(n, -1), held(n, 0);
            std::vector<NodeId> at_peak, all_saved;
            for (size_t i = 0; i < pt.schedule.size(); ++i) {
                const Instruction& ins = pt.schedule.code[i];
                if (ins.kind == InstrKind::Compute) {
                    computed_at[static_cast<size_t>(ins.target)] = static_cast<long>(i);
                } else if (ins.kind == InstrKind::Free) {
                    const NodeId v = g.value(ins.target).producer;
                    const auto vi = static_cast<size_t>(v);
                    if (!pt.saved[vi] || forbidden[vi]) continue;
                    all_saved.push_back(v);
                    held[vi] = static_cast<long>(i) - computed_at[vi];
                    if (computed_at[vi] <= sim.peak_instruction &&
                        sim.peak_instruction < static_cast<long>(i))
                        at_peak.push_back(v);
                }
            }
            points.push_back(std::move(pt));
            std::vector<NodeId>& candidates = at_peak.empty() ? all_saved : at_peak;
            if (candidates.empty()) break;
            // Bytes held × instructions held, per unit of recompute: a value saved far from
            // its backward frees the most memory-time when it is recomputed instead.
            auto ratio = [&](NodeId v) {
                const auto vi = static_cast<size_t>(v);
                return static_cast<double>(g.output_of(v).bytes) * static_cast<double>(held[vi]) /
                       (cost[vi] + 1e-12);
            };
            std::stable_sort(candidates.begin(), candidates.end(),
                             [&](NodeId a, NodeId b) { return ratio(a) > ratio(b); });
            const size_t take = std::max<size_t>(1, candidates.size() / 8);
            for (size_t i = 0; i < take; ++i) {
                forbidden[static_cast<size_t>(candidates[i])] = 1;
                // A banned matmul feeding it would only take its place in the cut (same bytes,
                // e.g. relu(fc) -> fc): forbid that too, which lets it be recomputed.
                if (recompute_dots) continue;
                for (ValueId u : g.node(candidates[i]).inputs)
                    if (!g.value(u).is_input() && op_def(g.node(g.value(u).producer).op).is_dot)
                        forbidden[static_cast<size_t>(g.value(u).producer)] = 1;
            }
        }

        const Point* chosen = nullptr;
        for (const Point& pt : points) {
            if (pt.peak > budget) continue;
            if (!chosen || pt.recompute_ms < chosen->recompute_ms ||
                (pt.recompute_ms == chosen->recompute_ms && pt.peak < chosen->peak))
                chosen = &pt;
        }
        if (offload) {
            // The cuts over the budget, with what they keep offloaded down to it.
            std::vector<Schedule> over;
            std::vector<const Point*> from;
            for (const Point& pt : points)
                if (pt.peak > budget) {
                    over.push_back(pt.schedule);
                    from.push_back(&pt);
                }
            auto pick = cheapest_offloaded(g, costs, budget, over);
            // Recompute + stall; a recompute-only cut has no stall.
            if (pick &&
                (!chosen || pick->added_ms < chosen->recompute_ms -
                                                 1e-9 * std::max(1.0, chosen->recompute_ms))) {
                const Simulation& sim = pick->sim;
                p.schedule = std::move(pick->schedule);
                p.checkpoints = saved_nodes(from[pick->source]->saved);
                p.message = "min-cut with offload: a cut that keeps " +
                            format_bytes(from[pick->source]->peak) + " at its peak, with " +
                            std::to_string(pick->offloaded.size()) + " kept values (" +
                            format_bytes(sim.offloaded_bytes) +
                            ") offloaded down to the budget; predicted stall " +
                            std::to_string(sim.stall_ms) + " ms, recompute " +
                            std::to_string(sim.recompute_ms) + " ms" +
                            (chosen ? ", less than the budgeted cut's " +
                                          std::to_string(chosen->recompute_ms) + " ms"
                                    : std::string(", where no cut fits the budget alone"));
                return p;
            }
            p.message = pick ? "offload=1: the cuts with offloads cost no less than this one"
                             : "offload=1: no cut over the budget could be offloaded down to it";
        }
        if (!chosen) {
            p.status = PlanStatus::Infeasible;
            p.min_feasible_budget = best_peak;
            p.message = "min-cut cannot meet the budget of " + format_bytes(budget) + " (" +
                        std::to_string(budget) +
                        " bytes) on this network: the smallest peak it reaches is " +
                        format_bytes(best_peak) + " (" + std::to_string(best_peak) +
                        " bytes); raise the budget to at least that" +
                        (recompute_dots ? std::string() : ", or try recompute_dots=1");
            return p;
        }
        p.schedule = chosen->schedule;
        p.checkpoints = saved_nodes(chosen->saved);
        return p;
    }
};

}  // namespace

std::unique_ptr<Strategy> make_min_cut_strategy() {
    return std::make_unique<MinCutStrategy>();
}

}  // namespace rl
