// The profiled cost model times each op as a step finds its data: where the network's parameters
// leave the cache, every timed run starts with the node's parameters (and, backward, their
// gradients) evicted. A backend that records what was evicted stands in for the CPU backend.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/cost_model.h"
#include "engine/networks/presets.h"

namespace rl {
namespace {

class EvictionRecorder final : public Backend {
  public:
    EvictionRecorder() : cpu_(make_cpu_backend(1)) {}
    std::string name() const override { return "recorder"; }
    void* allocate(uint64_t bytes) override { return cpu_->allocate(bytes); }
    void release(void* p) override { cpu_->release(p); }
    void copy_to_host(void* d, const void* s, uint64_t n) override { cpu_->copy_to_host(d, s, n); }
    void copy_from_host(void* d, const void* s, uint64_t n) override {
        cpu_->copy_from_host(d, s, n);
    }
    void add_into(float* d, const float* s, int64_t n) override { cpu_->add_into(d, s, n); }
    void evict_from_caches(const void* p, uint64_t bytes) override {
        evicted_.insert({p, bytes});
        cpu_->evict_from_caches(p, bytes);
    }
    // Each call: whether every parameter (backward: and its gradient, and every residual the
    // node reads) was evicted, whole, since the previous call; backward, whether the output
    // gradient was left alone.
    void forward(const ForwardCall& c) override {
        bool all = true, inputs = !c.node.inputs.empty();
        for (size_t k = 0; k < c.node.params.size(); ++k)
            all = all && evicted_.count({c.params[k], c.graph.param(c.node.params[k]).bytes});
        for (size_t k = 0; k < c.node.inputs.size(); ++k)
            inputs = inputs && evicted_.count({c.inputs[k], c.graph.value(c.node.inputs[k]).bytes});
        (all ? cold_ : warm_) += c.node.params.empty() ? 0 : 1;
        cold_inputs_ += all && inputs && !c.node.params.empty() ? 1 : 0;
        evicted_.clear();
        cpu_->forward(c);
    }
    void backward(const BackwardCall& c) override {
        bool all = true;
        for (size_t k = 0; k < c.node.params.size(); ++k) {
            const uint64_t bytes = c.graph.param(c.node.params[k]).bytes;
            all = all && evicted_.count({c.params[k], bytes}) &&
                  evicted_.count({c.grad_params[k], bytes});
        }
        for (size_t k = 0; k < c.node.inputs.size(); ++k)
            if (c.inputs[k])
                all = all && evicted_.count({c.inputs[k], c.graph.value(c.node.inputs[k]).bytes});
        if (c.output) all = all && evicted_.count({c.output, c.graph.value(c.node.output).bytes});
        for (const auto& [p, bytes] : evicted_) grad_output_evicted_ += p == c.grad_output;
        (all ? cold_ : warm_) += c.node.params.empty() ? 0 : 1;
        evicted_.clear();
        cpu_->backward(c);
    }
    int cold_ = 0, warm_ = 0;  // calls of nodes with parameters
    int grad_output_evicted_ = 0;
    int cold_inputs_ = 0;  // forwards of nodes with parameters whose inputs were evicted too

