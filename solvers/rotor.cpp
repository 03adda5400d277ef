#include "solvers/rotor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "engine/cancel.h"
#include "engine/graph_algorithms.h"
#include "engine/liveness.h"
#include "engine/simulator.h"
#include "solvers/rotor_internal.h"

namespace rl {

namespace rotor_detail {

std::vector<ValueId> backward_reads(const Graph& g, const LivenessTables& t, StageNodes st) {
    std::vector<ValueId> out;
    auto add = [&](ValueId v) {
        if (!g.value(v).is_input() && std::find(out.begin(), out.end(), v) == out.end())
            out.push_back(v);
    };
    for (NodeId n = st.first; n <= st.last; ++n)
        if (t.needs_backward[static_cast<size_t>(n)]) for_each_residual(g, t, n, add);
    return out;
}

// What option (a) computes: the loss stage whole (its first and only forward); otherwise the
// interior nodes whose outputs the stage's backwards read, and what they need in turn (as
// solvers/segments.cpp does). The stage's last node is not recomputed: its output is live
// whenever its backward reads it (a kept checkpoint).
std::vector<NodeId> recompute_set(const Graph& g, const LivenessTables& t, StageNodes st) {
    std::vector<NodeId> out;
    if (st.is_loss_stage) {
        for (NodeId n = st.first; n <= st.last; ++n) out.push_back(n);
        return out;
    }
    std::vector<uint8_t> needed(static_cast<size_t>(st.last - st.first + 1), 0);
    auto mark = [&](ValueId v) {
        const Value& val = g.value(v);
        if (!val.is_input() && val.producer >= st.first && val.producer < st.last)
            needed[static_cast<size_t>(val.producer - st.first)] = 1;
    };
    for (NodeId n = st.last; n >= st.first; --n) {
        const auto ni = static_cast<size_t>(n);
        const Node& node = g.node(n);
        const bool interior = n != st.last;
        // (The last node's own output is never marked: mark() takes producers before st.last.)
        if (t.needs_backward[ni]) for_each_residual(g, t, n, mark);
        if (interior && needed[static_cast<size_t>(n - st.first)])
            for (ValueId in : node.inputs) mark(in);
    }
    for (NodeId n = st.first; n < st.last; ++n)
        if (needed[static_cast<size_t>(n - st.first)]) out.push_back(n);
    return out;
}

// Counts what a piece of a schedule adds to the constant: parameters, inputs and the parameter
// gradients live at its start (other stages') are left out. The peak is taken when a kernel
// runs, with its output or gradients and its workspace allocated.
class PiecePeak final : public MemoryVisitor {
  public:
    bool starting = true;  // inside Liveness::resume
    uint64_t live = 0, peak = 0;
    void allocate(BufferRef b, uint64_t bytes) override {
        if (counts(b)) live += bytes;
    }
    void release(BufferRef b, uint64_t bytes) override {
        if (counts(b)) live -= bytes;
    }
    void run_kernel(const Instruction&, bool) override { peak = std::max(peak, live); }

