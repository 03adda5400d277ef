#include "ui/evaluation.h"

#include <algorithm>
#include <chrono>

#include "engine/errors.h"
#include "engine/networks/presets.h"
#include "engine/networks/slice_narrowing.h"
#include "engine/units.h"
#include "ui/qt_text.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

namespace {

QString infeasible_message(const QString& spec, const Plan& plan) {
    QString msg =
        plan.message.empty()
            ? QStringLiteral("strategy '%1' cannot meet its budget on this network").arg(spec)
            : to_qstring(plan.message);
    if (plan.min_feasible_budget) {
        const QString smallest = to_qstring(format_bytes(*plan.min_feasible_budget));
        if (!msg.contains(smallest) && !msg.contains(QString::number(*plan.min_feasible_budget)))
            msg += QStringLiteral(" (the smallest feasible budget is %1)").arg(smallest);
    }
    return msg;
}

}  // namespace

NetworkSummary summarize(const Graph& g, const QString& spec) {
    NetworkSummary s;
    s.spec = spec;
    s.name = to_qstring(g.name());
    s.nodes = g.num_nodes();
    s.narrowed = narrowed_node_count(g);
    s.params = g.num_params();
    s.param_bytes = g.param_bytes();
    s.input_bytes = g.input_bytes();
    s.activation_bytes = g.activation_bytes();
    s.forward_flops = g.forward_flops();
    SimulateOptions so;
    so.record_timeline = false;
    const Plan none = plan_with(g, CostModel{}, Spec{"none", {}});
    s.none_peak_bytes = simulate(g, none.schedule, CostModel{}, so).peak_bytes;
    s.floor_bytes = s.param_bytes + s.input_bytes;
    s.plan_only = g.plan_only();
    return s;
}

bool takes_budget(const Strategy& s) {
    const ParamSchema schema = s.schema();
    return std::any_of(schema.begin(), schema.end(), [](const ParamSpec& p) {
        return p.key == "budget" && p.type == ParamType::Bytes;
    });
}

std::vector<QString> instruction_texts(const Graph& g, const Schedule& s) {
    std::vector<QString> out;
    out.reserve(s.size());
    std::vector<uint8_t> computed(static_cast<size_t>(g.num_nodes()), 0);
    for (const Instruction& ins : s.code) {
        QString text = to_qstring(describe(g, ins));
        if (ins.kind == InstrKind::Compute) {
            auto& seen = computed[static_cast<size_t>(ins.target)];
            if (seen && text.startsWith(QLatin1String("compute")))
                text = QStringLiteral("re") + text;
            seen = 1;
        }
        out.push_back(std::move(text));
    }
    return out;
}

Timeline predicted_timeline(const Schedule& s, const Simulation& sim) {
    const size_t n = s.size();
    // Each instruction lasts what the simulator predicted for it (a recompute priced as it reads
    // its inputs, a Wait its stall).
    std::vector<double> start(n + 1, 0.0);
    for (size_t i = 0; i < n; ++i)
        start[i + 1] = start[i] + (i < sim.instruction_ms.size() ? sim.instruction_ms[i] : 0.0);
    // Events per instruction, to spread them inside it.
    std::vector<int> count(n, 0);
    for (const SimPoint& p : sim.timeline)
        if (p.instruction >= 0 && static_cast<size_t>(p.instruction) < n)
            ++count[static_cast<size_t>(p.instruction)];
    Timeline t;
    t.points.reserve(sim.timeline.size());
    t.instruction.reserve(sim.timeline.size());
    std::vector<int> seen(n, 0);
    bool after = false;
    for (const SimPoint& p : sim.timeline) {
        double x;
        if (p.instruction < 0 || static_cast<size_t>(p.instruction) >= n) {
            // Before the first instruction (set-up) or after the last (tear-down).
            x = after ? start[n] : 0.0;
        } else {
            const size_t i = static_cast<size_t>(p.instruction);
            const int k = ++seen[i];
            x = start[i] + (start[i + 1] - start[i]) * k / (count[i] + 1);
            after = true;
        }
        t.points.push_back({x, static_cast<double>(p.bytes)});
        t.instruction.push_back(p.instruction);
    }
    if (!sim.host_timeline.empty()) {
        t.host.push_back({0.0, 0.0});
        t.host_instruction.push_back(-1);
        for (const SimPoint& p : sim.host_timeline) {
            const size_t i = p.instruction < 0 ? n : static_cast<size_t>(p.instruction);
            t.host.push_back({start[std::min(i, n)], static_cast<double>(p.bytes)});
            t.host_instruction.push_back(p.instruction);
        }
    }
    return t;
}

