// Sums over rows, column by column, pairwise: what a linear layer's bias gradient and a layer
// norm's weight and bias gradients are (Σ over the batch's rows of per-row vectors).
//
// Added one after another, n rows' rounding errors grow with n (a float's 2^-24 per row in the
// worst case; 512 rows: mlp width 1024's last bias gradient read 2.8e-6 of its largest element
// from float64, PyTorch's cascade sum 1.1e-7, 2026-12-06). Pairwise summation (Higham, "The
// accuracy of floating point summation", SIAM J. Sci. Comput. 14(4), 1993) grows them with
// log2(n) instead: runs of kLeaf rows are added one after another (vectors along the columns, as
// before), and the runs' sums are combined as the leaves of a binary tree, a run with the one
// before it whenever both sum as many rows (a binary counter: at most log2(runs) + 1 partial sums
// are held). Every sum has one order, set by the row count alone, so the bits do not depend on
// the thread count or the strategy.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "engine/cpu/kernels.h"

namespace rl::cpu {

// Sums of `Count` vectors of n floats over rows [0, rows): add_row(r, dst) adds row r's terms
// into dst[0..Count) (each n floats, starting from +0 in each run); the totals go to out[i]
// where out[i] is not null.
template <int Count, class AddRow>
void pairwise_over_rows(int64_t rows, int64_t n, const std::array<float*, Count>& out,
                        AddRow&& add_row) {
    constexpr int64_t kLeaf = 16;
    const int64_t runs = (rows + kLeaf - 1) / kLeaf;
    int depth = 1;
    while ((int64_t{1} << (depth - 1)) < runs) ++depth;  // partial sums held at once, at most
    std::vector<float> buf(static_cast<size_t>((depth + 1) * Count * n));
    std::vector<int> level(static_cast<size_t>(depth + 1));
    auto at = [&](int k) {
        std::array<float*, Count> p;
        for (int i = 0; i < Count; ++i) p[i] = buf.data() + (k * Count + i) * n;
        return p;
    };
    int top = 0;
    for (int64_t run = 0; run < runs; ++run) {
        const std::array<float*, Count> leaf = at(top);
        for (float* v : leaf) ArrMap(v, n).setZero();
        for (int64_t r = run * kLeaf; r < std::min(rows, (run + 1) * kLeaf); ++r) add_row(r, leaf);
        level[static_cast<size_t>(top)] = 0;
        ++top;
        while (top >= 2 &&
               level[static_cast<size_t>(top - 2)] == level[static_cast<size_t>(top - 1)]) {
            const std::array<float*, Count> left = at(top - 2), right = at(top - 1);
            for (int i = 0; i < Count; ++i) ArrMap(left[i], n) += ConstArrMap(right[i], n);
            ++level[static_cast<size_t>(top - 2)];
            --top;
        }
    }
    // The partials left, earliest first: out = p0 + (p1 + (... + p_last)).
    for (int i = 0; i < Count; ++i) {
        if (!out[i]) continue;
        ArrMap o(out[i], n);
        if (top == 0) {
            o.setZero();
            continue;
        }
        o = ConstArrMap(at(top - 1)[i], n);
        for (int k = top - 2; k >= 0; --k) o = ConstArrMap(at(k)[i], n) + o;
    }
}

}  // namespace rl::cpu
