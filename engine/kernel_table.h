#pragma once
// A backend's kernels as a table indexed by OpKind (as ggml's backends do), with a compile-time
// check that every op has both kernels. Used by engine/cpu and engine/cuda.
#include <array>
#include <cstddef>

#include "engine/ops/op_kind.h"

namespace rl {

// `set` rather than a null test of the pointers in table_complete(): under GCC's -fsanitize=null
// (the asan preset) comparing a function pointer with null is not a constant expression.
template <class Forward, class Backward>
struct KernelPair {
    Forward forward = nullptr;
    Backward backward = nullptr;
    bool set = false;
    constexpr KernelPair() = default;
    constexpr KernelPair(Forward f, Backward b) : forward(f), backward(b), set(true) {}
};

template <class Forward, class Backward>
using KernelTable = std::array<KernelPair<Forward, Backward>, kNumOpKinds>;

constexpr size_t op_index(OpKind k) {
    return static_cast<size_t>(k);
}

template <class Forward, class Backward>
constexpr bool table_complete(const KernelTable<Forward, Backward>& table) {
    for (const auto& k : table)
        if (!k.set) return false;
    return true;
}

}  // namespace rl