  private:
    bool counts(BufferRef b) const {
        return b.category != Category::Parameters && b.category != Category::Inputs &&
               !(starting && b.category == Category::ParamGrads);
    }
};

// The peak live bytes of a piece of a schedule, walked with engine/liveness.h's rules (without
// the in-place rule: the DP charges its upper bound, liveness.h), counting only the values and
// gradients live at its start or created in it (and the parameter gradients it creates).
// `acts`: activations live at the start; `backwards_done_from`: the first node whose backward
// has run (kNoId: none), which leaves their gradients live; `kept`: values read after the piece
// (everything else is freed after its last read inside it, as ScheduleBuilder does; a value
// given live but never read nor kept is taken as already freed).
uint64_t walk_peak(const Graph& g, const LivenessTables& t, const std::vector<ValueId>& acts,
                   NodeId backwards_done_from, const std::vector<Instruction>& seq,
                   const std::vector<ValueId>& kept) {
    // Frees as ScheduleBuilder places them, per instance of a value (a piece may compute a value
    // again — a block MILP's post-forward sequence, rotor.h — after reading the instance live at
    // its start): walking backwards, the first read met of an instance is its last; a kept value's
    // last instance is read after the piece; a Compute starts an earlier, distinct instance.
    std::unordered_set<ValueId> read_later(kept.begin(), kept.end());
    std::vector<std::vector<ValueId>> frees_after(seq.size());
    for (size_t pos = seq.size(); pos-- > 0;) {
        const Instruction& ins = seq[pos];
        auto read = [&](ValueId v) {
            if (!g.value(v).is_input() && read_later.insert(v).second)
                frees_after[pos].push_back(v);
        };
        if (ins.kind == InstrKind::Compute) {
            const ValueId out = g.node(ins.target).output;
            if (!read_later.count(out)) frees_after[pos].push_back(out);
            read_later.erase(out);
            for (ValueId in : g.node(ins.target).inputs) read(in);
        } else {
            for_each_read(g, t, ins, read);
        }
    }
    // Live at the start: the given activations whose first instance is read in the piece or kept
    // (one given live but never read nor kept is taken as already freed).
    LiveStart start;
    start.backwards_done_from = backwards_done_from;
    std::unordered_set<ValueId> seen;
    for (ValueId v : acts)
        if (read_later.count(v) && seen.insert(v).second) start.activations.push_back(v);
    Schedule piece;
    for (size_t pos = 0; pos < seq.size(); ++pos) {
        piece.code.push_back(seq[pos]);
        for (ValueId v : frees_after[pos]) piece.code.push_back({InstrKind::Free, v});
    }
    PiecePeak peak;
    Liveness walk(g, t, piece, /*in_place=*/false);
    walk.resume(start, peak);
    peak.starting = false;
    for (size_t i = 0; i < piece.size(); ++i) walk.step(static_cast<long>(i), peak);
    return peak.peak;
}

std::vector<StageNodes> stages_of(const Graph& g, std::vector<NodeId>* stage_first) {
    const std::vector<NodeId> cuts = segment_boundaries(g);
    std::vector<StageNodes> out;
    NodeId first = 0;
    for (NodeId b : cuts) {
        out.push_back({first, b, false});
        first = b + 1;
    }
    out.push_back({first, g.num_nodes() - 1, true});
    if (stage_first) {
        stage_first->clear();
        for (const auto& s : out) stage_first->push_back(s.first);
    }
    return out;
}

std::vector<Instruction> computes(const std::vector<NodeId>& nodes) {
    std::vector<Instruction> out;
    for (NodeId n : nodes) out.push_back({InstrKind::Compute, n});
    return out;
}

}  // namespace rotor_detail

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
}  // namespace

using namespace rotor_detail;

