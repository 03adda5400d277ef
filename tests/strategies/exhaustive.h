#pragma once
// An exhaustive search over every valid schedule of a small graph (≤ 12 nodes or so), for tests:
// Dijkstra over states (backwards done, set of live activations, loss computed). From a state a
// schedule may Compute any node whose inputs are live, Free any live activation, or run the next
// Backward in canonical order when its residuals are live. Memory follows the rules of
// engine/liveness.h, derived here from the graph (gradients live from the first consumer's
// backward to the producer's; parameter gradients from the owner's backward on). Callers check
// the schedules it returns with simulate(), so a wrong derivation fails a test rather than
// passing silently. Used by test_checkmate.cpp and test_cross_strategy.cpp.
// As in the engine (engine/liveness.h), a Compute of a pointwise op may also run in place over a
// live input — the output takes the input's buffer, the schedule frees the input right after —
// which charges no output bytes.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/liveness.h"
#include "engine/schedule.h"

namespace rl {

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
                if (t_.reads_input(b, i) && !g.value(nd.inputs[i]).is_input())
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
        std::vector<ValueId> then_free(states, -1);  // an in-place Compute's freed input
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
            auto relax = [&](size_t to, double peak, double cost, Instruction ins,
                             ValueId freed = -1) {
                if (peak > budget) return;
                const double nd = minimise_peak ? std::max(d, peak) : d + cost;
                if (nd < dist[to]) {
                    dist[to] = nd;
                    parent[to] = s;
                    via[to] = ins;
                    then_free[to] = freed;
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
                    // In place over input slot i (then freed): no output bytes charged.
                    const Node& nd = g_.node(j);
                    const uint32_t ip = t_.in_place_inputs[static_cast<size_t>(j)];
                    for (size_t i = 0; i < nd.inputs.size(); ++i) {
                        if (!((ip >> i) & 1u)) continue;
                        const uint32_t from = 1u << g_.value(nd.inputs[i]).producer;
                        const double in_place_peak =
                            now + static_cast<double>(t_.fwd_workspace[static_cast<size_t>(j)]);
                        relax(key(k, loss || j == g_.loss_node(), (mask | bit) & ~from),
                              in_place_peak, costs_.forward_ms(j), {InstrKind::Compute, j},
                              nd.inputs[i]);
                    }
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
        for (size_t s = goal; s != start; s = parent[s]) {
            if (then_free[s] >= 0) code.push_back({InstrKind::Free, then_free[s]});
            code.push_back(via[s]);
        }
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

}  // namespace rl
