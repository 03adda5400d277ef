#include "solvers/milp_model.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <type_traits>

#include "engine/cancel.h"
#include "engine/errors.h"
#include "solvers/isolated.h"

namespace rl {
namespace {

// CBC's message callback carries no user pointer: the solve in progress records here when each
// new incumbent is reported (messages that carry an objective and name a solution), in seconds
// into the solve (-1: not during it).
struct IncumbentClock {
    std::chrono::steady_clock::time_point start;
    double last_s = -1;
};
thread_local IncumbentClock* t_clock = nullptr;

void COINLINKAGE_CB on_message(Cbc_Model*, int msgno, int, const double*, int, const int*, int,
                               char**) {
    // CbcMessage.cpp: CBC_SOLUTION (4), CBC_ROUNDING (12), CBC_FPUMP1/2 and the heuristics'
    // "Integer solution of %g found by ..." messages are 4, 12, 38, 39 (Cbc 2.10).
    if (!t_clock) return;
    if (msgno == 4 || msgno == 12 || msgno == 38 || msgno == 39)
        t_clock->last_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t_clock->start)
                .count();
}

}  // namespace

int MilpModel::add_col(double lb, double ub, double obj, bool integer) {
    lb_.push_back(lb);
    ub_.push_back(ub);
    obj_.push_back(obj);
    integer_.push_back(integer);
    return cols() - 1;
}

void MilpModel::add_row(const std::vector<std::pair<int, double>>& terms, double lo, double hi) {
    for (const auto& [col, coef] : terms)
        if (col >= 0 && coef != 0) entries_.push_back({rows(), col, coef});
    rlo_.push_back(lo);
    rhi_.push_back(hi);
}

int MilpModel::integers() const {
    return static_cast<int>(std::count(integer_.begin(), integer_.end(), true));
}

void MilpModel::load(void* cbc_model) const {
    auto* m = static_cast<Cbc_Model*>(cbc_model);
    // Column-major (CSC): count each column's entries, prefix-sum, then place the entries.
    std::vector<CoinBigIndex> begin(static_cast<size_t>(cols()) + 1, 0);
    for (const Entry& e : entries_) ++begin[static_cast<size_t>(e.col) + 1];
    for (size_t c = 0; c < static_cast<size_t>(cols()); ++c) begin[c + 1] += begin[c];
    std::vector<int> index(entries_.size());
    std::vector<double> value(entries_.size());
    std::vector<CoinBigIndex> fill(begin.begin(), begin.end() - 1);
    for (const Entry& e : entries_) {
        const auto at = static_cast<size_t>(fill[static_cast<size_t>(e.col)]++);
        index[at] = e.row;
        value[at] = e.coef;
    }
    Cbc_loadProblem(m, cols(), rows(), begin.data(), index.data(), value.data(), lb_.data(),
                    ub_.data(), obj_.data(), rlo_.data(), rhi_.data());
    for (int c = 0; c < cols(); ++c)
        if (integer_[static_cast<size_t>(c)]) Cbc_setInteger(m, c);
}

MilpResult MilpModel::solve(const MilpSolveOptions& opt,
                            const std::vector<std::pair<int, double>>& start) const {
    throw_if_cancelled();
    // In a worker process (solvers/isolated.h): CBC 2.10 has crashed on valid models, and a
    // crash must cost this solve only. A cancel kills the worker at once (its incumbent is of no
    // use to a cancelled plan), which also makes a Ctrl-C during a solve take effect within
    // 20 ms.
    MilpResult r = solve_until_cancelled(opt, start, nullptr, /*grace_s=*/0);
    throw_if_cancelled();
    return r;
}

MilpResult MilpModel::solve_until_cancelled(const MilpSolveOptions& opt,
                                            const std::vector<std::pair<int, double>>& start,
                                            const std::atomic<bool>* cancel, double grace_s) const {
    const auto t0 = std::chrono::steady_clock::now();
    const IsolatedRun run = run_in_worker(
        &MilpModel::serve, request(opt, start),
        [cancel] { return (cancel && cancel->load()) || cancel_requested(); }, grace_s,
        /*watchdog_s=*/3 * opt.time_limit_s + 120);
    MilpResult r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.interrupted = run.cancelled;
    if (!run.completed) {
        r.failure = "CBC " + run.failure;
        r.solve_s = r.seconds;
        return r;
    }
    ByteReader in(run.answer);
    r.has_solution = in.get<bool>();
    r.proven_optimal = in.get<bool>();
    r.proven_infeasible = in.get<bool>();
    r.interrupted = in.get<bool>() || run.cancelled;
    r.objective = in.get<double>();
    r.bound = in.get<double>();
    r.solve_s = in.get<double>();
    r.time_to_best_s = in.get<double>();
    r.x = in.get_vector<double>();
    return r;
}

