// The Checkmate MILP (Jain et al., MLSys 2020) over our fixed backward order; see checkmate.h.
#include "solvers/checkmate.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

#include "engine/cancel.h"
#include "engine/liveness.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "solvers/milp_model.h"

namespace rl {

namespace {

constexpr int kNone = -1;
// The objective's price of one copy (ms) besides its stall: a tie-breaker, far below any kernel's
// time, taken back out of CheckmateStats::model_ms.
constexpr double kCopyTieMs = 1e-6;
constexpr int kBackwardPos = -1;  // FREE position: after the stage's Backward

// One stage of the MILP. Nodes 0..max_node may be (re)computed or kept in it: after the
// Backward of b, nothing above b is read again.
struct Stage {
    int max_node = 0;
    NodeId first = kNone;        // forward stage: the node computed for the first time here
    bool whole_forward = false;  // forward_stages off: every node computed once here
    NodeId backward = kNone;
    double base_bytes = 0;  // parameters, inputs and gradients live during its computations
    double bwd_extra = 0;   // what the Backward adds inside its instruction (grads, workspace)
    std::vector<NodeId> residuals;  // nodes whose outputs the Backward reads
};

// Tracks the bytes of everything but activations while the engine's own rules walk a schedule:
// the fixed backward order makes them independent of where the recomputations go.
class NonActivationBytes final : public MemoryVisitor {
  public:
    uint64_t live = 0, at_kernel = 0;
    void allocate(BufferRef b, uint64_t bytes) override {
        if (b.category != Category::Activations) live += bytes;
    }
    void release(BufferRef b, uint64_t bytes) override {
        if (b.category != Category::Activations) live -= bytes;
    }
    void run_kernel(const Instruction&, bool) override { at_kernel = live; }
};

// Whether node k's compute may run in place over value v (one of its eligible input slots).
bool reads_in_place(const LivenessTables& t, NodeId k, ValueId v, const Graph& g) {
    const uint32_t mask = t.in_place_inputs[static_cast<size_t>(k)];
    const Node& node = g.node(k);
    for (size_t s = 0; s < node.inputs.size(); ++s)
        if (((mask >> s) & 1u) && node.inputs[s] == v) return true;
    return false;
}

std::vector<Stage> make_stages(const Graph& g, const LivenessTables& t, bool forward_stages) {
    NonActivationBytes v;
    const Schedule none = backprop_schedule(g);
    Liveness live(g, t, none);
    live.begin(v);
    const double forward_base = static_cast<double>(v.live);
    std::vector<Stage> stages;
    const int last = g.num_nodes() - 1;
    if (forward_stages)
        for (NodeId n = 0; n <= last; ++n) {
            Stage s;
            s.max_node = n;
            s.first = n;
            s.base_bytes = forward_base;
            stages.push_back(s);
        }
    bool first_backward = true;
    for (size_t i = 0; i < none.size(); ++i) {
        const Instruction& ins = none.code[i];
        if (ins.kind == InstrKind::Backward) {
            Stage s;
            s.max_node = ins.target;
            s.backward = ins.target;
            s.whole_forward = first_backward && !forward_stages;
            s.base_bytes = static_cast<double>(v.live);
            for_each_residual(g, t, ins.target, [&](ValueId x) {
                if (!g.value(x).is_input()) s.residuals.push_back(g.value(x).producer);
            });
            std::sort(s.residuals.begin(), s.residuals.end());
            s.residuals.erase(std::unique(s.residuals.begin(), s.residuals.end()),
                              s.residuals.end());
            live.step(static_cast<long>(i), v);
            s.bwd_extra = static_cast<double>(v.at_kernel) - s.base_bytes;
            stages.push_back(std::move(s));
            first_backward = false;
        } else {
            live.step(static_cast<long>(i), v);
        }
    }
    return stages;
}

// The network formulation's MILP: the shared model and its CBC solve (solvers/milp_model.h).
class Milp : public MilpModel {
  public:
    using Result = MilpResult;

