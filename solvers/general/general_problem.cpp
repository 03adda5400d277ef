#include "solvers/general/general_problem.h"

#include <cmath>

#include "engine/errors.h"

namespace rl::general {

GeneralSimulation simulate_general(const AbstractGraph& g, const Schedule& s,
                                   int max_computations) {
    const auto n = static_cast<size_t>(g.size());
    GeneralSimulation sim;
    sim.computations_per_node.assign(n, 0);
    std::vector<uint8_t> live(n, 0);
    int32_t frontier = 0;  // the next node whose first computation may run
    uint64_t bytes = 0;
    auto name = [&](int32_t v) { return "'" + g.nodes[static_cast<size_t>(v)].name + "'"; };
    for (size_t i = 0; i < s.code.size(); ++i) {
        const Instruction& ins = s.code[i];
        const long at = static_cast<long>(i);
        if (ins.target < 0 || static_cast<size_t>(ins.target) >= n)
            throw ScheduleError(at, "node " + std::to_string(ins.target) +
                                        " does not exist (the graph has " + std::to_string(n) +
                                        " nodes)");
        const auto v = static_cast<size_t>(ins.target);
        switch (ins.kind) {
            case InstrKind::Compute: {
                if (live[v])
                    throw ScheduleError(at, "compute " + name(ins.target) +
                                                ": its output is still live (free it first)");
                if (sim.computations_per_node[v] == 0) {
                    if (ins.target != frontier)
                        throw ScheduleError(
                            at, "compute " + name(ins.target) +
                                    ": first computation out of the node order (the next new "
                                    "node must be " +
                                    name(frontier) + ")");
                    ++frontier;
                }
                for (int32_t p : g.preds[v])
                    if (!live[static_cast<size_t>(p)])
                        throw ScheduleError(at, "compute " + name(ins.target) + ": its input " +
                                                    name(p) + " is not live");
                if (max_computations > 0 && sim.computations_per_node[v] >= max_computations)
                    throw ScheduleError(at, "compute " + name(ins.target) + ": more than " +
                                                std::to_string(max_computations) +
                                                " computations of this node");
                live[v] = 1;
                bytes += g.nodes[v].out_bytes;
                if (bytes > sim.peak_bytes || sim.peak_instruction < 0) {
                    sim.peak_bytes = std::max(sim.peak_bytes, bytes);
                    sim.peak_instruction = at;
                }
                ++sim.computations_per_node[v];
                ++sim.computations;
                sim.total_duration += g.nodes[v].duration;
                break;
            }
            case InstrKind::Free:
                if (!live[v]) throw ScheduleError(at, "free " + name(ins.target) + ": not live");
                live[v] = 0;
                bytes -= g.nodes[v].out_bytes;
                break;
            case InstrKind::Backward:
                throw ScheduleError(at,
                                    "a Backward instruction in a schedule of an abstract graph "
                                    "(its backward nodes are ordinary nodes: use Compute)");
            case InstrKind::Offload:
            case InstrKind::Prefetch:
            case InstrKind::Wait:
                throw ScheduleError(at,
                                    "an offload instruction in a schedule of an abstract "
                                    "graph: its problem (Checkmate's) has no host memory");
        }
    }
    if (static_cast<size_t>(frontier) < n)
        throw ScheduleError(static_cast<long>(s.code.size()),
                            "node " + name(frontier) + " is never computed");
    return sim;
}

Schedule schedule_from_computations(const AbstractGraph& g, const std::vector<int32_t>& computes) {
    const auto n = static_cast<size_t>(g.size());
    const size_t m = computes.size();
    // last_read[v]: position of the last read of v's current instance; -1 when none is live.
    std::vector<long> last_read(n, -1);
    std::vector<std::vector<int32_t>> frees_after(m);
    for (size_t p = 0; p < m; ++p) {
        const auto v = static_cast<size_t>(computes[p]);
        if (v >= n) continue;  // left for simulate_general to report
        for (int32_t u : g.preds[v])
            if (last_read[static_cast<size_t>(u)] >= 0)
                last_read[static_cast<size_t>(u)] = static_cast<long>(p);
        if (last_read[v] >= 0)  // recomputed: the previous instance dies after its last read
            frees_after[static_cast<size_t>(last_read[v])].push_back(computes[p]);
        last_read[v] = static_cast<long>(p);
    }
    for (size_t v = 0; v < n; ++v)
        if (last_read[v] >= 0)
            frees_after[static_cast<size_t>(last_read[v])].push_back(static_cast<int32_t>(v));
    Schedule s;
    s.code.reserve(2 * m);
    for (size_t p = 0; p < m; ++p) {
        s.code.push_back({InstrKind::Compute, computes[p]});
        for (int32_t v : frees_after[p]) s.code.push_back({InstrKind::Free, v});
    }
    return s;
}

Schedule no_remat_schedule(const AbstractGraph& g) {
    std::vector<int32_t> order(static_cast<size_t>(g.size()));
    for (int32_t v = 0; v < g.size(); ++v) order[static_cast<size_t>(v)] = v;
    return schedule_from_computations(g, order);
}

uint64_t peak_no_remat(const AbstractGraph& g) {
    return simulate_general(g, no_remat_schedule(g)).peak_bytes;
}

uint64_t budget_from_fraction(const AbstractGraph& g, double fraction) {
    if (!(fraction > 0) || !std::isfinite(fraction))
        throw Error("budget fraction " + std::to_string(fraction) + " must be > 0");
    // long double: ResNet50's peak (3.8e10) times 0.9 must floor exactly as in the published
    // budgets.
    return static_cast<uint64_t>(std::floor(static_cast<long double>(fraction) *
                                            static_cast<long double>(peak_no_remat(g))));
}

double tdi(const AbstractGraph& g, double total_duration) {
    const double base = g.total_duration();
    return base > 0 ? (total_duration - base) / base : 0.0;
}

uint64_t min_feasible_peak_bound(const AbstractGraph& g) {
    uint64_t best = 0;
    for (int32_t v = 0; v < g.size(); ++v) {
        uint64_t b = g.nodes[static_cast<size_t>(v)].out_bytes;
        for (int32_t p : g.preds[static_cast<size_t>(v)])
            b += g.nodes[static_cast<size_t>(p)].out_bytes;
        best = std::max(best, b);
    }
    return best;
}

}  // namespace rl::general
