#include "solvers/milp_model.h"

#include <coin/Cbc_C_Interface.h>

#include <algorithm>

namespace rl {

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

}  // namespace rl