    Result solve(double time_limit_s, int log_level,
                 const std::vector<std::pair<int, double>>& start = {}) const {
        MilpSolveOptions o;
        o.time_limit_s = time_limit_s;
        o.log_level = log_level;
        return MilpModel::solve(o, start);
    }
};

// The formulation of checkmate.h over given stages. In cost mode the memory rows are bounded by
// the budget and the objective is the recompute time; in peak mode a variable P bounds every
// memory row and is minimised.
class Formulation {
  public:
    Formulation(const Graph& g, const LivenessTables& t, const CostModel* costs,
                std::vector<Stage> stages, double unit_bytes, double budget_units, bool peak_mode,
                bool offload = false)
        : g_(g), stages_(std::move(stages)) {
        const int n = g.num_nodes();
        const auto T = stages_.size();
        R_.assign(T, std::vector<int>(static_cast<size_t>(n), kNone));
        S_.assign(T, std::vector<int>(static_cast<size_t>(n), kNone));
        OFF_ = PF_ = H_ = S_;
        stall_.assign(T, kNone);
        auto bytes = [&](NodeId i) {
            return static_cast<double>(g.output_of(i).bytes) / unit_bytes;
        };
        const bool timed = costs && costs->size();
        auto fwd_ms = [&](NodeId i) { return timed ? costs->forward_ms(i) : 0.0; };
        // Among plans of equal time, the one with fewest copies: a copy that hides entirely
        // behind compute costs nothing in the model, but it takes the link and a host buffer.
        const double copy_tie = peak_mode ? 0.0 : kCopyTieMs;

        for (size_t s = 0; s < T; ++s) {
            const Stage& st = stages_[s];
            for (NodeId i = 0; i <= st.max_node; ++i) {
                const bool forced = st.whole_forward || st.first == i;
                R_[s][static_cast<size_t>(i)] =
                    m_.add_col(forced ? 1 : 0, 1, peak_mode ? 0 : fwd_ms(i), true);
                // Entering stage s, only what earlier stages computed can be live.
                const bool can_be_kept =
                    s > 0 && i <= stages_[s - 1].max_node && !st.whole_forward && st.first != i;
                if (can_be_kept) S_[s][static_cast<size_t>(i)] = m_.add_col(0, 1, 0, true);
                // Offload (checkmate.h): a value that could be kept may be on the host instead
                // (H), and one kept into the stage may leave for the host during it (OFF).
                if (offload && can_be_kept && g.output_of(i).bytes > 0) {
                    H_[s][static_cast<size_t>(i)] = m_.add_col(0, 1, 0, true);
                    OFF_[s][static_cast<size_t>(i)] = m_.add_col(0, 1, copy_tie, true);
                }
            }
        }
        // PF[s][i]: a value on the host comes back during stage s, for stage s + 1.
        for (size_t s = 0; s + 1 < T; ++s)
            for (NodeId i = 0; i <= stages_[s].max_node; ++i)
                if (H_[s][static_cast<size_t>(i)] != kNone &&
                    S_[s + 1][static_cast<size_t>(i)] != kNone)
                    PF_[s][static_cast<size_t>(i)] = m_.add_col(0, 1, copy_tie, true);
        if (peak_mode) peak_ = m_.add_col(0, m_infinity(), 1, false);

        for (size_t s = 0; s < T; ++s) {
            const Stage& st = stages_[s];
            const auto& R = R_[s];
            const auto& S = S_[s];
            auto at = [](const std::vector<int>& v, NodeId i) { return v[static_cast<size_t>(i)]; };
            // A compute needs its inputs: computed earlier in this stage, or kept.
            for (NodeId j = 0; j <= st.max_node; ++j) {
                std::vector<ValueId> ins = g.node(j).inputs;
                std::sort(ins.begin(), ins.end());
                ins.erase(std::unique(ins.begin(), ins.end()), ins.end());
                for (ValueId in : ins) {
                    const Value& v = g.value(in);
                    if (v.is_input()) continue;
                    m_.add_row({{at(R, j), 1}, {at(S, v.producer), -1}, {at(R, v.producer), -1}},
                               -m_infinity(), 0);
                }
            }
            // A Backward needs its residuals.
            for (NodeId r : st.residuals)
                m_.add_row({{at(S, r), 1}, {at(R, r), 1}}, 1, m_infinity());
            // Keeping needs the value: S[s+1][i] <= S[s][i] + R[s][i] (+ PF[s][i], a prefetch
            // completed in the stage). Recomputing a value that is already live never helps
            // (every read of it in the stage comes after its recomputation), so S + R <= 1 is a
            // valid cut.
            const auto& OFF = OFF_[s];
            const auto& PF = PF_[s];
            const auto& H = H_[s];
            for (NodeId i = 0; i <= st.max_node; ++i) {
                const int next = s + 1 < T ? at(S_[s + 1], i) : kNone;
                if (next != kNone)
                    m_.add_row({{next, 1}, {at(S, i), -1}, {at(R, i), -1}, {at(PF, i), -1}},
                               -m_infinity(), 0);
                if (at(S, i) != kNone) m_.add_row({{at(S, i), 1}, {at(R, i), 1}}, -m_infinity(), 1);
                // H[s+1] = H[s] + OFF[s] - PF[s]; absent columns are 0, so H[s+1] = 0 where
                // the value could neither be on the host nor leave for it in this stage.
                if (s + 1 < T && at(H_[s + 1], i) != kNone)
                    m_.add_row(
                        {{at(H_[s + 1], i), 1}, {at(H, i), -1}, {at(OFF, i), -1}, {at(PF, i), 1}},
                        0, 0);
                if (at(H, i) == kNone) continue;
                // A value is on one side: not live nor recomputed while on the host (it comes
                // back only by a prefetch). OFF needs it live entering the stage and not kept
                // into the next (it is on the host then); PF needs it on the host and keeps it
                // into the next stage.
                m_.add_row({{at(S, i), 1}, {at(H, i), 1}}, -m_infinity(), 1);
                m_.add_row({{at(R, i), 1}, {at(H, i), 1}}, -m_infinity(), 1);
                m_.add_row({{at(OFF, i), 1}, {at(S, i), -1}}, -m_infinity(), 0);
                if (next != kNone) m_.add_row({{at(OFF, i), 1}, {next, 1}}, -m_infinity(), 1);
                if (at(PF, i) != kNone) {
                    m_.add_row({{at(PF, i), 1}, {at(H, i), -1}}, -m_infinity(), 0);
                    m_.add_row({{at(PF, i), 1}, {next, -1}}, -m_infinity(), 0);
                }
            }

            // Computing or keeping a value nobody reads costs time or memory and never helps:
            // R[s][i] (unless forced) and S[s][i] are at most the reads of i in this stage plus
            // keeping it for the next. Valid cuts that tighten the LP relaxation.
            for (NodeId i = 0; i <= st.max_node; ++i) {
                if (std::binary_search(st.residuals.begin(), st.residuals.end(), i)) continue;
                std::vector<std::pair<int, double>> uses;
                for (NodeId c : g.output_of(i).consumers)
                    if (c <= st.max_node) uses.push_back({at(R, c), -1});
                if (s + 1 < T) uses.push_back({at(S_[s + 1], i), -1});
                const bool forced = st.whole_forward || st.first == i;
                for (int col : {forced ? kNone : at(R, i), at(S, i)}) {
                    if (col == kNone) continue;
                    auto row = uses;
                    row.push_back({col, 1});
                    if (col == at(S, i)) row.push_back({at(OFF, i), -1});  // kept to leave
                    m_.add_row(row, -m_infinity(), 0);
                }
            }

            // FREE[s][i][k]: the instance of i live in this stage dies after position k.
            // frees_at[k] lists (column, bytes) freed after the compute at position k.
            std::vector<std::vector<std::pair<int, double>>> frees_at(
                static_cast<size_t>(st.max_node) + 1);
            std::vector<std::pair<int, double>> frees_after_backward;
            // in_place_at[k]: FREE columns of inputs that the compute at position k may run in
            // place over (engine/liveness.h: a pointwise op's eligible input slot, freed right
            // after it).
            std::vector<std::vector<int>> in_place_at(static_cast<size_t>(st.max_node) + 1);
            const std::vector<int>* next_S = s + 1 < T ? &S_[s + 1] : nullptr;
            for (NodeId i = 0; i <= st.max_node; ++i) {
                const int kept_next = next_S ? at(*next_S, i) : kNone;
                const bool residual =
                    std::binary_search(st.residuals.begin(), st.residuals.end(), i);
                // A value is freed at most once in a stage, and only when it is live there:
                // sum of its FREEs <= S + R. Without this row the LP relaxation frees a
                // fractionally computed value several times over (each FREE is bounded only by
                // its own reader), which makes its memory rows nearly free.
                std::vector<std::pair<int, double>> once = {{at(S, i), -1}, {at(R, i), -1}};
                // An offloaded device buffer is released by its copy's Wait, never freed.
                const int leaves = at(OFF, i);
                if (residual) {
                    const int f = m_.add_col(0, 1, 0, false);
                    if (kept_next != kNone) m_.add_row({{f, 1}, {kept_next, 1}}, -m_infinity(), 1);
                    if (leaves != kNone) m_.add_row({{f, 1}, {leaves, 1}}, -m_infinity(), 1);
                    frees_after_backward.push_back({f, bytes(i)});
                    once.push_back({f, 1});
                    m_.add_row(once, -m_infinity(), 0);
                    continue;
                }
                std::vector<NodeId> readers;  // consumers that may run in this stage
                for (NodeId c : g.output_of(i).consumers)
                    if (c <= st.max_node) readers.push_back(c);
                std::vector<NodeId> positions = {i};
                positions.insert(positions.end(), readers.begin(), readers.end());
                for (NodeId k : positions) {
                    const int f = m_.add_col(0, 1, 0, false);
                    m_.add_row({{f, 1}, {at(R, k), -1}}, -m_infinity(), 0);
                    for (NodeId c : readers)
                        if (c > k) m_.add_row({{f, 1}, {at(R, c), 1}}, -m_infinity(), 1);
                    if (kept_next != kNone) m_.add_row({{f, 1}, {kept_next, 1}}, -m_infinity(), 1);
                    if (leaves != kNone) m_.add_row({{f, 1}, {leaves, 1}}, -m_infinity(), 1);
                    frees_at[static_cast<size_t>(k)].push_back({f, bytes(i)});
                    if (k != i && reads_in_place(t, k, g.node(i).output, g))
                        in_place_at[static_cast<size_t>(k)].push_back(f);
                    once.push_back({f, 1});
                }
                m_.add_row(once, -m_infinity(), 0);
            }

            // Memory. U[j] = live bytes inside the compute at position j (its output allocated,
            // before its workspace): U[0] = base + kept + out(0), U[j] = U[j-1] - frees after
            // j-1 + out(j). Inside the compute: U[j] + workspace(j) <= budget; inside the
            // Backward: U[last] - frees after last + its extra <= budget.
            const double base = st.base_bytes / unit_bytes;
            int prev = kNone;
            for (NodeId j = 0; j <= st.max_node; ++j) {
                const int u = m_.add_col(-m_infinity(), m_infinity(), 0, false);
                std::vector<std::pair<int, double>> row = {{u, 1}, {at(R, j), -bytes(j)}};
                double rhs = 0;
                if (prev == kNone) {
                    rhs = base;
                    // Kept values, and prefetches (issued at the stage's start).
                    for (NodeId i = 0; i <= st.max_node; ++i) {
                        row.push_back({at(S, i), -bytes(i)});
                        row.push_back({at(PF, i), -bytes(i)});
                    }
                } else {
                    row.push_back({prev, -1});
                    for (const auto& [f, b] : frees_at[static_cast<size_t>(j) - 1])
                        row.push_back({f, b});
                }
                m_.add_row(row, rhs, rhs);
                const double ws =
                    static_cast<double>(t.fwd_workspace[static_cast<size_t>(j)]) / unit_bytes;
                std::vector<std::pair<int, double>> inside = {{u, 1}, {at(R, j), ws}};
                const auto& over = in_place_at[static_cast<size_t>(j)];
                if (!over.empty()) {
                    // Run in place, the compute allocates no output: z = 1 when one of the
                    // eligible inputs is freed right after it (z <= their FREEs, z <= 1).
                    const int z = m_.add_col(0, 1, 0, false);
                    std::vector<std::pair<int, double>> row = {{z, 1}};
                    for (int f : over) row.push_back({f, -1});
                    m_.add_row(row, -m_infinity(), 0);
                    inside.push_back({z, -bytes(j)});
                }
                add_budget_row(inside, budget_units);
                prev = u;
            }
            if (st.backward != kNone) {
                std::vector<std::pair<int, double>> row = {{prev, 1}};
                for (const auto& [f, b] : frees_at[static_cast<size_t>(st.max_node)])
                    row.push_back({f, -b});
                add_budget_row(row, budget_units - st.bwd_extra / unit_bytes);
            }

            // The same memory, seen through what must be live at the stage's last instruction:
            // every value kept into the next stage (S[s+1] = 1) is live from its compute to the
            // end of the stage, and a Backward's residuals are live at it. A knapsack row over
            // binaries alone, implied at integral points but not by the LP relaxation (whose
            // fractional FREEs can discount a kept value); CBC derives cover cuts from it.
            if (next_S) {
                std::vector<std::pair<int, double>> row;
                double fixed = base;
                for (NodeId i = 0; i <= st.max_node; ++i) {
                    if (std::binary_search(st.residuals.begin(), st.residuals.end(), i)) {
                        fixed += bytes(i);
                    } else if (i != st.max_node || st.backward != kNone) {
                        // Kept into the next stage (prefetched ones too: PF <= S[s+1]), or
                        // leaving for the host at the stage's end.
                        row.push_back({at(*next_S, i), bytes(i)});
                        row.push_back({at(OFF, i), bytes(i)});
                    }
                }
                if (st.backward != kNone) {
                    fixed += st.bwd_extra / unit_bytes;
                } else {
                    // Inside the last compute: its output (unless it may run in place) and its
                    // workspace.
                    const NodeId j = st.max_node;
                    if (in_place_at[static_cast<size_t>(j)].empty()) fixed += bytes(j);
                    fixed +=
                        static_cast<double>(t.fwd_workspace[static_cast<size_t>(j)]) / unit_bytes;
                }
                add_budget_row(row, budget_units - fixed);
            }

            // The stage's copies: issued at its start on the idle copy stream, one after the
            // other, and waited for after its last instruction, so the compute stream waits
            // max(0, copies - computes) — the engine's simulator times them the same way.
            if (timed && !peak_mode) {
                std::vector<std::pair<int, double>> row;
                const TransferRates& link = costs->transfer();
                for (NodeId i = 0; i <= st.max_node; ++i) {
                    const uint64_t b = g.output_of(i).bytes;
                    if (at(OFF, i) != kNone) row.push_back({at(OFF, i), -link.copy_ms(b, true)});
                    if (at(PF, i) != kNone) row.push_back({at(PF, i), -link.copy_ms(b, false)});
                }
                if (!row.empty()) {
                    stall_[s] = m_.add_col(0, m_infinity(), 1, false);
                    row.push_back({stall_[s], 1});
                    for (NodeId j = 0; j <= st.max_node; ++j) row.push_back({at(R, j), fwd_ms(j)});
                    const double bwd = st.backward != kNone ? costs->backward_ms(st.backward) : 0;
                    m_.add_row(row, -bwd, m_infinity());
                }
            }
        }
    }

