// `dtr[:budget=BYTES][,heuristic=eq|local]`: Dynamic Tensor Rematerialization — Kirisame,
// Lyubomirsky, Haan, Brennan, He, Roesch, Chen, Tatlock (ICLR 2021).
//
// DTR runs the ordinary step — the forward in node order, then the Backwards in the canonical
// order — online, like a cache: before each instruction it makes the values the instruction
// reads resident, rematerializing evicted ones (recursively: an evicted input of an evicted
// value is recomputed first), and whenever an allocation would take the live bytes over the
// budget it evicts the resident activation with the smallest
//     h(t) = cost(t) / (bytes(t) · staleness(t))
// among those the current instruction does not pin (parameters, graph inputs and gradients are
// never evicted). staleness = instructions since t was last read or written, plus one.
//   heuristic=eq (default): the paper's h_DTR-eq. cost(t) = its own forward cost plus the costs
//     of the evicted tensors around it — approximated with union-find: evicted tensors adjacent
//     in the graph form equivalence classes with a summed cost; t's cost adds the classes of
//     its evicted inputs and evicted consumers. As in the paper, a rematerialized tensor leaves
//     its class unsplit (its cost is subtracted), so the neighbourhood is over-approximated.
//   heuristic=local: h_DTR-local, cost(t) = its own forward cost only.
// A value that no later instruction of the step reads is freed at once (the paper's
// deallocation of dead tensors) — it may still be recomputed if rematerializing a consumer
// needs it.
//
// The memory model is the engine's (engine/liveness.h) replayed event by event: the output and
// workspace of a Compute; the seed, new input gradients, parameter gradients and workspace of a
// Backward, then the release of its workspace and output gradient. The result is recorded as an
// ordinary schedule — the Computes and Backwards in the order DTR issued them — and
// ScheduleBuilder inserts the Frees after each value instance's last read. An eviction or a
// death happens at or after that last read, so the schedule frees everything no later than the
// model did, while allocating at the same points: the simulated live bytes never exceed the
// model's, and the simulated peak is ≤ the budget. The plan checks this with simulate(); if it
// ever failed (a bug), the model's budget is tightened by the overshoot and DTR rerun.
//
// Worked example, `chain:l=3,width=16,batch=64` (x -> layer0 -> layer1 -> layer2 -> loss, each
// output 4 KiB; a linear layer's backward reads its input). `none` peaks at 24,832 B; under
// dtr:budget=21824 the forward evicts layer0 when layer2 is allocated (layer1, layer2's input,
// is pinned; layer0 is the only candidate); the backwards of the loss and of layer2 find
// layer2 and layer1 resident; layer1's backward reads layer0, which is recomputed from x, once:
//   compute layer0, layer1, [evict layer0], layer2, loss; backward loss, layer2;
//   compute layer0; backward layer1, layer0.
//
// Without a budget, DTR plans for the midpoint between the smallest budget it can meet and
// `none`'s peak. The smallest budget is found by bisection between 0 and `none`'s peak (at
// which DTR never evicts); DTR's success is not guaranteed monotone in the budget, so a failure
// at a budget above that point is answered by bisecting again above the failed budget — every
// reported min_feasible_budget is a budget at which the plan succeeds.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "engine/liveness.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "strategies/builtin.h"

