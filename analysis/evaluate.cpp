#include "analysis/evaluate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/units.h"

namespace rl {

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

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
    if (opt_.execute) {
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
        costs_ = CostModel::profiled(g, *backend_);
        data_ = RunData::seeded(g, opt_.inputs);
    } else {
        costs_ = CostModel::analytic(g, DeviceRates::measure_cpu());
    }
}

Evaluation Evaluator::evaluate(const Spec& strategy) {
    Evaluation ev;
    ev.network = network_spec_;
    ev.strategy = format_spec(strategy);
    ev.plan = plan_with(g_, costs_, strategy);
    if (ev.plan.status == PlanStatus::Infeasible) return ev;
    ev.predicted = simulate(g_, ev.plan.schedule, costs_);
    if (!opt_.execute) return ev;

    if (ev.predicted.peak_bytes > available_memory())
        throw Error("strategy '" + ev.strategy + "' needs a peak of " +
                    format_bytes(ev.predicted.peak_bytes) + " (" +
                    std::to_string(ev.predicted.peak_bytes) + " bytes) but only " +
                    format_bytes(available_memory()) +
                    " of memory is available; use smaller sizes or a strategy with a lower peak");

    Backend& backend = *backend_;
    if (!reference_grads_) {
        const Plan none = plan_with(g_, costs_, Spec{"none", {}});
        ExecuteOptions ro;
        ro.record_timeline = false;
        ro.cancel = opt_.cancel;
        reference_grads_ = execute(g_, none.schedule, backend, data_, ro).param_grads;
    }
    ExecuteOptions eo;
    eo.cap = opt_.cap;
    eo.observer = opt_.observer;
    eo.cancel = opt_.cancel;
    std::vector<double> fwd, rec, bwd, tot, cpu;
    for (int r = 0; r < opt_.repeat; ++r) {
        eo.keep_gradients = r == 0;
        eo.record_timeline = r == 0;
        if (r == 0) backend.reset_device_memory_peak();
        Execution e = execute(g_, ev.plan.schedule, backend, data_, eo);
        if (r == 0) ev.device_memory = backend.device_memory();
        fwd.push_back(e.forward_ms);
        rec.push_back(e.recompute_ms);
        bwd.push_back(e.backward_ms);
        tot.push_back(e.total_ms);
        cpu.push_back(e.cpu_ms);
        if (r == 0) ev.measured = std::move(e);
    }
    Execution& m = *ev.measured;
    m.forward_ms = median(fwd);
    m.recompute_ms = median(rec);
    m.backward_ms = median(bwd);
    m.total_ms = median(tot);
    m.cpu_ms = median(cpu);

    bool equal = true;
    double diff = 0;
    for (size_t p = 0; p < m.param_grads.size(); ++p) {
        const auto& a = m.param_grads[p];
        const auto& b = (*reference_grads_)[p];
        if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) != 0)
            equal = false;
        for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
            diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
    }
    ev.grads_bitwise_equal_to_none = equal;
    ev.max_abs_grad_diff_vs_none = diff;
    return ev;
}

}  // namespace rl
