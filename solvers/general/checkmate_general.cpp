#include "solvers/general/checkmate_general.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "engine/errors.h"
#include "solvers/milp_model.h"

namespace rl::general {

namespace {

constexpr int kFixedZero = -1;
constexpr int kFixedOne = -2;

using Model = MilpModel;  // solvers/milp_model.h

// For each stage, the outputs live at its start in the schedule built from `computes`.
std::vector<std::vector<uint8_t>> live_at_stage_starts(const AbstractGraph& g,
                                                       const std::vector<int32_t>& computes) {
    const auto n = static_cast<size_t>(g.size());
    const Schedule s = schedule_from_computations(g, computes);
    std::vector<std::vector<uint8_t>> at(n, std::vector<uint8_t>(n, 0));
    std::vector<uint8_t> live(n, 0), seen(n, 0);
    int32_t stage = 0;
    bool started = false;  // a computation of `stage` has run since its snapshot
    for (const Instruction& ins : s.code) {
        const auto v = static_cast<size_t>(ins.target);
        if (ins.kind == InstrKind::Compute) {
            live[v] = 1;
            started = true;
            if (!seen[v]) {
                seen[v] = 1;
                stage = ins.target + 1;
                started = false;
                if (static_cast<size_t>(stage) < n) at[static_cast<size_t>(stage)] = live;
            }
        } else if (ins.kind == InstrKind::Free) {
            live[v] = 0;
            // Frees right after the stage's last compute belong before the next stage; a free
            // after one of the next stage's recomputations does not (the output entered it).
            if (!started && static_cast<size_t>(stage) < n) at[static_cast<size_t>(stage)][v] = 0;
        }
    }
    return at;
}

}  // namespace

std::vector<int32_t> canonical_stage_order(const AbstractGraph& g,
                                           const std::vector<int32_t>& computes) {
    const auto n = static_cast<size_t>(g.size());
    // Stage sets: everything up to and including node t's first computation.
    std::vector<std::vector<uint8_t>> in_stage(n, std::vector<uint8_t>(n, 0));
    std::vector<uint8_t> seen(n, 0);
    std::vector<int32_t> pending;
    for (int32_t v : computes) {
        if (v < 0 || static_cast<size_t>(v) >= n) continue;
        pending.push_back(v);
        if (!seen[static_cast<size_t>(v)]) {
            seen[static_cast<size_t>(v)] = 1;
            for (int32_t u : pending)
                if (u <= v) in_stage[static_cast<size_t>(v)][static_cast<size_t>(u)] = 1;
            pending.clear();
        }
    }
    auto flatten = [&] {
        std::vector<int32_t> out;
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i <= t; ++i)
                if (in_stage[t][i]) out.push_back(static_cast<int32_t>(i));
        return out;
    };
    std::vector<int32_t> order = flatten();
    for (int round = 0; round < 8; ++round) {
        const auto live = live_at_stage_starts(g, order);
        bool changed = false;
        for (size_t t = 0; t < n; ++t)
            for (size_t i = 0; i < t; ++i)
                if (in_stage[t][i] && live[t][i]) {
                    in_stage[t][i] = 0;
                    changed = true;
                }
        if (!changed) break;
        order = flatten();
    }
    return order;
}

StageMatrices stage_matrices(const AbstractGraph& g, const std::vector<int32_t>& order) {
    const auto n = static_cast<size_t>(g.size());
    StageMatrices m;
    m.r.assign(n, std::vector<uint8_t>(n, 0));
    std::vector<uint8_t> seen(n, 0);
    // Each computation belongs to the stage of the next first computation.
    std::vector<int32_t> buffer;
    for (int32_t v : order) {
        if (v < 0 || static_cast<size_t>(v) >= n) continue;
        buffer.push_back(v);
        if (!seen[static_cast<size_t>(v)]) {
            seen[static_cast<size_t>(v)] = 1;
            for (int32_t u : buffer) m.r[static_cast<size_t>(v)][static_cast<size_t>(u)] = 1;
            buffer.clear();
        }
    }
    m.s = live_at_stage_starts(g, order);
    return m;
}

