#include "solvers/general/lns_general.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <tuple>

#include "engine/cancel.h"
#include "engine/errors.h"
#include "solvers/general/checkmate_general.h"

namespace rl::general {

namespace {

using Clock = std::chrono::steady_clock;

// Per stage: the largest memory while one of its computations runs (the MILP's U).
std::vector<uint64_t> stage_peaks(const AbstractGraph& g, const Schedule& s) {
    const auto n = static_cast<size_t>(g.size());
    std::vector<uint64_t> peak(n, 0);
    std::vector<uint8_t> seen(n, 0), live(n, 0);
    size_t stage = 0;  // the stage of the next computation: its first-computed node's index
    uint64_t bytes = 0;
    for (const Instruction& ins : s.code) {
        const auto v = static_cast<size_t>(ins.target);
        if (v >= n) continue;
        if (ins.kind == InstrKind::Compute) {
            if (!live[v]) bytes += g.nodes[v].out_bytes;
            live[v] = 1;
            if (stage < n) peak[stage] = std::max(peak[stage], bytes);
            if (!seen[v]) {
                seen[v] = 1;
                ++stage;
            }
        } else if (ins.kind == InstrKind::Free && live[v]) {
            live[v] = 0;
            bytes -= g.nodes[v].out_bytes;
        }
    }
    return peak;
}

struct Candidate {
    bool valid = false;
    std::vector<int32_t> order;  // in the MILP's class
    double duration = 0;
    double excess = 0;
    std::vector<uint64_t> peaks;
};

Candidate evaluate(const GeneralProblem& p, const std::vector<int32_t>& computes) {
    const AbstractGraph& g = *p.graph;
    Candidate c;
    c.order = canonical_stage_order(g, computes);
    try {
        const Schedule s = schedule_from_computations(g, c.order);
        const GeneralSimulation sim = simulate_general(g, s, p.max_computations);
        c.duration = sim.total_duration;
        c.peaks = stage_peaks(g, s);
        for (uint64_t b : c.peaks)
            if (b > p.budget) c.excess += static_cast<double>(b - p.budget);
        c.valid = true;
    } catch (const ScheduleError&) {
        c.valid = false;
    }
    return c;
}

bool better(const Candidate& a, const Candidate& b) {
    if (!a.valid) return false;
    if (!b.valid) return true;
    if (a.excess != b.excess) return a.excess < b.excess;
    return a.duration < b.duration - 1e-9 * std::max(1.0, std::abs(b.duration));
}

}  // namespace

double stage_excess(const AbstractGraph& g, const Schedule& s, uint64_t budget) {
    double excess = 0;
    for (uint64_t b : stage_peaks(g, s))
        if (b > budget) excess += static_cast<double>(b - budget);
    return excess;
}

LnsResult lns_improve(const GeneralProblem& p, const std::vector<int32_t>& start,
                      const LnsOptions& opt) {
    const AbstractGraph& g = *p.graph;
    const int32_t n = g.size();
    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    auto cancelled = [&] { return (opt.cancel && opt.cancel->load()) || cancel_requested(); };
    LnsResult res;
    Candidate best = evaluate(p, start);
    if (!best.valid) {
        res.message = "the starting schedule is not valid";
        return res;
    }
    auto publish = [&] {
        res.computes = best.order;
        res.total_duration = best.duration;
        res.excess = best.excess;
        res.found = best.excess == 0;
    };
    publish();
    if (n <= 1) return res;
    StageMatrices incumbent = stage_matrices(g, best.order);
    std::mt19937 rng(opt.seed);
    int32_t w = std::clamp(opt.initial_window, 2, n);
    // Phase 1's overflow costs this much per budget-sized unit: more than any recomputation
    // (the objective is the TDI), so the window reduces the excess first.
    constexpr double kOverflowPenalty = 1000;
    constexpr int kMaxWindowColumns = 30000;
    // Windows CBC proved optimal from the current incumbent: solving one again can only return
    // the incumbent (RL250 at 0.8 re-solved the same 30-stage window seven times in a row). A
    // window drawn from here is grown instead; the set empties whenever the incumbent changes.
    std::set<std::tuple<int32_t, int32_t, int32_t>> proven;
    int32_t skipped_in_a_row = 0;
    while (!cancelled()) {
        if (opt.max_windows > 0 && res.windows >= opt.max_windows) break;
        const double left = opt.time_limit_s - elapsed();
        if (left < 0.05) break;
        const bool phase1 = best.excess > 0;
        int32_t a;
        if (phase1) {
            std::vector<int32_t> over;
            for (int32_t t = 0; t < n; ++t)
                if (best.peaks[static_cast<size_t>(t)] > p.budget) over.push_back(t);
            const int32_t t = over[rng() % over.size()];
            a = t - static_cast<int32_t>(rng() % static_cast<uint32_t>(w));
        } else {
            // A window without recomputation in its stages is optimal as it is (its objective
            // is 0): windows are placed over a random stage that recomputes something.
            std::vector<int32_t> recomputing;
            for (int32_t t = 1; t < n; ++t) {
                const auto& row = incumbent.r[static_cast<size_t>(t)];
                if (std::any_of(row.begin(), row.begin() + t, [](uint8_t x) { return x != 0; }))
                    recomputing.push_back(t);
            }
            if (recomputing.empty()) break;  // every node once: optimal
            if (w >= n) {
                a = 0;
            } else {
                const int32_t t = recomputing[rng() % recomputing.size()];
                a = t - static_cast<int32_t>(rng() % static_cast<uint32_t>(w));
            }
        }
        a = std::clamp(a, 0, std::max(0, n - w));
        MilpWindow win;
        win.stage_begin = a;
        win.stage_end = std::min(n, a + w);
        win.node_begin = std::max(0, a - w);
        win.incumbent = &incumbent;
        if (proven.count({win.stage_begin, win.stage_end, win.node_begin})) {
            // Every window of this size may be proven already: grow after a few misses (the
            // draw is random, so a miss alone does not mean that).
            if (++skipped_in_a_row >= 4) {
                if (w >= n) break;  // the whole MILP is proven from the incumbent
                w = std::min(n, w + std::max(1, w / 4));
                skipped_in_a_row = 0;
            }
            continue;
        }
        skipped_in_a_row = 0;
        // Phase 2: older outputs the window's stages hold or recompute are free too: otherwise
        // a long-lived output could never be dropped there. Not in Phase 1, whose elastic
        // windows they make too large for CBC to finish (RL250 at 0.8 reached the budget after
        // 24 s without them and not in 60 s with them).
        std::vector<uint8_t> extra(static_cast<size_t>(n), 0);
        if (opt.free_held_outputs && !phase1) {
            for (int32_t t = win.stage_begin; t < win.stage_end; ++t)
                for (int32_t i = 0; i < win.node_begin; ++i) {
                    const auto T = static_cast<size_t>(t), I = static_cast<size_t>(i);
                    if (!incumbent.s[T][I] && !incumbent.r[T][I]) continue;
                    extra[I] = 1;
                }
            win.extra_nodes = &extra;
        }
        win.overflow_penalty = phase1 ? kOverflowPenalty : 0;
        MilpOptions mo;
        mo.time_limit_s = std::min(opt.window_time_limit_s, left);
        mo.node_limit = opt.window_node_limit;
        mo.cancel = opt.cancel;
        mo.log_level = opt.log_level > 1 ? opt.log_level : 0;  // CBC's log for every window
        mo.window = &win;
        const int improvements_before = res.improvements;
        const MilpResult r = solve_checkmate_milp(p, mo);
        ++res.windows;
        if (opt.log_level > 0)
            std::fprintf(stderr,
                         "lns %7.2fs window %d: stages [%d, %d) nodes >= %d, %d columns, %.2fs "
                         "%s; best: excess %.0f, duration %.6g\n",
                         elapsed(), res.windows, win.stage_begin, win.stage_end, win.node_begin,
                         r.variables, r.solve_s,
                         r.proven_optimal      ? "optimal"
                         : r.found             ? "incumbent"
                         : r.proven_infeasible ? "infeasible"
                                               : "nothing",
                         best.excess, best.duration);
        if (r.interrupted) {
            res.interrupted = true;
            break;
        }
        if (r.found) {
            Candidate c = evaluate(p, r.computes);
            if (better(c, best)) {
                best = std::move(c);
                incumbent = stage_matrices(g, best.order);
                proven.clear();
                ++res.improvements;
                publish();
                if (res.found) {
                    res.time_to_best_s = elapsed();
                    if (opt.on_improved) opt.on_improved(res.computes, res.time_to_best_s);
                }
            }
        }
        if (r.proven_optimal && res.improvements == improvements_before)
            proven.insert({win.stage_begin, win.stage_end, win.node_begin});
        // The whole MILP proven optimal from the incumbent: nothing is left to find (in Phase 1:
        // no schedule of the MILP's class fits the budget).
        if (r.proven_optimal && win.stage_begin == 0 && win.stage_end == n && win.node_begin == 0)
            break;
        // Grow while CBC proves windows quickly and they stay small; shrink when it does not
        // finish or the model gets large (its build and LP grow with the columns).
        if (r.too_large || !(r.proven_optimal || r.proven_infeasible) ||
            r.variables > kMaxWindowColumns)
            w = std::max(2, w * 3 / 4);
        else if ((opt.window_node_limit > 0 || r.solve_s < 0.25 * mo.time_limit_s) &&
                 r.variables < kMaxWindowColumns / 2)
            w = std::min(n, w + std::max(1, w / 4));
    }
    res.interrupted = res.interrupted || cancelled();
    if (!res.found)
        res.message = "no schedule within the budget found; the best exceeds it by " +
                      std::to_string(static_cast<uint64_t>(best.excess)) +
                      " bytes summed over stages";
    return res;
}

}  // namespace rl::general
