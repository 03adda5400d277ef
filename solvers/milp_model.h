#pragma once
// A sparse mixed-integer linear program assembled column by column and row by row, and loaded
// into COIN-OR CBC column-major: the one model builder of the Checkmate formulations
// (solvers/checkmate.cpp over a network's stages, solvers/general/checkmate_general.cpp over an
// abstract graph), and their one way to CBC: a solve in a worker process (solvers/isolated.h).
#include <atomic>
#include <string>
#include <utility>
#include <vector>

namespace rl {

// What a CBC solve reported. `bound` is CBC's best possible objective (a lower bound, for a
// minimisation, over every integral point), valid whether or not a solution was found.
struct MilpResult {
    bool has_solution = false, proven_optimal = false, proven_infeasible = false;
    // Stopped by a cancel (CBC's own SIGINT handler, or the worker killed).
    bool interrupted = false;
    double objective = 0, bound = 0;
    double seconds = 0;         // the whole call, here
    double solve_s = 0;         // CBC's solve, in the worker
    double time_to_best_s = 0;  // into the solve, when CBC reported its incumbent (0: the start)
    std::vector<double> x;
    // Why CBC gave no answer at all ("CBC killed by signal 6 (Aborted)"): its worker process
    // died (solvers/isolated.h). Then has_solution is false and bound 0, a valid lower bound.
    std::string failure;
};

struct MilpSolveOptions {
    double time_limit_s = 30;  // wall clock; CBC never runs unbounded
    int log_level = 0;
    // Stop only at a zero gap (CBC's default stops within a small relative gap; its bound is
    // valid either way, but a proven optimum is then exact).
    bool zero_gap = false;
    // CBC's preprocessing (CglPreProcess). Off for the small block models (solvers/rockmate.h),
    // which need none, as it crashed once in CglPreProcess::postProcess (rockmate.h).
    bool preprocess = true;
    // Branch-and-bound nodes at most (0: no limit). A node limit, unlike the wall clock, stops
    // CBC at the same point whatever the machine's load: the same model gives the same answer.
    int max_nodes = 0;
    // CBC's "threads" parameter where > 0 (the general formulation's 1); 0 leaves CBC's default.
    int threads = 0;
    // Where presolve fixes every column CBC proves optimality without storing an incumbent:
    // its column solution is then the answer (the general formulation).
    bool presolved_solution = false;
};

class MilpModel {
  public:
    // A column lb <= x <= ub with objective coefficient `obj`; returns its index.
    int add_col(double lb, double ub, double obj, bool integer);
    // A row lo <= sum coef * x <= hi. Terms with a negative column (a variable the formulation
    // fixed or left out) or a zero coefficient are skipped.
    void add_row(const std::vector<std::pair<int, double>>& terms, double lo, double hi);

    int cols() const { return static_cast<int>(lb_.size()); }
    int rows() const { return static_cast<int>(rlo_.size()); }
    int integers() const;

    // Loads the columns, rows and integrality into an empty CBC model (a `Cbc_Model*` of
    // coin/Cbc_C_Interface.h, which CBC 2.10 declares as void).
    void load(void* cbc_model) const;

    // Solves the model with CBC, from an optional integer start (column, value), in a worker
    // process (solvers/isolated.h, run_in_worker): a crash inside CBC comes back as
    // MilpResult::failure. The cancel flag (engine/cancel.h) is polled before, during (the
    // worker is killed within 20 ms of it) and after the solve; a raised flag throws Cancelled.
    MilpResult solve(const MilpSolveOptions& opt,
                     const std::vector<std::pair<int, double>>& start = {}) const;

    // The same without the throws: `cancel` (where given) and the cancel flag are polled while
    // CBC runs; when either is raised the worker gets SIGINT (CBC's handler stops the search and
    // the worker answers with its incumbent, MilpResult::interrupted) and `grace_s` seconds
    // before it is killed.
    MilpResult solve_until_cancelled(const MilpSolveOptions& opt,
                                     const std::vector<std::pair<int, double>>& start,
                                     const std::atomic<bool>* cancel, double grace_s) const;

  private:
    // The CBC solve itself, in the worker, from the start's columns and values: its answer as
    // ByteWriter bytes.
    std::string solve_here(const MilpSolveOptions& opt, const std::vector<int>& start_cols,
                           const std::vector<double>& start_values) const;
    // The model, the options and the start as the worker's request, and the worker's side:
    // the request decoded and solved.
    std::string request(const MilpSolveOptions& opt,
                        const std::vector<std::pair<int, double>>& start) const;
    static std::string serve(const std::string& request);
    struct Entry {
        int row, col;
        double coef;
    };
    std::vector<double> lb_, ub_, obj_, rlo_, rhi_;
    std::vector<bool> integer_;
    std::vector<Entry> entries_;
};

}  // namespace rl
