#include "solvers/rockmate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <variant>

#include "engine/cancel.h"
#include "engine/liveness.h"
#include "engine/simulator.h"
#include "solvers/block_milp.h"
#include "solvers/checkmate.h"
#include "solvers/rotor_internal.h"

namespace rl {

using namespace rotor_detail;

namespace {

void put_attr(std::ostringstream& o, const AttrValue& v) {
    std::visit(
        [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
                o << '[';
                for (int64_t i : x) o << i << ',';
                o << ']';
            } else {
                o << x;
            }
        },
        v);
}

void put_shape(std::ostringstream& o, const Shape& s) {
    o << '(';
    for (int64_t d : s.dims) o << d << ',';
    o << ')';
}

// Everything about a stage that its memory and its schedules depend on, names left out.
std::string signature(const Graph& g, const LivenessTables& t, StageNodes st, bool prev_reads) {
    std::ostringstream o;
    const ValueId xin = st.first > 0 ? g.node(st.first - 1).output : kNoId;
    o << (st.is_loss_stage ? 'L' : 'S') << (xin == kNoId ? '0' : '1') << prev_reads << '|';
    for (NodeId n = st.first; n <= st.last; ++n) {
        const Node& node = g.node(n);
        const Value& out = g.value(node.output);
        const auto ni = static_cast<size_t>(n);
        o << static_cast<int>(node.op) << '{';
        for (const auto& [key, value] : node.attrs.items()) {
            o << key << '=';
            put_attr(o, value);
            o << ';';
        }
        o << '}' << static_cast<int>(out.dtype);
        put_shape(o, out.shape);
        o << out.bytes << 'g' << out.requires_grad << 'b' << int(t.needs_backward[ni]) << 'w'
          << t.fwd_workspace[ni] << ',' << t.bwd_workspace[ni] << "<";
        for (ValueId in : node.inputs) {
            const Value& v = g.value(in);
            if (in == xin)
                o << 'x';
            else if (v.is_input())
                o << 'i' << in;  // the same graph input (token ids, a mask) in every layer
            else
                o << 'r' << (v.producer - st.first);
            o << ',';
        }
        o << "]p";
        for (ParamId p : node.params) {
            put_shape(o, g.param(p).shape);
            o << g.param(p).bytes << ',';
        }
        // Consumers inside the stage only: what lies beyond it (how many later nodes read the
        // stage's output) changes neither its menu search nor its peaks, which are measured
        // per stage anyway.
        o << 'c';
        for (NodeId c : out.consumers)
            if (c <= st.last) o << (c - st.first) << ',';
        o << '\n';
    }
    return o.str();
}

// The search space of one block: candidates (values its backwards read, its input and output
// excluded) and how recomputation depends on them.
struct Block {
    StageNodes st;
    ValueId xin = kNoId, xout = kNoId;
    bool xin_forced = false;  // x_k held whatever the option (a residual, or read by k-1)
    std::vector<ValueId> cand;
};

Block block_of(const Graph& g, const LivenessTables& t, StageNodes st, bool prev_reads) {
    Block b;
    b.st = st;
    b.xin = st.first > 0 ? g.node(st.first - 1).output : kNoId;
    b.xout = st.is_loss_stage ? kNoId : g.node(st.last).output;
    for (ValueId v : backward_reads(g, t, st)) {
        if (v == b.xin)
            b.xin_forced = true;
        else if (v != b.xout)
            b.cand.push_back(v);
    }
    b.xin_forced = b.xin != kNoId && (b.xin_forced || prev_reads);
    std::sort(b.cand.begin(), b.cand.end());
    return b;
}

// The nodes to recompute when only `kept` of the candidates are kept (kept[i] for cand[i]), in
// node order; `reads_xin` is set when one of them reads the block's input.
std::vector<NodeId> recompute_for(const Graph& g, const Block& b, const std::vector<uint8_t>& kept,
                                  bool* reads_xin) {
    const StageNodes st = b.st;
    std::vector<uint8_t> needed(static_cast<size_t>(st.last - st.first + 1), 0);
    std::vector<uint8_t> is_kept(needed.size(), 0);
    for (size_t i = 0; i < b.cand.size(); ++i)
        if (kept[i]) is_kept[static_cast<size_t>(g.value(b.cand[i]).producer - st.first)] = 1;
    auto mark = [&](ValueId v) {
        const Value& val = g.value(v);
        if (val.is_input() || val.producer < st.first || val.producer >= st.last) return;
        const auto r = static_cast<size_t>(val.producer - st.first);
        if (!is_kept[r]) needed[r] = 1;
    };
    for (size_t i = 0; i < b.cand.size(); ++i)
        if (!kept[i]) mark(b.cand[i]);
    *reads_xin = false;
    std::vector<NodeId> out;
    for (NodeId n = st.last - 1; n >= st.first; --n) {
        if (!needed[static_cast<size_t>(n - st.first)]) continue;
        out.push_back(n);
        for (ValueId in : g.node(n).inputs) {
            *reads_xin = *reads_xin || in == b.xin;
            mark(in);
        }
    }
    std::reverse(out.begin(), out.end());
    return out;
}

struct Choice {
    std::vector<uint8_t> kept;
    double rec_ms = 0;
    uint64_t hold = 0;
};

Choice evaluate(const Graph& g, const Block& b, std::vector<uint8_t> kept,
                const std::function<double(NodeId)>& fwd) {
    Choice c;
    bool reads_xin = false;
    for (NodeId n : recompute_for(g, b, kept, &reads_xin)) c.rec_ms += fwd(n);
    for (size_t i = 0; i < b.cand.size(); ++i)
        if (kept[i]) c.hold += g.value(b.cand[i]).bytes;
    if (b.xin != kNoId && (b.xin_forced || reads_xin)) c.hold += g.value(b.xin).bytes;
    c.kept = std::move(kept);
    return c;
}

// The menu of one block: for each hold budget, the least recompute time within it.
std::vector<std::vector<uint8_t>> search_menu(const Graph& g, const Block& b,
                                              const std::function<double(NodeId)>& fwd,
                                              const RockmateOptions& opt, uint64_t* left,
                                              bool* exhaustive) {
    const size_t c = b.cand.size();
    std::vector<Choice> choices;
    if (static_cast<int>(c) <= opt.exhaustive_max && (uint64_t{1} << c) <= *left) {
        *left -= uint64_t{1} << c;
        for (uint32_t mask = 0; mask < (1u << c); ++mask) {
            if ((mask & 1023u) == 0) throw_if_cancelled();
            std::vector<uint8_t> kept(c);
            for (size_t i = 0; i < c; ++i) kept[i] = (mask >> i) & 1u;
            choices.push_back(evaluate(g, b, std::move(kept), fwd));
        }
    } else {
        *exhaustive = false;
        // Drop candidates one by one, cheapest recompute per byte saved first.
        const Choice full = evaluate(g, b, std::vector<uint8_t>(c, 1), fwd);
        std::vector<std::pair<double, size_t>> order;
        for (size_t i = 0; i < c; ++i) {
            std::vector<uint8_t> kept(c, 1);
            kept[i] = 0;
            const Choice one = evaluate(g, b, kept, fwd);
            const double saved = static_cast<double>(full.hold - std::min(full.hold, one.hold));
            order.emplace_back(one.rec_ms / std::max(saved, 1.0), i);
        }
        std::sort(order.begin(), order.end());
        std::vector<uint8_t> kept(c, 1);
        choices.push_back(full);
        for (const auto& [ratio, i] : order) {
            kept[i] = 0;
            choices.push_back(evaluate(g, b, kept, fwd));
        }
    }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const Choice& ch : choices) {
        lo = std::min(lo, ch.hold);
        hi = std::max(hi, ch.hold);
    }
    std::vector<std::vector<uint8_t>> menu;
    const int points = std::max(opt.menu_points, 2);
    for (int p = 0; p < points; ++p) {
        const uint64_t budget =
            lo + static_cast<uint64_t>(static_cast<double>(hi - lo) * p / (points - 1));
        const Choice* best = nullptr;
        for (const Choice& ch : choices)
            if (ch.hold <= budget && (!best || ch.rec_ms < best->rec_ms ||
                                      (ch.rec_ms == best->rec_ms && ch.hold < best->hold)))
                best = &ch;
        // The full tape is Rotor's own option (c): not repeated.
        if (best && std::find(best->kept.begin(), best->kept.end(), 0) != best->kept.end() &&
            std::find(menu.begin(), menu.end(), best->kept) == menu.end())
            menu.push_back(best->kept);
    }
    return menu;
}

