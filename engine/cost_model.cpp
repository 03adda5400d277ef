#include "engine/cost_model.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>

#include "engine/backend.h"
#include "engine/cancel.h"
#include "engine/errors.h"
#include "engine/gemm.h"
#include "engine/liveness.h"
#include "engine/ops/op.h"
#include "engine/rng.h"

namespace rl {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

DeviceRates measure_now() {
    DeviceRates r;
    {  // GEMM rate: best of several 512³ products (the shape class of our linear layers), on
       // the library the kernels use (engine/gemm.h)
        constexpr int n = 512;
        std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
        double best = 1e30;
        for (int rep = 0; rep < 5; ++rep) {
            const auto t0 = Clock::now();
            sgemm(false, false, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
            best = std::min(best, ms_since(t0));
        }
        r.gflops = 2.0 * n * n * n / (best * 1e6);
    }
    {  // bandwidth: best of several 32 MiB copies (read + write)
        constexpr size_t bytes = size_t{32} << 20;
        std::vector<char> src(bytes, 1), dst(bytes, 0);
        double best = 1e30;
        for (int rep = 0; rep < 5; ++rep) {
            const auto t0 = Clock::now();
            std::memcpy(dst.data(), src.data(), bytes);
            best = std::min(best, ms_since(t0));
        }
        r.gbps = 2.0 * static_cast<double>(bytes) / (best * 1e6);
    }
    r.launch_us = 1.0;
    return r;
}

}  // namespace

DeviceRates DeviceRates::measure_cpu() {
    static std::mutex mu;
    static std::map<int, DeviceRates> cache;
    std::lock_guard<std::mutex> lock(mu);
    const int threads = cpu_threads();
    auto it = cache.find(threads);
    if (it == cache.end()) it = cache.emplace(threads, measure_now()).first;
    return it->second;
}

CostModel CostModel::from_times(std::string kind, std::vector<double> forward_ms,
                                std::vector<double> backward_ms, std::vector<double> recompute_ms) {
    if (forward_ms.size() != backward_ms.size())
        throw Error("cost model: " + std::to_string(forward_ms.size()) + " forward times but " +
                    std::to_string(backward_ms.size()) + " backward times");
    if (!recompute_ms.empty() && recompute_ms.size() != forward_ms.size())
        throw Error("cost model: " + std::to_string(forward_ms.size()) + " forward times but " +
                    std::to_string(recompute_ms.size()) + " recompute times");
    CostModel m;
    m.kind_ = std::move(kind);
    m.fwd_ = std::move(forward_ms);
    m.bwd_ = std::move(backward_ms);
    m.rec_ = std::move(recompute_ms);
    return m;
}

CostModel CostModel::analytic(const Graph& g, const DeviceRates& rates) {
    CostModel m;
    m.kind_ = "analytic";
    m.fwd_.resize(static_cast<size_t>(g.num_nodes()));
    m.bwd_.resize(static_cast<size_t>(g.num_nodes()));
    const double flops_per_ms = rates.gflops * 1e6, bytes_per_ms = rates.gbps * 1e6;
    const double launch_ms = rates.launch_us * 1e-3;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const auto i = static_cast<size_t>(n);
        if (g.node(n).op == OpKind::Opaque) {
            // An abstract graph's node: its duration, in the file's own units (Moccasin's are
            // abstract, Checkmate's are its cost_cpu), read as milliseconds; nothing else to run.
            m.kind_ = "durations";
            m.fwd_[i] = g.node(n).attrs.get_float("duration", 0);
            m.bwd_[i] = 0;
            continue;
        }
        const OpCost c = op_def(g.node(n).op).cost(g, g.node(n));
        m.fwd_[i] = std::max(c.fwd_flops / flops_per_ms, c.fwd_bytes / bytes_per_ms) + launch_ms;
        m.bwd_[i] = std::max(c.bwd_flops / flops_per_ms, c.bwd_bytes / bytes_per_ms) + launch_ms;
    }
    return m;
}

