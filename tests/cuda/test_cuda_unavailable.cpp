// Without a usable GPU (or in a build without CUDA), asking for the CUDA backend fails with a
// message naming the cause, from the engine and from `rematlab-cli --device cuda`; these tests
// run on CPU-only machines and skip where a GPU is present.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "cuda/gpu_util.h"
#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

using testing::run_cli;

bool names_cause(const std::string& msg) {
    return msg.find("no CUDA device: cudaGetDeviceCount") != std::string::npos ||
           msg.find("this build has no CUDA backend") != std::string::npos;
}

TEST(CudaUnavailable, MakeCudaBackendNamesTheCause) {
    std::string why;
    if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present";
    EXPECT_TRUE(names_cause(why)) << why;
    try {
        make_cuda_backend();
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_TRUE(names_cause(e.what())) << e.what();
        EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
    }
    EXPECT_THROW(make_backend("cuda"), Error);
}

TEST(CudaUnavailable, UnknownDeviceIsRefused) {
    try {
        make_backend("tpu");
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "unknown device 'tpu'; use cpu or cuda");
    }
    EXPECT_EQ(make_backend("cpu")->name(), "cpu");
}

TEST(CudaUnavailable, CliDeviceCudaNamesTheCause) {
    if (cuda_available(nullptr)) GTEST_SKIP() << "a GPU is present";
    int status = 0;
    const std::string out =
        run_cli("run --network mlp:depth=2,width=8,batch=2 --strategy none --device cuda", &status);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 1) << out;
    EXPECT_TRUE(names_cause(out)) << out;
}

TEST(CudaUnavailable, CliRejectsUnknownDevice) {
    int status = 0;
    const std::string out =
        run_cli("run --network mlp:depth=2,width=8,batch=2 --strategy none --device tpu", &status);
    EXPECT_NE(WEXITSTATUS(status), 0) << out;
    EXPECT_NE(out.find("tpu"), std::string::npos) << out;
}

// The executor's device-timing hook, with the CPU backend behind a stand-in that reports a fixed
// device time per instruction (as the CUDA backend reports its CUDA events' time): the
// instruction times and the forward/recompute/backward sums are the device's, the run is the
// CPU's otherwise. Runs without a GPU.
class FixedDeviceTime final : public Backend {
  public:
    explicit FixedDeviceTime(double ms) : cpu_(make_cpu_backend(1)), ms_(ms) {}
    std::string name() const override { return "fixed"; }
    void* allocate(uint64_t bytes) override { return cpu_->allocate(bytes); }
    void release(void* p) override { cpu_->release(p); }
    void forward(const ForwardCall& c) override { cpu_->forward(c); }
    void backward(const BackwardCall& c) override { cpu_->backward(c); }
    void copy_to_host(void* d, const void* s, uint64_t n) override { cpu_->copy_to_host(d, s, n); }
    void copy_from_host(void* d, const void* s, uint64_t n) override {
        cpu_->copy_from_host(d, s, n);
    }
    void add_into(float* d, const float* s, int64_t n) override { cpu_->add_into(d, s, n); }
    void begin_instruction() override { ++begun_; }
    double end_instruction() override {
        ++ended_;
        return ms_;
    }
    int begun_ = 0, ended_ = 0;

  private:
    std::unique_ptr<Backend> cpu_;
    double ms_;
};

TEST(GpuTimingHook, ExecutorTakesInstructionTimesFromTheBackend) {
    const Graph g = load_network("mlp:depth=8,width=8,batch=2");
    const RunData data = RunData::seeded(g);
    const Plan plan = plan_with(g, CostModel{}, parse_spec("sqrt-n"));
    FixedDeviceTime dev(0.25);
    const Execution run = execute(g, plan.schedule, dev, data);
    EXPECT_EQ(dev.begun_, static_cast<int>(plan.schedule.size()));
    EXPECT_EQ(dev.ended_, static_cast<int>(plan.schedule.size()));
    size_t computes = 0, recomputes = 0, backwards = 0;
    std::vector<int> seen(static_cast<size_t>(g.num_nodes()), 0);
    for (const Instruction& ins : plan.schedule.code) {
        if (ins.kind == InstrKind::Compute) {
            if (seen[static_cast<size_t>(ins.target)]++)
                ++recomputes;
            else
                ++computes;
        } else if (ins.kind == InstrKind::Backward)
            ++backwards;
    }
    ASSERT_GT(recomputes, 0u);  // sqrt-n recomputes on this network
    for (double ms : run.instruction_ms) EXPECT_EQ(ms, 0.25);
    EXPECT_DOUBLE_EQ(run.forward_ms, 0.25 * static_cast<double>(computes));
    EXPECT_DOUBLE_EQ(run.recompute_ms, 0.25 * static_cast<double>(recomputes));
    EXPECT_DOUBLE_EQ(run.backward_ms, 0.25 * static_cast<double>(backwards));
    // The CPU backend has no device memory to report.
    EXPECT_FALSE(make_cpu_backend()->device_memory().has_value());
}

}  // namespace
}  // namespace rl
