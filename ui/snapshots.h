#pragma once
// Immutable value snapshots the run worker publishes to the GUI thread (heaptrack's Parser style:
// one typed signal per kind of news). Timelines are shared, never mutated after publication, so
// a snapshot copies in O(1) across threads.
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "analysis/measure.h"
#include "engine/cost_model.h"
#include "ui/chart_math.h"

namespace rl::ui {

struct ScheduleTrace;  // ui/schedule_trace.h

// A memory timeline: x = milliseconds since the step began, y = live bytes after each event, and
// the instruction each event belongs to (-1 outside any instruction).
struct Timeline {
    std::vector<XY> points;
    std::vector<int32_t> instruction;
    // The host pool (offloaded values), predicted: bytes on the host at each of its events, on
    // the same x axis, with the instruction of each. Empty without offload.
    std::vector<XY> host;
    std::vector<int32_t> host_instruction;
};

struct NetworkSummary {
    QString spec;
    QString name;
    int nodes = 0;
    int narrowed = 0;  // nodes the ONNX import narrowed to what a slice reads (tag "narrowed")
    int params = 0;
    uint64_t param_bytes = 0;
    uint64_t input_bytes = 0;
    uint64_t activation_bytes = 0;
    double forward_flops = 0;
    uint64_t none_peak_bytes = 0;  // predicted peak of plain backprop: the budget slider's top
    uint64_t floor_bytes = 0;      // parameters + inputs: always live, the slider's bottom
    bool plan_only = false;        // an abstract benchmark graph: no kernels, Run refuses it
};

struct StrategyResult {
    QString name;     // registry name, "sqrt-n"
    QString spec;     // as planned, "sqrt-n:budget=12MiB"
    QString status;   // optimal, feasible, heuristic; infeasible, cap exceeded, error, cancelled
    QString message;  // for a failure: what was wrong and what to do
    std::optional<uint64_t> budget, min_feasible_budget;
    double solve_ms = 0;
    QString method;                        // how a solver found it: "rotor-dp", "milp"; "" = n/a
    std::optional<double> gap;             // solvers: (incumbent − bound) / incumbent
    std::optional<double> lower_bound_ms;  // solvers: a proven bound on the recompute cost

    bool planned = false;  // predicted figures valid
    uint64_t predicted_peak = 0, predicted_activation_peak = 0;
    QString predicted_peak_instruction;
    long instructions = 0, computes = 0, recomputes = 0;
    double predicted_forward_ms = 0, predicted_recompute_ms = 0, predicted_backward_ms = 0;
    double predicted_total_ms = 0;
    // Offload (engine/schedule.h): the host pool and the compute stream's waits for copies.
    uint64_t predicted_host_peak = 0, measured_host_peak = 0;
    double predicted_stall_ms = 0, stall_ms = 0;
    QString cost_model;  // "profiled" or "analytic"

    bool executed = false;  // measured figures valid
    uint64_t measured_peak = 0, measured_activation_peak = 0;
    QString measured_peak_instruction;
    double forward_ms = 0, recompute_ms = 0, backward_ms = 0, total_ms = 0;
    // The measured times with their spread over the timed repeats (analysis/measure.h); the
    // *_ms above are their medians.
    std::optional<MeasuredTimes> times;
    double loss = 0;
    bool grads_equal = false;
    double max_grad_diff = 0;

    std::shared_ptr<const Timeline> predicted_timeline, measured_timeline;
    // A run over the memory cap: the cap, the instruction and the allocation that failed. The
    // measured_timeline then holds the events measured up to the failure (executed stays false).
    struct CapFailure {
        uint64_t cap = 0;
        long instruction = -1;  // -1: while loading the parameters and inputs
        uint64_t live = 0, requested = 0;
        QString what;  // the buffer it was for
    };
    std::optional<CapFailure> cap_failure;
    // "compute block3.fc", "recompute block3.fc", "free …", "backward …", per instruction.
    std::shared_ptr<const std::vector<QString>> instruction_text;
    // The plan itself, for the schedule views (graph, matrix, teach mode); null for a failure.
    std::shared_ptr<const ScheduleTrace> trace;

    // Non-empty when a change made the measured figures out of date: the spec they were
    // measured as (the row's spec is the new plan's). They are kept, greyed, beside the new
    // plan's predictions until the next run.
    QString stale_measured_as;
    bool stale() const { return !stale_measured_as.isEmpty(); }

    bool failed() const { return !planned && !executed; }
};

// A slice of a running execution, at most ~30 per second: the new (time, bytes) points since the
// last slice, each with the instruction it ended, for the live chart (on its time axis or its
// instruction-index axis).
struct ProgressSnapshot {
    int strategy_index = 0;  // into the request's strategy list; -1 for the hidden baseline
    int strategy_count = 0;
    int round = 0, rounds = 0;  // 0: the warm-up round; then 1..rounds (timed)
    QString label;
    long instruction = 0, instruction_count = 0;
    uint64_t live_bytes = 0;
    double elapsed_ms = 0;
    std::vector<XY> new_points;
    std::vector<int32_t> new_instructions;  // per new point: the instruction's index
};

struct RunRequest {
    QString network;
    QStringList strategies;  // specs
    int threads = 1;
    uint64_t cap = 0;                        // bytes, 0 = none
    QString device = QStringLiteral("cpu");  // "cpu" or "cuda" (rl::make_backend)
    // Timed rounds after a warm-up round, the strategies interleaved (Evaluator::compare).
    int repeats = kDefaultRepeats;
    // The host link offloads cross, GB/s each way (engine/cost_model.h's TransferRates).
    double link_gbps = TransferRates{}.to_host_gbps;
};
// The EvaluateOptions::link of a request's link_gbps.
inline TransferRates link_of(double gbps) {
    TransferRates t;
    t.to_host_gbps = t.to_device_gbps = gbps;
    return t;
}

struct RunSummary {
    std::vector<StrategyResult> results;
    std::optional<double> baseline_total_ms;  // none's measured total, for the overhead column
    std::optional<Spread> baseline_total;     // the same with its spread: "within noise"
    double wall_ms = 0;
    // A run stopped by Cancel: the rows hold what was measured before it, each strategy over the
    // timed repeats it completed (StrategyResult::times' sample count; no timing when none).
    bool cancelled = false;
};

// The results are of an abstract benchmark graph (a plan-only network): their times are the
// graph's durations in the file's own units, not milliseconds (ui/evaluation.cpp).
bool in_duration_units(const std::vector<StrategyResult>& results);

}  // namespace rl::ui

Q_DECLARE_METATYPE(rl::ui::NetworkSummary)
Q_DECLARE_METATYPE(rl::ui::StrategyResult)
Q_DECLARE_METATYPE(rl::ui::ProgressSnapshot)
Q_DECLARE_METATYPE(rl::ui::RunSummary)
