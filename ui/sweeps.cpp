#include "ui/sweeps.h"

#include <algorithm>
#include <chrono>
#include <new>

#include "analysis/sweep.h"
#include "engine/errors.h"
#include "engine/simulator.h"
#include "ui/palette.h"

namespace rl::ui {

namespace {

void check(const std::atomic<bool>* cancel) {
    if (cancel && cancel->load()) throw Cancelled();
}

}  // namespace

std::vector<uint64_t> sweep_budgets(const Graph& g, const CostModel& costs, const Spec& base,
                                    int points) {
    const Plan tiny = plan_with(g, costs, with_budget(base, 1));
    uint64_t lo = 1;
    if (tiny.status == PlanStatus::Infeasible) {
        if (!tiny.min_feasible_budget) return {};
        lo = *tiny.min_feasible_budget;
    }
    SimulateOptions so;
    so.record_timeline = false;
    const uint64_t none_peak =
        simulate(g, plan_with(g, costs, Spec{"none", {}}).schedule, costs, so).peak_bytes;
    const uint64_t hi = std::max(lo, none_peak);
    const int n = std::max(1, points);
    std::vector<uint64_t> out;
    for (int i = 0; i < n; ++i) {
        const double f = n == 1 ? 1.0 : static_cast<double>(i) / (n - 1);
        out.push_back(lo + static_cast<uint64_t>(f * static_cast<double>(hi - lo)));
    }
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<Spec> sweep_points(const Graph& g, const CostModel& costs, const Spec& base,
                               int points) {
    SweepOptions opt;
    opt.budgets = std::max(1, points);
    // A budgeted strategy is swept over budgets even when it has a range of its own (sqrt-n's
    // segment counts): the budget is what the window's slider and the frontier speak in.
    if (is_budgeted(find_strategy(base.name)) && !has_arg(base, "budget")) {
        opt.budget_list = sweep_budgets(g, costs, base, points);
        if (opt.budget_list.empty()) return {base};
    }
    return sweep_specs(g, costs, base, opt, nullptr);
}

std::optional<QString> frontier_strategy() {
    for (const Strategy* s : strategies())
        if (s->name() == "optimal" && is_budgeted(*s)) return QStringLiteral("optimal");
    return std::nullopt;
}

SweepSummary run_sweeps(const Graph& g, Evaluator& evaluator, const SweepRequest& request,
                        const SweepProgress& progress, const std::atomic<bool>* cancel) {
    const auto t0 = std::chrono::steady_clock::now();
    const CostModel& costs = evaluator.costs();

    struct Job {
        SweepCurve curve;
        std::vector<Spec> specs;
        bool execute = false;
        QString error;
        int copy_of = -1;  // the frontier from the samples of this (ticked optimal) curve
    };
    std::vector<Job> jobs;
    std::vector<QString> names;
    for (const QString& text : request.strategies) {
        Job job;
        job.curve.spec = text;
        job.execute = request.execute;
        try {
            const Spec base = parse_spec(text.toStdString());
            job.curve.name = QString::fromStdString(base.name);
            (void)ParamValues::resolve(find_strategy(base.name).schema(), base);
            job.specs = sweep_points(g, costs, base, request.points);
        } catch (const std::exception& e) {
            job.error = QString::fromStdString(e.what());
            if (job.curve.name.isEmpty()) job.curve.name = text.section(QLatin1Char(':'), 0, 0);
        }
        names.push_back(job.curve.name);
        jobs.push_back(std::move(job));
    }
    const std::vector<int> instances = instance_numbers(names);
    for (size_t i = 0; i < jobs.size(); ++i) jobs[i].curve.instance = instances[i];
    if (request.frontier) {
        if (const auto name = frontier_strategy()) {
            Job job;
            job.curve.spec = request.frontier_spec.isEmpty() ? *name : request.frontier_spec;
            job.curve.name = *name;
            job.curve.frontier = true;
            for (size_t i = 0; i < jobs.size(); ++i)
                if (jobs[i].curve.spec == job.curve.spec && jobs[i].error.isEmpty())
                    job.copy_of = static_cast<int>(i);
            // When it is ticked, it is swept as a curve of its own: the same points, solved once.
            if (job.copy_of < 0) {
                try {
                    const Spec base = parse_spec(job.curve.spec.toStdString());
                    job.specs = sweep_points(g, costs, base, request.points);
                } catch (const std::exception& e) {
                    job.error = QString::fromStdString(e.what());
                }
            }
            jobs.push_back(std::move(job));
        }
    }

    int total = 0, done = 0;
    for (const Job& j : jobs) total += static_cast<int>(j.specs.size());
    SimulateOptions so;
    so.record_timeline = false;
    SweepSummary out;
    for (Job& job : jobs) {
        int infeasible = 0;
        QString failure = job.error;
        for (const Spec& spec : job.specs) {
            check(cancel);
            const QString text = QString::fromStdString(format_spec(spec));
            if (progress) progress(done, total, text);
            ++done;
            try {
                SweepSample sample;
                sample.spec = text;
                if (job.execute) {
                    const Evaluation e = evaluator.evaluate(spec);
                    if (e.plan.status == PlanStatus::Infeasible) {
                        ++infeasible;
                        continue;
                    }
                    sample.predicted = {e.predicted.recompute_ms,
                                        static_cast<double>(e.predicted.peak_bytes)};
                    if (e.measured)
                        sample.measured = XY{e.measured->recompute_ms,
                                             static_cast<double>(e.measured->peak_bytes)};
                } else {
                    const Plan plan = plan_with(g, costs, spec);
                    if (plan.status == PlanStatus::Infeasible) {
                        ++infeasible;
                        continue;
                    }
                    const Simulation sim = simulate(g, plan.schedule, costs, so);
                    sample.predicted = {sim.recompute_ms, static_cast<double>(sim.peak_bytes)};
                }
                job.curve.samples.push_back(std::move(sample));
            } catch (const Cancelled&) {
                throw;
            } catch (const std::bad_alloc&) {
                failure = QStringLiteral("%1: out of memory").arg(text);
            } catch (const std::exception& e) {
                failure = QStringLiteral("%1: %2").arg(text, QString::fromStdString(e.what()));
            }
        }
        QStringList why;
        if (infeasible)
            why << QStringLiteral("%1 of %2 points infeasible")
                       .arg(infeasible)
                       .arg(job.specs.size());
        if (!failure.isEmpty()) why << failure;
        job.curve.message = why.join(QStringLiteral("; "));
        if (job.copy_of >= 0) {
            job.curve.samples = out.curves[static_cast<size_t>(job.copy_of)].samples;
            job.curve.message = out.curves[static_cast<size_t>(job.copy_of)].message;
        }
        auto& s = job.curve.samples;
        std::stable_sort(s.begin(), s.end(), [](const SweepSample& a, const SweepSample& b) {
            return a.predicted.x < b.predicted.x;
        });
        if (job.curve.frontier) {
            // The lower envelope: drop the points another one dominates.
            std::vector<XY> pts;
            for (const SweepSample& p : s) pts.push_back(p.predicted);
            const std::vector<XY> env = lower_envelope(pts);
            std::erase_if(s, [&](const SweepSample& p) {
                return std::find(env.begin(), env.end(), p.predicted) == env.end();
            });
            // Equal points keep one sample.
            s.erase(std::unique(s.begin(), s.end(),
                                [](const SweepSample& a, const SweepSample& b) {
                                    return a.predicted == b.predicted;
                                }),
                    s.end());
        }
        out.curves.push_back(std::move(job.curve));
    }
    check(cancel);
    out.wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

}  // namespace rl::ui