std::string bytes_text(uint64_t b) {
    return std::to_string(b) + " bytes";
}

block_detail::BlockSpec spec_of(const Block& b, bool reads_out) {
    block_detail::BlockSpec spec;
    spec.first = b.st.first;
    spec.last = b.st.last;
    spec.xin = b.xin;
    spec.xin_forced = b.xin_forced;
    spec.reads_out = reads_out;
    return spec;
}

// A post-forward sequence in a block's own terms (node offsets from its first node), so that a
// class's MILP solutions serve every member.
struct RelInstr {
    InstrKind kind;
    int32_t offset;
};

std::vector<RelInstr> relative(const std::vector<Instruction>& seq, NodeId first) {
    std::vector<RelInstr> out;
    for (const Instruction& ins : seq) out.push_back({ins.kind, ins.target - first});
    return out;
}

std::vector<Instruction> absolute(const std::vector<RelInstr>& seq, NodeId first) {
    std::vector<Instruction> out;
    for (const RelInstr& r : seq) out.push_back({r.kind, first + r.offset});
    return out;
}

// The block-MILP menu of one class (block_milp.h): for `points` hold budgets between the
// class's smallest and full hold, and two activation budgets each, the least-recompute
// post-forward sequence. Solves stop when `deadline` has passed.
std::vector<std::vector<RelInstr>> milp_menu(const Graph& g, const LivenessTables& t,
                                             const Block& b, bool reads_out,
                                             const std::function<double(NodeId)>& fwd,
                                             const RockmateOptions& opt,
                                             std::chrono::steady_clock::time_point deadline,
                                             RockmateStats& stats) {
    const block_detail::BlockSpec spec = spec_of(b, reads_out);
    const uint64_t xin_bytes = b.xin != kNoId ? g.value(b.xin).bytes : 0;
    const uint64_t lo = b.xin_forced ? xin_bytes : 0;
    uint64_t hi = xin_bytes, all = 0, least = 0;
    for (ValueId v : b.cand) hi += g.value(v).bytes;
    for (NodeId n = b.st.first; n < b.st.last; ++n) all += g.output_of(n).bytes;
    // Whatever the schedule, some Backward's interior residuals are live at it.
    for (NodeId n = b.st.last; n >= b.st.first; --n) {
        if (!t.needs_backward[static_cast<size_t>(n)]) continue;
        uint64_t at = lo;
        std::vector<ValueId> seen;
        for_each_residual(g, t, n, [&](ValueId v) {
            const Value& val = g.value(v);
            if (val.is_input() || v == b.xin || val.producer == b.st.last) return;
            if (std::find(seen.begin(), seen.end(), v) != seen.end()) return;
            seen.push_back(v);
            at += val.bytes;
        });
        least = std::max(least, at);
    }
    std::vector<std::vector<RelInstr>> out;
    const int points = std::max(opt.menu_points, 2);
    block_detail::BlockMilpSolve solve;
    solve.time_limit_s = opt.milp_time_s;
    solve.max_nodes = opt.milp_nodes;
    for (int p = 0; p < points; ++p) {
        const uint64_t hold =
            lo + static_cast<uint64_t>(static_cast<double>(hi - lo) * p / (points - 1));
        const uint64_t most = hold + all;
        for (const double f : {0.0, 0.5}) {
            throw_if_cancelled();
            if (std::chrono::steady_clock::now() >= deadline) {
                stats.milp_complete = false;
                return out;
            }
            const uint64_t act = least + static_cast<uint64_t>(
                                             f * static_cast<double>(most - std::min(most, least)));
            ++stats.milp_solves;
            const std::optional<block_detail::BlockSchedule> s =
                block_detail::block_milp_schedule(g, t, spec, fwd, hold, act, solve);
            if (!s) continue;
            std::vector<RelInstr> rel = relative(s->post, b.st.first);
            const bool is_new = std::none_of(out.begin(), out.end(), [&](const auto& o) {
                return o.size() == rel.size() &&
                       std::equal(o.begin(), o.end(), rel.begin(), [](RelInstr a, RelInstr c) {
                           return a.kind == c.kind && a.offset == c.offset;
                       });
            });
            if (is_new) out.push_back(std::move(rel));
        }
    }
    return out;
}