namespace rl {

namespace {

enum class Heuristic { Eq, Local };

// Everything about the network the online simulation needs, computed once per plan. Values are
// indexed by their producing node (only node outputs can be evicted).
struct Network {
    Network(const Graph& graph, const CostModel& costs)
        : g(graph), tables(graph), cost(costs.forward_costs_for(graph)) {
        const auto n = static_cast<size_t>(g.num_nodes());
        inputs.resize(n);
        residuals.resize(n);
        consumers.resize(n);
        logical_reads.assign(n, 0);
        for (NodeId v = 0; v < g.num_nodes(); ++v) {
            const auto vi = static_cast<size_t>(v);
            const Node& node = g.node(v);
            for (ValueId u : node.inputs)
                if (!g.value(u).is_input()) inputs[vi].push_back(g.value(u).producer);
            std::sort(inputs[vi].begin(), inputs[vi].end());
            inputs[vi].erase(std::unique(inputs[vi].begin(), inputs[vi].end()), inputs[vi].end());
            for (NodeId u : inputs[vi]) {
                consumers[static_cast<size_t>(u)].push_back(v);
                ++logical_reads[static_cast<size_t>(u)];
            }
            if (!tables.needs_backward[vi]) continue;
            for_each_residual(g, tables, v, [&](ValueId x) {
                if (!g.value(x).is_input()) residuals[vi].push_back(g.value(x).producer);
            });
            std::sort(residuals[vi].begin(), residuals[vi].end());
            residuals[vi].erase(std::unique(residuals[vi].begin(), residuals[vi].end()),
                                residuals[vi].end());
            for (NodeId u : residuals[vi]) ++logical_reads[static_cast<size_t>(u)];
        }
        for (ParamId p = 0; p < g.num_params(); ++p) base_bytes += g.param(p).bytes;
        base_bytes += g.input_bytes();
    }

    const Graph& g;
    LivenessTables tables;
    std::vector<double> cost;
    std::vector<std::vector<NodeId>> inputs;     // distinct producing nodes of the inputs
    std::vector<std::vector<NodeId>> residuals;  // distinct values each Backward reads
    std::vector<std::vector<NodeId>> consumers;
    std::vector<int32_t> logical_reads;  // reads by the step's own instructions
    uint64_t base_bytes = 0;             // parameters and graph inputs: always live
};

struct Run {
    bool ok = false;
    std::vector<Instruction> sequence;  // Computes and Backwards, in DTR's order
    uint64_t model_peak = 0;
    long evictions = 0;
};

// One online pass under one budget.
class Dtr {
  public:
    Dtr(const Network& net, Heuristic h) : net_(net), g_(net.g), heuristic_(h) {}

    Run run(uint64_t budget) {
        reset(budget);
        Run r;
        for (NodeId n = 0; n < g_.num_nodes(); ++n)
            if (!step_compute(n)) return r;
        for (NodeId n = g_.num_nodes() - 1; n >= 0; --n)
            if (net_.tables.needs_backward[static_cast<size_t>(n)] && !step_backward(n)) return r;
        r.ok = true;
        r.sequence = std::move(seq_);
        r.model_peak = peak_;
        r.evictions = evictions_;
        return r;
    }

  private:
    enum State : uint8_t { NotYet, Resident, Evicted };

    void reset(uint64_t budget) {
        const auto n = static_cast<size_t>(g_.num_nodes());
        budget_ = budget;
        state_.assign(n, NotYet);
        pins_.assign(n, 0);
        remaining_ = net_.logical_reads;
        last_access_.assign(n, 0);
        slot_.assign(n, -1);
        resident_.clear();
        grad_live_.assign(static_cast<size_t>(g_.num_values()), 0);
        parent_.resize(n);
        for (size_t i = 0; i < n; ++i) parent_[i] = static_cast<NodeId>(i);
        class_cost_.assign(n, 0.0);
        seq_.clear();
        mem_ = net_.base_bytes;
        peak_ = mem_;
        clock_ = 0;
        evictions_ = 0;
    }

    // --- union-find over evicted values (h_DTR-eq) ---
    NodeId find(NodeId v) {
        while (parent_[static_cast<size_t>(v)] != v) {
            const NodeId up = parent_[static_cast<size_t>(parent_[static_cast<size_t>(v)])];
            parent_[static_cast<size_t>(v)] = up;
            v = up;
        }
        return v;
    }
    void unite(NodeId a, NodeId b) {
        a = find(a);
        b = find(b);
        if (a == b) return;
        if (a > b) std::swap(a, b);  // deterministic roots
        parent_[static_cast<size_t>(b)] = a;
        class_cost_[static_cast<size_t>(a)] += class_cost_[static_cast<size_t>(b)];
    }