std::shared_ptr<const ScheduleTrace> make_trace(std::shared_ptr<const Graph> graph,
                                                std::string spec, Plan plan, CostModel costs) {
    auto t = std::make_shared<ScheduleTrace>();
    t->sim = simulate(*graph, plan.schedule, costs);
    t->graph = std::move(graph);
    t->spec = std::move(spec);
    t->plan = std::move(plan);
    t->costs = std::move(costs);
    return t;
}

StrategyResult to_result(const Graph& g, const CostModel& costs, const Evaluation& e,
                         std::shared_ptr<const Graph> shared) {
    StrategyResult r;
    const Spec spec = parse_spec(e.strategy);
    r.name = to_qstring(spec.name);
    r.spec = to_qstring(e.strategy);
    r.budget = e.plan.budget;
    r.min_feasible_budget = e.plan.min_feasible_budget;
    r.solve_ms = e.plan.solve_ms;
    r.method = to_qstring(e.plan.method);
    r.gap = e.plan.gap;
    r.lower_bound_ms = e.plan.lower_bound_ms;
    r.cost_model = to_qstring(costs.kind());
    if (e.plan.status == PlanStatus::Infeasible) {
        r.status = QStringLiteral("infeasible");
        r.message = infeasible_message(r.spec, e.plan);
        return r;
    }
    r.status = QString::fromLatin1(plan_status_name(e.plan.status));
    // An executed bf16/f16 network ran as its f32 copy: show that copy's prediction beside the
    // measured figures (the planned dtype's bytes are what `plan` reports).
    const Simulation& sim = e.measured ? e.prediction_of_run() : e.predicted;
    r.planned = true;
    r.predicted_peak = sim.peak_bytes;
    r.predicted_activation_peak = sim.activation_peak_bytes();
    auto texts = std::make_shared<std::vector<QString>>(instruction_texts(g, e.plan.schedule));
    auto text_of = [&](int32_t i) {
        return i >= 0 && static_cast<size_t>(i) < texts->size() ? (*texts)[static_cast<size_t>(i)]
                                                                : QString();
    };
    r.predicted_peak_instruction = text_of(sim.peak_instruction);
    r.instructions = static_cast<long>(e.plan.schedule.size());
    r.computes = sim.computes;
    r.recomputes = sim.recomputes;
    r.predicted_forward_ms = sim.forward_ms;
    r.predicted_recompute_ms = sim.recompute_ms;
    r.predicted_backward_ms = sim.backward_ms;
    r.predicted_total_ms = sim.total_ms();
    r.predicted_host_peak = sim.host_peak_bytes;
    r.predicted_stall_ms = sim.stall_ms;
    r.predicted_timeline = std::make_shared<Timeline>(predicted_timeline(e.plan.schedule, sim));
    if (e.measured) {
        const Execution& m = *e.measured;
        r.executed = true;
        r.measured_peak = m.peak_bytes;
        r.measured_activation_peak = m.activation_peak_bytes();
        r.measured_peak_instruction = text_of(m.peak_instruction);
        r.forward_ms = m.forward_ms;
        r.recompute_ms = m.recompute_ms;
        r.backward_ms = m.backward_ms;
        r.total_ms = m.total_ms;
        r.measured_host_peak = m.host_peak_bytes;
        r.stall_ms = m.stall_ms;
        r.times = e.times;
        r.loss = m.loss;
        r.grads_equal = e.grads_bitwise_equal_to_none;
        r.max_grad_diff = e.max_abs_grad_diff_vs_none;
        auto t = std::make_shared<Timeline>();
        t->points.reserve(m.timeline.size());
        t->instruction.reserve(m.timeline.size());
        for (const TimelinePoint& p : m.timeline) {
            t->points.push_back({p.time_ms, static_cast<double>(p.bytes)});
            t->instruction.push_back(p.instruction);
        }
        r.measured_timeline = std::move(t);
    }
    r.instruction_text = std::move(texts);
    auto trace = std::make_shared<ScheduleTrace>();
    trace->graph = shared ? std::move(shared) : std::make_shared<const Graph>(g);
    trace->spec = e.strategy;
    trace->plan = e.plan;
    trace->costs = costs;
    trace->sim = e.predicted;  // the plan in the graph's own dtype, as trace->graph
    r.trace = std::move(trace);
    return r;
}

