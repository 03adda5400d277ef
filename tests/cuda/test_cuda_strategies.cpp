// The project's two invariants on the GPU, for every strategy on small presets:
//  1. predicted peak == the CUDA run's measured peak, to the byte, timeline event by event;
//  2. parameter gradients bitwise identical to those of `none` on the GPU;
// and the GPU's `none` gradients close to the CPU's. Skipped, with the reason, without a GPU.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "cuda/gpu_util.h"
#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "solvers/offload_pass.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

struct Case {
    std::string network;
    std::string strategy;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.network << " / " << c.strategy;
}

std::vector<std::string> networks() {
    return {
        "mlp:depth=6,width=64,batch=16",
        "mlp:depth=5,width=48,batch=8,act=gelu",
        "resmlp:depth=3,width=32,batch=8",
        "transformer:layers=2,d_model=32,heads=2,seq=8,batch=2,vocab=16",
        "vgg:depth=11,width=4,size=16,batch=2,hidden=16",
        "resnet:depth=18,width=4,size=16,batch=2",
        "unet:depth=2,channels=4,size=16,batch=2",
        "mobilenet:width=4,size=16,batch=2",
        // sin with its derivative computed in the forward (a derivative input)
        REMATLAB_SOURCE_DIR "/resources/networks/jax-sin.json",
    };
}

std::vector<Case> all_cases() {
    std::vector<std::string> specs;
    for (const Strategy* s : strategies()) specs.emplace_back(s->name());
    specs.push_back("sqrt-n:segments=2");
    specs.push_back("periodic:k=3");
    // Offload: copies to pinned host memory on the copy stream (engine/schedule.h).
    specs.push_back("policy:policy=offload_dot_with_no_batch_dims");
    std::vector<Case> cases;
    for (const auto& n : networks())
        for (const auto& s : specs) cases.push_back({n, s});
    return cases;
}

std::string test_name(std::string s) {
    for (char& ch : s)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
}

class GpuInvariants : public ::testing::TestWithParam<Case> {};

TEST_P(GpuInvariants, PredictedPeakEqualsMeasuredAndGradientsMatchNone) {
    RL_REQUIRE_GPU(gpu);
    const Case& c = GetParam();
    const Graph g = load_network(c.network);
    const RunData data = RunData::seeded(g);
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Plan plan = plan_with(g, costs, parse_spec(c.strategy));
    ASSERT_NE(plan.status, PlanStatus::Infeasible) << plan.message;

    const Simulation sim = simulate(g, plan.schedule, costs);
    const Execution run = execute(g, plan.schedule, *gpu, data);
    EXPECT_EQ(sim.peak_bytes, run.peak_bytes);
    EXPECT_EQ(sim.host_peak_bytes, run.host_peak_bytes);
    EXPECT_EQ(sim.offloaded_bytes, run.offloaded_bytes);
    EXPECT_EQ(sim.peak_instruction, run.peak_instruction);
    ASSERT_EQ(sim.timeline.size(), run.timeline.size());
    for (size_t i = 0; i < sim.timeline.size(); ++i)
        ASSERT_EQ(sim.timeline[i].bytes, run.timeline[i].bytes) << "event " << i;

    const Plan none = plan_with(g, costs, Spec{"none", {}});
    const auto reference = execute(g, none.schedule, *gpu, data).param_grads;
    ASSERT_EQ(reference.size(), run.param_grads.size());
    for (size_t p = 0; p < reference.size(); ++p) {
        ASSERT_EQ(reference[p].size(), run.param_grads[p].size());
        EXPECT_EQ(0, std::memcmp(reference[p].data(), run.param_grads[p].data(),
                                 reference[p].size() * sizeof(float)))
            << "gradient of " << g.param(static_cast<ParamId>(p)).name << " differs from none's";
    }
    EXPECT_TRUE(std::isfinite(run.loss));
    // Device time per instruction came from CUDA events: all recorded, none negative.
    ASSERT_EQ(run.instruction_ms.size(), plan.schedule.size());
    for (double ms : run.instruction_ms) EXPECT_GE(ms, 0.0);
}

INSTANTIATE_TEST_SUITE_P(EveryStrategy, GpuInvariants, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                             return test_name(info.param.network + "__" + info.param.strategy);
                         });

// A network and the relative bound on its gradients' GPU-vs-CPU difference: the dense ones
// differ only in summation order; batchnorm over a few elements (the small conv presets end at
// 1×1 planes, batch 2) divides by a tiny variance, which magnifies those differences.
struct Tolerance {
    std::string network;
    double rtol;
};

void PrintTo(const Tolerance& t, std::ostream* os) {
    *os << t.network;
}

std::vector<Tolerance> tolerances() {
    std::vector<Tolerance> out;
    for (const std::string& n : networks()) {
        const bool conv = n.rfind("vgg", 0) == 0 || n.rfind("resnet", 0) == 0 ||
                          n.rfind("unet", 0) == 0 || n.rfind("mobilenet", 0) == 0;
        out.push_back({n, conv ? 1e-2 : 1e-3});
    }
    return out;
}

class GpuVsCpu : public ::testing::TestWithParam<Tolerance> {};