    double score(NodeId v) {
        const auto vi = static_cast<size_t>(v);
        double c = net_.cost[vi];
        if (heuristic_ == Heuristic::Eq) {
            roots_.clear();
            auto add = [&](NodeId u) {
                if (state_[static_cast<size_t>(u)] != Evicted) return;
                const NodeId r = find(u);
                if (std::find(roots_.begin(), roots_.end(), r) != roots_.end()) return;
                roots_.push_back(r);
                c += std::max(0.0, class_cost_[static_cast<size_t>(r)]);
            };
            for (NodeId u : net_.inputs[vi]) add(u);
            for (NodeId u : net_.consumers[vi]) add(u);
        }
        const double bytes = static_cast<double>(std::max<uint64_t>(1, g_.output_of(v).bytes));
        const double staleness = static_cast<double>(clock_ - last_access_[vi] + 1);
        return c / (bytes * staleness);
    }

    // --- residency ---
    void make_resident(NodeId v) {
        const auto vi = static_cast<size_t>(v);
        if (state_[vi] == Evicted && heuristic_ == Heuristic::Eq)
            class_cost_[static_cast<size_t>(find(v))] -= net_.cost[vi];
        state_[vi] = Resident;
        last_access_[vi] = clock_;
        slot_[vi] = static_cast<long>(resident_.size());
        resident_.push_back(v);
    }
    void drop(NodeId v) {  // eviction or death: the bytes go, the value may come back
        const auto vi = static_cast<size_t>(v);
        state_[vi] = Evicted;
        mem_ -= g_.output_of(v).bytes;
        const long s = slot_[vi];
        resident_[static_cast<size_t>(s)] = resident_.back();
        slot_[static_cast<size_t>(resident_.back())] = s;
        resident_.pop_back();
        slot_[vi] = -1;
        if (heuristic_ == Heuristic::Eq) {
            class_cost_[static_cast<size_t>(find(v))] += net_.cost[vi];
            for (NodeId u : net_.inputs[vi])
                if (state_[static_cast<size_t>(u)] == Evicted) unite(v, u);
            for (NodeId u : net_.consumers[vi])
                if (state_[static_cast<size_t>(u)] == Evicted) unite(v, u);
        }
    }
    void release_if_dead(NodeId v) {
        const auto vi = static_cast<size_t>(v);
        if (state_[vi] == Resident && pins_[vi] == 0 && remaining_[vi] == 0) drop(v);
    }

    // Makes room for `bytes` more; false when everything evictable is gone and it still won't.
    bool reserve(uint64_t bytes) {
        while (mem_ + bytes > budget_) {
            NodeId victim = kNoId;
            double best = std::numeric_limits<double>::infinity();
            for (NodeId v : resident_) {
                if (pins_[static_cast<size_t>(v)]) continue;
                const double h = score(v);
                if (victim == kNoId || h < best || (h == best && v < victim)) {
                    best = h;
                    victim = v;
                }
            }
            if (victim == kNoId) return false;
            drop(victim);
            ++evictions_;
        }
        peak_ = std::max(peak_, mem_ + bytes);
        return true;
    }

    bool emit_compute(NodeId n) {
        const uint64_t out = g_.output_of(n).bytes;
        if (!reserve(out + net_.tables.fwd_workspace[static_cast<size_t>(n)])) return false;
        seq_.push_back({InstrKind::Compute, n});
        ++clock_;
        mem_ += out;
        make_resident(n);
        for (NodeId u : net_.inputs[static_cast<size_t>(n)])
            last_access_[static_cast<size_t>(u)] = clock_;
        return true;
    }

