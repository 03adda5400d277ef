#include "analysis/explain.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "engine/errors.h"
#include "engine/liveness.h"
#include "engine/ops/op.h"
#include "engine/units.h"

namespace rl {

namespace {

constexpr long kNever = LONG_MAX;

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

std::string join_names(const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
        out += names[i];
    }
    return out;
}

}  // namespace

const char* node_fate_name(NodeFate f) {
    switch (f) {
        case NodeFate::Kept:
            return "kept";
        case NodeFate::Recomputed:
            return "recomputed";
        case NodeFate::FreedEarly:
            return "freed early";
        case NodeFate::NotRun:
            return "not run";
    }
    return "?";
}

std::vector<NodeUse> node_uses(const Graph& g, const Schedule& s) {
    std::vector<NodeUse> out(static_cast<size_t>(g.num_nodes()));
    std::vector<uint8_t> live(static_cast<size_t>(g.num_values()), 0);
    std::vector<uint8_t> live_at_backward;
    const LivenessTables t(g);
    for (size_t i = 0; i < s.size(); ++i) {
        const Instruction& ins = s.code[i];
        if (ins.kind == InstrKind::Backward && live_at_backward.empty()) live_at_backward = live;
        for_each_read(g, t, ins, [&](ValueId v) {
            const NodeId p = g.value(v).producer;
            if (p != kNoId && ins.kind == InstrKind::Backward &&
                out[static_cast<size_t>(p)].first_backward_read < 0)
                out[static_cast<size_t>(p)].first_backward_read = static_cast<long>(i);
        });
        if (ins.kind == InstrKind::Compute) {
            NodeUse& u = out[static_cast<size_t>(ins.target)];
            if (u.computes++ == 0) u.first_compute = static_cast<long>(i);
            live[static_cast<size_t>(g.node(ins.target).output)] = 1;
        } else if (ins.kind == InstrKind::Free) {
            live[static_cast<size_t>(ins.target)] = 0;
        }
    }
    if (live_at_backward.empty()) live_at_backward = live;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        NodeUse& u = out[static_cast<size_t>(n)];
        if (u.computes == 0)
            u.fate = NodeFate::NotRun;
        else if (u.computes > 1)
            u.fate = NodeFate::Recomputed;
        else if (live_at_backward[static_cast<size_t>(g.node(n).output)])
            u.fate = NodeFate::Kept;
        else
            u.fate = NodeFate::FreedEarly;
    }
    return out;
}

// ---- matrix ----

int ScheduleMatrix::stage_of(long instruction) const {
    if (instruction < 0 || stages == 0 || instruction > stage_last.back()) return -1;
    const auto it = std::upper_bound(stage_last.begin(), stage_last.end(), instruction - 1);
    return static_cast<int>(it - stage_last.begin());
}

