#pragma once
// The bridge from the engine's figures to the GUI's snapshots, as plain functions: the run worker
// and the headless export (`rematlab --export`) both go through them, so the window and the
// command line chart the same numbers.
#include <QString>
#include <QStringList>
#include <atomic>
#include <memory>
#include <vector>

#include "analysis/evaluate.h"
#include "engine/graph.h"
#include "ui/snapshots.h"

namespace rl::ui {

NetworkSummary summarize(const Graph& g, const QString& spec);

// Fills a result from an evaluation (plan, simulation, and the execution when there was one).
// `shared` is `g` as the result's trace will hold it; null: the trace holds a copy of `g`.
StrategyResult to_result(const Graph& g, const CostModel& costs, const Evaluation& e,
                         std::shared_ptr<const Graph> shared = nullptr);
// A result for a strategy that failed before it had figures.
StrategyResult failure_result(const QString& spec, const QString& status, const QString& message);

// "budget" of type Bytes in the schema: the budget slider drives it.
bool takes_budget(const Strategy& s);

// Predicted timeline in milliseconds: each instruction lasts its predicted time
// (Simulation::instruction_ms) and its events are spread evenly inside it, so a peak inside an
// instruction shows.
Timeline predicted_timeline(const Schedule& s, const Simulation& sim);
std::vector<QString> instruction_texts(const Graph& g, const Schedule& s);

// Evaluates one strategy spec; every failure but a cancellation becomes a result row (infeasible
// with the smallest feasible budget, cap exceeded with the instruction, error). rl::Cancelled
// propagates.
StrategyResult evaluate_one(Evaluator& evaluator, const Graph& g, const QString& spec,
                            std::shared_ptr<const Graph> shared = nullptr);

// The result of one strategy of Evaluator::compare: its figures, or its error as a failure row.
StrategyResult compared_result(const Graph& g, const CostModel& costs, const ComparedStrategy& c,
                               const QString& spec, std::shared_ptr<const Graph> shared = nullptr);

// Measures `specs` (none appended when absent, as the overhead's baseline) interleaved round by
// round with `repeats` timed rounds; results in the order of `specs`, none's total in the
// summary. Checks each spec first (a bad one becomes an error row and is not run). `on_step` as
// in Evaluator::compare. A cancellation throws rl::Cancelled, or with `keep_cancelled` returns
// what was measured before it (summary.cancelled; the evaluator should keep_partial_rounds), a
// strategy with no timed repeat as its plan with the message that it has no timing.
RunSummary measure_all(Evaluator& evaluator, const Graph& g, const QStringList& specs,
                       std::shared_ptr<const Graph> shared, const StepListener& on_step = {},
                       bool keep_cancelled = false);

// Splits a --strategies list like rematlab-cli: ';' always separates; ',' separates unless the
// next piece is a bare key=value continuing the previous spec.
QStringList split_strategy_list(const QString& text);

// Plans, simulates and (when `execute`) runs each spec, none's baseline included, on the calling
// thread: what the headless export uses. Failures become result rows; a bad network throws.
RunSummary evaluate_all(const RunRequest& request, bool execute,
                        const std::atomic<bool>* cancel = nullptr);

}  // namespace rl::ui