// A process-wide memo of the block MILPs' results. They depend only on the block (its signature,
// which determines its nodes, sizes and edges), its nodes' costs and the options; CBC under a
// wall-clock limit need not return the same incumbent twice, so the memo also makes the plans of
// one process (a sweep's budgets, `optimal` trying rockmate after the DP) agree, and spares
// repeating the solves at every budget. Results cut short by a deadline are not kept.
template <class V>
class Memo {
  public:
    bool get(const std::string& key, V* out) {
        const std::lock_guard<std::mutex> lock(mutex_);
        const auto it = map_.find(key);
        if (it == map_.end()) return false;
        *out = it->second;
        return true;
    }
    void put(const std::string& key, V value) {
        const std::lock_guard<std::mutex> lock(mutex_);
        if (map_.size() >= 256) map_.clear();  // bounded: networks come and go in a GUI session
        map_[key] = std::move(value);
    }

  private:
    std::mutex mutex_;
    std::map<std::string, V> map_;
};

std::string memo_key(const Graph& g, const LivenessTables& t, const Block& b, bool reads_out,
                     const std::function<double(NodeId)>& fwd, const RockmateOptions& opt) {
    std::ostringstream o;
    o.precision(17);
    o << signature(g, t, b.st, false) << '|' << b.xin_forced << reads_out << '|';
    for (NodeId n = b.st.first; n <= b.st.last; ++n) o << fwd(n) << ',';
    o << '|' << opt.menu_points << ',' << opt.bound_points << ',' << opt.milp_time_s << ','
      << opt.milp_nodes;
    return o.str();
}

Memo<std::vector<std::vector<RelInstr>>>& menu_memo() {
    static Memo<std::vector<std::vector<RelInstr>>> memo;
    return memo;
}

