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

// The values an instruction reads: a Compute its inputs, a Backward its residuals.
template <typename F>
void for_each_read(const Graph& g, const std::vector<uint32_t>& residual_inputs,
                   const std::vector<uint8_t>& residual_output, const Instruction& ins, F&& f) {
    if (ins.kind == InstrKind::Free) return;
    const Node& node = g.node(ins.target);
    if (ins.kind == InstrKind::Compute) {
        for (ValueId u : node.inputs) f(u);
        return;
    }
    const auto n = static_cast<size_t>(ins.target);
    for (size_t i = 0; i < node.inputs.size(); ++i)
        if ((residual_inputs[n] >> i) & 1u) f(node.inputs[i]);
    if (residual_output[n]) f(node.output);
}

template <typename F>
void for_each_read(const Graph& g, const LivenessTables& t, const Instruction& ins, F&& f) {
    for_each_read(g, t.residual_inputs, t.residual_output, ins, std::forward<F>(f));
}

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
    for (long i = 0; i < n; ++i)
        stage[static_cast<size_t>(i)] = std::min(stage[static_cast<size_t>(i)], total - 1);
    m.stages = total;
    m.stage_first.assign(static_cast<size_t>(total), -1);
    m.stage_last.assign(static_cast<size_t>(total), -1);
    m.stage_node.assign(static_cast<size_t>(total), kNoId);
    m.stage_names.assign(static_cast<size_t>(total), "forward");
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

namespace {

ScheduleState initial_state(const Graph& g) {
    ScheduleState s;
    s.live.assign(static_cast<size_t>(g.num_values()), 0);
    for (ValueId v : g.inputs()) s.live[static_cast<size_t>(v)] = 1;
    s.computes.assign(static_cast<size_t>(g.num_nodes()), 0);
    s.backwarded.assign(static_cast<size_t>(g.num_nodes()), 0);
    return s;
}

void apply(const Graph& g, const Instruction& ins, ScheduleState& s, int direction) {
    switch (ins.kind) {
        case InstrKind::Compute:
            s.live[static_cast<size_t>(g.node(ins.target).output)] = direction > 0 ? 1 : 0;
            s.computes[static_cast<size_t>(ins.target)] += direction;
            break;
        case InstrKind::Free:
            s.live[static_cast<size_t>(ins.target)] = direction > 0 ? 0 : 1;
            break;
        case InstrKind::Backward:
            s.backwarded[static_cast<size_t>(ins.target)] = direction > 0 ? 1 : 0;
            break;
    }
}

}  // namespace

ScheduleCursor::ScheduleCursor(const Graph& g, const Schedule& s)
    : g_(g), s_(s), state_(initial_state(g)) {}

bool ScheduleCursor::forward() {
    if (state_.position >= size()) return false;
    apply(g_, s_.code[static_cast<size_t>(state_.position)], state_, +1);
    ++state_.position;
    return true;
}

bool ScheduleCursor::back() {
    if (state_.position <= 0) return false;
    --state_.position;
    apply(g_, s_.code[static_cast<size_t>(state_.position)], state_, -1);
    return true;
}

void ScheduleCursor::seek(long position) {
    position = std::clamp(position, 0L, size());
    while (state_.position < position) forward();
    while (state_.position > position) back();
}

ScheduleState state_at(const Graph& g, const Schedule& s, long position) {
    ScheduleState st = initial_state(g);
    position = std::clamp(position, 0L, static_cast<long>(s.size()));
    for (long i = 0; i < position; ++i) apply(g, s.code[static_cast<size_t>(i)], st, +1);
    st.position = position;
    return st;
}

// ---- sentences ----

