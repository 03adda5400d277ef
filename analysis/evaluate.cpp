#include "analysis/evaluate.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>

#include "engine/backend.h"
#include "engine/cancel.h"
#include "engine/errors.h"
#include "engine/units.h"

namespace rl {

namespace {

// What a new allocation can get without swapping: MemAvailable (free memory plus reclaimable
// caches), else free physical pages.
uint64_t available_memory() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key, unit;
    uint64_t kib = 0;
    while (meminfo >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return UINT64_MAX;
    return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

}  // namespace

Evaluator::Evaluator(const Graph& g, std::string network_spec, EvaluateOptions opt)
    : g_(g), network_spec_(std::move(network_spec)), opt_(opt) {
    set_cpu_threads(opt_.threads);
    opt_.repeat = std::max(opt_.repeat, 1);
    if (opt_.execute && g_.plan_only())
        throw Error("network '" + network_spec_ + "': " + kPlanOnlyNoKernels);
    if (opt_.execute && g_.float_dtype() != DType::F32) f32_copy_ = g_.with_float_dtype(DType::F32);
    if (opt_.execute) {
        const Graph& g = executed();
        // Refuse before allocating anything. Every strategy's gradients are checked against a
        // run of `none`, so none's peak must fit, plus the host copies of parameters, inputs and
        // two sets of gradients (graph sizes are bounded by 2^62 bytes in Graph::finalize).
        SimulateOptions so;
        so.record_timeline = false;
        const Plan none = plan_with(g, CostModel{}, Spec{"none", {}});
        const uint64_t none_peak = simulate(g, none.schedule, CostModel{}, so).peak_bytes;
        const uint64_t host = 3 * g.param_bytes() + g.input_bytes();
        const uint64_t need = none_peak + host, available = available_memory();
        if (need > available)
            throw Error(
                "network '" + network_spec_ + "' needs about " + format_bytes(need) + " (" +
                std::to_string(need) + " bytes: a predicted peak of " + format_bytes(none_peak) +
                " under 'none', the gradient reference of every run, plus " + format_bytes(host) +
                " of host copies of parameters, inputs and gradients), but only " +
                format_bytes(available) +
                " of memory is available; use smaller sizes, or `rematlab-cli plan` to "
                "inspect it without running it");
    }
    if (opt_.execute) {
        backend_ = make_backend(opt_.device, opt_.threads);
        const CancelScope scope(opt_.cancel);  // profiling polls it between ops
        costs_ = CostModel::profiled(executed(), *backend_);
        data_ = RunData::seeded(executed(), opt_.inputs);
    } else {
        costs_ =
            CostModel::analytic(g, opt_.nominal_rates ? DeviceRates{} : DeviceRates::measure_cpu());
    }
    if (opt_.link) costs_.set_transfer(*opt_.link);
}

void Evaluator::ensure_reference() {
    if (reference_) return;
    const Graph& g = executed();
    const Plan none = plan_with(g, costs_, Spec{"none", {}});
    Reference r;
    size_t total = 0;
    for (ParamId p = 0; p < g.num_params(); ++p) {
        r.at.push_back(total);
        r.count.push_back(g.param(p).bytes / sizeof(float));
        total += r.count.back();
    }
    r.values = HugeFloats(total);
    r.seen.assign(r.at.size(), 0);
    ExecuteOptions ro;
    ro.record_timeline = false;
    ro.cancel = opt_.cancel;
    ro.keep_gradients = false;
    ro.on_gradient = [&](ParamId p, const float* v, size_t count) {
        const auto k = static_cast<size_t>(p);
        if (count != r.count[k])
            throw Error("the reference step gave parameter '" + g.param(p).name + "' " +
                        std::to_string(count) + " gradient values, expected " +
                        std::to_string(r.count[k]));
        std::copy(v, v + count, r.values.data() + r.at[k]);
        r.seen[k] = 1;
    };
    execute(g, none.schedule, *backend_, data_, ro);
    reference_ = std::move(r);
}

Execution Evaluator::forward_outputs(const Evaluation& ev, const std::vector<unsigned char>& keep) {
    if (!backend_) throw Error("forward_outputs: this evaluator does not execute (plan only)");
    if (ev.plan.status == PlanStatus::Infeasible)
        throw Error("forward_outputs: strategy '" + ev.strategy + "' has no plan to execute");
    ExecuteOptions eo;
    eo.cap = opt_.cap;
    eo.cancel = opt_.cancel;
    eo.record_timeline = false;
    eo.keep_gradients = true;
    eo.keep_outputs = keep;
    return execute(executed(), ev.plan.schedule, *backend_, data_, eo);
}

Execution Evaluator::run_step(Evaluation& ev, bool timed_first, bool warm_up) {
    ExecuteOptions eo;
    eo.cap = opt_.cap;
    eo.observer = opt_.observer;
    eo.cancel = opt_.cancel;
    // Every step's gradients are checked against none's as the step hands them over: only the
    // measured step that --dump-grads writes keeps a copy of them all.
    eo.keep_gradients = opt_.keep_measured_gradients;
    bool bitwise = true;
    double diff = ev.max_abs_grad_diff_vs_none;
    size_t seen = 0;
    eo.on_gradient = [&](ParamId p, const float* a, size_t count) {
        const auto k = static_cast<size_t>(p);
        seen += reference_->seen[k];
        const float* b = reference_->values.data() + reference_->at[k];
        const size_t n = reference_->seen[k] ? reference_->count[k] : 0;
        if (count != n || std::memcmp(a, b, count * sizeof(float)) != 0) bitwise = false;
        for (size_t i = 0; i < std::min(count, n); ++i)
            diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    };
    // The first timed step's timeline is the result's; the warm-up records one too (untimed, so
    // free), for a run over the cap fails there and carries the timeline up to the failure.
    eo.record_timeline = timed_first || warm_up;
    if (timed_first) backend_->reset_device_memory_peak();
    Execution e = execute(executed(), ev.plan.schedule, *backend_, data_, eo);
    if (timed_first) ev.device_memory = backend_->device_memory();
    const auto given =
        static_cast<size_t>(std::count(reference_->seen.begin(), reference_->seen.end(), char{1}));
    if (!bitwise || seen != given) ev.grads_bitwise_equal_to_none = false;
    ev.max_abs_grad_diff_vs_none = diff;
    return e;
}

Evaluation Evaluator::evaluate(const Spec& strategy) {
    Comparison c = compare({strategy});
    if (c.cancelled) throw Cancelled();
    if (c.strategies[0].error) std::rethrow_exception(c.strategies[0].error);
    return std::move(c.strategies[0].eval);
}

Comparison Evaluator::compare(const std::vector<Spec>& strategies, const StepListener& on_step) {
    Comparison c;
    const size_t n = strategies.size();
    c.strategies.resize(n);
    std::vector<bool> running(n, false);
    for (size_t i = 0; i < n; ++i) {
        c.strategies[i].eval.network = network_spec_;
        c.strategies[i].eval.strategy = format_spec(strategies[i]);
    }
    // Planning polls the flag too (between a portfolio's candidates, a DP's memory levels, around
    // a MILP solve): a cancel there ends the comparison before any step, with no rows.
    const CancelScope scope(opt_.cancel);
    for (size_t i = 0; i < n; ++i) {
        Evaluation& ev = c.strategies[i].eval;
        try {
            if (on_step) on_step(kPlanningRound, i);
            throw_if_cancelled();
            ev.plan = plan_with(g_, costs_, strategies[i]);
            if (ev.plan.status == PlanStatus::Infeasible) continue;
            ev.predicted = simulate(g_, ev.plan.schedule, costs_);
            if (!opt_.execute) continue;
            if (f32_copy_) ev.predicted_executed = simulate(*f32_copy_, ev.plan.schedule, costs_);
            const uint64_t peak = ev.prediction_of_run().peak_bytes;
            if (peak > available_memory())
                throw Error("strategy '" + ev.strategy + "' needs a peak of " + format_bytes(peak) +
                            " (" + std::to_string(peak) + " bytes) but only " +
                            format_bytes(available_memory()) +
                            " of memory is available; use smaller sizes or a strategy with a "
                            "lower peak");
            ev.grads_bitwise_equal_to_none = true;  // until a step differs
            running[i] = true;
        } catch (const Error&) {
            c.strategies[i].error = std::current_exception();
        } catch (const Cancelled&) {
            c.cancelled = true;
            return c;
        }
    }
    if (std::none_of(running.begin(), running.end(), [](bool r) { return r; })) return c;

    // Per strategy, per timed round: forward, recompute, backward, total, cpu.
    std::vector<std::vector<std::array<double, 5>>> samples(n);
    std::vector<uint64_t> odd_peak(n, 0);
    std::vector<uint64_t> odd_host_peak(
        n, 0);  // the host pool's (offload)  // a measured peak that differs from the prediction
    try {
        ensure_reference();
        for (int round = 0; round <= opt_.repeat; ++round) {
            for (size_t i = 0; i < n; ++i) {
                if (!running[i]) continue;
                throw_if_cancelled();  // the scope opened for planning
                if (on_step) on_step(round, i);
                c.order.emplace_back(round, i);
                Evaluation& ev = c.strategies[i].eval;
                try {
                    Execution e = run_step(ev, round == 1, round == 0);
                    if (e.peak_bytes != ev.prediction_of_run().peak_bytes)
                        odd_peak[i] = e.peak_bytes;
                    if (e.host_peak_bytes != ev.prediction_of_run().host_peak_bytes)
                        odd_host_peak[i] = e.host_peak_bytes + 1;  // +1: 0 is a measurement
                    if (round == 0) continue;  // the warm-up: checked, not timed
                    samples[i].push_back(
                        {e.forward_ms, e.recompute_ms, e.backward_ms, e.total_ms, e.cpu_ms});
                    if (round == 1) ev.measured = std::move(e);
                } catch (const Error&) {
                    c.strategies[i].error = std::current_exception();
                    running[i] = false;
                    ev.measured.reset();
                }
            }
            if (round > 0) c.rounds_done = round;
        }
    } catch (const Cancelled&) {
        c.cancelled = true;
    }

    for (size_t i = 0; i < n; ++i) {
        Evaluation& ev = c.strategies[i].eval;
        // Every strategy is compared over the same rounds: a round cut short by a cancellation
        // counts for none, unless asked to keep each strategy's own completed steps.
        const size_t rounds = c.cancelled && opt_.keep_partial_rounds
                                  ? samples[i].size()
                                  : static_cast<size_t>(c.rounds_done);
        if (!running[i] || rounds == 0 || !ev.measured) {
            ev.measured.reset();
            continue;
        }
        std::array<std::vector<double>, 5> per_time;
        for (size_t r = 0; r < rounds; ++r)
            for (size_t t = 0; t < 5; ++t) per_time[t].push_back(samples[i][r][t]);
        MeasuredTimes times{spread_of(per_time[0]), spread_of(per_time[1]), spread_of(per_time[2]),
                            spread_of(per_time[3]), spread_of(per_time[4])};
        Execution& m = *ev.measured;
        m.forward_ms = times.forward.median;
        m.recompute_ms = times.recompute.median;
        m.backward_ms = times.backward.median;
        m.total_ms = times.total.median;
        m.cpu_ms = times.cpu.median;
        if (odd_peak[i]) m.peak_bytes = odd_peak[i];  // shows the mismatch (a bug) in reports
        if (odd_host_peak[i]) m.host_peak_bytes = odd_host_peak[i] - 1;
        ev.times = times;
    }
    return c;
}

}  // namespace rl