namespace {

// A stand-alone run of one node: its inputs, parameters and output, filled with valid data.
struct NodeBench {
    NodeBench(const Graph& g, NodeId id, Backend& b, const LivenessTables& t) : g_(g), b_(b) {
        const Node& n = g.node(id);
        SplitMix64 rng(0xc057 + static_cast<uint64_t>(id));
        auto fill = [&](DType dt, uint64_t bytes, int64_t classes) {
            std::vector<float> host(bytes / 4);
            if (dt == DType::F32) {
                for (float& x : host) x = rng.symmetric();
            } else {
                auto* l = reinterpret_cast<int32_t*>(host.data());
                for (size_t k = 0; k < host.size(); ++k)
                    l[k] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
            }
            void* p = own(bytes);
            b.copy_from_host(p, host.data(), bytes);
            return p;
        };
        for (ValueId in : n.inputs) {
            const Value& v = g.value(in);
            // Labels of a derived (non-input) i32 value do not occur; inputs carry their classes.
            inputs.push_back(fill(v.dtype, v.bytes, std::max<int64_t>(v.label_classes, 1)));
            grad_in.push_back(v.requires_grad ? static_cast<float*>(own(v.bytes)) : nullptr);
        }
        for (ParamId p : n.params) {
            params.push_back(static_cast<float*>(fill(DType::F32, g.param(p).bytes, 1)));
            grad_params.push_back(static_cast<float*>(own(g.param(p).bytes)));
        }
        const Value& out = g.value(n.output);
        output = own(out.bytes);
        grad_out = static_cast<float*>(fill(DType::F32, out.bytes, 1));
        const auto ni = static_cast<size_t>(id);
        const uint64_t ws = std::max(t.fwd_workspace[ni], t.bwd_workspace[ni]);
        workspace = ws ? own(ws) : nullptr;
        accumulate.assign(n.inputs.size(), 0);
        res_inputs.resize(n.inputs.size());
        for (size_t k = 0; k < n.inputs.size(); ++k)
            res_inputs[k] = t.reads_input(id, k) ? inputs[k] : nullptr;
        res_output = t.residual_output[ni] ? output : nullptr;
    }
    ~NodeBench() {
        for (void* p : owned_) b_.release(p);
    }
    void* own(uint64_t bytes) {
        void* p = b_.allocate(bytes);
        owned_.push_back(p);
        return p;
    }

    std::vector<const void*> inputs, res_inputs;
    std::vector<float*> grad_in, params, grad_params;
    std::vector<unsigned char> accumulate;
    void *output = nullptr, *workspace = nullptr;
    const void* res_output = nullptr;
    float* grad_out = nullptr;

  private:
    const Graph& g_;
    Backend& b_;
    std::vector<void*> owned_;
};

// Nodes with the same op, attributes and input shapes cost the same: time each kind once.
std::string signature(const Graph& g, const Node& n) {
    std::string s(op_name(n.op));
    for (ValueId in : n.inputs) s += format_type(g.value(in).dtype, g.value(in).shape);
    for (const auto& [k, v] : n.attrs.items()) {
        s += ";" + k + "=";
        if (auto* i = std::get_if<int64_t>(&v))
            s += std::to_string(*i);
        else if (auto* d = std::get_if<double>(&v))
            s += std::to_string(*d);
        else if (auto* str = std::get_if<std::string>(&v))
            s += *str;
        else
            for (int64_t x : std::get<std::vector<int64_t>>(v)) s += std::to_string(x) + ",";
    }
    s += g.value(n.output).requires_grad ? "+g" : "";
    for (ValueId in : n.inputs) s += g.value(in).requires_grad ? "1" : "0";
    return s;
}

}  // namespace

uint64_t last_level_cache_bytes() {
    static const uint64_t bytes = [] {
        uint64_t best = 0;
        int best_level = 0;
        for (int i = 0; i < 8; ++i) {
            const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
            std::ifstream level(dir + "/level"), type(dir + "/type"), size(dir + "/size");
            int lv = 0;
            std::string t, sz;
            if (!(level >> lv) || !(type >> t) || !(size >> sz) || t == "Instruction") continue;
            uint64_t v = 0;
            size_t k = 0;
            while (k < sz.size() && sz[k] >= '0' && sz[k] <= '9') v = v * 10 + (sz[k++] - '0');
            const char unit = k < sz.size() ? sz[k] : 'B';
            v <<= unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
            if (lv > best_level || (lv == best_level && v > best)) best = v, best_level = lv;
        }
        return best ? best : uint64_t{32} << 20;
    }();
    return bytes;
}

bool parameters_leave_cache(const Graph& g, uint64_t cache_bytes) {
    uint64_t params = 0;
    for (ParamId p = 0; p < g.num_params(); ++p) params += g.param(p).bytes;
    return 2 * params > cache_bytes / 2;
}