Memo<std::vector<std::pair<uint64_t, double>>>& bound_memo() {
    static Memo<std::vector<std::pair<uint64_t, double>>> memo;
    return memo;
}

// Whether option `a` is at least as good as `b` in every respect the chain DP weighs.
bool dominates(const RotorTapeOption& a, const RotorTapeOption& b) {
    return a.hold <= b.hold && a.peak_fwd <= b.peak_fwd && a.peak_bwd <= b.peak_bwd &&
           a.rec_ms <= b.rec_ms;
}

}  // namespace

std::vector<int32_t> rockmate_block_classes(const Graph& g,
                                            const std::vector<NodeId>& stage_first) {
    const LivenessTables t(g);
    std::vector<NodeId> first;
    const std::vector<StageNodes> st = stages_of(g, &first);
    if (first != stage_first)
        throw std::logic_error("rockmate_block_classes: stage_first is not this graph's chain");
    std::map<std::string, int32_t> ids;
    std::vector<int32_t> out;
    bool prev_reads = false;
    for (const StageNodes& s : st) {
        const auto it =
            ids.emplace(signature(g, t, s, prev_reads), static_cast<int32_t>(ids.size()));
        out.push_back(it.first->second);
        const std::vector<ValueId> br = backward_reads(g, t, s);
        prev_reads =
            !s.is_loss_stage && std::find(br.begin(), br.end(), g.node(s.last).output) != br.end();
    }
    return out;
}