    Milp& milp() { return m_; }
    const std::vector<Stage>& stages() const { return stages_; }

    // Integer start: the plain backprop schedule (compute each node once, keep everything).
    std::vector<std::pair<int, double>> keep_everything_start() const {
        std::vector<std::pair<int, double>> out;
        for (size_t s = 0; s < stages_.size(); ++s)
            for (size_t i = 0; i < R_[s].size(); ++i) {
                const bool first =
                    stages_[s].first == static_cast<NodeId>(i) || stages_[s].whole_forward;
                if (R_[s][i] != kNone) out.push_back({R_[s][i], first ? 1.0 : 0.0});
                if (S_[s][i] != kNone) out.push_back({S_[s][i], 1.0});
            }
        add_no_copies(out);
        return out;
    }

    // An integer start (R and S) describing `s`, or empty when `s` is outside the formulation's
    // class (a node computed twice in one stage, a first computation out of node order, a
    // Backward out of canonical order). Stage boundaries: a forward stage ends with its node's
    // first computation, a backward stage with its Backward; what is live at a boundary, after
    // the Frees that follow it, is what the next stage keeps (S).
    std::vector<std::pair<int, double>> start_from(const Schedule& sched) const {
        std::vector<std::pair<int, double>> out;
        const auto n = static_cast<size_t>(g_.num_nodes());
        std::vector<std::vector<uint8_t>> R(stages_.size(), std::vector<uint8_t>(n, 0));
        std::vector<uint8_t> live(static_cast<size_t>(g_.num_values()), 0), computed(n, 0);
        size_t s = 0;
        bool boundary = false;
        auto snapshot = [&]() {  // S of stage s from the live values
            for (size_t i = 0; i < n; ++i) {
                const int col = S_[s][i];
                if (col != kNone)
                    out.push_back(
                        {col, live[static_cast<size_t>(g_.node(static_cast<NodeId>(i)).output)]
                                  ? 1.0
                                  : 0.0});
            }
        };
        for (const Instruction& ins : sched.code) {
            if (is_copy(ins.kind)) return {};  // a schedule with copies: not described here
            if (ins.kind == InstrKind::Free) {
                live[static_cast<size_t>(ins.target)] = 0;
                continue;
            }
            if (boundary) {
                if (++s >= stages_.size()) return {};
                snapshot();
                boundary = false;
            }
            const Stage& st = stages_[s];
            const auto t = static_cast<size_t>(ins.target);
            if (ins.kind == InstrKind::Compute) {
                if (ins.target > st.max_node || R[s][t]) return {};
                R[s][t] = 1;
                live[static_cast<size_t>(g_.node(ins.target).output)] = 1;
                if (!computed[t]) {
                    computed[t] = 1;
                    if (st.first != ins.target && !st.whole_forward) return {};
                    if (st.first == ins.target) boundary = true;
                }
            } else {
                if (st.backward != ins.target) return {};
                boundary = true;
            }
        }
        if (s + 1 != stages_.size()) return {};
        for (size_t t = 0; t < stages_.size(); ++t)
            for (size_t i = 0; i < n; ++i)
                if (R_[t][i] != kNone)
                    out.push_back({R_[t][i], R[t][i] ? 1.0 : 0.0});
                else if (R[t][i])
                    return {};
        add_no_copies(out);
        return out;
    }