RotorChain rotor_chain(const Graph& g, const CostModel& costs, std::vector<NodeId>* stage_first) {
    const LivenessTables t(g);
    const std::vector<StageNodes> st = stages_of(g, stage_first);
    RotorChain chain;
    chain.constant = g.param_bytes() + g.input_bytes();
    const bool have_costs = costs.size() == static_cast<size_t>(g.num_nodes());
    auto fwd = [&](NodeId n) { return have_costs ? costs.forward_ms(n) : 0.0; };

    bool prev_reads_output = false;  // stage k-1's backwards read x_k
    for (size_t k = 0; k < st.size(); ++k) {
        const StageNodes s = st[k];
        RotorStage r;
        std::vector<NodeId> all;
        for (NodeId n = s.first; n <= s.last; ++n) all.push_back(n);
        const std::vector<NodeId> rec = recompute_set(g, t, s);
        const std::vector<ValueId> br = backward_reads(g, t, s);
        auto in_br = [&](ValueId v) { return std::find(br.begin(), br.end(), v) != br.end(); };
        const bool has_in = k > 0, has_out = !s.is_loss_stage;
        const ValueId xin = has_in ? g.node(s.first - 1).output : kNoId;
        const ValueId xout = has_out ? g.node(s.last).output : kNoId;
        std::vector<ValueId> init_x, xin_if_prev;
        if (has_in) init_x.push_back(xin);
        if (has_in && prev_reads_output) xin_if_prev.push_back(xin);
        const bool reads_out = has_out && in_br(xout);

        double fwd_ms = 0, rec_ms = 0;
        for (NodeId n : all) fwd_ms += fwd(n);
        for (NodeId n : rec) rec_ms += fwd(n);
        r.fwd_ms = static_cast<float>(fwd_ms);
        r.rec_ms = static_cast<float>(rec_ms);
        r.x_in = has_in ? g.value(xin).bytes : 0;
        for (NodeId n : all)
            if (t.needs_backward[static_cast<size_t>(n)])
                for (ParamId p : g.node(n).params) r.param_grads += g.param(p).bytes;
        if (has_out)
            r.ext = (g.value(xout).requires_grad ? g.value(xout).bytes : 0) +
                    (reads_out ? g.value(xout).bytes : 0);
        r.x_read_by_prev = has_in && prev_reads_output;
        r.x_read_in_a = false;
        if (has_in) {
            r.x_read_in_a = in_br(xin);
            for (NodeId n : rec)
                for (ValueId in : g.node(n).inputs) r.x_read_in_a = r.x_read_in_a || in == xin;
        }

        std::vector<Instruction> bwd;
        for (NodeId n = s.last; n >= s.first; --n)
            if (t.needs_backward[static_cast<size_t>(n)]) bwd.push_back({InstrKind::Backward, n});
        std::vector<ValueId> out_only, out_and_in;
        if (has_out) out_only.push_back(xout);
        out_and_in = out_only;
        if (has_in) out_and_in.push_back(xin);
        if (has_out) {
            r.peak_fwd_keep = walk_peak(g, t, init_x, kNoId, computes(all), out_and_in);
            r.peak_fwd_free = walk_peak(g, t, init_x, kNoId, computes(all), out_only);
        }
        // (c): forward keeping the tape; then, after the rest of the chain, the backwards.
        std::vector<ValueId> tape_kept = out_only;
        for (ValueId v : br) tape_kept.push_back(v);
        for (ValueId v : xin_if_prev) tape_kept.push_back(v);
        r.peak_fwd_all = walk_peak(g, t, init_x, kNoId, computes(all), tape_kept);
        for (ValueId v : br)
            if (v != xin && v != xout) r.hold_c += g.value(v).bytes;
        if (has_in && (in_br(xin) || prev_reads_output)) r.hold_c += r.x_in;
        std::vector<ValueId> bwd_init = br;
        for (ValueId v : xin_if_prev) bwd_init.push_back(v);
        r.peak_bwd = walk_peak(g, t, bwd_init, s.last + 1, bwd, xin_if_prev);
        // (a): recompute, then the backwards, with x_k and (if read) x_{k+1} live.
        std::vector<ValueId> a_init = init_x;
        if (reads_out) a_init.push_back(xout);
        std::vector<Instruction> a_seq = computes(rec);
        a_seq.insert(a_seq.end(), bwd.begin(), bwd.end());
        r.peak_a = walk_peak(g, t, a_init, s.last + 1, a_seq, xin_if_prev);

        chain.stages.push_back(r);
        prev_reads_output = reads_out;
    }

    // The grid: none's peak, and the gcd of every size that enters the DP's sums.
    SimulateOptions opt;
    opt.record_timeline = false;
    const uint64_t none_peak = simulate(g, t, backprop_schedule(g), CostModel{}, opt).peak_bytes;
    chain.span = none_peak > chain.constant ? none_peak - chain.constant : 0;
    uint64_t d = 0;
    for (const Value& v : g.values()) d = std::gcd(d, v.bytes);
    for (const Param& p : g.params()) d = std::gcd(d, p.bytes);
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        d = std::gcd(d, std::gcd(t.fwd_workspace[static_cast<size_t>(n)],
                                 t.bwd_workspace[static_cast<size_t>(n)]));
    chain.gcd = std::max<uint64_t>(d, 1);
    return chain;
}