void rockmate_menus(const Graph& g, const CostModel& costs, const std::vector<NodeId>& stage_first,
                    RotorChain& chain, const RockmateOptions& opt, RockmateStats* stats) {
    const LivenessTables t(g);
    std::vector<NodeId> first;
    const std::vector<StageNodes> st = stages_of(g, &first);
    if (first != stage_first || st.size() != chain.stages.size())
        throw std::logic_error("rockmate_menus: the chain is not this graph's");
    const std::vector<int32_t> cls = rockmate_block_classes(g, stage_first);
    const bool have_costs = costs.size() == static_cast<size_t>(g.num_nodes());
    const std::function<double(NodeId)> fwd = [&](NodeId n) {
        return have_costs ? costs.forward_ms(n) : 0.0;
    };
    RockmateStats local;
    local.stages = static_cast<int>(st.size());
    // Per class: the menu as kept-flags over the class's candidates (same order in every member:
    // candidates are sorted by value id, which follows node order, and members have the same
    // nodes in the same order).
    std::map<int32_t, std::vector<std::vector<uint8_t>>> menus;
    uint64_t left = opt.search_subsets;  // exhaustive searches still allowed, in subsets
    std::map<int32_t, std::vector<std::vector<RelInstr>>> milp_menus;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(std::max(0.0, opt.milp_total_s)));
    bool prev_reads = false;
    for (size_t k = 0; k < st.size(); ++k) {
        throw_if_cancelled();
        const StageNodes s = st[k];
        const Block b = block_of(g, t, s, prev_reads);
        const std::vector<ValueId> br = backward_reads(g, t, s);
        const bool reads_out =
            b.xout != kNoId && std::find(br.begin(), br.end(), b.xout) != br.end();
        prev_reads = reads_out;
        RotorStage& stage = chain.stages[k];
        stage.menu.clear();
        local.distinct_blocks = std::max(local.distinct_blocks, cls[k] + 1);
        if (s.is_loss_stage || b.cand.empty()) continue;
        auto found = menus.find(cls[k]);
        if (found == menus.end()) {
            ++local.searched_blocks;
            found =
                menus.emplace(cls[k], search_menu(g, b, fwd, opt, &left, &local.exhaustive)).first;
        }
        std::vector<NodeId> all;
        for (NodeId n = s.first; n <= s.last; ++n) all.push_back(n);
        std::vector<Instruction> bwd;
        for (NodeId n = s.last; n >= s.first; --n)
            if (t.needs_backward[static_cast<size_t>(n)]) bwd.push_back({InstrKind::Backward, n});
        std::vector<ValueId> init_x;
        if (b.xin != kNoId) init_x.push_back(b.xin);
        for (const std::vector<uint8_t>& kept : found->second) {
            RotorTapeOption o;
            bool reads_xin = false;
            o.recompute = recompute_for(g, b, kept, &reads_xin);
            double rec = 0;
            for (NodeId n : o.recompute) rec += fwd(n);
            o.rec_ms = static_cast<float>(rec);
            for (size_t i = 0; i < b.cand.size(); ++i)
                if (kept[i]) {
                    o.tape.push_back(b.cand[i]);
                    o.hold += g.value(b.cand[i]).bytes;
                }
            const bool hold_xin = b.xin != kNoId && (b.xin_forced || reads_xin);
            if (hold_xin) o.hold += g.value(b.xin).bytes;
            std::vector<ValueId> kept_fwd = o.tape;
            if (b.xout != kNoId) kept_fwd.push_back(b.xout);
            if (hold_xin) kept_fwd.push_back(b.xin);
            o.peak_fwd = walk_peak(g, t, init_x, kNoId, computes(all), kept_fwd);
            std::vector<ValueId> bwd_init = o.tape;
            if (hold_xin) bwd_init.push_back(b.xin);
            if (reads_out) bwd_init.push_back(b.xout);
            std::vector<Instruction> seq = computes(o.recompute);
            seq.insert(seq.end(), bwd.begin(), bwd.end());
            // x_k stays after the backwards when stage k-1's backward reads it.
            std::vector<ValueId> after;
            if (b.xin != kNoId && k > 0 && chain.stages[k].x_read_by_prev) after.push_back(b.xin);
            o.peak_bwd = walk_peak(g, t, bwd_init, s.last + 1, seq, after);
            stage.menu.push_back(std::move(o));
            ++local.menu_options;
        }
        if (!opt.milp_menus) continue;
        auto mfound = milp_menus.find(cls[k]);
        if (mfound == milp_menus.end()) {
            const std::string key = memo_key(g, t, b, reads_out, fwd, opt);
            std::vector<std::vector<RelInstr>> menu;
            if (!menu_memo().get(key, &menu)) {
                const bool complete_before = local.milp_complete;
                local.milp_complete = true;
                menu = milp_menu(g, t, b, reads_out, fwd, opt, deadline, local);
                if (local.milp_complete) menu_memo().put(key, menu);
                local.milp_complete = local.milp_complete && complete_before;
            }
            mfound = milp_menus.emplace(cls[k], std::move(menu)).first;
        }
        // Each MILP schedule as a widened option (rotor.h): the forward whole, then its own
        // post-forward sequence; its tape is what that sequence reads of the block before
        // computing it again, its peaks walk_peak's over its instructions.
        RotorTapeOption full;
        full.hold = stage.hold_c;
        full.peak_fwd = stage.peak_fwd_all;
        full.peak_bwd = stage.peak_bwd;
        const block_detail::BlockSpec spec = spec_of(b, reads_out);
        for (const std::vector<RelInstr>& rel : mfound->second) {
            RotorTapeOption o;
            o.post = absolute(rel, s.first);
            bool reads_xin = false;
            std::vector<ValueId> made;
            double rec = 0;
            for (const Instruction& ins : o.post) {
                for_each_read(g, t, ins, [&](ValueId v) {
                    const Value& val = g.value(v);
                    if (v == b.xin) {
                        reads_xin = true;
                    } else if (!val.is_input() && val.producer >= s.first &&
                               val.producer < s.last &&
                               std::find(made.begin(), made.end(), v) == made.end() &&
                               std::find(o.tape.begin(), o.tape.end(), v) == o.tape.end()) {
                        o.tape.push_back(v);
                    }
                });
                if (ins.kind == InstrKind::Compute) {
                    made.push_back(g.node(ins.target).output);
                    o.recompute.push_back(ins.target);
                    rec += fwd(ins.target);
                }
            }
            std::sort(o.tape.begin(), o.tape.end());
            o.rec_ms = static_cast<float>(rec);
            const bool hold_xin = b.xin != kNoId && (b.xin_forced || reads_xin);
            for (ValueId v : o.tape) o.hold += g.value(v).bytes;
            if (hold_xin) o.hold += g.value(b.xin).bytes;
            std::vector<ValueId> bwd_init = o.tape;
            if (hold_xin) bwd_init.push_back(b.xin);
            if (reads_out) bwd_init.push_back(b.xout);
            if (!block_detail::block_post_valid(g, t, spec, bwd_init, o.post))
                throw std::logic_error("rockmate: a block MILP's schedule does not run");
            std::vector<ValueId> kept_fwd = o.tape;
            if (b.xout != kNoId) kept_fwd.push_back(b.xout);
            if (hold_xin) kept_fwd.push_back(b.xin);
            o.peak_fwd = walk_peak(g, t, init_x, kNoId, computes(all), kept_fwd);
            std::vector<ValueId> after;
            if (b.xin != kNoId && k > 0 && chain.stages[k].x_read_by_prev) after.push_back(b.xin);
            o.peak_bwd = walk_peak(g, t, bwd_init, s.last + 1, o.post, after);
            if (dominates(full, o) || std::any_of(stage.menu.begin(), stage.menu.end(),
                                                  [&](const auto& m) { return dominates(m, o); }))
                continue;
            stage.menu.push_back(std::move(o));
            ++local.menu_options;
            ++local.milp_options;
        }
    }
    if (stats) *stats = local;
}