    // The order of Computes and Backwards the solution describes.
    Schedule schedule(const std::vector<double>& x, std::vector<NodeId>* kept) const {
        ScheduleBuilder b(g_);
        bool first_backward = true;
        for (size_t s = 0; s < stages_.size(); ++s) {
            const Stage& st = stages_[s];
            if (st.backward != kNone && first_backward && kept) {
                for (NodeId i = 0; i <= st.max_node; ++i)
                    if (on(x, S_[s][static_cast<size_t>(i)])) kept->push_back(i);
                first_backward = false;
            }
            // The stage's copies first (offloads, then prefetches, in node order), waited for
            // after its last instruction.
            std::vector<ValueId> copies;
            for (NodeId i = 0; i <= st.max_node; ++i)
                if (on(x, OFF_[s][static_cast<size_t>(i)])) {
                    b.offload(g_.node(i).output);
                    copies.push_back(g_.node(i).output);
                }
            for (NodeId i = 0; i <= st.max_node; ++i)
                if (on(x, PF_[s][static_cast<size_t>(i)])) {
                    b.prefetch(g_.node(i).output);
                    copies.push_back(g_.node(i).output);
                }
            for (NodeId j = 0; j <= st.max_node; ++j)
                if (on(x, R_[s][static_cast<size_t>(j)])) b.compute(j);
            if (st.backward != kNone) b.backward(st.backward);
            for (ValueId v : copies) b.wait(v);
        }
        return b.finish();
    }