uint64_t rotor_unit(const RotorChain& chain, int32_t slots) {
    const uint64_t s = static_cast<uint64_t>(std::max(slots, 1));
    const uint64_t want = std::max<uint64_t>(1, (chain.span + s - 1) / s);
    return std::max<uint64_t>(1, (want + chain.gcd - 1) / chain.gcd) * chain.gcd;
}

int32_t rotor_max_units(const RotorChain& chain, uint64_t unit) {
    // None's peak, in units, plus one for the rounding of the largest single requirement.
    // (Storing everything may need a few more units after rounding; the dispatcher plans budgets
    // at or above none's peak without the table.)
    return static_cast<int32_t>((chain.span + unit - 1) / unit) + 1;
}

std::vector<RotorOp> rotor_store_all(int32_t stages) {
    std::vector<RotorOp> out;
    for (int32_t k = 0; k + 1 < stages; ++k) out.push_back({RotorOp::ForwardTape, k, k});
    out.push_back({RotorOp::Recompute, stages - 1, stages - 1});
    for (int32_t k = stages; k-- > 0;) out.push_back({RotorOp::Backward, k, k});
    return out;
}

RotorSolver::RotorSolver(const RotorChain& chain, uint64_t unit, int32_t max_units, bool relaxed)
    : chain_(chain),
      unit_(std::max<uint64_t>(unit, 1)),
      max_units_(std::max(max_units, 0)),
      n_(static_cast<int32_t>(chain.stages.size())),
      relaxed_(relaxed) {
    const auto n = static_cast<size_t>(n_);
    fwd_prefix_.assign(n + 1, 0.0);
    for (size_t k = 0; k < n; ++k) fwd_prefix_[k + 1] = fwd_prefix_[k] + chain.stages[k].fwd_ms;
    grads_after_.assign(n, 0);
    for (size_t k = n; k-- > 1;)
        grads_after_[k - 1] = grads_after_[k] + chain.stages[k].param_grads;
    // Hundreds of MB on long chains: allocated one memory layer at a time, polling for a cancel.
    const size_t layer = n * (n + 1) / 2;
    table_.reserve(layer * static_cast<size_t>(max_units_ + 1));
    for (int32_t m = 0; m <= max_units_; ++m) {
        throw_if_cancelled();
        table_.insert(table_.end(), layer, kInf);
    }
    fill();
}

// Layout: one layer per memory unit m, each layer the triangle of (s, t) stored by columns
// (for a fixed t, s = 0..t contiguous). Option (b) for (s, t) at m reads C(s', t, m - K) for
// s' = s+2..t — a contiguous slice of column t in an earlier layer — and C(s, s'-1, m) — row s
// of the current layer, kept in a small buffer — so the min over s' is an 8-lane reduction
// over contiguous memory in a few recent layers (a layer is S²/2 floats). Measured at S = 500,
// M = 500: 5.2 s with rows over m (vectorised over m, streaming the table), 1.9 s this way.
size_t RotorSolver::index(int32_t s, int32_t t, int32_t m) const {
    const auto ts = static_cast<size_t>(t), ns = static_cast<size_t>(n_);
    return static_cast<size_t>(m) * (ns * (ns + 1) / 2) + ts * (ts + 1) / 2 +
           static_cast<size_t>(s);
}

int32_t RotorSolver::q(uint64_t bytes) const {
    const uint64_t u = relaxed_ ? bytes / unit_ : (bytes + unit_ - 1) / unit_;
    return static_cast<int32_t>(std::min<uint64_t>(u, static_cast<uint64_t>(max_units_) + 1));
}

uint64_t RotorSolver::base(int32_t t) const {
    return grads_after_[static_cast<size_t>(t)] + chain_.stages[static_cast<size_t>(t)].ext;
}

bool RotorSolver::keeps_input(int32_t s, int32_t sp) const {
    const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
    return sp - 1 > s || st.x_read_in_a || st.x_read_by_prev;
}