ScheduleMatrix schedule_matrix(const Graph& g, const Schedule& s) {
    ScheduleMatrix m;
    m.nodes = g.num_nodes();
    const long n = static_cast<long>(s.size());
    // Stage of each instruction (see the header).
    std::vector<int> stage(static_cast<size_t>(n), 0);
    int backwards = 0;
    bool tail = false;
    for (long i = 0; i < n; ++i) {
        const Instruction& ins = s.code[static_cast<size_t>(i)];
        int st;
        if (ins.kind == InstrKind::Backward) {
            st = ++backwards;
            tail = true;
        } else if (ins.kind == InstrKind::Free && tail) {
            st = backwards;
        } else {
            tail = false;
            st = backwards == 0 ? 0 : backwards + 1;
        }
        stage[static_cast<size_t>(i)] = st;
    }
    int total = backwards + 1;
    // A plan-only network (an abstract benchmark graph) has no Backward instructions: its stages
    // are the general problem's (Checkmate's R matrix): stage t ends with node t's first
    // computation and the Frees right after it, so the first computations form the diagonal.
    std::vector<std::string> first_names;
    if (g.plan_only()) {
        std::vector<uint8_t> seen(static_cast<size_t>(g.num_nodes()), 0);
        int firsts = 0;
        tail = false;
        for (long i = 0; i < n; ++i) {
            const Instruction& ins = s.code[static_cast<size_t>(i)];
            int st = firsts;
            if (ins.kind == InstrKind::Compute && !seen[static_cast<size_t>(ins.target)]) {
                seen[static_cast<size_t>(ins.target)] = 1;
                first_names.push_back("stage " + std::to_string(firsts) + ": " +
                                      g.node(ins.target).name);
                ++firsts;
                tail = true;
            } else if (ins.kind == InstrKind::Free && tail) {
                st = firsts - 1;
            } else {
                tail = false;
            }
            stage[static_cast<size_t>(i)] = st;
        }
        total = std::max(firsts, 1);
    }
    for (long i = 0; i < n; ++i)
        stage[static_cast<size_t>(i)] = std::min(stage[static_cast<size_t>(i)], total - 1);
    m.stages = total;
    m.stage_first.assign(static_cast<size_t>(total), -1);
    m.stage_last.assign(static_cast<size_t>(total), -1);
    m.stage_node.assign(static_cast<size_t>(total), kNoId);
    m.stage_names.assign(static_cast<size_t>(total), "forward");
    for (size_t k = 0; k < first_names.size() && k < m.stage_names.size(); ++k)
        m.stage_names[k] = first_names[k];
    m.cells.assign(static_cast<size_t>(total) * static_cast<size_t>(m.nodes), 0);
    std::vector<uint8_t> live(static_cast<size_t>(g.num_values()), 0);
    std::vector<uint8_t> computed(static_cast<size_t>(m.nodes), 0);
    auto cell = [&](int st, NodeId node) -> uint8_t& {
        return m.cells[static_cast<size_t>(st) * static_cast<size_t>(m.nodes) +
                       static_cast<size_t>(node)];
    };
    int current = -1;
    for (long i = 0; i < n; ++i) {
        const int st = stage[static_cast<size_t>(i)];
        if (st != current) {
            // Stages are contiguous and increasing; a stage with no instruction keeps -1.
            current = st;
            m.stage_first[static_cast<size_t>(st)] = i;
            for (NodeId node = 0; node < m.nodes; ++node)
                if (live[static_cast<size_t>(g.node(node).output)])
                    cell(st, node) |= ScheduleMatrix::Kept;
        }
        m.stage_last[static_cast<size_t>(st)] = i;
        const Instruction& ins = s.code[static_cast<size_t>(i)];
        switch (ins.kind) {
            case InstrKind::Compute: {
                auto& seen = computed[static_cast<size_t>(ins.target)];
                cell(st, ins.target) |=
                    seen ? ScheduleMatrix::Recomputed : ScheduleMatrix::Computed;
                seen = 1;
                live[static_cast<size_t>(g.node(ins.target).output)] = 1;
                break;
            }
            case InstrKind::Free: {
                live[static_cast<size_t>(ins.target)] = 0;
                const NodeId p = g.value(ins.target).producer;
                if (p != kNoId) cell(st, p) |= ScheduleMatrix::Freed;
                break;
            }
            case InstrKind::Backward:
                cell(st, ins.target) |= ScheduleMatrix::Backward;
                m.stage_node[static_cast<size_t>(st)] = ins.target;
                m.stage_names[static_cast<size_t>(st)] = "backward " + g.node(ins.target).name;
                break;
            case InstrKind::Offload:
            case InstrKind::Prefetch:
                break;
            case InstrKind::Wait: {  // the value leaves the device, or is back on it
                auto& on_device = live[static_cast<size_t>(ins.target)];
                on_device = !on_device;
                const NodeId p = g.value(ins.target).producer;
                if (!on_device && p != kNoId) cell(st, p) |= ScheduleMatrix::Freed;
                break;
            }
        }
    }
    // Stages without instructions (none in a valid schedule) take their neighbours' bounds so
    // stage_of stays monotonic.
    for (int st = 0; st < total; ++st) {
        auto& first = m.stage_first[static_cast<size_t>(st)];
        auto& last = m.stage_last[static_cast<size_t>(st)];
        if (last < 0) {
            last = st > 0 ? m.stage_last[static_cast<size_t>(st - 1)] : -1;
            first = last + 1;
        }
    }
    return m;
}

std::string schedule_matrix_json(const Graph& g, const ScheduleMatrix& m) {
    std::string out =
        "{\n  \"format\": \"rematlab-schedule-matrix\",\n  \"flags\": {\"computed\": 1, "
        "\"recomputed\": 2, \"kept\": 4, \"freed\": 8, \"backward\": 16},\n";
    out += "  \"nodes\": [";
    for (NodeId n = 0; n < m.nodes; ++n) {
        if (n) out += ", ";
        out += json_string(g.node(n).name);
    }
    out += "],\n  \"stages\": [\n";
    for (int st = 0; st < m.stages; ++st) {
        out +=
            "    {\"name\": " + json_string(m.stage_names[static_cast<size_t>(st)]) +
            ", \"first_instruction\": " + std::to_string(m.stage_first[static_cast<size_t>(st)]) +
            ", \"last_instruction\": " + std::to_string(m.stage_last[static_cast<size_t>(st)]) +
            ", \"cells\": [";
        for (NodeId n = 0; n < m.nodes; ++n) {
            if (n) out += ',';
            out += std::to_string(static_cast<int>(m.at(st, n)));
        }
        out += st + 1 < m.stages ? "]},\n" : "]}\n";
    }
    out += "  ]\n}\n";
    return out;
}

// ---- stepping ----
//
// The live set comes from engine/liveness (one memory model): a value is live exactly when the
// simulator and the executor hold its buffer, so an input whose buffer an in-place forward took
// stops being live at that Compute, not at its Free.

