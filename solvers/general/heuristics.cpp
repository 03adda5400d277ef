#include "solvers/general/heuristics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/errors.h"

namespace rl::general {

namespace {

// The walk shared by the eviction rules and Chen's checkpointing: materialise each node in order,
// recomputing evicted inputs on demand.
class Walker {
  public:
    static constexpr int kMaxRounds = 8;
    static constexpr size_t kMaxComputationsPerNode = 64;

    Walker(const GeneralProblem& p, EvictionRule rule, uint64_t budget, bool pin_inputs = false)
        : g_(*p.graph),
          rule_(rule),
          budget_(budget),
          limit_(p.max_computations),
          pin_inputs_(pin_inputs) {
        const auto n = static_cast<size_t>(g_.size());
        live_.assign(n, 0);
        lock_.assign(n, 0);
        soft_.assign(n, 0);
        count_.assign(n, 0);
        last_use_.assign(n, 0);
        drop_after_forward_.assign(n, 0);
    }

    // Chen: outputs dropped as soon as no forward node still to be computed reads them.
    // Only during the forward: in the backward, recomputed outputs stay until their last reader
    // (Chen recomputes a segment once and keeps it for the segment's backward).
    void set_dropped(const std::vector<uint8_t>& dropped, const std::vector<uint8_t>& forward) {
        drop_after_forward_ = dropped;
        forward_ = forward;
        eager_dead_ = true;
        for (int32_t v = 0; v < g_.size(); ++v)
            if (forward[static_cast<size_t>(v)]) last_forward_ = v;
    }

    HeuristicResult run() {
        HeuristicResult r;
        for (int32_t t = 0; t < g_.size(); ++t) {
            frontier_ = t;
            if (!materialize(t)) {
                r.message = message_;
                return r;
            }
            frontier_ = t + 1;
            release_dead(t);
            if (g_.succs[static_cast<size_t>(t)].empty()) free(t);
        }
        r.found = true;
        r.computes = std::move(computes_);
        return r;
    }

  private:
    bool dead(int32_t u) const {
        const auto& s = g_.succs[static_cast<size_t>(u)];
        return s.empty() || s.back() < frontier_;
    }
    // Chen: u is dropped and no forward node at or after the frontier reads it.
    bool dropped_now(int32_t u) const {
        if (!drop_after_forward_[static_cast<size_t>(u)] || frontier_ > last_forward_) return false;
        for (int32_t s : g_.succs[static_cast<size_t>(u)])
            if (s >= frontier_ && forward_[static_cast<size_t>(s)]) return false;
        return true;
    }
    void free(int32_t u) {
        const auto k = static_cast<size_t>(u);
        if (!live_[k]) return;
        live_[k] = 0;
        bytes_ -= g_.nodes[k].out_bytes;
    }
    // Chen frees dead outputs at once (it plans without a budget); the eviction rules keep them
    // until room is needed, as a recomputation may still read them.
    void release_dead(int32_t v) {
        for (int32_t p : g_.preds[static_cast<size_t>(v)])
            if (!lock_[static_cast<size_t>(p)] && ((eager_dead_ && dead(p)) || dropped_now(p)))
                free(p);
    }

    // u's inputs are live and each is read again no earlier than u's next reader: recomputing u
    // there will not recurse (unless an input is evicted meanwhile).
    bool safe(int32_t u) const {
        const auto& s = g_.succs[static_cast<size_t>(u)];
        const auto it = std::lower_bound(s.begin(), s.end(), frontier_);
        if (it == s.end()) return true;
        for (int32_t p : g_.preds[static_cast<size_t>(u)]) {
            const auto P = static_cast<size_t>(p);
            if (!live_[P] || g_.succs[P].back() < *it) return false;
        }
        return true;
    }

    // How many of u's inputs are not live: recomputing u recurses into them.
    int dead_inputs(int32_t u) const {
        int c = 0;
        for (int32_t p : g_.preds[static_cast<size_t>(u)])
            c += live_[static_cast<size_t>(p)] ? 0 : 1;
        return c;
    }

