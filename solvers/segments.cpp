#include "solvers/segments.h"

#include <algorithm>
#include <cmath>

#include "engine/liveness.h"

namespace rl {

Schedule segment_schedule(const Graph& g, const std::vector<NodeId>& checkpoints) {
    const LivenessTables t(g);
    ScheduleBuilder b(g);
    for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);

    std::vector<uint8_t> needed(static_cast<size_t>(g.num_nodes()), 0);
    NodeId hi = g.num_nodes() - 1;  // the current segment is (lo, hi]
    for (size_t s = checkpoints.size() + 1; s-- > 0;) {
        const NodeId lo = s == 0 ? -1 : checkpoints[s - 1];
        const bool last = s == checkpoints.size();
        if (!last) {
            // Recompute the interior nodes whose outputs this segment's backwards read, and
            // what those need in turn (walking down the interior).
            auto mark = [&](ValueId v) {
                const Value& val = g.value(v);
                if (!val.is_input() && val.producer > lo && val.producer < hi)
                    needed[static_cast<size_t>(val.producer)] = 1;
            };
            for (NodeId n = hi; n > lo; --n) {
                const auto ni = static_cast<size_t>(n);
                const Node& node = g.node(n);
                if (t.needs_backward[ni]) {
                    for (size_t i = 0; i < node.inputs.size(); ++i)
                        if ((t.residual_inputs[ni] >> i) & 1u) mark(node.inputs[i]);
                    if (t.residual_output[ni] && n != hi) needed[ni] = 1;
                }
                if (needed[ni] && n != hi)
                    for (ValueId in : node.inputs) mark(in);
            }
            for (NodeId n = lo + 1; n < hi; ++n)
                if (needed[static_cast<size_t>(n)]) b.compute(n);
        }
        for (NodeId n = hi; n > lo; --n)
            if (g.needs_backward(n)) b.backward(n);
        hi = lo;
    }
    return b.finish();
}

std::vector<NodeId> even_checkpoints(const Graph& g, const std::vector<NodeId>& candidates,
                                     int segments) {
    std::vector<NodeId> out;
    if (segments <= 1 || candidates.empty()) return out;
    // Cumulative activation bytes up to and including each node.
    std::vector<double> cum(static_cast<size_t>(g.num_nodes()));
    double total = 0;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        total += static_cast<double>(g.output_of(n).bytes);
        cum[static_cast<size_t>(n)] = total;
    }
    size_t from = 0;
    for (int k = 1; k < segments && from < candidates.size(); ++k) {
        const double target = total * k / segments;
        size_t best = from;
        for (size_t i = from; i < candidates.size(); ++i)
            if (std::abs(cum[static_cast<size_t>(candidates[i])] - target) <
                std::abs(cum[static_cast<size_t>(candidates[best])] - target))
                best = i;
        out.push_back(candidates[best]);
        from = best + 1;
    }
    return out;
}

}  // namespace rl
