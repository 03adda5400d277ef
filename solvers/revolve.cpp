// Griewank & Walther's binomial checkpointing (the solver core of `revolve:slots=s`). See
// solvers/revolve.h for the algorithm, the mapping of our graphs onto Griewank's steps, and a
// worked example.
#include "solvers/revolve.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "engine/errors.h"
#include "engine/graph_algorithms.h"
#include "engine/liveness.h"

namespace rl::revolve {

uint64_t beta(int64_t s, int64_t r) {
    if (r < 0 || s < 0) return 0;
    // C(s+r, k) with k = min(s, r), built up as C(n−k+i, i), i = 1..k: each partial product is
    // an exact binomial, and they grow with i, so saturating once is final.
    const int64_t k = std::min(s, r);
    const auto base = static_cast<uint64_t>(s + r - k);
    uint64_t c = 1;
    for (int64_t i = 1; i <= k; ++i) {
        const uint64_t factor = base + static_cast<uint64_t>(i);
        if (c > kSaturated / factor) return kSaturated;
        c = c * factor / static_cast<uint64_t>(i);
    }
    return std::min(c, kSaturated);
}

int64_t repetition(int64_t l, int64_t s) {
    if (l < 1 || s < 1) throw Error("revolve: repetition number needs l ≥ 1 and s ≥ 1");
    int64_t r = 0;
    uint64_t b = 1;  // β(s, r), updated with β(s, r+1) = β(s, r)·(s+r+1)/(r+1)
    while (b < static_cast<uint64_t>(l)) {
        const auto factor = static_cast<uint64_t>(s + r + 1);
        b = b > kSaturated / factor ? kSaturated : b * factor / static_cast<uint64_t>(r + 1);
        ++r;
    }
    return r;
}

int64_t min_advances(int64_t l, int64_t s) {
    if (l <= 1) return 0;
    const int64_t r = repetition(l, s);
    return r * l - static_cast<int64_t>(beta(s + 1, r - 1));
}

namespace {

// The offset of the first checkpoint when reversing l ≥ 2 steps with s ≥ 2 slots: the largest j
// in the range of revolve.h, which makes both parts binomially optimal.
int64_t split(int64_t l, int64_t s) {
    const int64_t r = repetition(l, s);
    auto b = [](int64_t ss, int64_t rr) { return static_cast<int64_t>(beta(ss, rr)); };
    const int64_t lo = std::max({int64_t{1}, b(s, r - 2), l - b(s - 1, r)});
    const int64_t hi = std::min({l - 1, b(s, r - 1), l - b(s - 1, r - 1)});
    if (lo > hi) throw Error("revolve: empty split range (a bug)");
    return hi;
}

}  // namespace

std::vector<Action> actions(int64_t l, int64_t s) {
    if (l < 1 || s < 1) throw Error("revolve: needs at least one step and one slot");
    using K = Action::Kind;
    std::vector<Action> out;
    // Frames of the recursion "reverse (a, b] from x_a, stored, with s slots (x_a's included)",
    // kept on an explicit stack: with many slots the recursion is as deep as the chain.
    struct Frame {
        int64_t a, b, s;
    };
    std::vector<Frame> stack{{0, l, std::min(s, l)}};
    out.push_back({K::Store, 0});
    while (!stack.empty()) {
        Frame& f = stack.back();
        if (f.b - f.a == 1) {
            out.push_back({K::Turn, f.b});
            out.push_back({K::Release, f.a});
            const int64_t done = f.a;
            stack.pop_back();
            if (!stack.empty()) {
                stack.back().b = done;
                out.push_back({K::Restore, stack.back().a});
            }
        } else if (f.s == 1) {
            out.push_back({K::Advance, f.b - 1});
            out.push_back({K::Turn, f.b});
            --f.b;
            out.push_back({K::Restore, f.a});
        } else {
            const int64_t j = f.a + split(f.b - f.a, f.s);
            out.push_back({K::Advance, j});
            out.push_back({K::Store, j});
            const Frame child{j, f.b, f.s - 1};
            stack.push_back(child);  // invalidates f
        }
    }
    return out;
}

std::vector<NodeId> stage_ends(const Graph& g) {
    return segment_boundaries(g);
}

Schedule schedule(const Graph& g, const std::vector<NodeId>& ends,
                  const std::vector<Action>& acts) {
    const LivenessTables t(g);
    ScheduleBuilder builder(g);
    const auto k = static_cast<int64_t>(ends.size());
    // Stage i (1-based) is the nodes (first(i)−1, last(i)]; the tail after the last end joins
    // the first turn.
    auto first = [&](int64_t i) {
        return i == 1 ? NodeId{0} : ends[static_cast<size_t>(i - 2)] + 1;
    };
    auto last = [&](int64_t i) { return ends[static_cast<size_t>(i - 1)]; };
    if (k == 0) {
        for (NodeId n = 0; n < g.num_nodes(); ++n) builder.compute(n);
        for (NodeId n = g.num_nodes() - 1; n >= 0; --n)
            if (t.needs_backward[static_cast<size_t>(n)]) builder.backward(n);
        return builder.finish();
    }

    int64_t working = 0;
    bool advanced_since_turn = false;
    std::vector<uint8_t> needed(static_cast<size_t>(g.num_nodes()), 0);
    for (const Action& a : acts) {
        switch (a.kind) {
            case Action::Kind::Advance:
                for (int64_t i = working + 1; i <= a.index; ++i)
                    for (NodeId n = first(i); n <= last(i); ++n) builder.compute(n);
                advanced_since_turn = advanced_since_turn || a.index > working;
                working = a.index;
                break;
            case Action::Kind::Restore:
                working = a.index;
                break;
            case Action::Kind::Store:
            case Action::Kind::Release:
                break;  // the schedule builder frees each value after its last read
            case Action::Kind::Turn: {
                const int64_t i = a.index;
                const NodeId lo = first(i), hi = last(i);
                if (i == k) {
                    for (NodeId n = lo; n < g.num_nodes(); ++n) builder.compute(n);
                    for (NodeId n = g.num_nodes() - 1; n >= lo; --n)
                        if (t.needs_backward[static_cast<size_t>(n)]) builder.backward(n);
                } else {
                    // Recompute what the stage's backwards read, walking down the stage: a node
                    // is needed when a backward reads its output, or a needed node its input.
                    // x_i itself is still live when no stage was advanced since turn i+1 read it.
                    const bool recompute_end = advanced_since_turn;
                    std::fill(needed.begin() + static_cast<std::ptrdiff_t>(lo),
                              needed.begin() + static_cast<std::ptrdiff_t>(hi) + 1, 0);
                    auto mark = [&](ValueId v) {
                        const NodeId p = g.value(v).producer;
                        if (p >= lo && p <= hi) needed[static_cast<size_t>(p)] = 1;
                    };
                    for (NodeId n = hi; n >= lo; --n) {
                        const auto ni = static_cast<size_t>(n);
                        const Node& node = g.node(n);
                        if (t.needs_backward[ni]) {
                            for (size_t in = 0; in < node.inputs.size(); ++in)
                                if ((t.residual_inputs[ni] >> in) & 1u) mark(node.inputs[in]);
                            if (t.residual_output[ni] && (n != hi || recompute_end)) needed[ni] = 1;
                        }
                        if (n == hi && !recompute_end) needed[ni] = 0;
                        if (needed[ni])
                            for (ValueId in : node.inputs) mark(in);
                    }
                    for (NodeId n = lo; n <= hi; ++n)
                        if (needed[static_cast<size_t>(n)]) builder.compute(n);
                    for (NodeId n = hi; n >= lo; --n)
                        if (t.needs_backward[static_cast<size_t>(n)]) builder.backward(n);
                }
                advanced_since_turn = false;
                break;
            }
        }
    }
    return builder.finish();
}

}  // namespace rl::revolve