namespace {

ScheduleState initial_state(const Graph& g) {
    ScheduleState s;
    s.live.assign(static_cast<size_t>(g.num_values()), 0);
    for (ValueId v : g.inputs()) s.live[static_cast<size_t>(v)] = 1;
    s.computes.assign(static_cast<size_t>(g.num_nodes()), 0);
    s.backwarded.assign(static_cast<size_t>(g.num_nodes()), 0);
    return s;
}

// Records, per instruction, the activations that come alive and those that stop being live.
class LiveChanges final : public MemoryVisitor {
  public:
    explicit LiveChanges(std::vector<std::vector<ScheduleCursor::Change>>& out) : out_(out) {}
    long index = -1;
    void allocate(BufferRef b, uint64_t) override { note(b, 1); }
    void release(BufferRef b, uint64_t) override { note(b, 0); }
    void hand_over(BufferRef from, BufferRef to, uint64_t) override {
        note(from, 0);
        note(to, 1);
    }
    void run_kernel(const Instruction&, bool) override {}

  private:
    void note(BufferRef b, uint8_t live) {
        if (index >= 0 && b.category == Category::Activations)
            out_[static_cast<size_t>(index)].push_back({b.id, live});
    }
    std::vector<std::vector<ScheduleCursor::Change>>& out_;
};

void apply_counts(const Instruction& ins, ScheduleState& s, int direction) {
    if (ins.kind == InstrKind::Compute)
        s.computes[static_cast<size_t>(ins.target)] += direction;
    else if (ins.kind == InstrKind::Backward)
        s.backwarded[static_cast<size_t>(ins.target)] = direction > 0 ? 1 : 0;
}

}  // namespace

ScheduleCursor::ScheduleCursor(const Graph& g, const Schedule& s)
    : g_(g), s_(s), state_(initial_state(g)), changes_(s.size()) {
    const LivenessTables t(g);
    Liveness live(g, t, s);
    LiveChanges v(changes_);
    live.begin(v);
    for (size_t i = 0; i < s.size(); ++i) {
        v.index = static_cast<long>(i);
        live.step(static_cast<long>(i), v);
    }
}

bool ScheduleCursor::forward() {
    if (state_.position >= size()) return false;
    const auto i = static_cast<size_t>(state_.position);
    for (const Change& c : changes_[i]) state_.live[static_cast<size_t>(c.value)] = c.live;
    apply_counts(s_.code[i], state_, +1);
    ++state_.position;
    return true;
}

bool ScheduleCursor::back() {
    if (state_.position <= 0) return false;
    --state_.position;
    const auto i = static_cast<size_t>(state_.position);
    const std::vector<Change>& cs = changes_[i];
    for (auto c = cs.rbegin(); c != cs.rend(); ++c)
        state_.live[static_cast<size_t>(c->value)] = c->live ? 0 : 1;
    apply_counts(s_.code[i], state_, -1);
    return true;
}

void ScheduleCursor::seek(long position) {
    position = std::clamp(position, 0L, size());
    while (state_.position < position) forward();
    while (state_.position > position) back();
}

ScheduleState state_at(const Graph& g, const Schedule& s, long position) {
    // Walked from the start and read off Liveness itself, independently of the cursor's record.
    class Quiet final : public MemoryVisitor {
        void allocate(BufferRef, uint64_t) override {}
        void release(BufferRef, uint64_t) override {}
        void run_kernel(const Instruction&, bool) override {}
    } quiet;
    ScheduleState st = initial_state(g);
    position = std::clamp(position, 0L, static_cast<long>(s.size()));
    const LivenessTables t(g);
    Liveness live(g, t, s);
    live.begin(quiet);
    for (long i = 0; i < position; ++i) {
        live.step(i, quiet);
        apply_counts(s.code[static_cast<size_t>(i)], st, +1);
    }
    for (ValueId v = 0; v < g.num_values(); ++v)
        st.live[static_cast<size_t>(v)] = live.activation_live(v) ? 1 : 0;
    st.position = position;
    return st;
}

// ---- sentences ----

