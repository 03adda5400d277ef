#pragma once
// Per-node forward and backward cost in milliseconds, which strategies plan with and the
// simulator turns into predicted forward / recompute / backward times.
//  - analytic: a roofline, max(FLOPs / peak FLOP rate, bytes / bandwidth), with rates measured
//    on this machine (a GEMM and a large copy) or given;
//  - profiled: each op timed on the backend, median of several runs; where a step's parameters
//    cannot stay in the caches from one use to the next, they are timed from memory.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"

namespace rl {

class Backend;

struct DeviceRates {
    double gflops = 100.0;   // sustained float32 GEMM rate
    double gbps = 20.0;      // sustained memory bandwidth
    double launch_us = 1.0;  // fixed cost per kernel
    // Measures this CPU with the current thread setting (about 50 ms; cached per thread count).
    static DeviceRates measure_cpu();
};

// The link between device and host memory that offloaded values cross (engine/schedule.h's
// Offload and Prefetch): a copy of b bytes takes latency_us + b / bandwidth, one copy at a
// time on the copy stream. The defaults are PCIe 4.0 x16 as achieved with pinned memory
// (about 25 GB/s of its 31.5 GB/s each way, ~10 us per transfer).
struct TransferRates {
    double to_host_gbps = 25.0;    // device -> host (offload)
    double to_device_gbps = 25.0;  // host -> device (prefetch)
    double latency_us = 10.0;      // fixed cost per copy, each direction
    double copy_ms(uint64_t bytes, bool to_host) const {
        const double gbps = to_host ? to_host_gbps : to_device_gbps;
        return latency_us * 1e-3 + (gbps > 0 ? static_cast<double>(bytes) / (gbps * 1e6) : 1e30);
    }
};

// This machine's last-level cache in bytes (the largest cache of CPU 0, from sysfs; 32 MiB where
// none is reported).
uint64_t last_level_cache_bytes();

// Whether a training step of `g` reads its parameters from memory: its parameters and their
// gradients together take more than half of a `cache_bytes` cache. A step touches each
// parameter once in its forward and once in its backward, with all the other layers' traffic
// between; on the 2-core EPYC of the pool (32 MiB L3, shared) a buffer read again ran at L3
// speed up to 16 MiB and fell to memory speed from 24 MiB (docs/benchmarks.md).
bool parameters_leave_cache(const Graph& g, uint64_t cache_bytes);

class CostModel {
  public:
    CostModel() = default;
    static CostModel analytic(const Graph& g, const DeviceRates& rates);
    // Times each node's forward and backward on the backend (median of `repeats`). Alone, an op
    // runs on data its previous run left in the caches; in a step of a network whose
    // parameters leave the cache (parameters_leave_cache with `cache_bytes`), every layer reads
    // its weights (and writes their gradients) from memory, the weights streaming through the
    // cache push out the activations the backward will read, and the step took 1.4-1.7× the
    // sum of such times (ResNet-18, RegNetY-400MF, MobileNetV3, DenseNet-121 at 64 px). There
    // the node's parameters, and backward their gradients and its residuals, are evicted before
    // each timed run (Backend::evict_from_caches): the same steps at 1.0-1.1× the sum
    // (bench/bench_cost_model.cpp, docs/benchmarks.md). There a recompute is timed too: the
    // forward with its inputs evicted as well, as it reads values kept since the forward
    // (recompute_ms; the simulator prices a recompute of just-recomputed inputs at forward_ms).
    // Throws Cancelled between ops when the thread's CancelScope flag is raised (engine/cancel.h).
    static CostModel profiled(const Graph& g, Backend& backend, int repeats = 5,
                              uint64_t cache_bytes = last_level_cache_bytes());
    // Per-node times known already (a saved session reopened): `kind` as the model was made;
    // `recompute_ms` empty (recomputes cost the forward's time) or one per node.
    static CostModel from_times(std::string kind, std::vector<double> forward_ms,
                                std::vector<double> backward_ms,
                                std::vector<double> recompute_ms = {});

    double forward_ms(NodeId n) const { return fwd_[static_cast<size_t>(n)]; }
    double backward_ms(NodeId n) const { return bwd_[static_cast<size_t>(n)]; }
    // A recompute of n: its forward with its inputs, kept since the forward, read from memory
    // where the profile timed that (parameters leaving the cache), else the forward's time.
    double recompute_ms(NodeId n) const {
        return rec_.empty() ? forward_ms(n) : rec_[static_cast<size_t>(n)];
    }
    bool has_recompute_times() const { return !rec_.empty(); }
    const std::string& kind() const { return kind_; }
    size_t size() const { return fwd_.size(); }
    double total_forward_ms() const;
    // The copy link the simulator times offloads and prefetches with (settable: the lab's and
    // the CLI's --bandwidth, or a measurement on the GPU backend).
    const TransferRates& transfer() const { return transfer_; }
    void set_transfer(const TransferRates& t) { transfer_ = t; }

    // Per-node forward costs (never negative) to plan with: this model when it covers `g`, else
    // an analytic one at nominal rates (callers that only want a schedule pass CostModel{}).
    std::vector<double> forward_costs_for(const Graph& g) const;

  private:
    std::string kind_ = "none";
    std::vector<double> fwd_, bwd_, rec_;  // rec_: empty, or one per node
    TransferRates transfer_;
};

}  // namespace rl
