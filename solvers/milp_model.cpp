#include "solvers/milp_model.h"

#include <coin/Cbc_C_Interface.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>

#include "engine/cancel.h"

namespace rl {

namespace {

// For its lifetime: SIGINT blocked on this thread (a Ctrl-C stays pending), and at its end
// SIGINT's disposition as it was at its start, then the thread's signal mask as it was (a
// pending Ctrl-C is delivered there, to the handler the application installed).
class HoldSigint {
  public:
    HoldSigint() {
        sigaction(SIGINT, nullptr, &before_);
        sigset_t block;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        pthread_sigmask(SIG_BLOCK, &block, &mask_);
    }
    ~HoldSigint() {
        sigaction(SIGINT, &before_, nullptr);
        pthread_sigmask(SIG_SETMASK, &mask_, nullptr);
    }
    HoldSigint(const HoldSigint&) = delete;
    HoldSigint& operator=(const HoldSigint&) = delete;

  private:
    struct sigaction before_ {};
    sigset_t mask_{};
};

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
    if (!opt.preprocess) Cbc_setParameter(m.get(), "preprocess", "off");
    if (opt.max_nodes > 0) Cbc_setMaximumNodes(m.get(), opt.max_nodes);
    if (!start.empty()) {
        std::vector<int> cols;
        std::vector<double> vals;
        for (const auto& [c, x] : start) {
            cols.push_back(c);
            vals.push_back(x);
        }
        Cbc_setMIPStartI(m.get(), static_cast<int>(cols.size()), cols.data(), vals.data());
    }
    // CBC installs its own SIGINT handler for parts of a solve, which swallows Ctrl-C without
    // stopping anything: SIGINT is held pending on this thread meanwhile, and delivered to the
    // application's handler (which raises the flag) once the solve is over.
    throw_if_cancelled();
    const auto t0 = std::chrono::steady_clock::now();
    {
        const HoldSigint hold;
        Cbc_solve(m.get());
    }
    throw_if_cancelled();
    MilpResult r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.proven_infeasible = Cbc_isProvenInfeasible(m.get()) != 0;
    const double* best = Cbc_bestSolution(m.get());
    if (best && !r.proven_infeasible) {
        r.has_solution = true;
        r.x.assign(best, best + cols());
        r.objective = Cbc_getObjValue(m.get());
        r.proven_optimal = Cbc_isProvenOptimal(m.get()) != 0;
    }
    r.bound = Cbc_getBestPossibleObjValue(m.get());
    return r;
}

}  // namespace rl