  private:
    // Every offload column at 0: a start without copies.
    void add_no_copies(std::vector<std::pair<int, double>>& out) const {
        for (const auto* m : {&OFF_, &PF_, &H_})
            for (const auto& row : *m)
                for (int col : row)
                    if (col != kNone) out.push_back({col, 0.0});
    }
    static double m_infinity() { return std::numeric_limits<double>::infinity(); }
    static bool on(const std::vector<double>& x, int col) {
        return col != kNone && x[static_cast<size_t>(col)] > 0.5;
    }
    void add_budget_row(std::vector<std::pair<int, double>> row, double rhs) {
        if (peak_ != kNone) {
            row.push_back({peak_, -1});
            m_.add_row(row, -m_infinity(), rhs);
        } else {
            m_.add_row(row, -m_infinity(), rhs);
        }
    }

    const Graph& g_;
    std::vector<Stage> stages_;
    Milp m_;
    std::vector<std::vector<int>> R_, S_;
    std::vector<std::vector<int>> OFF_, PF_, H_;  // offload (all kNone without it)
    std::vector<int> stall_;                      // per stage: the wait for its copies
    int peak_ = kNone;
};

double sum_forward_ms(const Graph& g, const CostModel& costs) {
    double s = 0;
    if (costs.size() == 0) return 0;
    for (NodeId n = 0; n < g.num_nodes(); ++n) s += costs.forward_ms(n);
    return s;
}

std::string bytes_text(uint64_t b) {
    return format_bytes(b) + " (" + std::to_string(b) + " bytes)";
}

}  // namespace

uint64_t checkmate_min_budget(const Graph& g, const CheckmateOptions& opt, bool* proven,
                              Schedule* schedule) {
    const LivenessTables t(g);
    SimulateOptions quiet;
    quiet.record_timeline = false;
    const Schedule none = backprop_schedule(g);
    const uint64_t none_peak = simulate(g, t, none, CostModel{}, quiet).peak_bytes;
    const double unit = std::max(1.0, static_cast<double>(none_peak) / 1000.0);
    // In peak mode the memory rows read  U + ... - P <= budget_units; with budget_units = 0 they
    // bound every memory point by P.
    Formulation f(g, t, nullptr, make_stages(g, t, opt.forward_stages), unit, 0.0, true,
                  opt.offload);
    const Milp::Result r =
        f.milp().solve(opt.time_limit_s, opt.log_level, f.keep_everything_start());
    if (proven) *proven = false;
    if (!r.has_solution) {
        if (schedule) *schedule = none;
        return none_peak;
    }
    Schedule s = f.schedule(r.x, nullptr);
    const uint64_t peak = simulate(g, t, s, CostModel{}, quiet).peak_bytes;
    if (peak > none_peak) {  // cannot happen with an exact model; keep the better answer
        if (schedule) *schedule = none;
        return none_peak;
    }
    if (proven) *proven = r.proven_optimal;
    if (schedule) *schedule = std::move(s);
    return peak;
}

Plan checkmate_plan(const Graph& g, const CostModel& costs, uint64_t budget, double time_limit_s) {
    CheckmateOptions opt;
    opt.time_limit_s = time_limit_s;
    return checkmate_plan(g, costs, budget, opt);
}

namespace {
Plan solve_for_budget(const Graph& g, const CostModel& costs, uint64_t budget,
                      const CheckmateOptions& opt, CheckmateStats& st);
}  // namespace

Plan checkmate_plan(const Graph& g, const CostModel& costs, uint64_t budget,
                    const CheckmateOptions& opt, CheckmateStats* stats) {
    CheckmateStats local;
    CheckmateStats& st = stats ? *stats : local;
    st = CheckmateStats{};
    Plan p = solve_for_budget(g, costs, budget, opt, st);
    p.method = opt.offload ? "milp-offload" : "milp";
    if (st.solved) {
        p.lower_bound_ms = st.lower_bound_ms;
        p.bound_class = p.method;
        p.gap = st.gap;
    }
    return p;
}

namespace {
Plan solve_for_budget(const Graph& g, const CostModel& costs, uint64_t budget,
                      const CheckmateOptions& opt, CheckmateStats& st) {
    const LivenessTables t(g);
    SimulateOptions quiet;
    quiet.record_timeline = false;
    Plan p;
    p.budget = budget;

    // Plain backprop fits: nothing to recompute, trivially optimal.
    const Schedule none = backprop_schedule(g);
    if (simulate(g, t, none, costs, quiet).peak_bytes <= budget) {
        p.schedule = none;
        p.status = PlanStatus::Optimal;
        st.solved = st.proven_optimal = true;
        for (NodeId n = 0; n < g.num_nodes(); ++n)
            if (g.needs_backward(n)) p.checkpoints.push_back(n);
        return p;
    }

    const std::vector<Stage> stages = make_stages(g, t, opt.forward_stages);
    const double constant_ms = sum_forward_ms(g, costs);
    const double unit = std::max(1.0, static_cast<double>(budget) / 1000.0);
    // Byte sums are integers: <= budget + 1/4 (plus solver tolerances, far below a quarter of
    // a byte) means <= budget.
    double budget_units = (static_cast<double>(budget) + 0.25) / unit;
    const auto t0 = std::chrono::steady_clock::now();
    for (int attempt = 0; attempt < 3; ++attempt) {
        Formulation f(g, t, &costs, stages, unit, budget_units, false, opt.offload);
        st.variables = f.milp().cols();
        st.integer_variables = f.milp().integers();
        st.constraints = f.milp().rows();
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::vector<std::pair<int, double>> start;
        if (opt.initial && !opt.initial->code.empty() &&
            simulate(g, t, *opt.initial, costs, quiet).peak_bytes <= budget)
            start = f.start_from(*opt.initial);
        st.warm_started = !start.empty();
        const Milp::Result r = f.milp().solve(opt.time_limit_s - elapsed, opt.log_level, start);
        st.solve_s += r.seconds;
        if (!r.has_solution) {
            st.lower_bound_ms = std::max(0.0, r.bound - constant_ms);
            std::string why =
                !r.failure.empty() ? r.failure + " during the solve (no schedule from it)"
                : r.proven_infeasible
                    ? "no schedule in the MILP's class fits the budget of " + bytes_text(budget)
                    : "CBC found no schedule within " + bytes_text(budget) +
                          " in the time limit of " + std::to_string(opt.time_limit_s) + " s";
            if (!opt.find_min_budget) {
                p.status = PlanStatus::Infeasible;
                p.message = why + "; raise the budget or the time limit";
                return p;
            }
            bool proven = false;
            Schedule lean;
            const uint64_t min_budget = checkmate_min_budget(g, opt, &proven, &lean);
            if (min_budget <= budget) {
                // The peak-minimising search found a schedule that fits: return it. (The cost
                // MILP may have hit its time limit, or — by solver tolerance only — called a
                // budget infeasible that the simulated peak of this schedule meets.)
                p.schedule = std::move(lean);
                p.status = PlanStatus::Feasible;
                const Simulation sim = simulate(g, t, p.schedule, costs, quiet);
                st.solved = true;
                st.objective_ms = sim.recompute_ms + sim.stall_ms;
                st.gap = st.objective_ms > 0
                             ? (st.objective_ms - st.lower_bound_ms) / st.objective_ms
                             : 0;
                return p;
            }
            p.status = PlanStatus::Infeasible;
            p.min_feasible_budget = std::max(min_budget, budget + 1);
            p.message = why + "; the smallest feasible budget " +
                        (proven ? "over the MILP's class of schedules is "
                                : "found (an upper bound: the peak minimisation did not prove "
                                  "it) is ") +
                        bytes_text(*p.min_feasible_budget) + "; raise the budget to at least that";
            return p;
        }
        std::vector<NodeId> kept;
        Schedule s = f.schedule(r.x, &kept);
        const Simulation sim = simulate(g, t, s, costs, quiet);
        if (sim.peak_bytes > budget) {
            // Only solver tolerances can get here: tighten by the excess and solve again.
            budget_units -= static_cast<double>(sim.peak_bytes - budget) / unit;
            continue;
        }
        p.schedule = std::move(s);
        p.checkpoints = std::move(kept);
        p.status = r.proven_optimal ? PlanStatus::Optimal : PlanStatus::Feasible;
        st.solved = true;
        st.proven_optimal = r.proven_optimal;
        // Recompute plus the waits for copies (0 without offload): what the MILP minimises.
        st.objective_ms = sim.recompute_ms + sim.stall_ms;
        st.model_ms = r.objective - constant_ms -
                      kCopyTieMs * static_cast<double>(sim.offloads + sim.prefetches);
        st.lower_bound_ms =
            r.proven_optimal ? st.objective_ms : std::max(0.0, r.bound - constant_ms);
        st.gap = st.objective_ms > 0
                     ? std::max(0.0, (st.objective_ms - st.lower_bound_ms) / st.objective_ms)
                     : 0;
        return p;
    }
    p.status = PlanStatus::Infeasible;
    p.message = "the MILP's schedules kept exceeding the budget of " + bytes_text(budget) +
                " in simulation (solver tolerance); raise the budget slightly";
    p.min_feasible_budget = budget + 1;
    return p;
}
}  // namespace

}  // namespace rl