  private:
    std::unique_ptr<Backend> cpu_;
    std::set<std::pair<const void*, uint64_t>> evicted_;
};

TEST(CostModel, TimesParametersFromMemoryWhereTheyLeaveTheCache) {
    const Graph g = load_network("mlp:depth=3,width=32,batch=4");
    constexpr int kRepeats = 3;
    // Two kinds of linear layer (the first, whose input needs no gradient, and the two alike,
    // timed once), each timed kRepeats times after a warm-up run: forward and backward, and where
    // the parameters leave the cache a recompute too (a forward with its inputs evicted).
    const int runs = 2 * (kRepeats + 1);
    {
        EvictionRecorder b;
        const CostModel m = CostModel::profiled(g, b, kRepeats, /*cache_bytes=*/0);
        EXPECT_EQ(m.kind(), "profiled");
        EXPECT_EQ(b.cold_, 3 * runs);
        EXPECT_EQ(b.cold_inputs_, runs);
        EXPECT_EQ(b.warm_, 0);
        EXPECT_EQ(b.grad_output_evicted_, 0);
        EXPECT_TRUE(m.has_recompute_times());
    }
    {
        EvictionRecorder b;
        const CostModel m = CostModel::profiled(g, b, kRepeats, /*cache_bytes=*/uint64_t{1} << 40);
        EXPECT_EQ(b.cold_, 0);
        EXPECT_EQ(b.warm_, 2 * runs);
        EXPECT_FALSE(m.has_recompute_times());
        EXPECT_EQ(m.recompute_ms(0), m.forward_ms(0));
    }
}

// Every buffer a node's kernels write holds its output and input gradients in float32, the
// kernels' type, also for a network planned in bf16 or f16: a backend that records each
// allocation's size checks every call against the f32 bytes of what it writes.
class SizeChecker final : public Backend {
  public:
    SizeChecker() : cpu_(make_cpu_backend(1)) {}
    std::string name() const override { return "size checker"; }
    void* allocate(uint64_t bytes) override {
        void* p = cpu_->allocate(bytes);
        sizes_[p] = bytes;
        return p;
    }
    void release(void* p) override {
        sizes_.erase(p);
        cpu_->release(p);
    }
    void copy_to_host(void* d, const void* s, uint64_t n) override { cpu_->copy_to_host(d, s, n); }
    void copy_from_host(void* d, const void* s, uint64_t n) override {
        cpu_->copy_from_host(d, s, n);
    }
    void add_into(float* d, const float* s, int64_t n) override { cpu_->add_into(d, s, n); }
    void forward(const ForwardCall& c) override {
        expect_holds(c.output, c.graph, c.node.output);
        ++calls_;
        cpu_->forward(c);
    }
    void backward(const BackwardCall& c) override {
        for (size_t k = 0; k < c.node.inputs.size(); ++k)
            if (c.grad_inputs[k]) expect_holds(c.grad_inputs[k], c.graph, c.node.inputs[k]);
        ++calls_;
        cpu_->backward(c);
    }
    int calls_ = 0;

  private:
    void expect_holds(const void* p, const Graph& g, ValueId v) {
        const Value& val = g.value(v);
        const DType executed = is_floating(val.dtype) ? DType::F32 : val.dtype;
        const auto it = sizes_.find(p);
        ASSERT_NE(it, sizes_.end()) << val.name;
        EXPECT_GE(it->second, static_cast<uint64_t>(val.shape.numel()) * dtype_size(executed))
            << val.name << " (" << dtype_name(val.dtype) << ")";
    }
    std::unique_ptr<Backend> cpu_;
    std::map<const void*, uint64_t> sizes_;
};

TEST(CostModel, ProfilesANarrowNetworkAsItsFloat32Copy) {
    for (const char* spec : {"gpt:layers=1,d_model=32,heads=4,seq=8,batch=1,vocab=16,dtype=bf16",
                             "gpt:layers=1,d_model=32,heads=4,seq=8,batch=1,vocab=16,dtype=f16,"
                             "tp=2,sp=1"}) {
        SCOPED_TRACE(spec);
        const Graph g = load_network(spec);
        ASSERT_NE(g.float_dtype(), DType::F32);
        SizeChecker b;
        const CostModel m = CostModel::profiled(g, b, 1, /*cache_bytes=*/uint64_t{1} << 40);
        EXPECT_GT(b.calls_, 0);
        for (NodeId n = 0; n < g.num_nodes(); ++n) EXPECT_GE(m.forward_ms(n), 0.0);
    }
}

TEST(CostModel, ParametersLeaveTheCacheFromHalfOfIt) {
    const Graph g = load_network("mlp:depth=2,width=16,batch=2");
    uint64_t params = 0;
    for (ParamId p = 0; p < g.num_params(); ++p) params += g.param(p).bytes;
    ASSERT_GT(params, 0u);
    // Parameters and gradients, 2·params, against half the cache.
    EXPECT_FALSE(parameters_leave_cache(g, 4 * params));
    EXPECT_TRUE(parameters_leave_cache(g, 4 * params - 8));
    // This machine's figure is a cache's size, in bytes (not KiB, not a whole socket's memory).
    EXPECT_GE(last_level_cache_bytes(), uint64_t{256} << 10);
    EXPECT_LE(last_level_cache_bytes(), uint64_t{4} << 30);
}

TEST(CpuBackend, EvictingFromTheCachesKeepsTheData) {
    auto b = make_cpu_backend(1);
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
    const std::vector<float> before = v;
    b->evict_from_caches(v.data() + 3, 997 * sizeof(float) - 2);  // not line-aligned either end
    b->evict_from_caches(v.data(), 0);
    EXPECT_EQ(v, before);
}

}  // namespace
}  // namespace rl