ScheduleExplainer::ScheduleExplainer(const Graph& g, const Plan& plan, const Simulation& sim,
                                     const CostModel& costs)
    : g_(g), plan_(plan), sim_(sim), costs_(costs), tables_(g) {
    const LivenessTables& t = tables_;
    const Schedule& s = plan.schedule;
    const long n = static_cast<long>(s.size());
    computes_of_.assign(static_cast<size_t>(g.num_nodes()), {});
    frees_of_.assign(static_cast<size_t>(g.num_values()), {});
    reads_of_.assign(static_cast<size_t>(g.num_values()), {});
    for (long i = 0; i < n; ++i) {
        const Instruction& ins = s.code[static_cast<size_t>(i)];
        if (ins.kind == InstrKind::Compute)
            computes_of_[static_cast<size_t>(ins.target)].push_back(i);
        if (ins.kind == InstrKind::Free) frees_of_[static_cast<size_t>(ins.target)].push_back(i);
        if (ins.kind == InstrKind::Backward && first_backward_ < 0) first_backward_ = i;
        for_each_read(g, t, ins,
                      [&](ValueId v) { reads_of_[static_cast<size_t>(v)].push_back(i); });
    }
    // serves_[i]: the first Backward that reads the output of Compute i, directly or through
    // Computes that consume it before it is freed. One reverse sweep: `pending[v]` is the
    // earliest such Backward among the reads of v seen so far (later in the schedule).
    serves_.assign(static_cast<size_t>(n), -1);
    direct_.assign(static_cast<size_t>(n), -1);
    std::vector<long> pending(static_cast<size_t>(g.num_values()), kNever);
    std::vector<long> pending_direct(static_cast<size_t>(g.num_values()), kNever);
    for (long i = n - 1; i >= 0; --i) {
        const Instruction& ins = s.code[static_cast<size_t>(i)];
        if (ins.kind == InstrKind::Backward) {
            for_each_read(g, t, ins, [&](ValueId v) {
                pending[static_cast<size_t>(v)] = std::min(pending[static_cast<size_t>(v)], i);
                pending_direct[static_cast<size_t>(v)] = i;
            });
        } else if (ins.kind == InstrKind::Compute) {
            const auto out = static_cast<size_t>(g.node(ins.target).output);
            const long served = pending[out];
            serves_[static_cast<size_t>(i)] = served == kNever ? -1 : served;
            direct_[static_cast<size_t>(i)] =
                pending_direct[out] == kNever ? -1 : pending_direct[out];
            pending[out] = kNever;
            pending_direct[out] = kNever;
            if (served != kNever)
                for (ValueId u : g.node(ins.target).inputs)
                    pending[static_cast<size_t>(u)] =
                        std::min(pending[static_cast<size_t>(u)], served);
        }
    }
    // Live bytes after each instruction: its last event in the simulation's timeline (or the
    // bytes before it, for an instruction without events).
    live_after_.assign(static_cast<size_t>(n), 0);
    wait_stall_ms_.assign(static_cast<size_t>(n), 0.0);
    for (const auto& [at, ms] : sim.stalls)
        if (at >= 0 && at < n) wait_stall_ms_[static_cast<size_t>(at)] = ms;
    std::vector<uint8_t> has(static_cast<size_t>(n), 0);
    uint64_t before = 0;
    bool started = false;
    for (const SimPoint& p : sim.timeline) {
        if (p.instruction < 0) {
            if (!started) before = p.bytes;  // parameters and inputs, before the first instruction
            continue;
        }
        started = true;
        if (p.instruction >= n) continue;
        live_after_[static_cast<size_t>(p.instruction)] = p.bytes;
        has[static_cast<size_t>(p.instruction)] = 1;
    }
    for (long i = 0; i < n; ++i) {
        if (!has[static_cast<size_t>(i)]) live_after_[static_cast<size_t>(i)] = before;
        before = live_after_[static_cast<size_t>(i)];
    }
    checkpoint_.assign(static_cast<size_t>(g.num_nodes()), 0);
    for (NodeId c : plan.checkpoints)
        if (c >= 0 && c < g.num_nodes()) checkpoint_[static_cast<size_t>(c)] = 1;
}

std::string ScheduleExplainer::node_text(NodeId n) const {
    // An abstract benchmark graph's node has no op to name; what it has is its role, a node of
    // the forward pass or one of the backward pass the graph holds explicitly.
    if (g_.plan_only())
        return g_.node(n).name + (g_.node(n).has_tag("backward")
                                      ? " (a backward node of the graph)"
                                      : " (a forward node of the graph)");
    return g_.node(n).name + " (" + std::string(op_name(g_.node(n).op)) + ")";
}

std::string ScheduleExplainer::value_text(ValueId v) const {
    const Value& val = g_.value(v);
    if (val.is_input()) return "the input " + val.name;
    return val.name + "'s output";
}

std::string ScheduleExplainer::at_text(long index) const {
    return "#" + std::to_string(index);
}

std::string ScheduleExplainer::cost_text(double ms) const {
    char buf[48];
    if (g_.plan_only()) {  // an abstract graph's durations, in the file's own units
        std::snprintf(buf, sizeof buf, "%.6g time units", ms);
        return buf;
    }
    if (ms >= 10)
        std::snprintf(buf, sizeof buf, "%.1f ms", ms);
    else if (ms >= 0.1)
        std::snprintf(buf, sizeof buf, "%.2f ms", ms);
    else
        std::snprintf(buf, sizeof buf, "%.3f ms", ms);
    return buf;
}

long ScheduleExplainer::compute_before(NodeId n, long index) const {
    const auto& c = computes_of_[static_cast<size_t>(n)];
    auto it = std::lower_bound(c.begin(), c.end(), index);
    return it == c.begin() ? -1 : *(it - 1);
}

long ScheduleExplainer::compute_after(NodeId n, long index) const {
    const auto& c = computes_of_[static_cast<size_t>(n)];
    auto it = std::upper_bound(c.begin(), c.end(), index);
    return it == c.end() ? -1 : *it;
}

long ScheduleExplainer::free_after(ValueId v, long index) const {
    const auto& f = frees_of_[static_cast<size_t>(v)];
    auto it = std::upper_bound(f.begin(), f.end(), index);
    return it == f.end() ? -1 : *it;
}