CostModel CostModel::profiled(const Graph& g, Backend& backend, int repeats, uint64_t cache_bytes) {
    if (g.plan_only())
        throw Error(std::string("cannot profile network '") + g.name() +
                    "': " + kPlanOnlyNoKernels);
    // The kernels compute in float32 (executor.cpp): a network planned in bf16 or f16 is timed
    // as its f32 copy, whose nodes are these. Its own, narrower, byte counts had sized the
    // buffers the kernels wrote f32 into (bench_roofline on a bf16 GPT corrupted the heap).
    if (g.float_dtype() != DType::F32)
        return profiled(g.with_float_dtype(DType::F32), backend, repeats, cache_bytes);
    CostModel m;
    m.kind_ = "profiled";
    const bool cold_parameters = parameters_leave_cache(g, cache_bytes);
    m.fwd_.resize(static_cast<size_t>(g.num_nodes()));
    m.bwd_.resize(static_cast<size_t>(g.num_nodes()));
    const LivenessTables t(g);
    std::map<std::string, std::tuple<double, double, double>> seen;
    if (cold_parameters) m.rec_.resize(static_cast<size_t>(g.num_nodes()));
    repeats = std::max(repeats, 1);
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
        throw_if_cancelled();
        const Node& n = g.node(id);
        const auto i = static_cast<size_t>(id);
        const std::string sig = signature(g, n);
        if (auto it = seen.find(sig); it != seen.end()) {
            double rec = 0;
            std::tie(m.fwd_[i], m.bwd_[i], rec) = it->second;
            if (!m.rec_.empty()) m.rec_[i] = rec;
            continue;
        }
        NodeBench nb(g, id, backend, t);
        // As a step finds them: the parameters, and backward their gradients and the values
        // the forward kept for it, in memory (the output gradient comes hot from the node that
        // made it, the forward's inputs from theirs).
        auto cold = [&](bool backward) {
            if (!cold_parameters) return;
            for (size_t k = 0; k < n.params.size(); ++k) {
                const uint64_t bytes = g.param(n.params[k]).bytes;
                backend.evict_from_caches(nb.params[k], bytes);
                if (backward) backend.evict_from_caches(nb.grad_params[k], bytes);
            }
            if (!backward) return;
            for (size_t k = 0; k < n.inputs.size(); ++k)
                if (nb.res_inputs[k])
                    backend.evict_from_caches(nb.res_inputs[k], g.value(n.inputs[k]).bytes);
            if (nb.res_output) backend.evict_from_caches(nb.res_output, g.value(n.output).bytes);
        };
        auto forward_ms = [&] {
            const auto t0 = Clock::now();
            backend.forward(
                ForwardCall{g, n, nb.inputs.data(), nb.params.data(), nb.output, nb.workspace});
            backend.synchronize();
            return ms_since(t0);
        };
        std::vector<double> fwd, bwd, rec;
        for (int r = 0; r <= repeats; ++r) {  // the first run warms caches and is dropped
            cold(false);
            double ms = forward_ms();
            if (r) fwd.push_back(ms);
            if (cold_parameters) {
                // A recompute reads inputs kept since the forward: from memory too.
                cold(false);
                for (size_t k = 0; k < n.inputs.size(); ++k)
                    backend.evict_from_caches(nb.inputs[k], g.value(n.inputs[k]).bytes);
                ms = forward_ms();
                if (r) rec.push_back(ms);
            }
            if (!t.needs_backward[i]) continue;
            cold(true);
            const auto t0 = Clock::now();
            backend.backward(BackwardCall{g, n, nb.res_inputs.data(), nb.res_output,
                                          nb.params.data(), nb.grad_out, nb.grad_in.data(),
                                          reinterpret_cast<const bool*>(nb.accumulate.data()),
                                          nb.grad_params.data(), nb.workspace});
            backend.synchronize();
            if (r) bwd.push_back(ms_since(t0));
        }
        m.fwd_[i] = median(fwd);
        m.bwd_[i] = median(bwd);
        if (!m.rec_.empty()) m.rec_[i] = median(rec);
        seen.emplace(sig, std::make_tuple(m.fwd_[i], m.bwd_[i], m.rec_.empty() ? 0 : m.rec_[i]));
    }
    return m;
}

std::vector<double> CostModel::forward_costs_for(const Graph& g) const {
    const bool covers = size() == static_cast<size_t>(g.num_nodes());
    const CostModel fallback = covers ? CostModel{} : analytic(g, DeviceRates{});
    const CostModel& c = covers ? *this : fallback;
    std::vector<double> out(static_cast<size_t>(g.num_nodes()));
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        out[static_cast<size_t>(n)] = std::max(0.0, c.forward_ms(n));
    return out;
}

double CostModel::total_forward_ms() const {
    return std::accumulate(fwd_.begin(), fwd_.end(), 0.0);
}

}  // namespace rl