    double score(int32_t u) const {
        const auto k = static_cast<size_t>(u);
        if (rule_ == EvictionRule::FarthestNextUse) {
            const auto& s = g_.succs[k];
            const auto it = std::lower_bound(s.begin(), s.end(), frontier_);
            const double next = it == s.end() ? 1e18 : static_cast<double>(*it);
            // Larger is evicted first: next use, then bytes.
            return next * 1e6 + static_cast<double>(g_.nodes[k].out_bytes) /
                                    (1.0 + static_cast<double>(g_.nodes[k].out_bytes));
        }
        double cost = g_.nodes[k].duration;
        for (int32_t p : g_.preds[k])
            if (!live_[static_cast<size_t>(p)]) cost += g_.nodes[static_cast<size_t>(p)].duration;
        const double staleness = static_cast<double>(clock_ - last_use_[k]) + 1.0;
        // Negated: the smallest h is evicted first.
        return -cost / (static_cast<double>(g_.nodes[k].out_bytes) * staleness);
    }

    bool reserve(uint64_t need, int32_t for_node) {
        while (bytes_ + need > budget_) {
            // Tiers: dead outputs (kept only in case a recomputation wants them), largest first;
            // then by the rule, first among outputs whose recomputation needs no further
            // recomputation (safe), then the rest; inputs made live for the node being prepared
            // last.
            int32_t victim = -1;
            int victim_tier = 4;
            double best = -std::numeric_limits<double>::infinity();
            for (int32_t u = 0; u < g_.size(); ++u) {
                const auto k = static_cast<size_t>(u);
                if (!live_[k] || lock_[k] || g_.nodes[k].out_bytes == 0) continue;
                const int tier = dead(u) ? 0 : soft_[k] ? 3 : safe(u) ? 1 : 2;
                const double s = tier == 0 ? static_cast<double>(g_.nodes[k].out_bytes) : score(u);
                if (tier < victim_tier || (tier == victim_tier && s > best)) {
                    victim = u;
                    victim_tier = tier;
                    best = s;
                }
            }
            if (victim < 0) {
                message_ = "node '" + g_.nodes[static_cast<size_t>(for_node)].name + "' needs " +
                           std::to_string(bytes_ + need) +
                           " bytes with its inputs live, above the budget of " +
                           std::to_string(budget_);
                return false;
            }
            free(victim);
        }
        return true;
    }

    bool materialize(int32_t v) {
        const auto k = static_cast<size_t>(v);
        if (live_[k]) {
            last_use_[k] = ++clock_;
            return true;
        }
        // Inputs are made live one after another without pinning each other, so a deep
        // recomputation may evict a sibling made live before it; then the round repeats. Only
        // the node's own computation pins its inputs, so it needs no more than its inputs and
        // output: any budget above min_feasible_peak_bound leaves room for it.
        if (computes_.size() > kMaxComputationsPerNode * static_cast<size_t>(g_.size())) {
            message_ = "more than " + std::to_string(kMaxComputationsPerNode) +
                       " computations per node on average: the budget is too tight for this rule";
            return false;
        }
        const auto& inputs = g_.preds[k];
        bool all_live = false;
        // Pinned variant: an input made live by this call is pinned at once; inputs live before
        // are only soft-pinned (evicted last). Each step materialises the missing input whose
        // recomputation goes deepest (most inputs not live), while the least is pinned; an input
        // evicted meanwhile is missing again, but every step pins one more input, so the walk
        // ends after at most one step per input and cannot thrash.
        std::vector<int32_t> pinned;
        auto unpin = [&] {
            for (int32_t p : pinned) --lock_[static_cast<size_t>(p)];
        };
        if (pin_inputs_) {
            for (int32_t p : inputs) ++soft_[static_cast<size_t>(p)];
            for (;;) {
                int32_t next = -1;
                for (int32_t p : inputs) {
                    if (live_[static_cast<size_t>(p)]) continue;
                    if (next < 0 || dead_inputs(p) > dead_inputs(next)) next = p;
                }
                if (next < 0) break;
                if (!materialize(next)) {
                    for (int32_t p : inputs) --soft_[static_cast<size_t>(p)];
                    unpin();
                    return false;
                }
                ++lock_[static_cast<size_t>(next)];
                pinned.push_back(next);
            }
            for (int32_t p : inputs) --soft_[static_cast<size_t>(p)];
        }
        for (int32_t p : inputs) ++soft_[static_cast<size_t>(p)];
        for (int round = 0; round < kMaxRounds && !all_live; ++round) {
            for (int32_t p : inputs)
                if (!live_[static_cast<size_t>(p)] && !materialize(p)) return false;
            all_live = std::all_of(inputs.begin(), inputs.end(),
                                   [&](int32_t p) { return live_[static_cast<size_t>(p)] != 0; });
        }
        for (int32_t p : inputs) --soft_[static_cast<size_t>(p)];
        if (!all_live) {
            unpin();
            message_ = "the inputs of node '" + g_.nodes[k].name +
                       "' keep evicting each other under this budget";
            return false;
        }
        for (int32_t p : inputs) ++lock_[static_cast<size_t>(p)];
        const bool ok = reserve(g_.nodes[k].out_bytes, v);
        if (ok && limit_ > 0 && count_[k] >= limit_) {
            message_ = "node '" + g_.nodes[k].name + "' would be computed more than " +
                       std::to_string(limit_) + " times";
        }
        const bool run = ok && !(limit_ > 0 && count_[k] >= limit_);
        if (run) {
            live_[k] = 1;
            bytes_ += g_.nodes[k].out_bytes;
            ++count_[k];
            computes_.push_back(v);
            last_use_[k] = ++clock_;
        }
        for (int32_t p : g_.preds[k]) --lock_[static_cast<size_t>(p)];
        unpin();
        if (run && v < frontier_) release_dead(v);  // inputs only a recomputation needed
        return run;
    }