long ScheduleExplainer::last_read_before(ValueId v, long index, long since) const {
    const auto& r = reads_of_[static_cast<size_t>(v)];
    auto it = std::lower_bound(r.begin(), r.end(), index);
    if (it == r.begin()) return -1;
    --it;
    return *it > since ? *it : -1;
}

const char* claim_kind_name(ClaimKind k) {
    switch (k) {
        case ClaimKind::Reads:
            return "reads";
        case ClaimKind::ReadsFrom:
            return "reads from";
        case ClaimKind::ReadBy:
            return "read by";
        case ClaimKind::FreedAt:
            return "freed at";
        case ClaimKind::NotReadUntil:
            return "not read until";
        case ClaimKind::NoBackwardReads:
            return "no backward reads";
        case ClaimKind::Checkpoint:
            return "checkpoint";
    }
    return "?";
}

// Records that instruction `index` reads v and which Compute made the copy it reads; returns
// that Compute's index (-1 for a graph input).
long ScheduleExplainer::reads_from(ValueId v, long index, Explanation& e) const {
    e.claims.push_back({ClaimKind::Reads, v, index, -1, false});
    const NodeId p = g_.value(v).producer;
    if (p == kNoId) return -1;
    const long c = compute_before(p, index);
    const bool again = c >= 0 && computes_of_[static_cast<size_t>(p)].front() != c;
    e.claims.push_back({ClaimKind::ReadsFrom, v, index, c, again});
    if (p != e.node) e.related.push_back(p);
    return c;
}

// Why the Compute at i runs again: the chain of real reads from its output to the Backward it
// serves (serves_), e.g. "block7.act is recomputed because recomputing block8.fc (#55) reads it;
// recomputing block8.act (#56) reads block8.fc; block8.act is needed by the backward of
// block9.fc (#59)". Each link is a ReadBy claim.
std::string ScheduleExplainer::reason_chain(long i, Explanation& e) const {
    const Schedule& s = plan_.schedule;
    const long target = serves_[static_cast<size_t>(i)];
    ValueId cur = g_.node(s.code[static_cast<size_t>(i)].target).output;
    const std::string name = g_.value(cur).name;
    long made = i;
    std::string why;
    for (int link = 0; link < static_cast<int>(s.size()); ++link) {
        const long next = compute_after(g_.value(cur).producer, made);
        long reader = -1;
        for (long r : reads_of_[static_cast<size_t>(cur)]) {
            if (r <= made) continue;
            if (next >= 0 && r > next) break;
            const Instruction& ri = s.code[static_cast<size_t>(r)];
            const bool ok = target < 0 ? true
                            : ri.kind == InstrKind::Backward
                                ? r == target
                                : serves_[static_cast<size_t>(r)] == target;
            if (ok) {
                reader = r;
                break;
            }
        }
        if (reader < 0) {
            if (link == 0) why = "Nothing reads " + name + " after this recompute";
            break;
        }
        e.claims.push_back({ClaimKind::ReadBy, cur, reader, made, false});
        const Instruction& ri = s.code[static_cast<size_t>(reader)];
        const Node& rn = g_.node(ri.target);
        e.related.push_back(ri.target);
        const bool backward = ri.kind == InstrKind::Backward;
        const std::string reader_text =
            backward ? "the backward of " + rn.name + " (" + at_text(reader) + ")"
                     : (computes_of_[static_cast<size_t>(ri.target)].front() == reader
                            ? "computing "
                            : "recomputing ") +
                           rn.name + " (" + at_text(reader) + ")";
        if (link == 0)
            why = name + " is recomputed because " + reader_text + " reads it";
        else if (backward)
            why += "; " + g_.value(cur).name + " is needed by " + reader_text;
        else
            why += "; " + reader_text + " reads " + g_.value(cur).name;
        // Without a Backward to reach, the first reader is the whole reason.
        if (backward || target < 0) break;
        cur = rn.output;
        made = reader;
    }
    return why;
}