// The forward run of (b) over stages s..sp-1: its peak, x_s included when kept.
uint64_t RotorSolver::run_peak(int32_t s, int32_t sp) const {
    const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
    const bool keep = keeps_input(s, sp);
    uint64_t run = keep ? st.peak_fwd_keep : st.peak_fwd_free;  // both count x_s
    for (int32_t k = s + 1; k < sp; ++k)
        run = std::max(run, st.x_in + chain_.stages[static_cast<size_t>(k)].peak_fwd_free);
    return run;
}

// The three options, evaluated one by one (the unrolling); fill() computes the same values
// with the same float operations, so the unrolling finds the exact value the table holds.
float RotorSolver::option_a(int32_t s, int32_t m) const {
    const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
    return m >= q(grads_after_[static_cast<size_t>(s)] + st.peak_a) ? st.rec_ms : kInf;
}

float RotorSolver::option_c(int32_t s, int32_t t, int32_t m) const {
    const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
    const int32_t h = q(st.hold_c);
    const int32_t need = std::max(
        {q(base(t) + st.peak_fwd_all), q(grads_after_[static_cast<size_t>(s)] + st.peak_bwd), h});
    if (m < need) return kInf;
    return st.fwd_ms + table_[index(s + 1, t, m - h)];
}

// (c) with menu option j of stage s (RotorTapeOption).
float RotorSolver::option_menu(int32_t s, int32_t t, int32_t m, size_t j) const {
    const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
    const RotorTapeOption& o = st.menu[j];
    const int32_t h = q(o.hold);
    const int32_t need = std::max(
        {q(base(t) + o.peak_fwd), q(grads_after_[static_cast<size_t>(s)] + o.peak_bwd), h});
    if (m < need) return kInf;
    return (st.fwd_ms + o.rec_ms) + table_[index(s + 1, t, m - h)];
}

float RotorSolver::option_b(int32_t s, int32_t sp, int32_t t, int32_t m) const {
    const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
    const int32_t kq = q(keeps_input(s, sp) ? st.x_in : 0);
    if (m < std::max(q(base(t) + run_peak(s, sp)), kq)) return kInf;
    const auto c = static_cast<float>(fwd_prefix_[static_cast<size_t>(sp)] -
                                      fwd_prefix_[static_cast<size_t>(s)]);
    return (c + table_[index(sp, t, m - kq)]) + table_[index(s, sp - 1, m)];
}