MilpResult solve_checkmate_milp(const GeneralProblem& p, const MilpOptions& opt) {
    const AbstractGraph& g = *p.graph;
    const int32_t n = g.size();
    const auto N = static_cast<size_t>(n);
    MilpResult res;
    if (p.budget == 0) throw Error("the budget must be at least 1 byte");
    const double B = static_cast<double>(p.budget);
    const double D = g.total_duration() > 0 ? g.total_duration() : 1.0;
    auto mem = [&](int32_t i) {
        return static_cast<double>(g.nodes[static_cast<size_t>(i)].out_bytes) / B;
    };

    // ancestor[t][i]: a path i -> ... -> t. Only ancestors of t can be (re)computed in stage t;
    // an output is worth keeping into stage t only while it has a descendant at or after t
    // (last_descendant), even when all its own readers are done: it may feed a recomputation.
    std::vector<std::vector<uint8_t>> ancestor(N, std::vector<uint8_t>(N, 0));
    for (size_t t = 0; t < N; ++t)
        for (int32_t p : g.preds[t]) {
            const auto P = static_cast<size_t>(p);
            ancestor[t][P] = 1;
            for (size_t i = 0; i < P; ++i)
                if (ancestor[P][i]) ancestor[t][i] = 1;
        }
    std::vector<int32_t> last_descendant(N, -1);
    for (size_t i = N; i-- > 0;)
        for (int32_t j : g.succs[i])
            last_descendant[i] =
                std::max({last_descendant[i], j, last_descendant[static_cast<size_t>(j)]});

    Model m;
    const MilpWindow* W = opt.window;
    if (W && (!W->incumbent || W->incumbent->r.size() != N || W->incumbent->s.size() != N))
        throw Error("an MILP window needs the incumbent's stage matrices of this graph");
    auto in_window = [&](int32_t t) { return !W || (t >= W->stage_begin && t < W->stage_end); };
    // R[t][i], S[t][i]: column or kFixedZero / kFixedOne.
    std::vector<std::vector<int>> R(N), S(N);
    for (int32_t t = 0; t < n; ++t) {
        const auto T = static_cast<size_t>(t);
        auto& r = R[T];
        auto& s = S[T];
        r.assign(T + 1, kFixedZero);
        s.assign(T + 1, kFixedZero);
        r[T] = kFixedOne;
        const bool free_stage = in_window(t);
        for (int32_t i = 0; i < t; ++i) {
            const auto I = static_cast<size_t>(i);
            const bool free_node = free_stage && (!W || i >= W->node_begin ||
                                                  (W->extra_nodes && (*W->extra_nodes)[I]));
            if (free_node && ancestor[T][I])
                r[I] = m.add_col(0, 1, g.nodes[I].duration / D, true);
            else if (W && W->incumbent->r[T][I])
                r[I] = kFixedOne;
            if (free_node && last_descendant[I] >= t)
                s[I] = m.add_col(0, 1, 0, true);
            else if (W && W->incumbent->s[T][I])
                s[I] = kFixedOne;
        }
    }
    const double penalty = W ? W->overflow_penalty : 0;
    std::vector<int> overflow_cols;
    // Linear terms with fixed values folded into the bounds.
    struct Lin {
        std::vector<std::pair<int, double>> terms;
        double constant = 0;
        void add(int col, double a) {
            if (col == kFixedZero) return;
            if (col == kFixedOne)
                constant += a;
            else
                terms.emplace_back(col, a);
        }
    };
    auto row = [&](Lin l, double lo, double hi) {
        if (l.terms.empty()) {
            if (l.constant < lo - 1e-12 || l.constant > hi + 1e-12) res.proven_infeasible = true;
            return;
        }
        m.add_row(l.terms, lo - l.constant, hi - l.constant);
    };
    constexpr double kInf = 1e30;
    auto Rc = [&](int32_t t, int32_t i) {
        return R[static_cast<size_t>(t)][static_cast<size_t>(i)];
    };
    auto Sc = [&](int32_t t, int32_t i) {
        if (t >= n) return kFixedZero;
        return S[static_cast<size_t>(t)][static_cast<size_t>(i)];
    };

    const int32_t row_begin = W ? std::max(0, W->stage_begin - 1) : 0;
    const int32_t row_end = W ? std::min(n, W->stage_end) : n;
    for (int32_t t = row_begin; t < row_end; ++t) {
        if (!in_window(t)) {
            // The stage before the window: only what it hands to the window's first stage.
            for (int32_t i = 0; i <= t; ++i) {
                if (Sc(t + 1, i) < 0) continue;
                Lin l;
                l.add(Sc(t + 1, i), 1);
                if (i < t) l.add(Sc(t, i), -1);
                l.add(Rc(t, i), -1);
                row(l, -kInf, 0);
            }
            continue;
        }
        // Inputs live: R[t][k] <= R[t][i] + S[t][i].
        for (int32_t k = 0; k <= t; ++k) {
            if (Rc(t, k) == kFixedZero) continue;
            for (int32_t i : g.preds[static_cast<size_t>(k)]) {
                Lin l;
                l.add(Rc(t, k), 1);
                l.add(Rc(t, i), -1);
                l.add(Sc(t, i), -1);
                row(l, -kInf, 0);
            }
        }
        for (int32_t i = 0; i < t; ++i) {
            if (Sc(t, i) == kFixedZero) continue;
            Lin l;  // S + R <= 1
            l.add(Sc(t, i), 1);
            l.add(Rc(t, i), 1);
            row(l, -kInf, 1);
        }
        // Keep: S[t+1][i] <= S[t][i] + R[t][i].
        if (t + 1 < n)
            for (int32_t i = 0; i <= t; ++i) {
                if (Sc(t + 1, i) == kFixedZero) continue;
                Lin l;
                l.add(Sc(t + 1, i), 1);
                if (i < t) l.add(Sc(t, i), -1);
                l.add(Rc(t, i), -1);
                row(l, -kInf, 0);
            }
        if (m.cols() > opt.max_columns) break;
        // Memory along the stage's active positions.
        int prev_u = -1;
        int32_t prev_k = -1;
        int over = -1;  // o_t, elastic budget
        if (penalty > 0) {
            over = m.add_col(0, kInf, penalty, false);
            overflow_cols.push_back(over);
        }
        std::vector<std::pair<int32_t, int>> frees_prev;  // (input, FREE column) after prev_k
        for (int32_t k = 0; k <= t; ++k) {
            if (Rc(t, k) == kFixedZero) continue;
            const int u = m.add_col(0, over >= 0 ? kInf : 1, 0, false);
            if (over >= 0) m.add_row({{u, 1}, {over, -1}}, -kInf, 1);
            Lin l;  // U[t][k] - (...) = 0
            l.add(u, 1);
            if (prev_u < 0) {
                for (int32_t i = 0; i < t; ++i) l.add(Sc(t, i), -mem(i));
            } else {
                l.add(prev_u, -1);
                for (const auto& [i, f] : frees_prev) l.add(f, mem(i));
                if (g.succs[static_cast<size_t>(prev_k)].empty()) l.add(Rc(t, prev_k), mem(prev_k));
            }
            l.add(Rc(t, k), -mem(k));
            row(l, 0, 0);
            // FREE[t][i,k] for k's inputs.
            frees_prev.clear();
            for (int32_t i : g.preds[static_cast<size_t>(k)]) {
                // A later reader j of i with R[t][j] fixed to 1 (j = t) forbids the free.
                bool forbidden = false;
                std::vector<int> later;
                for (int32_t j : g.succs[static_cast<size_t>(i)]) {
                    if (j <= k || j > t) continue;
                    if (Rc(t, j) == kFixedOne) forbidden = true;
                    if (Rc(t, j) >= 0) later.push_back(Rc(t, j));
                }
                if (Sc(t + 1, i) == kFixedOne) forbidden = true;
                if (forbidden) continue;
                const int f = m.add_col(0, 1, 0, false);
                frees_prev.emplace_back(i, f);
                if (Rc(t, k) >= 0) m.add_row({{f, 1}, {Rc(t, k), -1}}, -kInf, 0);
                if (Sc(t + 1, i) >= 0) m.add_row({{f, 1}, {Sc(t + 1, i), 1}}, -kInf, 1);
                for (int c : later) m.add_row({{f, 1}, {c, 1}}, -kInf, 1);
            }
            prev_u = u;
            prev_k = k;
        }
    }
    if (p.max_computations > 0)
        for (int32_t i = 0; i < n; ++i) {
            Lin l;
            for (int32_t t = i + 1; t < n; ++t) l.add(Rc(t, i), 1);
            if (!l.terms.empty()) row(l, -kInf, p.max_computations - 1.0);
        }
    res.variables = m.cols();
    res.integer_variables = m.integers();
    res.constraints = m.rows();
    if (res.proven_infeasible) return res;
    if (m.cols() > opt.max_columns) {
        res.too_large = true;
        return res;
    }

    // The MIP start: the window's incumbent, or the warm start where it is in the class.
    std::vector<std::pair<int, double>> start;
    if (W) {
        for (int32_t t = W->stage_begin; t < W->stage_end && t < n; ++t)
            for (int32_t i = 0; i < t; ++i) {
                const auto T = static_cast<size_t>(t), I = static_cast<size_t>(i);
                if (Rc(t, i) >= 0) start.emplace_back(Rc(t, i), W->incumbent->r[T][I]);
                if (Sc(t, i) >= 0) start.emplace_back(Sc(t, i), W->incumbent->s[T][I]);
            }
        res.warm_started = true;
    } else if (opt.warm_start) {
        const std::vector<int32_t> order = canonical_stage_order(g, *opt.warm_start);
        bool fits = false;
        try {
            fits = simulate_general(g, schedule_from_computations(g, order), p.max_computations)
                       .peak_bytes <= p.budget;
        } catch (const Error&) {
            fits = false;
        }
        if (fits) {
            const StageMatrices sm = stage_matrices(g, order);
            const auto& r = sm.r;
            const auto& live = sm.s;
            std::vector<std::pair<int, double>> in_class_start;
            bool in_class = true;
            for (int32_t t = 0; t < n && in_class; ++t)
                for (int32_t i = 0; i < t; ++i) {
                    const auto T = static_cast<size_t>(t), I = static_cast<size_t>(i);
                    const int rc = Rc(t, i), sc = Sc(t, i);
                    if ((rc == kFixedZero && r[T][I]) || (sc == kFixedZero && live[T][I])) {
                        in_class = false;
                        break;
                    }
                    if (rc >= 0) in_class_start.emplace_back(rc, r[T][I]);
                    if (sc >= 0) in_class_start.emplace_back(sc, live[T][I]);
                }
            if (in_class) {
                start = std::move(in_class_start);
                res.warm_started = true;
            }
        }
    }

    // The CBC solve runs in a worker process (MilpModel::solve_until_cancelled): CBC 2.10
    // crashed in CglPreProcess::postProcess and aborted in Clp on valid models, and a crash must
    // cost this solve only. On a cancel the worker gets SIGINT (CBC's handler stops the search
    // and it still answers with its incumbent) and 3 s before it is killed.
    MilpSolveOptions so;
    so.time_limit_s = opt.time_limit_s;
    so.log_level = opt.log_level;
    so.threads = 1;
    so.max_nodes = opt.node_limit;
    so.presolved_solution = true;
    // CBC 2.10 (Debian) crashed in CglPreProcess::postProcess on a window of ResNet50's train
    // graph (stages [221, 259), 33,000 columns); windows are small, so they go without it.
    so.preprocess = !W;
    const rl::MilpResult r = m.solve_until_cancelled(so, start, opt.cancel, /*grace_s=*/3);
    res.solve_s = r.solve_s;
    res.interrupted = r.interrupted;
    if (!r.failure.empty()) {
        res.failure = r.failure;
        return res;
    }
    res.proven_infeasible = r.proven_infeasible;
    res.lower_bound_tdi = std::max(0.0, r.bound);
    if (r.has_solution) {
        res.found = true;
        res.proven_optimal = r.proven_optimal;
        res.objective_tdi = r.objective;
        res.time_to_best_s = r.time_to_best_s;
        for (int32_t t = 0; t < n; ++t)
            for (int32_t i = 0; i <= t; ++i) {
                const int c = Rc(t, i);
                if (c == kFixedOne || (c >= 0 && r.x[static_cast<size_t>(c)] > 0.5))
                    res.computes.push_back(i);
            }
        if (res.proven_optimal) res.lower_bound_tdi = res.objective_tdi;
        for (int c : overflow_cols) res.overflow += r.x[static_cast<size_t>(c)];
    }
    return res;
}

}  // namespace rl::general