std::string ScheduleExplainer::explain_compute(long i, Explanation& e) const {
    const NodeId n = e.node;
    const Node& node = g_.node(n);
    const Value& out = g_.value(node.output);
    const auto& computes = computes_of_[static_cast<size_t>(n)];
    const bool first = computes.front() == i;
    const long freed = free_after(node.output, i);
    const std::string size =
        g_.plan_only() ? format_bytes(out.bytes) + " of output"
                       : format_type(out.dtype, out.shape) + ", " + format_bytes(out.bytes);
    std::string why;
    if (first) {
        e.what = "compute " + node.name;
        why = (g_.plan_only() ? "First computation of " : "Forward of ") + node_text(n) + " → " +
              size + ", " + cost_text(costs_.size() ? costs_.forward_ms(n) : 0) + ". ";
        const long direct = direct_[static_cast<size_t>(i)];
        const long again = compute_after(n, i);
        const long last = freed >= 0 ? last_read_before(node.output, freed, i) : -1;
        if (direct >= 0) {
            const NodeId b = plan_.schedule.code[static_cast<size_t>(direct)].target;
            e.related.push_back(b);
            e.claims.push_back({ClaimKind::ReadBy, node.output, direct, i, false});
            if (checkpoint_[static_cast<size_t>(n)]) {
                e.claims.push_back({ClaimKind::Checkpoint, node.output, -1, -1, false});
                why +=
                    "One of the strategy's checkpoints: it is kept for the backward; the "
                    "backward of ";
            } else {
                why += "It is kept for the backward: the backward of ";
            }
            why += (b == n ? std::string("itself") : g_.node(b).name) + " reads it at " +
                   at_text(direct) + ".";
            if (again >= 0) {
                e.claims.push_back({ClaimKind::FreedAt, node.output, freed, last, false});
                e.claims.push_back({ClaimKind::NotReadUntil, node.output, freed, again, false});
                why += " It is freed at " + at_text(freed);
                if (last >= 0)
                    why += " once " + describe(g_, plan_.schedule.code[static_cast<size_t>(last)]) +
                           " (" + at_text(last) + ") has read it";
                why += ", and recomputed at " + at_text(again) + ".";
            }
        } else if (again >= 0) {
            e.claims.push_back({ClaimKind::FreedAt, node.output, freed, last, false});
            e.claims.push_back({ClaimKind::NotReadUntil, node.output, freed, again, false});
            why += "It is not kept: freed at " + at_text(freed);
            if (last >= 0) {
                why += " once " + describe(g_, plan_.schedule.code[static_cast<size_t>(last)]) +
                       " (" + at_text(last) + ") has read it";
                e.related.push_back(plan_.schedule.code[static_cast<size_t>(last)].target);
            }
            why += ", and recomputed at " + at_text(again);
            const long s = serves_[static_cast<size_t>(again)];
            if (s >= 0) {
                why +=
                    " for the backward of " + g_.node(plan_.schedule.code[size_t(s)].target).name;
                e.related.push_back(plan_.schedule.code[static_cast<size_t>(s)].target);
            }
            why += ".";
        } else if (freed >= 0 && g_.plan_only()) {
            // An abstract graph's node: no Backward instructions; its output stays live until
            // the last computation that reads it (a forward or a backward node of the graph).
            e.claims.push_back({ClaimKind::FreedAt, node.output, freed, last, false});
            if (last >= 0) {
                why += "It stays live until its last reader, " +
                       describe(g_, plan_.schedule.code[static_cast<size_t>(last)]) + " (" +
                       at_text(last) + "), and is freed right after it, at " + at_text(freed) + ".";
                e.related.push_back(plan_.schedule.code[static_cast<size_t>(last)].target);
            } else {
                why += "Nothing reads it, so it is freed at once, at " + at_text(freed) + ".";
            }
        } else if (freed >= 0) {
            e.claims.push_back({ClaimKind::NoBackwardReads, node.output, i, -1, false});
            e.claims.push_back({ClaimKind::FreedAt, node.output, freed, last, false});
            why += "No backward reads it, so it is freed at " + at_text(freed);
            if (last >= 0) {
                why += " right after " +
                       describe(g_, plan_.schedule.code[static_cast<size_t>(last)]) + " (" +
                       at_text(last) + ") reads it";
                e.related.push_back(plan_.schedule.code[static_cast<size_t>(last)].target);
            }
            why += ".";
        } else {
            why += g_.plan_only() ? "Nothing frees it before the end of the schedule."
                                  : "Nothing frees it before the end of the step.";
        }
        return why;
    }
    // A recompute: why (the chain of reads to the backward it serves), that it was not kept, and
    // what recomputing it reads.
    e.recompute = true;
    e.what = "recompute " + node.name;
    const long prev_free = [&] {
        const auto& f = frees_of_[static_cast<size_t>(node.output)];
        auto it = std::lower_bound(f.begin(), f.end(), i);
        return it == f.begin() ? -1L : *(it - 1);
    }();
    why = reason_chain(i, e);
    if (prev_free >= 0) {
        e.claims.push_back({ClaimKind::NotReadUntil, node.output, prev_free, i, false});
        why += ". " + node.name + " was not kept (freed at " + at_text(prev_free) + ")";
    }
    why += ". Recomputing it";
    std::vector<std::string> reads;
    std::vector<ValueId> seen;
    for (ValueId u : node.inputs) {
        if (std::find(seen.begin(), seen.end(), u) != seen.end()) continue;
        seen.push_back(u);
        const long c = reads_from(u, i, e);
        const Value& val = g_.value(u);
        if (val.is_input()) {
            reads.push_back("the input " + val.name);
        } else {
            const bool again = computes_of_[static_cast<size_t>(val.producer)].front() != c;
            reads.push_back(val.name + (again ? " (recomputed at " : " (kept since ") + at_text(c) +
                            ")");
        }
    }
    if (!reads.empty()) why += " reads " + join_names(reads) + ",";
    // The simulator's price (Simulation::instruction_ms): above the forward's only where the
    // recompute reads a value kept since the forward (engine/simulator.h).
    const double forward = costs_.size() ? costs_.forward_ms(n) : 0;
    const auto at = static_cast<size_t>(i);
    const double ms = at < sim_.instruction_ms.size() ? sim_.instruction_ms[at] : forward;
    why += " costs " + cost_text(ms);
    if (cost_text(ms) != cost_text(forward))
        why += " (its kept inputs read from memory; " + cost_text(forward) + " in the forward)";
    why += " and " + format_bytes(out.bytes) + ".";
    const int nth = static_cast<int>(std::lower_bound(computes.begin(), computes.end(), i) -
                                     computes.begin() + 1);
    if (computes.size() > 2)
        why += " This is computation " + std::to_string(nth) + " of " +
               std::to_string(computes.size()) + " of " + node.name + ".";
    return why;
}

