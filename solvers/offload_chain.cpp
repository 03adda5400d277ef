#include "solvers/offload_chain.h"

#include <algorithm>
#include <limits>

#include "engine/errors.h"
#include "engine/liveness.h"

namespace rl {

const char* value_choice_name(ValueChoice c) {
    switch (c) {
        case ValueChoice::Keep:
            return "keep";
        case ValueChoice::Offload:
            return "offload";
        case ValueChoice::Recompute:
            return "recompute";
    }
    return "?";
}

std::optional<OffloadChain> offload_chain(const Graph& g, const CostModel& costs,
                                          std::string* why) {
    auto fail = [&](const std::string& reason) -> std::optional<OffloadChain> {
        if (why) *why = reason;
        return std::nullopt;
    };
    const int32_t n = g.num_nodes();
    if (n < 2) return fail("the network has fewer than two nodes");
    if (g.plan_only()) return fail("the network is an abstract benchmark graph");
    for (NodeId i = 0; i < n; ++i) {
        const Node& node = g.node(i);
        for (ValueId in : node.inputs) {
            const Value& v = g.value(in);
            if (!v.is_input() && v.producer != i - 1)
                return fail("node '" + node.name + "' reads '" + v.name +
                            "', which is neither a graph input nor the previous node's output");
        }
    }
    const LivenessTables t(g);
    const std::vector<double> fwd = costs.forward_costs_for(g);
    OffloadChain c;
    c.n = n;
    c.link = costs.transfer();
    uint64_t fixed = 0, ws_fwd = 0, ws_bwd = 0;
    c.param_grad_bytes.assign(static_cast<size_t>(n), 0);
    for (ParamId p = 0; p < g.num_params(); ++p) {
        fixed += g.param(p).bytes;
        c.param_grad_bytes[static_cast<size_t>(g.param(p).owner)] += g.param(p).bytes;
    }
    for (ValueId in : g.inputs()) fixed += g.value(in).bytes;
    for (NodeId i = 0; i < n; ++i) {
        const Node& node = g.node(i);
        const Value& out = g.value(node.output);
        const auto ii = static_cast<size_t>(i);
        c.bytes.push_back(out.bytes);
        c.grad_bytes.push_back(out.requires_grad ? out.bytes : 0);
        c.fwd_ms.push_back(fwd[ii]);
        c.bwd_ms.push_back(costs.size() > 0 ? costs.backward_ms(i) : 0.0);
        bool in = false;
        for (size_t k = 0; k < node.inputs.size(); ++k)
            if (t.reads_input(i, k) && !g.value(node.inputs[k]).is_input()) in = true;
        c.reads_in.push_back(in ? 1 : 0);
        c.reads_out.push_back(t.residual_output[ii]);
        c.has_backward.push_back(t.needs_backward[ii]);
        ws_fwd = std::max(ws_fwd, t.fwd_workspace[ii]);
        ws_bwd = std::max(ws_bwd, t.bwd_workspace[ii]);
    }
    c.const_fwd = fixed + ws_fwd;
    c.const_bwd = fixed + std::max(ws_fwd, ws_bwd);
    return c;
}

namespace {

struct Op {
    InstrKind kind;
    int32_t i;  // the node, also for an instruction on its output value
};

using Choices = std::vector<ValueChoice>;

// The forward part of edge (r → b) (offload_chain.h, THE CLASS).
void forward_part(const OffloadChain& c, int32_t r, bool offload_r, int32_t b,
                  std::vector<Op>& ops) {
    if (offload_r) ops.push_back({InstrKind::Offload, r});
    for (int32_t i = r + 1; i <= b; ++i) {
        ops.push_back({InstrKind::Compute, i});
        if (i - 1 > r) ops.push_back({InstrKind::Free, i - 1});
        if (i == c.n - 1 && !c.reads_out[static_cast<size_t>(i)])
            ops.push_back({InstrKind::Free, i});  // the loss value, read by nothing
    }
    if (offload_r) ops.push_back({InstrKind::Wait, r});
}

// The backward part of edge (r → b).
void backward_part(const OffloadChain& c, int32_t r, bool offload_r, int32_t b,
                   std::vector<Op>& ops) {
    auto in_run = [&](int32_t j) { return j > r && j < b; };
    bool pending = false;  // v_r's prefetch not yet waited for
    if (offload_r) {
        ops.push_back({InstrKind::Prefetch, r});
        pending = true;
    }
    auto wait_r = [&] {
        if (pending) ops.push_back({InstrKind::Wait, r});
        pending = false;
    };
    bool recomputed = false;
    for (int32_t i = b; i > r; --i) {
        const auto ii = static_cast<size_t>(i);
        if (!c.has_backward[ii]) continue;
        int32_t need_run = -1;  // the highest run value node i's backward reads
        if (c.reads_in[ii] && in_run(i - 1)) need_run = i - 1;
        if (c.reads_out[ii] && in_run(i)) need_run = i;
        if (need_run >= 0 && !recomputed) {
            wait_r();
            for (int32_t k = r + 1; k <= need_run; ++k) {
                ops.push_back({InstrKind::Compute, k});
                const int32_t prev = k - 1;
                if (prev > r && !c.reads_out[static_cast<size_t>(prev)] &&
                    !c.reads_in[static_cast<size_t>(k)])
                    ops.push_back({InstrKind::Free, prev});
            }
            recomputed = true;
        }
        if (c.reads_in[ii] && i - 1 == r) wait_r();
        ops.push_back({InstrKind::Backward, i});
        if (c.reads_out[ii] && (in_run(i) || i == b)) ops.push_back({InstrKind::Free, i});
        if (c.reads_in[ii] && in_run(i - 1) && !c.reads_out[ii - 1])
            ops.push_back({InstrKind::Free, i - 1});
    }
    wait_r();
    if (r >= 0 && !c.reads_out[static_cast<size_t>(r)]) ops.push_back({InstrKind::Free, r});
}

// The boundaries of an assignment, with -1 first.
std::vector<int32_t> boundaries(const Choices& ch) {
    std::vector<int32_t> out{-1};
    for (size_t j = 0; j < ch.size(); ++j)
        if (ch[j] != ValueChoice::Recompute) out.push_back(static_cast<int32_t>(j));
    return out;
}

std::vector<Op> program(const OffloadChain& c, const Choices& ch) {
    const std::vector<int32_t> bs = boundaries(ch);
    auto off = [&](int32_t r) {
        return r >= 0 && ch[static_cast<size_t>(r)] == ValueChoice::Offload;
    };
    std::vector<Op> ops;
    for (size_t e = 0; e < bs.size(); ++e) {
        const int32_t r = bs[e], b = e + 1 < bs.size() ? bs[e + 1] : c.n - 1;
        forward_part(c, r, off(r), b, ops);
    }
    for (size_t e = bs.size(); e-- > 0;) {
        const int32_t r = bs[e], b = e + 1 < bs.size() ? bs[e + 1] : c.n - 1;
        backward_part(c, r, off(r), b, ops);
    }
    return ops;
}

// Walks ops with the model's rules from a given state. Returns the largest live bytes (values
// and gradients, without the constant) and the time; `backward` selects the phase's gradient
// rule, `grad_of` is the node whose output gradient is live at the start (-1: none).
struct Walk {
    const OffloadChain& c;
    std::vector<uint8_t> live;  // per value, on the device
    std::vector<double> copy_end;
    std::vector<uint8_t> copy_to_host;  // per value: its latest copy is an offload
    uint64_t bytes = 0;
    uint64_t param_grads = 0;  // of the backwards run so far
    int32_t grad_of = -1;
    double now = 0, copy_free = 0, stall = 0;
    uint64_t peak = 0;

