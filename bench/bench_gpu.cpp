// GPU benchmark: float GEMM throughput through the CUDA backend's matmul kernel, and
// whole training steps of presets under several strategies on the GPU, each with its predicted
// peak, its measured peak (tracking allocator), the CUDA driver's view, and whether its
// gradients are bitwise those of `none`. Plain timing, one JSON object per line on stdout
// (scripts/gpu-check reads them); a line {"skipped": reason} where no GPU can be used.
//
//   bench_gpu [--gemm N] [--networks "a;b"] [--strategies "none;sqrt-n;periodic"] [--repeat R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/rng.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= s.size()) {
        const size_t end = std::min(s.find(sep, pos), s.size());
        if (end > pos) out.push_back(s.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

// y [1, n, n] = a·b through the backend's matmul (cuBLAS SGEMM), timed on the host after a
// synchronize; FLOP/s = 2n³ / time.
nlohmann::json gemm_throughput(rl::Backend& b, int64_t n, int reps) {
    rl::Graph g("gemm", 1);
    const auto a = g.add_input("a", rl::DType::F32, rl::Shape{1, n, n});
    const auto bm = g.add_input("b", rl::DType::F32, rl::Shape{1, n, n});
    const auto node = g.add_node("mm", rl::OpKind::MatMul, {a, bm});
    const uint64_t bytes = static_cast<uint64_t>(n * n) * sizeof(float);
    std::vector<float> host(static_cast<size_t>(n * n));
    rl::SplitMix64 rng(7);
    for (float& x : host) x = rng.symmetric();
    void* da = b.allocate(bytes);
    void* db = b.allocate(bytes);
    void* dy = b.allocate(bytes);
    b.copy_from_host(da, host.data(), bytes);
    b.copy_from_host(db, host.data(), bytes);
    const void* ins[2] = {da, db};
    const rl::ForwardCall call{g, g.node(node), ins, nullptr, dy, nullptr};
    b.forward(call);  // warm-up (cuBLAS picks its kernel)
    b.synchronize();
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        b.forward(call);
        b.synchronize();
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    b.release(da);
    b.release(db);
    b.release(dy);
    const double t = median(ms);
    return {{"kind", "gemm"},
            {"n", n},
            {"ms", t},
            {"tflops", 2.0 * static_cast<double>(n) * n * n / (t * 1e-3) / 1e12}};
}

// One network's graph, seeded data and `none` gradients on the GPU, shared by its strategies.
struct Network {
    std::string spec;
    rl::Graph g;
    rl::RunData data;
    rl::CostModel costs;
    std::vector<std::vector<float>> reference;
    Network(rl::Backend& b, const std::string& s)
        : spec(s),
          g(rl::load_network(s)),
          data(rl::RunData::seeded(g)),
          costs(rl::CostModel::analytic(g, rl::DeviceRates{})) {
        const rl::Plan none = rl::plan_with(g, costs, rl::Spec{"none", {}});
        reference = rl::execute(g, none.schedule, b, data).param_grads;
    }
};

nlohmann::json step(rl::Backend& b, const Network& net, const std::string& strategy, int repeat) {
    nlohmann::json j{{"kind", "step"}, {"network", net.spec}, {"strategy", strategy}};
    try {
        const rl::Graph& g = net.g;
        const rl::RunData& data = net.data;
        const rl::CostModel& costs = net.costs;
        const auto& reference = net.reference;
        const rl::Plan plan = rl::plan_with(g, costs, rl::parse_spec(strategy));
        if (plan.status == rl::PlanStatus::Infeasible) {
            j["error"] = "infeasible: " + plan.message;
            return j;
        }
        rl::SimulateOptions so;
        so.record_timeline = false;
        const rl::Simulation sim = rl::simulate(g, plan.schedule, costs, so);

        rl::ExecuteOptions eo;
        eo.record_timeline = false;
        b.reset_device_memory_peak();
        const rl::Execution first = rl::execute(g, plan.schedule, b, data);  // also the warm-up
        const auto mem = b.device_memory();
        bool equal = reference.size() == first.param_grads.size();
        for (size_t p = 0; equal && p < reference.size(); ++p)
            equal = reference[p].size() == first.param_grads[p].size() &&
                    std::memcmp(reference[p].data(), first.param_grads[p].data(),
                                reference[p].size() * sizeof(float)) == 0;
        eo.keep_gradients = false;
        std::vector<double> total, device, recompute;
        for (int r = 0; r < repeat; ++r) {
            const rl::Execution e = rl::execute(g, plan.schedule, b, data, eo);
            total.push_back(e.total_ms);
            double dev = 0;
            for (double ms : e.instruction_ms) dev += ms;
            device.push_back(dev);
            recompute.push_back(e.recompute_ms);
        }
        std::vector<std::string> checkpoints;
        for (rl::NodeId c : plan.checkpoints) checkpoints.push_back(g.node(c).name);
        j["checkpoints"] = checkpoints;
        j["step_ms"] = median(total);
        j["step_ms_all"] = total;  // every timed step, for the spread
        j["device_ms"] = median(device);
        j["recompute_ms"] = median(recompute);
        j["predicted_peak_bytes"] = sim.peak_bytes;
        j["measured_peak_bytes"] = first.peak_bytes;
        j["peak_equal"] = sim.peak_bytes == first.peak_bytes;
        j["grads_bitwise_equal_to_none"] = equal;
        j["loss"] = first.loss;
        if (mem) {
            j["device"] = mem->device;
            j["driver_peak_delta_bytes"] = mem->driver_peak_delta();
            j["reserved_peak_bytes"] = mem->reserved_peak;
        }
    } catch (const std::exception& e) {
        j["error"] = e.what();
    }
    return j;
}

}  // namespace

int main(int argc, char** argv) {
    int64_t gemm_n = 4096;
    int repeat = 3;
    std::string networks = "mlp:depth=32,width=4096,batch=4096";
    std::string strategies = "none;sqrt-n;periodic";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i], v = argv[i + 1];
        if (k == "--gemm")
            gemm_n = std::stoll(v);
        else if (k == "--networks")
            networks = v;
        else if (k == "--strategies")
            strategies = v;
        else if (k == "--repeat")
            repeat = std::max(1, std::stoi(v));
        else {
            std::cerr << "bench_gpu: unknown option " << k
                      << " (use --gemm N, --networks \"a;b\", --strategies \"a;b\", --repeat R)\n";
            return 2;
        }
    }
    std::string why;
    if (!rl::cuda_available(&why)) {
        std::cout << nlohmann::json{{"skipped", why}}.dump() << std::endl;
        return 0;
    }
    try {
        auto backend = rl::make_cuda_backend();
        if (gemm_n > 0) std::cout << gemm_throughput(*backend, gemm_n, 10).dump() << std::endl;
        for (const std::string& n : split(networks, ';')) {
            std::unique_ptr<Network> net;
            try {
                net = std::make_unique<Network>(*backend, n);
            } catch (const std::exception& e) {
                std::cout
                    << nlohmann::json{{"kind", "step"}, {"network", n}, {"error", e.what()}}.dump()
                    << std::endl;
                continue;
            }
            for (const std::string& s : split(strategies, ';'))
                std::cout << step(*backend, *net, s, repeat).dump() << std::endl;
        }
    } catch (const std::exception& e) {
        std::cout << nlohmann::json{{"error", e.what()}}.dump() << std::endl;
        return 1;
    }
    return 0;
}