std::string MilpModel::request(const MilpSolveOptions& opt,
                               const std::vector<std::pair<int, double>>& start) const {
    static_assert(std::is_trivially_copyable_v<MilpSolveOptions>);
    std::vector<int> start_cols;
    std::vector<double> start_values;
    for (const auto& [c, x] : start) {
        start_cols.push_back(c);
        start_values.push_back(x);
    }
    ByteWriter out;
    out.put(opt).put_vector(lb_).put_vector(ub_).put_vector(obj_).put_vector(rlo_);
    out.put_vector(rhi_).put_vector(std::vector<uint8_t>(integer_.begin(), integer_.end()));
    out.put_vector(entries_).put_vector(start_cols).put_vector(start_values);
    return out.take();
}

std::string MilpModel::serve(const std::string& request) {
    ByteReader in(request);
    const auto opt = in.get<MilpSolveOptions>();
    MilpModel m;
    m.lb_ = in.get_vector<double>();
    m.ub_ = in.get_vector<double>();
    m.obj_ = in.get_vector<double>();
    m.rlo_ = in.get_vector<double>();
    m.rhi_ = in.get_vector<double>();
    const auto integer = in.get_vector<uint8_t>();
    m.integer_.assign(integer.begin(), integer.end());
    m.entries_ = in.get_vector<Entry>();
    const auto start_cols = in.get_vector<int>();
    const auto start_values = in.get_vector<double>();
    if (start_cols.size() != start_values.size())
        throw Error("a MILP request's start has " + std::to_string(start_cols.size()) +
                    " columns and " + std::to_string(start_values.size()) + " values");
    return m.solve_here(opt, start_cols, start_values);
}

std::string MilpModel::solve_here(const MilpSolveOptions& opt, const std::vector<int>& start_cols,
                                  const std::vector<double>& start_values) const {
    // In the worker, a silent solve points stdout at /dev/null while it runs, as CBC's
    // preprocessing prints there whatever its log level (the parent's --json stays clean).
    const QuietStdout quiet(opt.log_level == 0 && in_isolated_child());
    std::unique_ptr<Cbc_Model, void (*)(Cbc_Model*)> m(Cbc_newModel(), Cbc_deleteModel);
    load(m.get());
    Cbc_setLogLevel(m.get(), opt.log_level);
    Cbc_setParameter(m.get(), "timeMode", "elapsed");
    Cbc_setMaximumSeconds(m.get(), std::max(0.01, opt.time_limit_s));
    // Memory rows are in budget-relative units; tight integrality keeps them honest.
    Cbc_setParameter(m.get(), "integerTolerance", "1e-9");
    if (opt.zero_gap) {
        Cbc_setParameter(m.get(), "ratioGap", "0");
        Cbc_setParameter(m.get(), "allowableGap", "0");
    }
    if (opt.log_level == 0) Cbc_setParameter(m.get(), "log", "0");
    if (opt.threads > 0) Cbc_setParameter(m.get(), "threads", std::to_string(opt.threads).c_str());
    if (!opt.preprocess) Cbc_setParameter(m.get(), "preprocess", "off");
    if (opt.max_nodes > 0) Cbc_setMaximumNodes(m.get(), opt.max_nodes);
    if (!start_cols.empty())
        Cbc_setMIPStartI(m.get(), static_cast<int>(start_cols.size()), start_cols.data(),
                         start_values.data());
    IncumbentClock clock{std::chrono::steady_clock::now(), -1};
    t_clock = &clock;
    Cbc_registerCallBack(m.get(), on_message);
    Cbc_solve(m.get());
    t_clock = nullptr;
    const double solve_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - clock.start).count();
    // Cbc_status 1 with secondary status 5: stopped on an event (its SIGINT handler).
    const bool interrupted = Cbc_status(m.get()) == 1 && Cbc_secondaryStatus(m.get()) == 5;
    const bool infeasible = Cbc_isProvenInfeasible(m.get()) != 0;
    const double* best = Cbc_bestSolution(m.get());
    if (!best && opt.presolved_solution && Cbc_isProvenOptimal(m.get()))
        best = Cbc_getColSolution(m.get());
    const bool has = best && !infeasible;
    ByteWriter out;
    out.put(has).put(has && Cbc_isProvenOptimal(m.get()) != 0).put(infeasible).put(interrupted);
    out.put(has ? Cbc_getObjValue(m.get()) : 0.0).put(Cbc_getBestPossibleObjValue(m.get()));
    out.put(solve_s).put(has && clock.last_s >= 0 ? clock.last_s : 0.0);
    out.put_vector(has ? std::vector<double>(best, best + cols()) : std::vector<double>{});
    return out.take();
}

}  // namespace rl