void RotorSolver::fill() {
    const int32_t n = n_, M = max_units_;
    if (n == 0) return;
    const auto ns = static_cast<size_t>(n);
    // Per (s, t): the first m at which (a)/(c) and (b) with s' = s+1 are allowed; per (s, s')
    // the run's peak for s' >= s+2 (nondecreasing in s'), and the cost of the run.
    std::vector<int32_t> need_c(ns * ns, 0), need_b1(ns * ns, 0), kq1(ns, 0), kq2(ns, 0),
        last_sp(ns * ns, 0);
    std::vector<uint64_t> run2(ns * ns, 0);
    std::vector<float> run_cost(ns * (ns + 1), 0);
    for (int32_t s = 0; s < n; ++s) {
        throw_if_cancelled();  // O(n²) run peaks: seconds on chains of thousands of stages
        const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
        const auto si = static_cast<size_t>(s);
        kq1[si] = q(keeps_input(s, s + 1) ? st.x_in : 0);
        kq2[si] = q(st.x_in);
        for (int32_t sp = s + 1; sp <= n; ++sp)
            run_cost[si * (ns + 1) + static_cast<size_t>(sp)] =
                static_cast<float>(fwd_prefix_[static_cast<size_t>(sp)] - fwd_prefix_[si]);
        for (int32_t sp = s + 2; sp < n; ++sp)
            run2[si * ns + static_cast<size_t>(sp)] = run_peak(s, sp);
        for (int32_t t = s + 1; t < n; ++t) {
            const size_t i = si * ns + static_cast<size_t>(t);
            need_c[i] = std::max(
                {q(base(t) + st.peak_fwd_all), q(grads_after_[si] + st.peak_bwd), q(st.hold_c)});
            need_b1[i] = std::max(q(base(t) + run_peak(s, s + 1)), kq1[si]);
            last_sp[i] = s + 1;  // no s' >= s+2 allowed yet
        }
    }
    std::vector<float> row(ns);  // C(s, t, m) for the current s and m, t = s..n-1
    for (int32_t m = 0; m <= M; ++m) {
        throw_if_cancelled();  // one memory level of the table per poll
        // The largest requirement q() admits at m units (relaxed: rounded down).
        const uint64_t bytes = static_cast<uint64_t>(m) * unit_ + (relaxed_ ? unit_ - 1 : 0);
        for (int32_t s = n - 1; s >= 0; --s) {
            const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
            const auto si = static_cast<size_t>(s);
            row[si] = option_a(s, m);
            table_[index(s, s, m)] = row[si];
            const float* cost_from_s = &run_cost[si * (ns + 1)];
            for (int32_t t = s + 1; t < n; ++t) {
                const size_t i = si * ns + static_cast<size_t>(t);
                float best = kInf;
                if (m >= need_c[i])  // (c)
                    best = st.fwd_ms + table_[index(s + 1, t, m - q(st.hold_c))];
                for (size_t j = 0; j < st.menu.size(); ++j) {  // (c) with a partial tape
                    const float v = option_menu(s, t, m, j);
                    best = v < best ? v : best;
                }
                if (m >= need_b1[i]) {  // (b), s' = s + 1
                    const float v =
                        (cost_from_s[s + 1] + table_[index(s + 1, t, m - kq1[si])]) + row[si];
                    best = v < best ? v : best;
                }
                // (b), s' >= s + 2: the run fits for s' up to last_sp (monotone in m).
                const uint64_t b = base(t);
                int32_t& last = last_sp[i];
                while (last < t && b + run2[si * ns + static_cast<size_t>(last + 1)] <= bytes)
                    ++last;
                if (last >= s + 2 && m >= kq2[si]) {
                    const float* right = &table_[index(0, t, m - kq2[si])];
                    const float* left = row.data() - 1;
                    // Eight lanes by hand (GCC/Clang vector extensions): the compiler does
                    // not vectorise this min-reduction itself.
                    using V8 = float __attribute__((vector_size(32)));
                    auto load = [](const float* p) {
                        V8 v;
                        std::memcpy(&v, p, sizeof v);
                        return v;
                    };
                    V8 acc8 = {kInf, kInf, kInf, kInf, kInf, kInf, kInf, kInf};
                    int32_t sp = s + 2;
                    for (; sp + 7 <= last; sp += 8) {
                        const V8 v = (load(cost_from_s + sp) + load(right + sp)) + load(left + sp);
                        acc8 = v < acc8 ? v : acc8;
                    }
                    float acc[1] = {kInf};
                    for (int j = 0; j < 8; ++j) best = acc8[j] < best ? acc8[j] : best;
                    for (; sp <= last; ++sp) {
                        const float v = (cost_from_s[sp] + right[sp]) + left[sp];
                        acc[0] = v < acc[0] ? v : acc[0];
                    }
                    best = acc[0] < best ? acc[0] : best;
                }
                row[static_cast<size_t>(t)] = best;
                table_[index(s, t, m)] = best;
            }
        }
    }
}

float RotorSolver::cost(int32_t units) const {
    if (n_ == 0 || units < 0) return kInf;
    return table_[index(0, n_ - 1, std::min(units, max_units_))];
}

int32_t RotorSolver::min_units() const {
    for (int32_t m = 0; m <= max_units_; ++m)
        if (std::isfinite(cost(m))) return m;
    return -1;
}

uint64_t RotorSolver::min_budget() const {
    const uint64_t none_peak = chain_.constant + chain_.span;
    const int32_t m = min_units();
    return m < 0 ? none_peak
                 : std::min(none_peak, chain_.constant + unit_ * static_cast<uint64_t>(m));
}