namespace {

// THE BOUND's options (rockmate.h): for each stage but the loss stage, for hold budgets H_0 <
// … < H_{P-1} from the block's smallest to its full hold, an option holding H_{i-1} + 1 bytes (0
// for i = 0) whose recompute time is the block MILP's lower bound for holds <= H_i
// (block_detail::block_hold_lower_bound) and whose peaks are the larger of its hold and what every
// schedule of the block reaches — at most those of any schedule of the block holding that much
// (the held values are all live at the forward's last kernel and at the first kernel after it). No
// schedule to run: only the relaxed DP reads them. `complete` is cleared when the deadline cut the
// solves short (later blocks get cost 0).
std::vector<std::vector<RotorTapeOption>> block_bound_options(
    const Graph& g, const CostModel& costs, const std::vector<NodeId>& stage_first,
    const RotorChain& chain, const RockmateOptions& opt, bool* complete) {
    const LivenessTables t(g);
    const std::vector<StageNodes> st = stages_of(g, nullptr);
    const std::vector<int32_t> cls = rockmate_block_classes(g, stage_first);
    const bool have_costs = costs.size() == static_cast<size_t>(g.num_nodes());
    const std::function<double(NodeId)> fwd = [&](NodeId n) {
        return have_costs ? costs.forward_ms(n) : 0.0;
    };
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(std::max(0.0, opt.milp_total_s)));
    block_detail::BlockMilpSolve solve;
    solve.time_limit_s = opt.milp_time_s;
    solve.max_nodes = opt.milp_nodes;
    const int points = std::max(opt.bound_points, 2);
    // Per class: (hold, lower bound) pairs.
    std::map<int32_t, std::vector<std::pair<uint64_t, double>>> levels;
    std::vector<std::vector<RotorTapeOption>> out(st.size());
    bool prev_reads = false;
    for (size_t k = 0; k < st.size(); ++k) {
        const StageNodes s = st[k];
        const Block b = block_of(g, t, s, prev_reads);
        const std::vector<ValueId> br = backward_reads(g, t, s);
        const bool reads_out =
            b.xout != kNoId && std::find(br.begin(), br.end(), b.xout) != br.end();
        prev_reads = reads_out;
        if (s.is_loss_stage) continue;
        auto found = levels.find(cls[k]);
        const std::string key = found == levels.end() ? memo_key(g, t, b, reads_out, fwd, opt) : "";
        std::vector<std::pair<uint64_t, double>> memo;
        if (found == levels.end() && bound_memo().get(key, &memo))
            found = levels.emplace(cls[k], std::move(memo)).first;
        if (found == levels.end()) {
            bool cut = false;
            std::vector<std::pair<uint64_t, double>> lv;
            const uint64_t xin_bytes = b.xin != kNoId ? g.value(b.xin).bytes : 0;
            const uint64_t lo = b.xin_forced ? xin_bytes : 0;
            const uint64_t hi = std::max(lo, chain.stages[k].hold_c);
            const block_detail::BlockSpec spec = spec_of(b, reads_out);
            for (int p = 0; p < points; ++p) {
                throw_if_cancelled();
                const uint64_t hold =
                    lo + static_cast<uint64_t>(static_cast<double>(hi - lo) * p / (points - 1));
                double lb = 0;  // always a bound
                if (std::chrono::steady_clock::now() < deadline)
                    lb = block_detail::block_hold_lower_bound(g, t, spec, fwd, hold, solve);
                else
                    cut = true;
                lv.push_back({hold, lb});
            }
            if (cut)
                *complete = false;
            else
                bound_memo().put(key, lv);
            found = levels.emplace(cls[k], std::move(lv)).first;
        }
        // Peaks every schedule of the block reaches, whatever it holds: at each Compute of its
        // forward that node's inputs and output are live, at each Backward its residuals; the
        // rest of what walk_peak counts there (gradients, workspace) is the same in every
        // schedule, the backward order being fixed — or less (parameter gradients of the
        // block's later backwards are left out here).
        uint64_t fwd_least = 0, bwd_least = 0;
        for (NodeId n = s.first; n <= s.last; ++n) {
            std::vector<ValueId> ins;
            for (ValueId v : g.node(n).inputs)
                if (!g.value(v).is_input()) ins.push_back(v);
            fwd_least =
                std::max(fwd_least, walk_peak(g, t, ins, kNoId, {{InstrKind::Compute, n}}, {}));
            if (!t.needs_backward[static_cast<size_t>(n)]) continue;
            std::vector<ValueId> res;
            for_each_residual(g, t, n, [&](ValueId v) {
                if (!g.value(v).is_input()) res.push_back(v);
            });
            bwd_least =
                std::max(bwd_least, walk_peak(g, t, res, n + 1, {{InstrKind::Backward, n}}, {}));
        }
        const auto& lv = found->second;
        for (size_t i = 0; i < lv.size(); ++i) {
            if (!std::isfinite(lv[i].second)) continue;  // no schedule holds so little
            RotorTapeOption o;
            o.hold = i == 0 ? 0 : lv[i - 1].first + 1;
            o.peak_fwd = std::max(o.hold, fwd_least);
            o.peak_bwd = std::max(o.hold, bwd_least);
            // As a float, rounded down.
            auto f = static_cast<float>(lv[i].second);
            if (static_cast<double>(f) > lv[i].second)
                f = std::nextafter(f, -std::numeric_limits<float>::infinity());
            o.rec_ms = std::max(0.0f, f);
            out[k].push_back(std::move(o));
        }
    }
    return out;
}

}  // namespace

