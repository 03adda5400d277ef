#pragma once
// Sweeps for the Pareto chart: each strategy instance's memory / recompute trade-off curve, and
// the optimal frontier. A budgeted instance ("sqrt-n", "optimal:method=dp") is swept over budgets
// from the smallest it can meet to plain backprop's peak; any other over its own sweep range
// (periodic's k, the policies) when given without arguments, else it is one point
// (analysis/sweep.h decides the specs). Predicted points always; measured ones when the sweep
// executes. The frontier is the lower envelope of `optimal`'s predicted budget sweep.
//
// Plain functions on the calling thread: the run worker calls them off the GUI thread, the
// headless export calls them directly.
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <atomic>
#include <functional>
#include <optional>
#include <vector>

#include "analysis/evaluate.h"
#include "ui/chart_math.h"
#include "ui/snapshots.h"

namespace rl::ui {

struct SweepSample {
    QString spec;                // the point as planned, "sqrt-n:budget=12582912"
    XY predicted;                // x = predicted recompute ms, y = predicted peak bytes
    std::optional<XY> measured;  // when the sweep executed this point
};

struct SweepCurve {
    QString spec;           // the instance swept ("sqrt-n", "periodic:k=2"): the series' name
    QString name;           // registry name, for the colour
    int instance = 0;       // its instance among the swept specs of that strategy (shade)
    bool frontier = false;  // the optimal frontier: a lower envelope, predicted
    std::vector<SweepSample> samples;  // sorted by predicted x
    QString message;  // why points are missing (infeasible budgets, an error), or ""
};

struct SweepRequest {
    QString network;
    QStringList strategies;  // instance specs without a budget
    int points = 12;         // budgets per budgeted strategy
    bool execute = false;    // also run every point and measure it
    bool frontier = true;    // add optimal's frontier when the registry has `optimal`
    QString frontier_spec;   // the optimal instance to take it from ("" = plain `optimal`)
    int threads = 1;
    uint64_t cap = 0;
    QString device = QStringLiteral("cpu");  // where "Run each point" executes
    bool use_run_costs = false;              // predict with the profiled cost model of the last run
    double link_gbps = TransferRates{}.to_host_gbps;  // RunRequest::link_gbps
};

struct SweepSummary {
    std::vector<SweepCurve> curves;  // one per requested spec, then the frontier
    double wall_ms = 0;
};

// Progress: `done` of `total` points, the spec being evaluated.
using SweepProgress = std::function<void(int done, int total, const QString& spec)>;

// Every spec a sweep of `base` evaluates (budgets from rl::sweep_budgets, strategies/sweep_specs.h,
// for budgeted strategies).
std::vector<Spec> sweep_points(const Graph& g, const CostModel& costs, const Spec& base,
                               int points);

// Runs the sweeps with `evaluator` (its cost model predicts; it executes when it was built to and
// `request.execute`). `progress` is called before each point; a stop raised in `cancel` between
// points (or inside an execution) throws rl::Cancelled.
SweepSummary run_sweeps(const Graph& g, Evaluator& evaluator, const SweepRequest& request,
                        const SweepProgress& progress = {},
                        const std::atomic<bool>* cancel = nullptr);

// The optimal strategy's spec to draw the frontier from, when the registry has one.
std::optional<QString> frontier_strategy();

}  // namespace rl::ui

Q_DECLARE_METATYPE(rl::ui::SweepSummary)
