// Checkmate's MILP over one block of a chain (see block_milp.h).
#include "solvers/block_milp.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "solvers/milp_model.h"

namespace rl::block_detail {

namespace {

constexpr int kNone = -1;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Where a value comes from, seen from the block.
enum class Source { Interior, Xin, Xout, Always, Outside };

Source source_of(const Graph& g, const BlockSpec& b, ValueId v, NodeId* producer) {
    const Value& val = g.value(v);
    if (val.is_input()) return Source::Always;
    if (v == b.xin) return Source::Xin;
    if (val.producer == b.last) return Source::Xout;
    if (val.producer >= b.first && val.producer < b.last) {
        *producer = val.producer;
        return Source::Interior;
    }
    return Source::Outside;
}

std::vector<ValueId> unique_inputs(const Graph& g, NodeId n) {
    std::vector<ValueId> ins = g.node(n).inputs;
    std::sort(ins.begin(), ins.end());
    ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
    return ins;
}

std::vector<ValueId> residuals(const Graph& g, const LivenessTables& t, NodeId n) {
    std::vector<ValueId> out;
    for_each_residual(g, t, n, [&](ValueId v) {
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    });
    return out;
}

// The block's Backwards, in their (decreasing node) order.
std::vector<NodeId> backwards_of(const LivenessTables& t, const BlockSpec& b) {
    std::vector<NodeId> out;
    for (NodeId n = b.last; n >= b.first; --n)
        if (t.needs_backward[static_cast<size_t>(n)]) out.push_back(n);
    return out;
}

double bytes_of(const Graph& g, NodeId n) {
    return static_cast<double>(g.output_of(n).bytes);
}

}  // namespace

std::optional<BlockSchedule> block_milp_schedule(const Graph& g, const LivenessTables& t,
                                                 const BlockSpec& b,
                                                 const std::function<double(NodeId)>& fwd,
                                                 uint64_t hold_budget, uint64_t act_budget,
                                                 const BlockMilpSolve& opt) {
    const std::vector<NodeId> bwd = backwards_of(t, b);
    const auto interior = static_cast<size_t>(b.last - b.first);  // nodes first..last-1
    if (bwd.empty()) return std::nullopt;
    // Scale bytes so that the memory rows have coefficients near 1.
    const double unit =
        std::max(1.0, static_cast<double>(std::max(hold_budget, act_budget)) / 1000.0);
    MilpModel m;
    auto idx = [&](NodeId n) { return static_cast<size_t>(n - b.first); };
    const double xin_bytes = b.xin != kNoId ? static_cast<double>(g.value(b.xin).bytes) : 0.0;
    int kx = kNone;
    if (b.xin != kNoId) kx = m.add_col(b.xin_forced ? 1 : 0, 1, 0, true);
    const size_t T = bwd.size();
    std::vector<std::vector<int>> R(T, std::vector<int>(interior, kNone)),
        S(T, std::vector<int>(interior, kNone));
    // useful[s][i]: node i's output may be read in stage s or later — by a Backward there, or
    // by a computation there of a consumer (consumers are <= b_s to be computed in stage s;
    // b_s decreases with s). Elsewhere neither keeping nor computing it can help: no column.
    std::vector<std::vector<uint8_t>> useful(T, std::vector<uint8_t>(interior, 0));
    for (size_t s = T; s-- > 0;) {
        if (s + 1 < T) useful[s] = useful[s + 1];
        for (ValueId v : residuals(g, t, bwd[s])) {
            NodeId p = kNoId;
            if (source_of(g, b, v, &p) == Source::Interior) useful[s][idx(p)] = 1;
        }
        for (NodeId j = std::min(bwd[s], b.last - 1); j >= b.first; --j) {
            if (!useful[s][idx(j)]) continue;
            for (ValueId v : g.node(j).inputs) {
                NodeId p = kNoId;
                if (source_of(g, b, v, &p) == Source::Interior) useful[s][idx(p)] = 1;
            }
        }
    }
    for (size_t s = 0; s < T; ++s)
        for (size_t i = 0; i < interior; ++i) {
            const NodeId n = b.first + static_cast<NodeId>(i);
            if (!useful[s][i]) continue;
            S[s][i] = m.add_col(0, 1, 0, true);
            if (n <= bwd[s]) R[s][i] = m.add_col(0, 1, fwd(n), true);
        }
    // Hold: the tape (S[0]) and x_k.
    {
        std::vector<std::pair<int, double>> row;
        for (size_t i = 0; i < interior; ++i)
            row.push_back({S[0][i], bytes_of(g, b.first + static_cast<NodeId>(i)) / unit});
        row.push_back({kx, xin_bytes / unit});
        m.add_row(row, -kInfinity, (static_cast<double>(hold_budget) + 0.25) / unit);
    }
    for (size_t s = 0; s < T; ++s) {
        // A computation needs its inputs.
        for (size_t j = 0; j < interior; ++j) {
            if (R[s][j] == kNone) continue;
            const NodeId n = b.first + static_cast<NodeId>(j);
            for (ValueId v : unique_inputs(g, n)) {
                NodeId p = kNoId;
                switch (source_of(g, b, v, &p)) {
                    case Source::Interior:  // p < j: useful here (j is), so it has columns
                        m.add_row({{R[s][j], 1}, {S[s][idx(p)], -1}, {R[s][idx(p)], -1}},
                                  -kInfinity, 0);
                        break;
                    case Source::Xin:
                        m.add_row({{R[s][j], 1}, {kx, -1}}, -kInfinity, 0);
                        break;
                    case Source::Always:
                        break;
                    case Source::Xout:
                    case Source::Outside:
                        return std::nullopt;  // not a stage of rotor's chain
                }
            }
        }
        // A Backward needs its residuals.
        for (ValueId v : residuals(g, t, bwd[s])) {
            NodeId p = kNoId;
            switch (source_of(g, b, v, &p)) {
                case Source::Interior:
                    m.add_row({{S[s][idx(p)], 1}, {R[s][idx(p)], 1}}, 1, kInfinity);
                    break;
                case Source::Xin:
                    m.add_row({{kx, 1}}, 1, kInfinity);
                    break;
                case Source::Xout:
                    if (!b.reads_out) return std::nullopt;
                    break;
                case Source::Always:
                    break;
                case Source::Outside:
                    return std::nullopt;
            }
        }
        std::vector<std::pair<int, double>> mem;
        for (size_t i = 0; i < interior; ++i) {
            // Kept into the next stage only if live in this one; never computed while live.
            if (s + 1 < T)
                m.add_row({{S[s + 1][i], 1}, {S[s][i], -1}, {R[s][i], -1}}, -kInfinity, 0);
            m.add_row({{S[s][i], 1}, {R[s][i], 1}}, -kInfinity, 1);
            const double w = bytes_of(g, b.first + static_cast<NodeId>(i)) / unit;
            mem.push_back({S[s][i], w});
            mem.push_back({R[s][i], w});
        }
        mem.push_back({kx, xin_bytes / unit});
        m.add_row(mem, -kInfinity, (static_cast<double>(act_budget) + 0.25) / unit);
    }
    MilpSolveOptions so;
    so.time_limit_s = opt.time_limit_s;
    so.preprocess = false;
    so.max_nodes = opt.max_nodes;
    const MilpResult r = m.solve(so);
    if (!r.has_solution) return std::nullopt;
    auto on = [&](int col) { return col != kNone && r.x[static_cast<size_t>(col)] > 0.5; };
    BlockSchedule out;
    out.proven = r.proven_optimal;
    for (size_t s = 0; s < T; ++s) {
        for (size_t i = 0; i < interior; ++i)
            if (on(R[s][i])) {
                const NodeId n = b.first + static_cast<NodeId>(i);
                out.post.push_back({InstrKind::Compute, n});
                out.rec_ms += fwd(n);
            }
        out.post.push_back({InstrKind::Backward, bwd[s]});
    }
    return out;
}

double block_hold_lower_bound(const Graph& g, const LivenessTables& t, const BlockSpec& b,
                              const std::function<double(NodeId)>& fwd, uint64_t hold_budget,
                              const BlockMilpSolve& opt) {
    const auto interior = static_cast<size_t>(b.last - b.first);
    const double unit = std::max(1.0, static_cast<double>(hold_budget) / 1000.0);
    MilpModel m;
    auto idx = [&](NodeId n) { return static_cast<size_t>(n - b.first); };
    int kx = kNone;
    if (b.xin != kNoId) kx = m.add_col(b.xin_forced ? 1 : 0, 1, 0, true);
    std::vector<int> K(interior), C(interior);
    for (size_t i = 0; i < interior; ++i) {
        K[i] = m.add_col(0, 1, 0, true);
        C[i] = m.add_col(0, 1, fwd(b.first + static_cast<NodeId>(i)), true);
    }
    // Available after the forward: kept, or computed again (or x_k held, or always live).
    // Returns false for a value no schedule of the form can have (outside the block).
    auto need = [&](ValueId v, int reader) {
        NodeId p = kNoId;
        switch (source_of(g, b, v, &p)) {
            case Source::Interior:
                m.add_row({{reader, 1}, {K[idx(p)], -1}, {C[idx(p)], -1}}, -kInfinity, 0);
                return true;
            case Source::Xin:
                m.add_row({{reader, 1}, {kx, -1}}, -kInfinity, 0);
                return true;
            case Source::Xout:
                return b.reads_out;  // live at the backwards, never recomputed
            case Source::Always:
                return true;
            case Source::Outside:
                return false;
        }
        return false;
    };
    const int one = m.add_col(1, 1, 0, false);  // the constant 1, for "must be available"
    for (NodeId n : backwards_of(t, b))
        for (ValueId v : residuals(g, t, n))
            if (!need(v, one)) return 0.0;
    for (size_t j = 0; j < interior; ++j)
        for (ValueId v : unique_inputs(g, b.first + static_cast<NodeId>(j)))
            if (!need(v, C[j])) return 0.0;
    std::vector<std::pair<int, double>> row;
    for (size_t i = 0; i < interior; ++i)
        row.push_back({K[i], bytes_of(g, b.first + static_cast<NodeId>(i)) / unit});
    if (b.xin != kNoId) row.push_back({kx, static_cast<double>(g.value(b.xin).bytes) / unit});
    // Byte sums are integers: <= budget + 1/4 means <= budget.
    m.add_row(row, -kInfinity, (static_cast<double>(hold_budget) + 0.25) / unit);
    MilpSolveOptions so;
    so.time_limit_s = opt.time_limit_s;
    so.zero_gap = true;
    so.preprocess = false;
    so.max_nodes = opt.max_nodes;
    const MilpResult r = m.solve(so);
    if (r.proven_infeasible) return kInfinity;
    const double bound = r.proven_optimal ? std::min(r.bound, r.objective) : r.bound;
    if (!std::isfinite(bound) || bound <= 0) return 0.0;
    return bound * (1 - 1e-7);
}

bool block_post_valid(const Graph& g, const LivenessTables& t, const BlockSpec& b,
                      const std::vector<ValueId>& live, const std::vector<Instruction>& post) {
    std::unordered_set<ValueId> have(live.begin(), live.end());
    const std::vector<NodeId> bwd = backwards_of(t, b);
    size_t next = 0;
    auto ok = [&](ValueId v) { return g.value(v).is_input() || have.count(v) > 0; };
    for (const Instruction& ins : post) {
        if (ins.kind == InstrKind::Compute) {
            if (ins.target < b.first || ins.target >= b.last) return false;
            for (ValueId v : g.node(ins.target).inputs)
                if (!ok(v)) return false;
            have.insert(g.node(ins.target).output);
        } else if (ins.kind == InstrKind::Backward) {
            if (next >= bwd.size() || bwd[next] != ins.target) return false;
            ++next;
            for (ValueId v : residuals(g, t, ins.target))
                if (!ok(v)) return false;
        } else {
            return false;
        }
    }
    return next == bwd.size();
}

}  // namespace rl::block_detail