std::string ScheduleExplainer::explain_free(long i, Explanation& e) const {
    const ValueId v = e.instruction.target;
    const Value& val = g_.value(v);
    e.what = "free " + val.name;
    const NodeId p = val.producer;
    const long made = p == kNoId ? -1 : compute_before(p, i);
    const long r = last_read_before(v, i, made);
    std::string reader;
    if (r >= 0) {
        const Instruction& ri = plan_.schedule.code[static_cast<size_t>(r)];
        reader = describe(g_, ri) + " (" + at_text(r) + ")";
        e.related.push_back(ri.target);
    }
    const long again = p == kNoId ? -1 : compute_after(p, i);
    e.claims.push_back({ClaimKind::FreedAt, v, i, r, false});
    e.claims.push_back({ClaimKind::NotReadUntil, v, i, again, false});
    std::string why;
    if (again >= 0) {
        why = "Freed to save memory: ";
        why += r >= 0 ? "its last read for now was " + reader : "nothing has read it yet";
        why +=
            "; nothing reads " + val.name + " again before it is recomputed at " + at_text(again);
        const long s = serves_[static_cast<size_t>(again)];
        if (s >= 0) {
            const NodeId b = plan_.schedule.code[static_cast<size_t>(s)].target;
            why += " for the backward of " + g_.node(b).name;
            e.related.push_back(b);
        }
        why += ". Releases " + format_bytes(val.bytes) + ".";
    } else if (r >= 0) {
        why = "Nothing reads " + val.name + " after " + reader + ", so its " +
              format_bytes(val.bytes) + " are released.";
    } else {
        why = "Nothing reads " + val.name + "'s output";
        if (p != kNoId && p == g_.loss_node() && !g_.plan_only())
            why += " (the loss's backward does not need it)";
        why += ", so its " + format_bytes(val.bytes) + " are released at once.";
    }
    return why;
}

// Offload, Prefetch and Wait: what moves where, what the copy costs on the cost model's link,
// and, for an offload, what it replaces: recomputing the value's producer for its next reader.
std::string ScheduleExplainer::explain_copy(long i, Explanation& e) const {
    const ValueId v = e.instruction.target;
    const Value& val = g_.value(v);
    const auto& code = plan_.schedule.code;
    const bool has_costs = costs_.size() > 0;
    e.what = describe(g_, e.instruction);
    auto find = [&](long from, long step, InstrKind k) {
        for (long j = from; j >= 0 && j < size(); j += step)
            if (code[static_cast<size_t>(j)].kind == k && code[static_cast<size_t>(j)].target == v)
                return j;
        return -1L;
    };
    const std::string size_text = format_bytes(val.bytes);
    if (e.instruction.kind == InstrKind::Offload) {
        const long back = find(i + 1, 1, InstrKind::Prefetch);
        const double copy = has_costs ? costs_.transfer().copy_ms(val.bytes, true) : 0.0;
        std::string why = "Copies " + val.name + " (" + size_text +
                          ") to host memory on the copy stream, beside the kernels (" +
                          cost_text(copy) + " on the link); its device buffer is released at " +
                          "its wait";
        if (back >= 0) {
            why += ", and it comes back by the prefetch at " + at_text(back);
            if (val.producer != kNoId)
                why += ". Offloaded rather than recomputed: recomputing " +
                       g_.node(val.producer).name + " would cost " +
                       cost_text(has_costs ? costs_.forward_ms(val.producer) : 0) +
                       " of compute (more if its inputs are gone too), while the copies only " +
                       "cost the step the time the compute stream waits for them";
        }
        return why + ".";
    }
    if (e.instruction.kind == InstrKind::Prefetch) {
        const double copy = has_costs ? costs_.transfer().copy_ms(val.bytes, false) : 0.0;
        std::string why = "Copies " + val.name + " (" + size_text +
                          ") back from host memory, taking its device buffer now; " +
                          cost_text(copy) + " on the link";
        for (long j = i + 1; j < size(); ++j) {
            const Instruction& r = code[static_cast<size_t>(j)];
            bool reads = false;
            for_each_read(g_, tables_, r, [&](ValueId x) { reads = reads || x == v; });
            if (!reads) continue;
            why += "; it is read next by " + describe(g_, r) + " (" + at_text(j) + ")";
            if (!targets_value(r.kind)) e.related.push_back(r.target);
            break;
        }
        return why + ".";
    }
    // Wait
    const long issued =
        std::max(find(i - 1, -1, InstrKind::Offload), find(i - 1, -1, InstrKind::Prefetch));
    const bool offload =
        issued >= 0 && code[static_cast<size_t>(issued)].kind == InstrKind::Offload;
    std::string why = "The compute stream waits for the " +
                      std::string(offload ? "offload" : "prefetch") + " of " + val.name +
                      (issued >= 0 ? " issued at " + at_text(issued) : std::string()) + "; then " +
                      (offload ? "its device buffer (" + size_text + ") is released"
                               : "it is readable on the device and its host copy is released");
    const double stall = wait_stall_ms_.empty() ? 0.0 : wait_stall_ms_[static_cast<size_t>(i)];
    why += stall > 0 ? ". The copy was not done yet: the step stalls here " + cost_text(stall)
                     : ". The copy is already done: no stall";
    return why + ".";
}

