#pragma once
// Sessions: the network, the strategies with their parameters and budget, the run settings and
// every result (predicted and measured figures, timelines, and each plan with the cost model it
// was made with) in one JSON file that reopens exactly — nothing is planned or run again: each
// schedule is simulated anew from the saved plan and costs, which gives the saved prediction back
// to the byte. Written atomically (engine/atomic_file.h).
//
//   { "format": "rematlab-session", "version": 1, "network_spec": "mlp:depth=8",
//     "network": { …the network in RematLab's JSON format… },
//     "strategies": ["none", "sqrt-n"], "budget": 12582912, "threads": 1, "cap": "",
//     "baseline_total_ms": 3.2, "baseline_total": {"median": 3.2, "min": 3.1, "max": 3.5,
//     "samples": 3}, "results": [ { "spec": …, "plan": {"schedule": [["compute", 0], …], …},
//     "costs": {"kind": "analytic", "forward_ms": […], "backward_ms": […]},
//     "times": {"forward": {…spread…}, "recompute": …, "backward": …, "total": …, "cpu": …},
//     "stale_measured_as": "sqrt-n:budget=8MiB", … } ] }
//
// The spreads and the stale marks came later: a file without them loads with medians only and
// nothing stale, as it was saved.
//
// Also the network's own exports (DOT for Graphviz, our JSON) and a schedule as JSON.
#include <QString>
#include <QStringList>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "ui/snapshots.h"

namespace rl::ui {

struct ScheduleTrace;

struct Session {
    QString network_spec;
    std::shared_ptr<const Graph> graph;  // the network as it was (a file may have changed since)
    QStringList strategies;              // as ticked, without the budget
    std::optional<uint64_t> budget;
    int threads = 1;
    QString cap;
    std::vector<StrategyResult> results;
    std::optional<double> baseline_ms;
    // none's total time with its spread over the timed repeats: what "within noise" is judged
    // against (absent in sessions saved before it was kept).
    std::optional<Spread> baseline_spread;
};

// Throws rl::Error naming the file and what went wrong.
void save_session(const QString& path, const Session& session);
Session load_session(const QString& path);

// The network as a Graphviz DOT digraph (inputs as ellipses, nodes as boxes with op and shape).
std::string network_dot(const Graph& g);
// A schedule as JSON: {"format": "rematlab-schedule", "network", "strategy", "status",
// "instructions": [{"index", "op", "target", "recompute"}…]}.
std::string schedule_json(const ScheduleTrace& trace);
// Writes by suffix: the network as .dot or .json, atomically. Throws rl::Error.
void export_network(const Graph& g, const QString& path);
void export_schedule(const ScheduleTrace& trace, const QString& path);

}  // namespace rl::ui
