// The in-place rule of engine/liveness.h: a pointwise Compute whose input the schedule frees
// right after it takes over that input's buffer. Byte counts added up by hand, the simulator
// against the executor event by event, and gradients against a schedule that cannot run in place.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/liveness.h"
#include "engine/schedule.h"
#include "engine/simulator.h"

namespace rl {
namespace {

// x[4,8] → fc0 (linear) → g0 (gelu) → r0 (relu) → fc1 (linear) → s = add(fc1, r0) → loss
// Every activation is 4·8·4 = 128 bytes, the loss 4.
Graph pointwise_chain() {
    Graph g("pointwise");
    g.add_input("x", DType::F32, {4, 8});
    g.add_node("fc0", OpKind::Linear, std::vector<std::string>{"x"},
               {{"out_features", int64_t{8}}});
    g.add_node("g0", OpKind::Gelu, std::vector<std::string>{"fc0"});
    g.add_node("r0", OpKind::Relu, std::vector<std::string>{"g0"});
    g.add_node("fc1", OpKind::Linear, std::vector<std::string>{"r0"},
               {{"out_features", int64_t{8}}});
    g.add_node("s", OpKind::Add, std::vector<std::string>{"fc1", "r0"});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"s"});
    g.finalize();
    return g;
}

Schedule plain(const Graph& g) {
    ScheduleBuilder b(g);
    for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);
    for (NodeId n = g.num_nodes() - 1; n >= 0; --n)
        if (g.needs_backward(n)) b.backward(n);
    return b.finish();
}

// The same schedule with every run of Frees after a Compute moved past the next instruction:
// legal here (nothing is recomputed), and no Compute is directly followed by its input's Free.
Schedule frees_delayed(const Schedule& s) {
    Schedule out;
    std::vector<Instruction> held;
    for (size_t i = 0; i < s.size();) {
        const Instruction ins = s.code[i++];
        out.code.push_back(ins);
        if (ins.kind == InstrKind::Free) continue;
        out.code.insert(out.code.end(), held.begin(), held.end());
        held.clear();
        if (ins.kind == InstrKind::Compute)
            while (i < s.size() && s.code[i].kind == InstrKind::Free) held.push_back(s.code[i++]);
    }
    out.code.insert(out.code.end(), held.begin(), held.end());
    return out;
}

std::vector<uint64_t> bytes_of(const std::vector<SimPoint>& t) {
    std::vector<uint64_t> b;
    for (const SimPoint& p : t) b.push_back(p.bytes);
    return b;
}
std::vector<uint64_t> bytes_of(const std::vector<TimelinePoint>& t) {
    std::vector<uint64_t> b;
    for (const TimelinePoint& p : t) b.push_back(p.bytes);
    return b;
}

long index_of(const Schedule& s, InstrKind kind, int32_t target) {
    for (size_t i = 0; i < s.size(); ++i)
        if (s.code[i].kind == kind && s.code[i].target == target) return static_cast<long>(i);
    return -1;
}

TEST(InPlace, PointwiseOpsTakeOverADyingInputAndTheBytesAddUpByHand) {
    const Graph g = pointwise_chain();
    const Schedule s = plain(g);
    const LivenessTables t(g);
    const Liveness live(g, t, s);
    const auto node = [&](const char* name) { return *g.find_node(name); };
    // gelu's backward reads its input: fc0 stays live, so gelu allocates.
    EXPECT_EQ(live.in_place_input(index_of(s, InstrKind::Compute, node("g0"))), -1);
    // relu's input g0 dies at it (nothing reads gelu's output later): relu writes over it.
    EXPECT_EQ(live.in_place_input(index_of(s, InstrKind::Compute, node("r0"))), 0);
    // add's slot 0 (fc1) dies at it; r0 stays for fc1's backward.
    EXPECT_EQ(live.in_place_input(index_of(s, InstrKind::Compute, node("s"))), 0);
    // Not pointwise.
    EXPECT_EQ(live.in_place_input(index_of(s, InstrKind::Compute, node("fc1"))), -1);

    // Activations: fc0 + g0 (then r0 in g0's buffer) + fc1 (then s in fc1's buffer) + loss
    // = 3·128 + 4 at the loss; without the rule, s and fc1 are both live: 4·128.
    const Simulation sim = simulate(g, s, CostModel{});
    EXPECT_EQ(sim.activation_peak_bytes(), 3u * 128 + 4);
    const Schedule late = frees_delayed(s);
    ASSERT_NO_THROW(validate(g, late));
    const Liveness late_live(g, t, late);
    for (size_t i = 0; i < late.size(); ++i)
        EXPECT_EQ(late_live.in_place_input(static_cast<long>(i)), -1) << describe(g, late.code[i]);
    const Simulation late_sim = simulate(g, late, CostModel{});
    // Delayed frees keep fc1 past the loss: fc0, r0, fc1, s and the loss are live together.
    EXPECT_EQ(late_sim.activation_peak_bytes(), 4u * 128 + 4);
    // An in-place Compute's event changes no bytes (every Compute has one, for the timeline
    // views), and its input's Free has no release event: two fewer events here.
    EXPECT_EQ(sim.timeline.size() + 2, late_sim.timeline.size());
    for (const char* name : {"r0", "s"}) {
        const auto at = static_cast<int32_t>(index_of(s, InstrKind::Compute, node(name)));
        size_t k = 0;
        while (k < sim.timeline.size() && sim.timeline[k].instruction != at) ++k;
        ASSERT_LT(k, sim.timeline.size()) << name << " has no timeline event";
        ASSERT_GT(k, 0u);
        EXPECT_EQ(sim.timeline[k].bytes, sim.timeline[k - 1].bytes) << name;
    }
}