    const AbstractGraph& g_;
    EvictionRule rule_;
    uint64_t budget_;
    int limit_;
    bool pin_inputs_ = false;
    std::vector<uint8_t> live_;
    std::vector<int32_t> lock_, soft_, count_;
    std::vector<uint64_t> last_use_;
    std::vector<uint8_t> drop_after_forward_, forward_;
    std::vector<int32_t> computes_;
    std::string message_;
    uint64_t bytes_ = 0, clock_ = 0;
    int32_t frontier_ = 0;
    int32_t last_forward_ = -1;
    bool eager_dead_ = false;
};

}  // namespace

HeuristicResult eviction_heuristic(const GeneralProblem& p, EvictionRule rule, bool pin_inputs) {
    return Walker(p, rule, p.budget, pin_inputs).run();
}

HeuristicResult chen_sqrt_n(const GeneralProblem& p) {
    const AbstractGraph& g = *p.graph;
    const auto n = static_cast<size_t>(g.size());
    std::vector<uint8_t> forward(n, 0);
    bool any_backward = false;
    for (size_t v = 0; v < n; ++v) {
        forward[v] = !g.nodes[v].backward;
        any_backward = any_backward || g.nodes[v].backward;
    }
    HeuristicResult none;
    if (!any_backward) {
        none.message =
            "Chen's checkpointing needs a forward/backward split; this graph has no backward "
            "nodes";
        return none;
    }
    // Articulation points of the forward part in its order: no forward edge jumps over v.
    std::vector<int32_t> fwd;
    for (size_t v = 0; v < n; ++v)
        if (forward[v]) fwd.push_back(static_cast<int32_t>(v));
    std::vector<int32_t> cuts;
    int32_t far = -1;
    for (int32_t v : fwd) {
        if (far <= v && v != fwd.back()) cuts.push_back(v);
        for (int32_t s : g.succs[static_cast<size_t>(v)])
            if (forward[static_cast<size_t>(s)]) far = std::max(far, s);
    }
    HeuristicResult best;
    double best_duration = std::numeric_limits<double>::infinity();
    best.message = "no checkpoint spacing of Chen's method fits the budget";
    // Every k-th articulation point is kept (k = 1 .. |cuts|); everything else in the forward is
    // dropped and recomputed on demand.
    for (size_t k = 1; k <= std::max<size_t>(1, cuts.size()); ++k) {
        std::vector<uint8_t> dropped(n, 0);
        for (int32_t v : fwd) dropped[static_cast<size_t>(v)] = 1;
        for (size_t i = k - 1; i < cuts.size(); i += k) dropped[static_cast<size_t>(cuts[i])] = 0;
        GeneralProblem unbounded = p;
        Walker w(unbounded, EvictionRule::FarthestNextUse, std::numeric_limits<uint64_t>::max());
        w.set_dropped(dropped, forward);
        HeuristicResult r = w.run();
        if (!r.found) continue;
        const Schedule s = schedule_from_computations(g, r.computes);
        GeneralSimulation sim;
        try {
            sim = simulate_general(g, s, p.max_computations);
        } catch (const Error&) {
            continue;
        }
        if (sim.peak_bytes <= p.budget && sim.total_duration < best_duration) {
            best_duration = sim.total_duration;
            best = std::move(r);
        }
    }
    return best;
}

}  // namespace rl::general