std::string ScheduleExplainer::explain_backward(long i, Explanation& e) const {
    const NodeId n = e.node;
    const Node& node = g_.node(n);
    e.what = "backward " + node.name;
    std::vector<std::string> reads;
    std::vector<ValueId> seen;
    for_each_residual(g_, tables_, n, [&](ValueId v) {
        if (std::find(seen.begin(), seen.end(), v) != seen.end()) return;
        seen.push_back(v);
        const Value& val = g_.value(v);
        const long c = reads_from(v, i, e);
        std::string how;
        if (val.is_input()) {
            how = "a graph input";
        } else {
            const bool again = computes_of_[static_cast<size_t>(val.producer)].front() != c;
            how = (again ? "recomputed at " : "kept since ") + at_text(c);
            for (long j = i - 1; j > c && j >= 0; --j) {  // brought back from the host since?
                const Instruction& x = plan_.schedule.code[static_cast<size_t>(j)];
                if (x.kind == InstrKind::Prefetch && x.target == v) {
                    how = (again ? "recomputed at " : "computed at ") + at_text(c) +
                          ", offloaded, and prefetched at " + at_text(j);
                    break;
                }
            }
        }
        reads.push_back((v == node.output ? "its own output" : "its input " + val.name) + " (" +
                        how + ")");
    });
    std::string why = "Backward of " + node_text(n) + ": " +
                      (reads.empty() ? std::string("its op's backward reads no saved value")
                                     : "reads " + join_names(reads));
    std::vector<std::string> grads;
    for (ValueId u : node.inputs)
        if (g_.value(u).requires_grad) grads.push_back(g_.value(u).name);
    if (!grads.empty()) why += "; adds into the gradient of " + join_names(grads);
    std::vector<std::string> params;
    for (ParamId p : node.params) params.push_back(g_.param(p).name);
    if (!params.empty()) why += "; writes the gradients of " + join_names(params);
    why += "; then its output gradient (" + format_bytes(g_.value(node.output).bytes) +
           ") is released. Costs " + cost_text(costs_.size() ? costs_.backward_ms(n) : 0) + ".";
    return why;
}

Explanation ScheduleExplainer::explain(long index) const {
    if (index < 0 || index >= size())
        throw Error("instruction " + std::to_string(index) + " is outside the schedule (0 to " +
                    std::to_string(size() - 1) + ")");
    Explanation e;
    e.index = index;
    e.instruction = plan_.schedule.code[static_cast<size_t>(index)];
    e.node = targets_value(e.instruction.kind) ? g_.value(e.instruction.target).producer
                                               : e.instruction.target;
    switch (e.instruction.kind) {
        case InstrKind::Compute:
            e.why = explain_compute(index, e);
            break;
        case InstrKind::Free:
            e.why = explain_free(index, e);
            break;
        case InstrKind::Backward:
            e.why = explain_backward(index, e);
            break;
        case InstrKind::Offload:
        case InstrKind::Prefetch:
        case InstrKind::Wait:
            e.why = explain_copy(index, e);
            break;
    }
    e.live_bytes = live_after_[static_cast<size_t>(index)];
    e.at_peak = sim_.peak_instruction == index;
    e.why += " Live memory after it: " + format_bytes(e.live_bytes);
    e.why += e.at_peak ? " — this instruction holds the schedule's peak (" +
                             format_bytes(sim_.peak_bytes) + ")."
                       : ".";
    std::sort(e.related.begin(), e.related.end());
    e.related.erase(std::unique(e.related.begin(), e.related.end()), e.related.end());
    e.related.erase(std::remove(e.related.begin(), e.related.end(), e.node), e.related.end());
    return e;
}

std::string explain_instruction(const Graph& g, const Plan& plan, const Simulation& sim,
                                const CostModel& costs, long index) {
    const ScheduleExplainer ex(g, plan, sim, costs);
    const Explanation e = ex.explain(index);
    return e.what + ": " + e.why;
}

}  // namespace rl