    // Makes v resident, recomputing evicted ancestors depth-first; each finished input stays
    // pinned until the node that reads it has run. On failure the pass is over (run() stops),
    // so pins are not unwound.
    bool rematerialize(NodeId target) {
        if (state_[static_cast<size_t>(target)] == Resident) return true;
        stack_.clear();
        stack_.push_back({target, 0});
        while (!stack_.empty()) {
            const NodeId node = stack_.back().first;
            size_t next = stack_.back().second;
            const auto& ins = net_.inputs[static_cast<size_t>(node)];
            while (next < ins.size() && state_[static_cast<size_t>(ins[next])] == Resident) {
                ++pins_[static_cast<size_t>(ins[next])];
                ++next;
            }
            stack_.back().second = next;
            if (next < ins.size()) {
                stack_.push_back({ins[next], 0});
                continue;
            }
            if (!emit_compute(node)) return false;
            for (NodeId u : ins) {
                --pins_[static_cast<size_t>(u)];
                release_if_dead(u);
            }
            stack_.pop_back();
        }
        return true;
    }

    // Pins the values an instruction reads, bringing the evicted ones back first.
    bool acquire(const std::vector<NodeId>& needed) {
        held_.assign(needed.size(), 0);
        for (size_t i = 0; i < needed.size(); ++i)
            if (state_[static_cast<size_t>(needed[i])] == Resident) {
                ++pins_[static_cast<size_t>(needed[i])];
                held_[i] = 1;
            }
        for (size_t i = 0; i < needed.size(); ++i) {
            if (held_[i]) continue;
            if (!rematerialize(needed[i])) return false;
            ++pins_[static_cast<size_t>(needed[i])];
        }
        return true;
    }
    void finish_reads(const std::vector<NodeId>& read) {
        for (NodeId v : read) {
            const auto vi = static_cast<size_t>(v);
            --pins_[vi];
            --remaining_[vi];
            last_access_[vi] = clock_;
            release_if_dead(v);
        }
    }

    bool step_compute(NodeId n) {
        const auto& needed = net_.inputs[static_cast<size_t>(n)];
        if (!acquire(needed)) return false;
        if (!emit_compute(n)) return false;
        finish_reads(needed);
        release_if_dead(n);
        return true;
    }

    bool step_backward(NodeId n) {
        const auto ni = static_cast<size_t>(n);
        const auto& needed = net_.residuals[ni];
        if (!acquire(needed)) return false;
        const Node& node = g_.node(n);
        const Value& out = g_.value(node.output);
        uint64_t alloc = 0;
        if (n == g_.loss_node()) alloc += out.bytes;  // the seed dL/dL
        for (ValueId in : node.inputs) {
            const Value& v = g_.value(in);
            if (!v.requires_grad || grad_live_[static_cast<size_t>(in)]) continue;
            grad_live_[static_cast<size_t>(in)] = 1;
            alloc += v.bytes;
        }
        for (ParamId p : node.params) alloc += g_.param(p).bytes;
        if (!reserve(alloc + net_.tables.bwd_workspace[ni])) return false;
        seq_.push_back({InstrKind::Backward, n});
        ++clock_;
        mem_ += alloc;
        mem_ -= out.bytes;  // the output gradient dies with this Backward
        grad_live_[static_cast<size_t>(node.output)] = 0;
        finish_reads(needed);
        return true;
    }

    const Network& net_;
    const Graph& g_;
    Heuristic heuristic_;
    uint64_t budget_ = 0, mem_ = 0, peak_ = 0;
    long clock_ = 0, evictions_ = 0;
    std::vector<State> state_;
    std::vector<int32_t> pins_, remaining_;
    std::vector<long> last_access_, slot_;
    std::vector<NodeId> resident_;
    std::vector<uint8_t> grad_live_;
    std::vector<NodeId> parent_;
    std::vector<double> class_cost_;
    std::vector<NodeId> roots_;
    std::vector<uint8_t> held_;
    std::vector<std::pair<NodeId, size_t>> stack_;
    std::vector<Instruction> seq_;
};

class DtrStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "dtr"; }
    std::string_view about() const override {
        return "Dynamic Tensor Rematerialization (Kirisame et al. 2021): online eviction under "
               "a byte budget by h = cost / (memory x staleness)";
    }
    ParamSchema schema() const override {
        return {
            {"budget",
             ParamType::Bytes,
             "",
             "peak-memory budget in bytes (e.g. 64MiB); none: midway between the smallest "
             "budget DTR meets and none's peak",
             {},
             1},
            {"heuristic",
             ParamType::Choice,
             "eq",
             "eq: cost includes the evicted neighbourhood (h_DTR-eq); local: own cost only",
             {"eq", "local"}},
        };
    }