ScheduleExplainer::ScheduleExplainer(const Graph& g, const Plan& plan, const Simulation& sim,
                                     const CostModel& costs)
    : g_(g), plan_(plan), sim_(sim), costs_(costs) {
    const LivenessTables t(g);
    residual_inputs_ = t.residual_inputs;
    residual_output_ = t.residual_output;
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
    char buf[32];
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

// The values a recompute at `index` of v's producer ultimately starts from: inputs that were kept
// (computed in the forward and never freed since) or graph inputs; through inputs that are
// themselves recomputed just before.
void ScheduleExplainer::sources(ValueId v, long index, std::vector<ValueId>& out,
                                std::vector<uint8_t>& seen) const {
    const NodeId p = g_.value(v).producer;
    if (p == kNoId) return;
    for (ValueId u : g_.node(p).inputs) {
        if (seen[static_cast<size_t>(u)]) continue;
        seen[static_cast<size_t>(u)] = 1;
        const NodeId q = g_.value(u).producer;
        if (q == kNoId) {
            out.push_back(u);
            continue;
        }
        const long c = compute_before(q, index);
        const bool recomputed = c >= 0 && computes_of_[static_cast<size_t>(q)].front() != c;
        if (recomputed)
            sources(u, c, out, seen);
        else
            out.push_back(u);
    }
}

std::string ScheduleExplainer::explain_compute(long i, Explanation& e) const {
    const NodeId n = e.node;
    const Node& node = g_.node(n);
    const Value& out = g_.value(node.output);
    const auto& computes = computes_of_[static_cast<size_t>(n)];
    const bool first = computes.front() == i;
    const long serves = serves_[static_cast<size_t>(i)];
    const long freed = free_after(node.output, i);
    const std::string size = format_type(out.dtype, out.shape) + ", " + format_bytes(out.bytes);
    std::string why;
    if (first) {
        e.what = "compute " + node.name;
        why = "Forward of " + node_text(n) + " → " + size + ", " +
              cost_text(costs_.size() ? costs_.forward_ms(n) : 0) + ". ";
        const long direct = direct_[static_cast<size_t>(i)];
        const long again = compute_after(n, i);
        if (again >= 0) {
            const long s = serves_[static_cast<size_t>(again)];
            why += "It is not kept: freed at " + at_text(freed) +
                   " once the forward is done with "
                   "it, and recomputed at " +
                   at_text(again);
            if (s >= 0) {
                why +=
                    " for the backward of " + g_.node(plan_.schedule.code[size_t(s)].target).name;
                e.related.push_back(plan_.schedule.code[static_cast<size_t>(s)].target);
            }
            why += ".";
        } else if (direct >= 0) {
            const NodeId b = plan_.schedule.code[static_cast<size_t>(direct)].target;
            e.related.push_back(b);
            why += checkpoint_[static_cast<size_t>(n)]
                       ? "One of the strategy's checkpoints: it is "
                         "kept for the backward; the backward of "
                       : "It is kept for the backward: the backward "
                         "of ";
            why += (b == n ? std::string("itself") : g_.node(b).name) + " reads it at " +
                   at_text(direct) + ".";
        } else if (freed >= 0) {
            const long r = last_read_before(node.output, freed, i);
            why += "No backward reads it, so it is freed at " + at_text(freed);
            if (r >= 0) {
                why += " right after " + describe(g_, plan_.schedule.code[static_cast<size_t>(r)]) +
                       " (" + at_text(r) + ") reads it";
                e.related.push_back(plan_.schedule.code[static_cast<size_t>(r)].target);
            }
            why += ".";
        } else {
            why += "Nothing frees it before the end of the step.";
        }
        return why;
    }
    // A recompute.
    e.recompute = true;
    e.what = "recompute " + node.name;
    const long prev_free = frees_of_[static_cast<size_t>(node.output)].empty() ? -1 : [&] {
        const auto& f = frees_of_[static_cast<size_t>(node.output)];
        auto it = std::lower_bound(f.begin(), f.end(), i);
        return it == f.begin() ? -1L : *(it - 1);
    }();
    const std::string not_kept =
        "was not kept" +
        (prev_free >= 0 ? " (freed at " + at_text(prev_free) + ")" : std::string());
    if (serves >= 0) {
        const NodeId b = plan_.schedule.code[static_cast<size_t>(serves)].target;
        e.related.push_back(b);
        why = "The backward of " + node_text(b) + " at " + at_text(serves) + " reads ";
        if (direct_[static_cast<size_t>(i)] == serves) {
            why += (b == n ? "this node's own output" : node.name + "'s output") + ", which " +
                   not_kept;
        } else {
            // The first recomputed consumer on the way to that backward.
            std::string via;
            for (long r : reads_of_[static_cast<size_t>(node.output)]) {
                if (r <= i) continue;
                if (freed >= 0 && r > freed) break;
                const Instruction& ri = plan_.schedule.code[static_cast<size_t>(r)];
                if (ri.kind == InstrKind::Compute) {
                    via = g_.node(ri.target).name;
                    break;
                }
            }
            why += (via.empty() ? std::string("a value") : via + "'s output") +
                   ", recomputed from " + node.name + "'s; " + node.name + " " + not_kept;
        }
    } else {
        why = node.name + "'s output is needed again and " + not_kept;
    }
    why += ": recomputing it";
    std::vector<ValueId> src;
    std::vector<uint8_t> seen(static_cast<size_t>(g_.num_values()), 0);
    sources(node.output, i, src, seen);
    if (!src.empty()) {
        std::vector<std::string> names;
        bool all_kept = true;
        for (ValueId v : src) {
            names.push_back(value_text(v));
            if (!g_.value(v).is_input()) {
                e.related.push_back(g_.value(v).producer);
            } else {
                all_kept = false;
            }
        }
        if (names.size() > 4) {
            names.resize(4);
            names.push_back("more");
        }
        why += std::string(" from ") + (all_kept && src.size() == 1 ? "the checkpoint at " : "") +
               join_names(names);
    }
    why += " costs " + cost_text(costs_.size() ? costs_.forward_ms(n) : 0) + " and " +
           format_bytes(out.bytes) + ".";
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
    std::string why;
    if (again >= 0) {
        why = "Freed early to save memory: ";
        why += r >= 0 ? "its last read for now was " + reader : "nothing has read it yet";
        const long s = serves_[static_cast<size_t>(again)];
        why += "; it is recomputed at " + at_text(again);
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
        if (p != kNoId && p == g_.loss_node()) why += " (the loss's backward does not need it)";
        why += ", so its " + format_bytes(val.bytes) + " are released at once.";
    }
    return why;
}

std::string ScheduleExplainer::explain_backward(long i, Explanation& e) const {
    const NodeId n = e.node;
    const Node& node = g_.node(n);
    e.what = "backward " + node.name;
    std::vector<std::string> reads;
    for_each_read(g_, residual_inputs_, residual_output_, e.instruction, [&](ValueId v) {
        const Value& val = g_.value(v);
        std::string how;
        if (val.is_input()) {
            how = "an input";
        } else {
            const long c = compute_before(val.producer, i);
            const bool recomputed =
                c >= 0 && computes_of_[static_cast<size_t>(val.producer)].front() != c;
            how = recomputed ? "recomputed at " + at_text(c) : "kept since the forward";
            if (val.producer != n) e.related.push_back(val.producer);
        }
        reads.push_back((v == node.output ? "its own output" : val.name) + " (" + how + ")");
    });
    std::string why = "Backward of " + node_text(n) + ": reads " +
                      (reads.empty() ? std::string("no saved value") : join_names(reads));
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
    e.node = e.instruction.kind == InstrKind::Free ? g_.value(e.instruction.target).producer
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