namespace rl::general {

HeuristicResult greedy_interval_split(const GeneralProblem& p, bool recompute_inputs,
                                      bool best_effort) {
    const AbstractGraph& g = *p.graph;
    const int32_t n = g.size();
    const auto N = static_cast<size_t>(n);
    HeuristicResult res;
    // use points of each node: its own stage, its readers' stages, and stages where a successor
    // is recomputed (it must be live there); kept sorted.
    std::vector<std::vector<int32_t>> uses(N);
    // ranges: live [start, end] pairs, disjoint, sorted; the first starts at the node itself.
    std::vector<std::vector<std::pair<int32_t, int32_t>>> ranges(N);
    std::vector<int64_t> mem(N, 0);  // live bytes per stage
    std::vector<int32_t> splits(N, 0);
    std::vector<std::vector<int32_t>> recompute_at(N);  // stage -> nodes recomputed there
    for (int32_t v = 0; v < n; ++v) {
        const auto V = static_cast<size_t>(v);
        uses[V].push_back(v);
        for (int32_t s : g.succs[V]) uses[V].push_back(s);
        const int32_t end = g.succs[V].empty() ? v : g.succs[V].back();
        ranges[V].emplace_back(v, end);
        for (int32_t t = v; t <= end; ++t)
            mem[static_cast<size_t>(t)] += static_cast<int64_t>(g.nodes[V].out_bytes);
    }
    auto live_at = [&](int32_t v, int32_t t) {
        for (const auto& [a, b] : ranges[static_cast<size_t>(v)])
            if (a <= t && t <= b) return true;
        return false;
    };
    const auto budget = static_cast<int64_t>(std::min<uint64_t>(p.budget, INT64_MAX));
    // Per stage: the budget, or (best effort) the bytes of a stage nothing could relieve.
    std::vector<int64_t> cap(N, budget);
    bool stuck = false;
    for (;;) {
        int32_t worst = -1;
        for (int32_t t = 0; t < n; ++t)
            if (mem[static_cast<size_t>(t)] > cap[static_cast<size_t>(t)] &&
                (worst < 0 || mem[static_cast<size_t>(t)] > mem[static_cast<size_t>(worst)]))
                worst = t;
        if (worst < 0) break;
        // Candidates: u live at `worst` with no use there, and a use after it.
        int32_t best_u = -1, best_a = 0, best_b = 0;
        std::vector<std::pair<int32_t, int32_t>> best_extend;
        std::vector<int32_t> best_co;
        double best_score = 0;
        for (int32_t u = 0; u < worst; ++u) {
            const auto U = static_cast<size_t>(u);
            if (g.nodes[U].out_bytes == 0 || !live_at(u, worst)) continue;
            if (p.max_computations > 0 && splits[U] + 1 >= p.max_computations) continue;
            const auto& us = uses[U];
            const auto it = std::lower_bound(us.begin(), us.end(), worst);
            if (it == us.end() || *it == worst || it == us.begin()) continue;
            const int32_t next_use = *it, a = *(it - 1);
            // Recompute in the latest stage after `worst`, up to the next use, where every input
            // is live, or can be kept live longer without pushing any stage over the budget, or
            // can itself be recomputed there from live inputs (one level, no further cascade).
            int32_t b = -1;
            std::vector<std::pair<int32_t, int32_t>> extend;  // (input, from its end to b)
            std::vector<int32_t> co;                          // inputs recomputed at b too
            for (int32_t s = next_use; s > worst && b < 0; --s) {
                extend.clear();
                co.clear();
                int64_t co_bytes = 0;
                bool ok = true;
                for (int32_t q : g.preds[U]) {
                    if (live_at(q, s)) continue;
                    const auto Q = static_cast<size_t>(q);
                    const auto& qr = ranges[Q];
                    int32_t end = -1;
                    for (const auto& [x, y] : qr)
                        if (x <= s) end = y;
                    bool handled = false;
                    if (end >= 0 && end > worst) {
                        bool ext_ok = true;
                        for (int32_t t = end + 1; t <= s && ext_ok; ++t) {
                            int64_t add = static_cast<int64_t>(g.nodes[Q].out_bytes);
                            for (const auto& [q2, e2] : extend)
                                if (e2 < t)
                                    add += static_cast<int64_t>(
                                        g.nodes[static_cast<size_t>(q2)].out_bytes);
                            if (t == s) add += co_bytes;
                            if (mem[static_cast<size_t>(t)] + add > cap[static_cast<size_t>(t)])
                                ext_ok = false;
                        }
                        if (ext_ok) {
                            extend.emplace_back(q, end);
                            handled = true;
                        }
                    }
                    if (!handled && recompute_inputs &&
                        !(p.max_computations > 0 && splits[Q] + 1 >= p.max_computations)) {
                        bool preds_live = true;
                        for (int32_t r : g.preds[Q])
                            if (!live_at(r, s)) preds_live = false;
                        int64_t ext_at_s = 0;
                        for (const auto& [q2, e2] : extend)
                            ext_at_s +=
                                static_cast<int64_t>(g.nodes[static_cast<size_t>(q2)].out_bytes);
                        const auto qb = static_cast<int64_t>(g.nodes[Q].out_bytes);
                        if (preds_live && mem[static_cast<size_t>(s)] + ext_at_s + co_bytes + qb <=
                                              cap[static_cast<size_t>(s)]) {
                            co.push_back(q);
                            co_bytes += qb;
                            handled = true;
                        }
                    }
                    if (!handled) {
                        ok = false;
                        break;
                    }
                }
                if (ok) b = s;
            }
            if (b < 0) continue;
            // Duration per byte-stage relieved, the over-budget stages weighted.
            double relief = 0;
            for (int32_t t = a + 1; t < b; ++t)
                if (mem[static_cast<size_t>(t)] > cap[static_cast<size_t>(t)]) relief += 1;
            const double score =
                (g.nodes[U].duration + 1e-9) / (static_cast<double>(g.nodes[U].out_bytes) * relief);
            if (best_u < 0 || score < best_score) {
                best_extend = extend;
                best_co = co;
                best_u = u;
                best_a = a;
                best_b = b;
                best_score = score;
            }
        }
        if (best_u < 0) {
            res.message = "no output live at stage '" + g.nodes[static_cast<size_t>(worst)].name +
                          "' can be dropped and recomputed from live inputs; " +
                          std::to_string(mem[static_cast<size_t>(worst)]) +
                          " bytes there against a budget of " + std::to_string(p.budget);
            if (!best_effort) return res;
            cap[static_cast<size_t>(worst)] = mem[static_cast<size_t>(worst)];
            stuck = true;
            continue;
        }
        const auto U = static_cast<size_t>(best_u);
        auto& rs = ranges[U];
        for (size_t i = 0; i < rs.size(); ++i)
            if (rs[i].first <= worst && worst <= rs[i].second) {
                const int32_t end = rs[i].second;
                rs[i].second = best_a;
                rs.insert(rs.begin() + static_cast<long>(i) + 1, {best_b, end});
                break;
            }
        for (int32_t t = best_a + 1; t < best_b; ++t)
            mem[static_cast<size_t>(t)] -= static_cast<int64_t>(g.nodes[U].out_bytes);
        ++splits[U];
        for (int32_t q : best_co) {
            const auto Q = static_cast<size_t>(q);
            auto& qr = ranges[Q];
            qr.insert(std::upper_bound(qr.begin(), qr.end(), std::make_pair(best_b, best_b)),
                      {best_b, best_b});
            mem[static_cast<size_t>(best_b)] += static_cast<int64_t>(g.nodes[Q].out_bytes);
            ++splits[Q];
            recompute_at[static_cast<size_t>(best_b)].push_back(q);
            uses[Q].insert(std::lower_bound(uses[Q].begin(), uses[Q].end(), best_b), best_b);
            for (int32_t r : g.preds[Q]) {
                auto& ru = uses[static_cast<size_t>(r)];
                ru.insert(std::lower_bound(ru.begin(), ru.end(), best_b), best_b);
            }
        }
        for (const auto& [q, end] : best_extend) {
            for (auto& r : ranges[static_cast<size_t>(q)])
                if (r.second == end) r.second = best_b;
            for (int32_t t = end + 1; t <= best_b; ++t)
                mem[static_cast<size_t>(t)] +=
                    static_cast<int64_t>(g.nodes[static_cast<size_t>(q)].out_bytes);
        }
        recompute_at[static_cast<size_t>(best_b)].push_back(best_u);
        for (int32_t q : g.preds[U]) {
            auto& qu = uses[static_cast<size_t>(q)];
            qu.insert(std::lower_bound(qu.begin(), qu.end(), best_b), best_b);
        }
    }
    for (int32_t t = 0; t < n; ++t) {
        auto& rc = recompute_at[static_cast<size_t>(t)];
        std::sort(rc.begin(), rc.end());
        for (int32_t u : rc) res.computes.push_back(u);
        res.computes.push_back(t);
    }
    res.found = !stuck;
    return res;
}

}  // namespace rl::general