StrategyResult failure_result(const QString& spec, const QString& status, const QString& message) {
    StrategyResult r;
    r.spec = spec;
    r.name = spec.section(QLatin1Char(':'), 0, 0);
    r.status = status;
    r.message = message;
    return r;
}

namespace {

// What a cap failure leaves (engine/errors.h): the cap, the allocation that failed and the
// timeline measured up to it.
void attach_cap_failure(StrategyResult& r, const CapExceeded& e) {
    const CapExceeded::Details* d = e.details();
    if (!d) return;
    r.cap_failure = StrategyResult::CapFailure{d->cap, d->instruction, d->live, d->requested,
                                               to_qstring(d->what)};
    if (d->timeline.empty()) return;
    auto t = std::make_shared<Timeline>();
    t->points.reserve(d->timeline.size());
    t->instruction.reserve(d->timeline.size());
    for (const TimelinePoint& p : d->timeline) {
        t->points.push_back({p.time_ms, static_cast<double>(p.bytes)});
        t->instruction.push_back(p.instruction);
    }
    r.measured_timeline = std::move(t);
}

}  // namespace

StrategyResult evaluate_one(Evaluator& evaluator, const Graph& g, const QString& spec,
                            std::shared_ptr<const Graph> shared) {
    try {
        const Spec parsed = parse_spec(spec.toStdString());
        (void)ParamValues::resolve(find_strategy(parsed.name).schema(), parsed);
        return to_result(g, evaluator.costs(), evaluator.evaluate(parsed), std::move(shared));
    } catch (const Cancelled&) {
        throw;
    } catch (const NotApplicable& e) {  // e.g. sqrt-n on an abstract benchmark graph
        return failure_result(spec, QStringLiteral("not applicable"), to_qstring(e.what()));
    } catch (const CapExceeded& e) {
        StrategyResult r =
            failure_result(spec, QStringLiteral("cap exceeded"), to_qstring(e.what()));
        attach_cap_failure(r, e);
        return r;
    } catch (const std::bad_alloc&) {
        return failure_result(spec, QStringLiteral("error"),
                              QStringLiteral("out of memory; try a smaller network or a strategy "
                                             "with a lower peak"));
    } catch (const std::exception& e) {
        return failure_result(spec, QStringLiteral("error"), to_qstring(e.what()));
    }
}

StrategyResult compared_result(const Graph& g, const CostModel& costs, const ComparedStrategy& c,
                               const QString& spec, std::shared_ptr<const Graph> shared) {
    try {
        if (c.error) std::rethrow_exception(c.error);
        return to_result(g, costs, c.eval, std::move(shared));
    } catch (const NotApplicable& e) {
        return failure_result(spec, QStringLiteral("not applicable"), to_qstring(e.what()));
    } catch (const CapExceeded& e) {
        // The plan and its predicted timeline stay (they are what the cap was too small for);
        // the message names the instruction and the allocation that failed.
        StrategyResult r = c.eval.plan.schedule.size() > 0
                               ? to_result(g, costs, c.eval, std::move(shared))
                               : failure_result(spec, {}, {});
        r.status = QStringLiteral("cap exceeded");
        r.message = to_qstring(e.what());
        r.measured_timeline.reset();  // the run's, if any, is the partial one
        attach_cap_failure(r, e);
        return r;
    } catch (const std::bad_alloc&) {
        return failure_result(spec, QStringLiteral("error"),
                              QStringLiteral("out of memory; try a smaller network or a strategy "
                                             "with a lower peak"));
    } catch (const std::exception& e) {
        return failure_result(spec, QStringLiteral("error"), to_qstring(e.what()));
    }
}