    explicit Walk(const OffloadChain& chain)
        : c(chain),
          live(static_cast<size_t>(chain.n), 0),
          copy_end(static_cast<size_t>(chain.n), 0.0),
          copy_to_host(static_cast<size_t>(chain.n), 0) {}

    uint64_t grad(int32_t i) const {
        if (i < 0) return 0;
        return i == c.n - 1 ? c.bytes[static_cast<size_t>(i)]
                            : c.grad_bytes[static_cast<size_t>(i)];
    }
    void note(uint64_t extra) { peak = std::max(peak, bytes + param_grads + extra); }
    void set_live(int32_t i) {
        if (!live[static_cast<size_t>(i)]) bytes += c.bytes[static_cast<size_t>(i)];
        live[static_cast<size_t>(i)] = 1;
    }
    void drop(int32_t i) {
        if (live[static_cast<size_t>(i)]) bytes -= c.bytes[static_cast<size_t>(i)];
        live[static_cast<size_t>(i)] = 0;
    }
    void run(const std::vector<Op>& ops, size_t from, size_t to) {
        for (size_t k = from; k < to; ++k) {
            const Op& op = ops[k];
            const auto ii = static_cast<size_t>(op.i);
            const uint64_t g_now = grad_of >= 0 ? grad(grad_of) : 0;
            switch (op.kind) {
                case InstrKind::Compute:
                    set_live(op.i);
                    note(g_now);
                    now += c.fwd_ms[ii];
                    break;
                case InstrKind::Free:
                    drop(op.i);
                    break;
                case InstrKind::Backward:
                    param_grads += c.param_grad_bytes[ii];
                    note(grad(op.i) + grad(op.i - 1));
                    now += c.bwd_ms[ii];
                    grad_of = op.i - 1;
                    break;
                case InstrKind::Offload:
                case InstrKind::Prefetch: {
                    const bool to_host = op.kind == InstrKind::Offload;
                    if (!to_host) {
                        set_live(op.i);
                        note(g_now);
                    }
                    const double start = std::max(now, copy_free);
                    copy_free = start + c.link.copy_ms(c.bytes[ii], to_host);
                    copy_end[ii] = copy_free;
                    copy_to_host[ii] = to_host ? 1 : 0;
                    break;
                }
                case InstrKind::Wait: {
                    if (copy_end[ii] > now) {
                        stall += copy_end[ii] - now;
                        now = copy_end[ii];
                    }
                    // An offload's Wait releases the device buffer; a prefetch's keeps it (now
                    // readable).
                    if (copy_to_host[ii]) drop(op.i);
                    break;
                }
            }
        }
    }
};

// What one edge costs on its own (the program's pieces, offload_chain.h).
struct EdgeCost {
    uint64_t fwd_peak = 0, bwd_peak = 0;  // without the constants and the Kept bytes below r
    double ms = 0;
};

EdgeCost edge_cost(const OffloadChain& c, int32_t r, bool offload_r, int32_t b) {
    EdgeCost e;
    {
        std::vector<Op> ops;
        forward_part(c, r, offload_r, b, ops);
        Walk w(c);
        if (r >= 0) w.set_live(r);
        w.note(0);
        w.run(ops, 0, ops.size());
        e.fwd_peak = w.peak;
        e.ms += w.now;
    }
    {
        std::vector<Op> ops;
        backward_part(c, r, offload_r, b, ops);
        Walk w(c);
        if (r >= 0 && !offload_r) w.set_live(r);
        if (c.reads_out[static_cast<size_t>(b)]) w.set_live(b);
        w.grad_of = b < c.n - 1 ? b : -1;
        for (int32_t j = b + 1; j < c.n; ++j)
            w.param_grads += c.param_grad_bytes[static_cast<size_t>(j)];
        w.note(w.grad_of >= 0 ? w.grad(w.grad_of) : 0);
        w.run(ops, 0, ops.size());
        e.bwd_peak = w.peak;
        e.ms += w.now;
    }
    return e;
}

}  // namespace

ChainCost offload_chain_evaluate(const OffloadChain& c, const Choices& ch) {
    if (ch.size() + 1 != static_cast<size_t>(c.n))
        throw Error("offload chain: " + std::to_string(ch.size()) + " choices for " +
                    std::to_string(c.n) + " nodes (one per value but the loss)");
    const std::vector<Op> ops = program(c, ch);
    // The whole program, walked once: forward parts with the forward constant, the rest with
    // the backward one.
    size_t split = 0;
    {
        const std::vector<int32_t> bs = boundaries(ch);
        auto off = [&](int32_t r) {
            return r >= 0 && ch[static_cast<size_t>(r)] == ValueChoice::Offload;
        };
        std::vector<Op> fwd;
        for (size_t e = 0; e < bs.size(); ++e)
            forward_part(c, bs[e], off(bs[e]), e + 1 < bs.size() ? bs[e + 1] : c.n - 1, fwd);
        split = fwd.size();
    }
    Walk w(c);
    w.run(ops, 0, split);
    const uint64_t fwd_peak = w.peak;
    w.peak = 0;
    w.note(0);
    w.run(ops, split, ops.size());
    ChainCost out;
    out.peak = std::max(c.const_fwd + fwd_peak, c.const_bwd + w.peak);
    out.ms = w.now;
    out.stall_ms = w.stall;
    return out;
}

std::optional<ChainSolution> solve_offload_chain(const OffloadChain& c, uint64_t budget,
                                                 bool allow_offload) {
    const int32_t n = c.n;
    // States: boundary r in -1 … n-2 with a mode; each holds the Pareto set of (Kept bytes
    // below r, time so far) with a back pointer.
    struct Entry {
        uint64_t below;
        double ms;
        uint64_t peak;     // the model's peak so far (ties in time go to the lower)
        int32_t from_r;    // the previous boundary (-2: the start)
        int32_t from_m;    // its mode index
        int32_t from_idx;  // its entry
    };
    const int modes = allow_offload ? 2 : 1;  // 0 Keep, 1 Offload
    auto state = [&](int32_t r, int m) { return static_cast<size_t>((r + 1) * 2 + m); };
    std::vector<std::vector<Entry>> sets(static_cast<size_t>((n + 1) * 2));
    sets[state(-1, 0)].push_back({0, 0.0, 0, -2, 0, -1});
    auto insert = [](std::vector<Entry>& set, const Entry& e) {
        for (const Entry& x : set)
            if (x.below <= e.below && x.ms <= e.ms && x.peak <= e.peak) return;  // dominated
        std::erase_if(set, [&](const Entry& x) {
            return e.below <= x.below && e.ms <= x.ms && e.peak <= x.peak;
        });
        set.push_back(e);
    };
    std::optional<Entry> best;
    for (int32_t r = -1; r <= n - 2; ++r) {
        for (int m = 0; m < (r < 0 ? 1 : modes); ++m) {
            const auto& set = sets[state(r, m)];
            if (set.empty()) continue;
            const bool off = m == 1;
            const uint64_t own = (r >= 0 && !off) ? c.bytes[static_cast<size_t>(r)] : 0;
            for (int32_t b = r + 1; b <= n - 1; ++b) {
                const EdgeCost e = edge_cost(c, r, off, b);
                for (size_t k = 0; k < set.size(); ++k) {
                    const Entry& x = set[k];
                    if (c.const_fwd + x.below + e.fwd_peak > budget ||
                        c.const_bwd + x.below + e.bwd_peak > budget)
                        continue;
                    const uint64_t peak = std::max({x.peak, c.const_fwd + x.below + e.fwd_peak,
                                                    c.const_bwd + x.below + e.bwd_peak});
                    const Entry next{x.below + own,          x.ms + e.ms, peak, r, m,
                                     static_cast<int32_t>(k)};
                    if (b == n - 1) {
                        // Least time; within rounding of it, the lower peak.
                        const double tol = 1e-12 * std::max(1.0, best ? best->ms : 0.0);
                        if (!best || next.ms < best->ms - tol ||
                            (next.ms <= best->ms + tol && next.peak < best->peak))
                            best = next;
                        continue;
                    }
                    for (int mb = 0; mb < modes; ++mb) insert(sets[state(b, mb)], next);
                }
            }
        }
    }
    if (!best) return std::nullopt;
    ChainSolution sol;
    sol.choices.assign(static_cast<size_t>(n - 1), ValueChoice::Recompute);
    Entry at = *best;
    while (at.from_r >= 0) {
        const int32_t r = at.from_r;
        sol.choices[static_cast<size_t>(r)] =
            at.from_m == 1 ? ValueChoice::Offload : ValueChoice::Keep;
        at = sets[state(r, at.from_m)][static_cast<size_t>(at.from_idx)];
    }
    sol.cost = offload_chain_evaluate(c, sol.choices);
    return sol;
}

uint64_t offload_chain_min_peak(const OffloadChain& c, bool allow_offload) {
    // The peak is a step function of the assignment; search the budget for the smallest at
    // which the program finds one (feasibility is monotone in the budget).
    uint64_t hi =
        offload_chain_evaluate(c, Choices(static_cast<size_t>(c.n - 1), ValueChoice::Keep)).peak;
    uint64_t lo = std::min(c.const_fwd, c.const_bwd);
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (solve_offload_chain(c, mid, allow_offload))
            hi = mid;
        else
            lo = mid + 1;
    }
    return hi;
}

Schedule offload_chain_schedule(const Graph& g, const OffloadChain& c, const Choices& ch) {
    if (ch.size() + 1 != static_cast<size_t>(c.n) || g.num_nodes() != c.n)
        throw Error("offload chain: the assignment does not match the network's chain");
    Schedule s;
    for (const Op& op : program(c, ch))
        s.code.push_back({op.kind, targets_value(op.kind) ? g.node(op.i).output : op.i});
    return s;
}

}  // namespace rl