    Plan plan(const Graph& g, const CostModel& costs, const ParamValues& params) const override {
        const Network net(g, costs);
        Dtr dtr(net, params.get_string("heuristic") == "local" ? Heuristic::Local : Heuristic::Eq);
        SimulateOptions opt;
        opt.record_timeline = false;

        // `none`'s peak: DTR's model frees each value after its last read, as `none` does, so
        // at this budget it never evicts.
        uint64_t none_peak = 0;
        { none_peak = simulate(g, net.tables, backprop_schedule(g), costs, opt).peak_bytes; }
        // The smallest budget in (lo, hi] at which DTR succeeds, given that it succeeds at hi.
        auto smallest_feasible = [&](uint64_t lo, uint64_t hi) {
            while (hi - lo > 1) {
                const uint64_t mid = lo + (hi - lo) / 2;
                (dtr.run(mid).ok ? hi : lo) = mid;
            }
            return hi;
        };

        Plan p;
        p.status = PlanStatus::Heuristic;
        uint64_t budget = 0;
        if (params.has("budget")) {
            budget = params.get_bytes("budget");
        } else {
            const uint64_t least = smallest_feasible(0, none_peak);
            budget = least + (none_peak - least) / 2;
        }
        p.budget = budget;

        Run r = dtr.run(budget);
        if (!r.ok) {
            // Bisect over the same range as the default does, so both report the same smallest
            // budget; above the failed one if DTR's non-monotonicity put it below.
            uint64_t least = smallest_feasible(0, none_peak);
            if (least <= budget) least = smallest_feasible(budget, none_peak);
            if (params.has("budget")) {
                p.status = PlanStatus::Infeasible;
                p.min_feasible_budget = least;
                p.message = "dtr cannot meet the budget of " + format_bytes(budget) + " (" +
                            std::to_string(budget) +
                            " bytes) on this network: some instruction then needs more than "
                            "the budget with every other activation evicted. The smallest "
                            "budget it meets is " +
                            format_bytes(least) + " (" + std::to_string(least) +
                            " bytes); raise the budget to at least that";
                return p;
            }
            // The default budget failed although a smaller one succeeded (DTR's success is not
            // monotone in the budget): take the smallest success above it.
            budget = least;
            p.budget = budget;
            r = dtr.run(budget);
        }
        uint64_t model_budget = budget;
        for (int attempt = 0; attempt < 4 && r.ok; ++attempt) {
            ScheduleBuilder b(g);
            for (const Instruction& ins : r.sequence)
                ins.kind == InstrKind::Compute ? b.compute(ins.target) : b.backward(ins.target);
            Schedule s = b.finish();
            const Simulation sim = simulate(g, net.tables, s, costs, opt);
            if (sim.peak_bytes <= budget) {
                p.schedule = std::move(s);
                return p;
            }
            // The model undercounted (a bug, see the header): tighten by the overshoot, rerun.
            const uint64_t over = sim.peak_bytes - budget;
            if (over >= model_budget) break;
            model_budget -= over;
            r = dtr.run(model_budget);
        }
        p.status = PlanStatus::Infeasible;
        p.min_feasible_budget = none_peak;
        p.message = "dtr's memory model disagreed with the simulator at the budget of " +
                    format_bytes(budget) + " (" + std::to_string(budget) +
                    " bytes); `none`'s peak of " + format_bytes(none_peak) + " (" +
                    std::to_string(none_peak) + " bytes) is always met";
        return p;
    }
};

}  // namespace

std::unique_ptr<Strategy> make_dtr_strategy() {
    return std::make_unique<DtrStrategy>();
}

}  // namespace rl