Plan rockmate_plan(const Graph& g, const CostModel& costs, uint64_t budget,
                   const RockmateOptions& opt, RockmateStats* stats) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<NodeId> first;
    RotorChain chain = rotor_chain(g, costs, &first);
    RockmateStats local;
    // Storing everything fits: no option will be used, so no block MILP is worth solving.
    RockmateOptions menu_opt = opt;
    if (budget >= chain.constant + chain.span) menu_opt.milp_menus = false;
    rockmate_menus(g, costs, first, chain, menu_opt, &local);
    const uint64_t unit = rotor_unit(chain, opt.slots);
    local.unit = unit;
    const int32_t max_units = rotor_max_units(chain, unit);
    const RotorSolver dp(chain, unit, max_units);
    const uint64_t none_peak = chain.constant + chain.span;
    const uint64_t dp_min_budget = dp.min_budget();

    Plan p;
    p.budget = budget;
    p.method = "rockmate";
    auto finish = [&] {
        p.solve_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (stats) *stats = local;
        return p;
    };
    std::ostringstream head;
    head << "method: rockmate. " << local.stages << " stages, " << local.distinct_blocks
         << " distinct blocks (" << local.searched_blocks << " menus searched, "
         << (local.exhaustive ? "exhaustively" : "some greedily") << "), " << local.menu_options
         << " menu options, memory grid of " << unit << " bytes";
    int32_t units = -1;
    if (budget >= none_peak)
        units = max_units;
    else if (budget >= chain.constant)
        units = static_cast<int32_t>(
            std::min<uint64_t>((budget - chain.constant) / unit, static_cast<uint64_t>(max_units)));
    const LivenessTables tables(g);
    SimulateOptions sopt;
    sopt.record_timeline = false;
    int retries = 0;
    for (;;) {
        throw_if_cancelled();
        const bool store_all = budget >= none_peak && retries == 0;
        if (!store_all && (units < 0 || !std::isfinite(dp.cost(units)))) {
            p.status = PlanStatus::Infeasible;
            p.min_feasible_budget = dp_min_budget;
            p.message = head.str() + ". The budget of " + bytes_text(budget) +
                        " cannot be met by the chain DP over the blocks' menus: the smallest "
                        "budget it can meet is " +
                        bytes_text(dp_min_budget) + " (parameters and inputs alone take " +
                        bytes_text(chain.constant) + "); raise the budget to at least that";
            return finish();
        }
        const std::vector<RotorOp> ops =
            store_all ? rotor_store_all(static_cast<int32_t>(chain.stages.size()))
                      : dp.sequence(units);
        Schedule s = rotor_schedule(g, first, ops, &chain);
        const Simulation sim = simulate(g, tables, s, costs, sopt);
        if (sim.peak_bytes <= budget) {
            p.schedule = std::move(s);
            for (const RotorOp& op : ops)
                if (op.kind == RotorOp::Forward)
                    p.checkpoints.push_back(first[static_cast<size_t>(op.last + 1)] - 1);
            std::sort(p.checkpoints.begin(), p.checkpoints.end());
            p.checkpoints.erase(std::unique(p.checkpoints.begin(), p.checkpoints.end()),
                                p.checkpoints.end());
            p.status = sim.recomputes == 0 ? PlanStatus::Optimal : PlanStatus::Feasible;
            std::ostringstream m;
            m << head.str() << "; predicted peak " << sim.peak_bytes << " bytes, recompute "
              << sim.recompute_ms << " ms";
            if (sim.recomputes == 0) {
                p.lower_bound_ms = 0;
                p.bound_class = "trivial";
                p.gap = 0;
                m << ". Nothing is recomputed, which no schedule can beat";
            } else if (opt.lower_bound) {
                // The within-class bound, the relaxed DP: requirements rounded down, memory
                // rounded up (rockmate.h). Whole units of memory, rounded down, are enough: a
                // schedule whose bytes fit has floor(need/u) + Σ floor(held/u) <=
                // floor((need + Σ held)/u) <= that. Any grid gives a bound: the finest whose
                // table stays within 16 M entries.
                const auto n = static_cast<uint64_t>(chain.stages.size());
                const uint64_t layer = std::max<uint64_t>(1, n * (n + 1) / 2);
                const auto fit = static_cast<int32_t>(
                    std::min<uint64_t>((uint64_t{16} << 20) / layer, INT32_MAX));
                const int32_t slots = std::max(1, std::min(opt.bound_slots, fit - 2));
                const uint64_t bunit = rotor_unit(chain, slots);
                const int32_t bmax = rotor_max_units(chain, bunit);
                // The block bound (rockmate.h, THE BOUND): the same DP with, beside the menus,
                // each block's MILP lower bounds as options.
                const bool block_bound =
                    opt.block_bound &&
                    !(opt.true_bound_max_nodes > 0 && g.num_nodes() <= opt.true_bound_max_nodes);
                bool block_complete = true;
                RotorChain widened;
                if (block_bound) {
                    widened = chain;
                    const std::vector<std::vector<RotorTapeOption>> extra =
                        block_bound_options(g, costs, first, chain, opt, &block_complete);
                    for (size_t k = 0; k < extra.size(); ++k)
                        for (const RotorTapeOption& o : extra[k])
                            widened.stages[k].menu.push_back(o);
                }
                const RotorSolver relaxed(block_bound ? widened : chain, bunit, bmax,
                                          /*relaxed=*/true);
                const auto up = static_cast<int32_t>(std::min<uint64_t>(
                    (budget - chain.constant) / bunit, static_cast<uint64_t>(bmax)));
                // The DP's cost counts the first forward too (rotor.h): take it off.
                double forward_ms = 0;
                for (const RotorStage& st : chain.stages) forward_ms += st.fwd_ms;
                const double bound = std::clamp(static_cast<double>(relaxed.cost(up)) - forward_ms,
                                                0.0, sim.recompute_ms);
                const double class_bound = std::isfinite(bound) ? bound : sim.recompute_ms;
                // The bound over the whole-network MILP's class, where the graph is small.
                bool milp_bound = false;
                if (opt.true_bound_max_nodes > 0 && g.num_nodes() <= opt.true_bound_max_nodes) {
                    CheckmateOptions copt;
                    copt.time_limit_s = opt.true_bound_time_s;
                    copt.find_min_budget = false;
                    copt.initial = &p.schedule;
                    CheckmateStats cst;
                    const Plan milp = checkmate_plan(g, costs, budget, copt, &cst);
                    if (cst.solved && std::isfinite(cst.lower_bound_ms)) {
                        milp_bound = true;
                        p.bound_class = "milp";
                        p.lower_bound_ms = std::clamp(cst.lower_bound_ms, 0.0, sim.recompute_ms);
                        m << ". Bound " << *p.lower_bound_ms
                          << " ms over the whole-network MILP's class (Checkmate, "
                          << (cst.proven_optimal ? "proven optimum" : "CBC's best bound within ")
                          << (cst.proven_optimal ? std::string()
                                                 : std::to_string(opt.true_bound_time_s) + " s")
                          << "; its best schedule recomputes " << cst.objective_ms
                          << " ms), which takes in schedules outside rockmate's class";
                    }
                }
                if (!milp_bound && block_bound) {
                    p.lower_bound_ms = class_bound;
                    p.bound_class = "block_milp";
                    m << ". Bound " << class_bound
                      << " ms over the block-MILP class: the chain DP's class (Rotor's "
                         "recursion over the blocks, its memory rounded in the bound's favour) "
                         "with ANY schedule of a block in place of its menu — a forward with any "
                         "recomputation, any of its values held while the rest of the chain "
                         "runs, any recomputation interleaved with its backwards — each block's "
                         "least recompute per hold bounded by a Checkmate MILP over the block "
                         "(CBC); not over schedules that hold a block's values across other "
                         "blocks' work otherwise, or drop and recompute a kept checkpoint";
                    if (!block_complete)
                        m << " (the block MILPs' time ran out: some blocks bounded by 0)";
                } else if (!milp_bound) {
                    p.lower_bound_ms = class_bound;
                    p.bound_class = "within_class";
                    m << ". Bound " << class_bound
                      << " ms WITHIN rockmate's class only: the least recompute of any "
                         "schedule of the class within the budget (the grid rounded in its "
                         "favour); not a bound over all schedules (the whole-network MILP "
                         "bound runs only up to "
                      << opt.true_bound_max_nodes << " nodes; this graph has " << g.num_nodes()
                      << ")";
                } else {
                    m << "; within rockmate's class the bound is " << class_bound << " ms";
                }
                p.gap = sim.recompute_ms > 0
                            ? (sim.recompute_ms - *p.lower_bound_ms) / sim.recompute_ms
                            : 0.0;
                m << "; gap " << *p.gap * 100 << " % against the reported bound";
            }
            if (retries > 0)
                m << "; the DP's memory model was off: " << retries << " retries with less memory";
            p.message = m.str();
            return finish();
        }
        ++retries;
        const uint64_t excess = sim.peak_bytes - budget;
        units -= static_cast<int32_t>(std::max<uint64_t>(1, (excess + unit - 1) / unit));
    }
}

}  // namespace rl