RunSummary measure_all(Evaluator& evaluator, const Graph& g, const QStringList& specs,
                       std::shared_ptr<const Graph> shared, const StepListener& on_step,
                       bool keep_cancelled) {
    RunSummary summary;
    summary.results.resize(static_cast<size_t>(specs.size()));
    std::vector<Spec> parsed;
    std::vector<int> row_of;  // parsed index -> row; -1 for the appended baseline
    int none_at = -1;
    for (int i = 0; i < specs.size(); ++i) {
        try {
            Spec s = parse_spec(specs[i].toStdString());
            (void)ParamValues::resolve(find_strategy(s.name).schema(), s);
            if (s.name == "none" && s.args.empty() && none_at < 0)
                none_at = static_cast<int>(parsed.size());
            parsed.push_back(std::move(s));
            row_of.push_back(i);
        } catch (const std::exception& e) {
            summary.results[static_cast<size_t>(i)] =
                failure_result(specs[i], QStringLiteral("error"), to_qstring(e.what()));
        }
    }
    if (none_at < 0) {
        none_at = static_cast<int>(parsed.size());
        parsed.push_back(Spec{"none", {}});
        row_of.push_back(-1);
    }
    const Comparison c = evaluator.compare(
        parsed, on_step ? StepListener([&](int round, size_t i) {
            const int row = row_of[i];
            on_step(round, row < 0 ? static_cast<size_t>(specs.size()) : static_cast<size_t>(row));
        })
                        : StepListener());
    if (c.cancelled && !keep_cancelled) throw Cancelled();
    summary.cancelled = c.cancelled;
    for (size_t i = 0; i < parsed.size(); ++i) {
        const ComparedStrategy& cs = c.strategies[i];
        if (static_cast<int>(i) == none_at && !cs.error && cs.eval.measured && cs.eval.times) {
            summary.baseline_total_ms = cs.eval.measured->total_ms;
            summary.baseline_total = cs.eval.times->total;
        }
        if (row_of[i] < 0) continue;
        StrategyResult& r = summary.results[static_cast<size_t>(row_of[i])];
        r = compared_result(g, evaluator.costs(), cs, specs[row_of[i]], shared);
        if (c.cancelled && !cs.error && r.planned && !r.executed && r.message.isEmpty())
            r.message = QStringLiteral(
                "No timing: the run was cancelled before this strategy's first timed repeat; "
                "the figures are the plan's. Run again to measure it.");
    }
    return summary;
}

QStringList split_strategy_list(const QString& text) {
    auto continues = [](const QString& piece) {
        const auto eq = piece.indexOf(QLatin1Char('='));
        const auto colon = piece.indexOf(QLatin1Char(':'));
        return eq >= 0 && (colon < 0 || colon > eq);
    };
    QStringList specs;
    for (const QString& group : text.split(QLatin1Char(';'))) {
        bool fresh = true;
        for (QString piece : group.split(QLatin1Char(','))) {
            piece = piece.trimmed();
            if (piece.isEmpty()) continue;
            if (!fresh && !specs.isEmpty() && continues(piece))
                specs.back() += QLatin1Char(',') + piece;
            else
                specs.push_back(piece);
            fresh = false;
        }
    }
    return specs;
}

RunSummary evaluate_all(const RunRequest& request, bool execute, const std::atomic<bool>* cancel) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto shared = std::make_shared<const Graph>(load_network(request.network.toStdString()));
    const Graph& g = *shared;
    EvaluateOptions eo;
    eo.threads = request.threads;
    eo.cap = request.cap;
    eo.device = request.device.toStdString();
    eo.link = link_of(request.link_gbps);
    // A plan-only network (an abstract benchmark graph) has no kernels: its strategies are
    // planned and simulated only, whatever was asked.
    execute = execute && !g.plan_only();
    eo.execute = execute;
    eo.cancel = cancel;
    eo.repeat = request.repeats;
    Evaluator evaluator(g, request.network.toStdString(), eo);
    if (execute) {
        RunSummary summary = measure_all(evaluator, g, request.strategies, shared);
        summary.wall_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        return summary;
    }
    RunSummary summary;
    for (const QString& spec : request.strategies)
        summary.results.push_back(evaluate_one(evaluator, g, spec, shared));
    summary.wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return summary;
}

bool in_duration_units(const std::vector<StrategyResult>& results) {
    return std::any_of(results.begin(), results.end(), [](const StrategyResult& r) {
        return r.trace && r.trace->graph && r.trace->graph->plan_only();
    });
}

}  // namespace rl::ui
