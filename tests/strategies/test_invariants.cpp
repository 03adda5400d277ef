// The project's two invariants, for every strategy on every preset at small sizes:
//  1. predicted peak == measured peak, to the byte (and the whole timelines agree event by event);
//  2. parameter gradients are bitwise identical to those of `none` (CPU, fixed thread count).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"
#include "strategies/test_networks.h"

namespace rl {
namespace {

struct Case {
    std::string network;
    std::string strategy;
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.network << " / " << c.strategy;
}

std::vector<Case> all_cases() {
    std::vector<Case> cases;
    for (const auto& n : testing::small_networks())
        for (const auto& s : testing::strategy_specs()) cases.push_back({n, s});
    return cases;
}

class Invariants : public ::testing::TestWithParam<Case> {};

std::vector<std::vector<float>> none_grads(const Graph& g, Backend& b, const RunData& data) {
    const Plan none = plan_with(g, CostModel{}, Spec{"none", {}});
    return execute(g, none.schedule, b, data).param_grads;
}

TEST_P(Invariants, PredictedPeakEqualsMeasuredAndGradientsMatchNone) {
    const Case& c = GetParam();
    // Planned in the network's dtype; what executes is the f32 copy, with the same schedule.
    const Graph planned = load_network(c.network);
    const Graph g = planned.with_float_dtype(DType::F32);
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    const CostModel costs = CostModel::analytic(planned, DeviceRates{});

    const Plan plan = plan_with(planned, costs, parse_spec(c.strategy));
    ASSERT_NO_THROW(validate(planned, plan.schedule));
    ASSERT_NE(plan.status, PlanStatus::Infeasible) << plan.message;
    ASSERT_NO_THROW(validate(g, plan.schedule));

    const Simulation sim = simulate(g, plan.schedule, costs);
    const Execution run = execute(g, plan.schedule, *backend, data);
    EXPECT_EQ(sim.peak_bytes, run.peak_bytes);
    EXPECT_EQ(sim.peak_instruction, run.peak_instruction);
    EXPECT_EQ(sim.activation_peak_bytes(), run.activation_peak_bytes());
    ASSERT_EQ(sim.timeline.size(), run.timeline.size());
    for (size_t i = 0; i < sim.timeline.size(); ++i) {
        ASSERT_EQ(sim.timeline[i].bytes, run.timeline[i].bytes) << "event " << i;
        ASSERT_EQ(sim.timeline[i].instruction, run.timeline[i].instruction) << "event " << i;
    }
    // The measured events lie within the step, in order: set-up at 0, tear-down (the buffers
    // released after the last instruction, the gradients copied out first) at its end.
    ASSERT_FALSE(run.timeline.empty());
    for (size_t i = 0; i < run.timeline.size(); ++i) {
        EXPECT_GE(run.timeline[i].time_ms, i ? run.timeline[i - 1].time_ms : 0.0) << i;
        EXPECT_LE(run.timeline[i].time_ms, run.total_ms) << "event " << i;
    }
    EXPECT_EQ(run.timeline.back().instruction, -1);
    EXPECT_EQ(run.timeline.back().time_ms, run.total_ms);

    const auto reference = none_grads(g, *backend, data);
    ASSERT_EQ(reference.size(), run.param_grads.size());
    for (size_t p = 0; p < reference.size(); ++p) {
        ASSERT_EQ(reference[p].size(), run.param_grads[p].size());
        EXPECT_EQ(0, std::memcmp(reference[p].data(), run.param_grads[p].data(),
                                 reference[p].size() * sizeof(float)))
            << "gradient of " << g.param(static_cast<ParamId>(p)).name << " differs";
    }
    EXPECT_TRUE(std::isfinite(run.loss));
}

INSTANTIATE_TEST_SUITE_P(EveryStrategyOnEveryPreset, Invariants, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                             std::string s = info.param.network + "__" + info.param.strategy;
                             for (char& ch : s)
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return s;
                         });

TEST(InvariantsThreads, GradientsMatchNoneWithTwoThreads) {
    const Graph g = load_network("mlp:depth=8,width=64,batch=32");
    auto backend = make_cpu_backend(2);
    const RunData data = RunData::seeded(g);
    const auto reference = none_grads(g, *backend, data);
    const Plan plan = plan_with(g, CostModel{}, parse_spec("sqrt-n"));
    const Execution run = execute(g, plan.schedule, *backend, data);
    for (size_t p = 0; p < reference.size(); ++p)
        EXPECT_EQ(0, std::memcmp(reference[p].data(), run.param_grads[p].data(),
                                 reference[p].size() * sizeof(float)));
    set_cpu_threads(1);
}

// The NCHW kernels at sizes where their parallel paths (and Eigen's threaded GEMM) run: every
// recomputation under sqrt-n and min-cut, dropout masks included, reproduces the bits of `none`.
TEST(InvariantsThreads, ConvPresetGradientsMatchNoneWithTwoThreads) {
    for (const char* spec :
         {"resnet:depth=18,width=16,size=16,batch=4", "unet:depth=2,channels=16,size=16,batch=2",
          "vgg:depth=11,width=8,size=16,batch=4,bn=1", "mobilenet:width=16,size=16,batch=4"}) {
        SCOPED_TRACE(spec);
        const Graph g = load_network(spec);
        auto backend = make_cpu_backend(2);
        const RunData data = RunData::seeded(g);
        const auto reference = none_grads(g, *backend, data);
        for (const char* strategy : {"sqrt-n", "min-cut"}) {
            const Plan plan = plan_with(g, CostModel{}, parse_spec(strategy));
            const Execution run = execute(g, plan.schedule, *backend, data);
            for (size_t p = 0; p < reference.size(); ++p)
                EXPECT_EQ(0, std::memcmp(reference[p].data(), run.param_grads[p].data(),
                                         reference[p].size() * sizeof(float)))
                    << strategy << ": " << g.param(static_cast<ParamId>(p)).name;
        }
    }
    set_cpu_threads(1);
}

}  // namespace
}  // namespace rl