TEST(InPlace, ExecutionMatchesThePredictionEventByEventAndTheGradientsBitForBit) {
    const Graph g = pointwise_chain();
    const Schedule s = plain(g);
    const Schedule late = frees_delayed(s);
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    const Execution run = execute(g, s, *backend, data);
    const Execution ref = execute(g, late, *backend, data);
    const Simulation sim = simulate(g, s, CostModel{});
    EXPECT_EQ(run.peak_bytes, sim.peak_bytes);
    EXPECT_EQ(bytes_of(run.timeline), bytes_of(sim.timeline));
    EXPECT_EQ(run.peak_by_category, sim.peak_by_category);
    EXPECT_LT(run.peak_by_category[static_cast<size_t>(Category::Activations)],
              ref.peak_by_category[static_cast<size_t>(Category::Activations)]);
    EXPECT_EQ(run.loss, ref.loss);
    ASSERT_EQ(run.param_grads.size(), ref.param_grads.size());
    for (size_t i = 0; i < ref.param_grads.size(); ++i) {
        ASSERT_EQ(run.param_grads[i].size(), ref.param_grads[i].size());
        EXPECT_EQ(0, std::memcmp(ref.param_grads[i].data(), run.param_grads[i].data(),
                                 ref.param_grads[i].size() * sizeof(float)))
            << g.param(static_cast<ParamId>(i)).name;
    }
}

TEST(InPlace, GraphInputsAndOtherSizesAreNeverTakenOver) {
    Graph g("edges");
    g.add_input("x", DType::F32, {4, 8});
    g.add_node("r", OpKind::Relu, std::vector<std::string>{"x"});  // over a graph input
    g.add_node("fc", OpKind::Linear, std::vector<std::string>{"r"}, {{"out_features", int64_t{8}}});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"fc"});
    g.finalize();
    const LivenessTables t(g);
    EXPECT_EQ(t.in_place_inputs[static_cast<size_t>(*g.find_node("r"))], 0u);
    EXPECT_EQ(t.in_place_inputs[static_cast<size_t>(*g.find_node("fc"))], 0u);
    EXPECT_EQ(t.in_place_inputs[static_cast<size_t>(*g.find_node("loss"))], 0u);
}

TEST(InPlace, TheTakenOverInputCannotBeFreedTwice) {
    const Graph g = pointwise_chain();
    Schedule s = plain(g);
    const long r0 = index_of(s, InstrKind::Compute, *g.find_node("r0"));
    ASSERT_EQ(s.code[static_cast<size_t>(r0 + 1)].kind, InstrKind::Free);
    s.code.insert(s.code.begin() + r0 + 2, s.code[static_cast<size_t>(r0 + 1)]);
    try {
        validate(g, s);
        FAIL() << "double free not detected";
    } catch (const ScheduleError& e) {
        EXPECT_NE(std::string(e.what()).find("free 'g0': it is not live (double free)"),
                  std::string::npos)
            << e.what();
    }
}

// h12-elementwise: a broadcasting op takes over only its output-sized input. x[2,3,4] → fc0 →
// m = reduce_mean(fc0, axis 2) [2,3,1] → d = sub(m, fc0) → ls = mul(d, γ [4]) → loss. fc0 and m
// both die at d; fc0 (slot 1) has d's size, m does not.
TEST(InPlace, BroadcastingOpsTakeOverOnlyTheOutputSizedInput) {
    Graph g("broadcast");
    g.add_input("x", DType::F32, {2, 3, 4});
    g.add_node("fc0", OpKind::Linear, std::vector<std::string>{"x"},
               {{"out_features", int64_t{4}}});
    g.add_node("m", OpKind::ReduceMean, std::vector<std::string>{"fc0"},
               {{"axes", std::vector<int64_t>{2}}});
    g.add_node("d", OpKind::Sub, std::vector<std::string>{"m", "fc0"});
    g.add_node("ls", OpKind::Mul, std::vector<std::string>{"d"},
               {{"param_shape", std::vector<int64_t>{4}}});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"ls"});
    g.finalize();
    const Schedule s = plain(g);
    const LivenessTables t(g);
    EXPECT_EQ(t.in_place_inputs[static_cast<size_t>(*g.find_node("d"))], 0b10u);
    const Liveness live(g, t, s);
    EXPECT_EQ(live.in_place_input(index_of(s, InstrKind::Compute, *g.find_node("d"))), 1);
    // ls's input d is its residual (γ's gradient reads it): ls allocates.
    EXPECT_EQ(live.in_place_input(index_of(s, InstrKind::Compute, *g.find_node("ls"))), -1);

    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    const Execution run = execute(g, s, *backend, data);
    const Execution ref = execute(g, frees_delayed(s), *backend, data);
    const Simulation sim = simulate(g, s, CostModel{});
    EXPECT_EQ(run.peak_bytes, sim.peak_bytes);
    EXPECT_EQ(bytes_of(run.timeline), bytes_of(sim.timeline));
    EXPECT_EQ(run.loss, ref.loss);
    for (size_t i = 0; i < ref.param_grads.size(); ++i)
        EXPECT_EQ(0, std::memcmp(ref.param_grads[i].data(), run.param_grads[i].data(),
                                 ref.param_grads[i].size() * sizeof(float)))
            << g.param(static_cast<ParamId>(i)).name;
}

}  // namespace
}  // namespace rl