// The whole step on the GPU gives the CPU's loss and gradients up to summation order.
TEST_P(GpuVsCpu, NoneGradientsAndLossCloseToCpu) {
    RL_REQUIRE_GPU(gpu);
    const Graph g = load_network(GetParam().network);
    const RunData data = RunData::seeded(g);
    const Plan none = plan_with(g, CostModel{}, Spec{"none", {}});
    auto cpu = make_cpu_backend(1);
    const Execution on_cpu = execute(g, none.schedule, *cpu, data);
    const Execution on_gpu = execute(g, none.schedule, *gpu, data);
    EXPECT_NEAR(on_gpu.loss, on_cpu.loss, GetParam().rtol * std::max(1.0, std::fabs(on_cpu.loss)));
    EXPECT_EQ(on_gpu.peak_bytes, on_cpu.peak_bytes);  // the same schedule, the same bytes
    ASSERT_EQ(on_gpu.param_grads.size(), on_cpu.param_grads.size());
    for (size_t p = 0; p < on_cpu.param_grads.size(); ++p)
        testing::expect_close(on_gpu.param_grads[p], on_cpu.param_grads[p], GetParam().rtol,
                              g.param(static_cast<ParamId>(p)).name);
}

INSTANTIATE_TEST_SUITE_P(Presets, GpuVsCpu, ::testing::ValuesIn(tolerances()),
                         [](const ::testing::TestParamInfo<Tolerance>& info) {
                             return test_name(info.param.network);
                         });

// The driver's view is reported beside the tracking allocator's: the pool held at least every
// byte of the run's peak at once (it only ever holds more: rounding, cached blocks). Free
// memory's fall is not checked against it: other processes on the GPU (ctest -j) move it.
TEST(GpuMemory, PoolCoversTheTrackedPeak) {
    RL_REQUIRE_GPU(gpu);
    const Graph g = load_network("mlp:depth=4,width=256,batch=64");
    const RunData data = RunData::seeded(g);
    const Plan none = plan_with(g, CostModel{}, Spec{"none", {}});
    auto fresh = make_cuda_backend();
    fresh->reset_device_memory_peak();
    const Execution run = execute(g, none.schedule, *fresh, data);
    const auto mem = fresh->device_memory();
    ASSERT_TRUE(mem.has_value());
    EXPECT_GE(mem->reserved_peak, run.peak_bytes);
    EXPECT_LE(mem->driver_peak_delta(), mem->total);
    EXPECT_NE(mem->device.find("sm_"), std::string::npos) << mem->device;
    RecordProperty("driver_peak_delta_bytes", std::to_string(mem->driver_peak_delta()));
}

// Without the pool every release goes back to the driver, and the run is the same.
TEST(GpuMemory, UnpooledBackendGivesTheSameGradients) {
    RL_REQUIRE_GPU(gpu);
    const Graph g = load_network("mlp:depth=3,width=64,batch=8");
    const RunData data = RunData::seeded(g);
    const Plan plan = plan_with(g, CostModel{}, parse_spec("sqrt-n"));
    auto unpooled = make_cuda_backend(false);
    const Execution a = execute(g, plan.schedule, *unpooled, data);
    const Execution b = execute(g, plan.schedule, *gpu, data);
    EXPECT_EQ(a.peak_bytes, b.peak_bytes);
    ASSERT_EQ(a.param_grads.size(), b.param_grads.size());
    for (size_t p = 0; p < a.param_grads.size(); ++p) EXPECT_EQ(a.param_grads[p], b.param_grads[p]);
    EXPECT_EQ(unpooled->device_memory()->reserved, 0u);  // everything went back
}

// Every gap of none's schedule offloaded (solvers/offload_pass.h), run on the GPU: pinned host
// memory and cudaMemcpyAsync on the copy stream. Both pools as predicted, none's gradients, and
// copies that were timed by their events.
TEST(GpuOffload, EveryGapOffloadedRunsAsPredicted) {
    RL_REQUIRE_GPU(gpu);
    for (const char* spec : {"mlp:depth=6,width=64,batch=16",
                             "transformer:layers=2,d_model=32,heads=2,seq=8,batch=2,vocab=16"}) {
        const Graph g = load_network(spec);
        const RunData data = RunData::seeded(g);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        const Schedule none = backprop_schedule(g);
        const Schedule s = insert_offloads(g, none, offload_gaps(g, none));
        const Simulation sim = simulate(g, s, costs);
        ASSERT_GT(sim.offloads, 0) << spec;
        const Execution run = execute(g, s, *gpu, data);
        EXPECT_EQ(sim.peak_bytes, run.peak_bytes) << spec;
        EXPECT_EQ(sim.host_peak_bytes, run.host_peak_bytes) << spec;
        EXPECT_EQ(sim.offloads, run.offloads) << spec;
        EXPECT_GT(run.transfer_ms, 0.0) << spec;
        const auto reference = execute(g, none, *gpu, data).param_grads;
        for (size_t p = 0; p < reference.size(); ++p)
            EXPECT_EQ(0, std::memcmp(reference[p].data(), run.param_grads[p].data(),
                                     reference[p].size() * sizeof(float)))
                << spec << ": " << g.param(static_cast<ParamId>(p)).name;
    }
}

}  // namespace
}  // namespace rl