void RotorSolver::unroll(int32_t s, int32_t t, int32_t m, std::vector<RotorOp>& out) const {
    const float target = table_[index(s, t, m)];
    if (s == t) {
        out.push_back({RotorOp::Recompute, s, s});
        out.push_back({RotorOp::Backward, s, s});
        return;
    }
    // The option fill() kept: the first whose value is the table's (the min it stored).
    if (option_c(s, t, m) == target) {
        out.push_back({RotorOp::ForwardTape, s, s});
        unroll(s + 1, t, m - q(chain_.stages[static_cast<size_t>(s)].hold_c), out);
        out.push_back({RotorOp::Backward, s, s});
        return;
    }
    const RotorStage& stage = chain_.stages[static_cast<size_t>(s)];
    for (size_t j = 0; j < stage.menu.size(); ++j) {
        if (option_menu(s, t, m, j) != target) continue;
        const auto option = static_cast<int32_t>(j);
        out.push_back({RotorOp::ForwardTape, s, s, option});
        unroll(s + 1, t, m - q(stage.menu[j].hold), out);
        out.push_back({RotorOp::Backward, s, s, option});
        return;
    }
    for (int32_t sp = s + 1; sp <= t; ++sp) {
        if (option_b(s, sp, t, m) != target) continue;
        const RotorStage& st = chain_.stages[static_cast<size_t>(s)];
        out.push_back({RotorOp::Forward, s, sp - 1});
        unroll(sp, t, m - q(keeps_input(s, sp) ? st.x_in : 0), out);
        unroll(s, sp - 1, m, out);
        return;
    }
    throw std::logic_error("rotor: no option reproduces the table's value");
}

std::vector<RotorOp> RotorSolver::sequence(int32_t units) const {
    std::vector<RotorOp> out;
    if (!std::isfinite(cost(units))) return out;
    unroll(0, n_ - 1, std::min(units, max_units_), out);
    return out;
}

Schedule rotor_schedule(const Graph& g, const std::vector<NodeId>& stage_first,
                        const std::vector<RotorOp>& ops, const RotorChain* chain) {
    const LivenessTables t(g);
    const auto n_stages = static_cast<int32_t>(stage_first.size());
    auto stage = [&](int32_t k) {
        const NodeId last =
            k + 1 < n_stages ? stage_first[static_cast<size_t>(k + 1)] - 1 : g.num_nodes() - 1;
        return StageNodes{stage_first[static_cast<size_t>(k)], last, k + 1 == n_stages};
    };
    auto option_of = [&](const RotorOp& op) -> const RotorTapeOption& {
        if (!chain) throw std::logic_error("rotor_schedule: a menu option needs the chain");
        return chain->stages.at(static_cast<size_t>(op.first))
            .menu.at(static_cast<size_t>(op.option));
    };
    ScheduleBuilder b(g);
    for (const RotorOp& op : ops) {
        switch (op.kind) {
            case RotorOp::Forward:
            case RotorOp::ForwardTape: {
                const RotorTapeOption* o =
                    op.kind == RotorOp::ForwardTape && op.option >= 0 ? &option_of(op) : nullptr;
                if (o && !o->forward.empty()) {
                    for (const Instruction& ins : o->forward) b.compute(ins.target);
                    break;
                }
                for (NodeId n = stage(op.first).first; n <= stage(op.last).last; ++n) b.compute(n);
                break;
            }
            case RotorOp::Recompute:
                for (NodeId n : recompute_set(g, t, stage(op.first))) b.compute(n);
                break;
            case RotorOp::Backward: {
                const StageNodes s = stage(op.first);
                if (op.option >= 0) {
                    const RotorTapeOption& o = option_of(op);
                    if (!o.post.empty()) {
                        for (const Instruction& ins : o.post)
                            if (ins.kind == InstrKind::Backward)
                                b.backward(ins.target);
                            else
                                b.compute(ins.target);
                        break;
                    }
                    for (NodeId n : o.recompute) b.compute(n);
                }
                for (NodeId n = s.last; n >= s.first; --n)
                    if (t.needs_backward[static_cast<size_t>(n)]) b.backward(n);
                break;
            }
        }
    }
    return b.finish();
}

}  // namespace rl
