#pragma once
// A sparse mixed-integer linear program assembled column by column and row by row, and loaded
// into COIN-OR CBC column-major: the one model builder of the Checkmate formulations
// (solvers/checkmate.cpp over a network's stages, solvers/general/checkmate_general.cpp over an
// abstract graph). The solve itself, its options and callbacks stay with each formulation.
#include <utility>
#include <vector>

namespace rl {

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

  private:
    struct Entry {
        int row, col;
        double coef;
    };
    std::vector<double> lb_, ub_, obj_, rlo_, rhi_;
    std::vector<bool> integer_;
    std::vector<Entry> entries_;
};

}  // namespace rl
