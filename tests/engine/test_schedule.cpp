// The schedule builder, the validator's error messages, and the liveness rules' byte accounting
// on a network small enough to add up by hand.
#include <gtest/gtest.h>

#include "engine/errors.h"
#include "engine/schedule.h"
#include "engine/simulator.h"

namespace rl {
namespace {

// x[4,8] → fc0 (linear 8) → r0 (relu) → fc1 (linear 8) → loss (sum_squares)
Graph small_chain() {
    Graph g("small");
    g.add_input("x", DType::F32, {4, 8});
    g.add_node("fc0", OpKind::Linear, std::vector<std::string>{"x"},
               {{"out_features", int64_t{8}}});
    g.add_node("r0", OpKind::Relu, std::vector<std::string>{"fc0"});
    g.add_node("fc1", OpKind::Linear, std::vector<std::string>{"r0"},
               {{"out_features", int64_t{8}}});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"fc1"});
    g.finalize();
    return g;
}

// x → a, x → b, add(a, b) → loss
Graph diamond() {
    Graph g("diamond");
    g.add_input("x", DType::F32, {2, 4});
    g.add_node("a", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", int64_t{4}}});
    g.add_node("b", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", int64_t{4}}});
    g.add_node("sum", OpKind::Add, std::vector<std::string>{"a", "b"});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"sum"});
    g.finalize();
    return g;
}

Instruction C(int n) {
    return {InstrKind::Compute, n};
}
Instruction B(int n) {
    return {InstrKind::Backward, n};
}
Instruction F(int v) {
    return {InstrKind::Free, v};
}

std::string schedule_error(const Graph& g, std::vector<Instruction> code) {
    try {
        validate(g, Schedule{std::move(code)});
    } catch (const ScheduleError& e) {
        return e.what();
    }
    return "";
}

TEST(ScheduleBuilder, FreesEachValueAfterItsLastRead) {
    const Graph g = small_chain();
    ScheduleBuilder b(g);
    for (int n = 0; n < 4; ++n) b.compute(n);
    for (int n = 3; n >= 0; --n) b.backward(n);
    const Schedule s = b.finish();
    // values: 0 x, 1 fc0, 2 r0, 3 fc1, 4 loss. fc0 is read only by r0's compute (relu's backward
    // reads its output); r0 by fc1's compute and backward and by its own backward.
    const std::vector<Instruction> expected = {C(0), C(1), F(1), C(2), C(3), F(4),
                                               B(3), F(3), B(2), B(1), F(2), B(0)};
    EXPECT_EQ(s.code, expected) << to_text(g, s);
    EXPECT_NO_THROW(validate(g, s));
}

// small_chain's forward and backward, recomputing fc0 and r0 before r0's backward.
Schedule recomputing_fc0_and_r0(const Graph& g) {
    ScheduleBuilder b(g);
    for (int n = 0; n < 4; ++n) b.compute(n);
    b.backward(3);
    b.backward(2);
    b.compute(0);  // recompute fc0 (pointless, but legal): its first instance died at C(1)
    b.compute(1);  // r0 is still live: the builder frees the first instance first
    b.backward(1);
    b.backward(0);
    return b.finish();
}

TEST(ScheduleBuilder, RecomputedValueGetsASecondInstance) {
    const Graph g = small_chain();
    const Schedule s = recomputing_fc0_and_r0(g);
    EXPECT_NO_THROW(validate(g, s)) << to_text(g, s);
    const Simulation sim = simulate(g, s, CostModel{});
    EXPECT_EQ(sim.recomputes, 2);
    EXPECT_EQ(sim.computes, 6);
}

// A recompute that reads a value kept since the forward (here the network input) is priced at
// its recompute time (inputs from memory); one whose inputs were just recomputed, at its forward
// time. The per-instruction times add up to the step's.
TEST(Simulator, PricesARecomputeByWhereItsInputsComeFrom) {
    const Graph g = small_chain();
    // fc0's recompute reads x, kept since the start: recompute_ms; r0's reads fc0, just
    // recomputed: forward_ms.
    const Schedule s = recomputing_fc0_and_r0(g);
    const CostModel costs =
        CostModel::from_times("test", {1, 2, 3, 4}, {0.5, 0.5, 0.5, 0.5}, {10, 20, 30, 40});
    const Simulation sim = simulate(g, s, costs);
    EXPECT_DOUBLE_EQ(sim.forward_ms, 1 + 2 + 3 + 4);
    EXPECT_DOUBLE_EQ(sim.recompute_ms, 10 + 2);
    EXPECT_DOUBLE_EQ(sim.backward_ms, 4 * 0.5);
    ASSERT_EQ(sim.instruction_ms.size(), s.size());
    double sum = 0;
    std::vector<double> computes;
    for (size_t i = 0; i < s.size(); ++i) {
        sum += sim.instruction_ms[i];
        if (s.code[i].kind == InstrKind::Compute) computes.push_back(sim.instruction_ms[i]);
        if (s.code[i].kind == InstrKind::Free) {
            EXPECT_EQ(sim.instruction_ms[i], 0.0);
        }
    }
    EXPECT_DOUBLE_EQ(sum, sim.total_ms());
    EXPECT_EQ(computes, (std::vector<double>{1, 2, 3, 4, 10, 2}));
    // Without recompute times, every compute costs its forward.
    const Simulation plain =
        simulate(g, s, CostModel::from_times("test", {1, 2, 3, 4}, {0, 0, 0, 0}));
    EXPECT_DOUBLE_EQ(plain.recompute_ms, 1 + 2);
    EXPECT_THROW(CostModel::from_times("test", {1, 2}, {0, 0}, {1}), Error);
}

// A value read while its offload is in flight (the device buffer stays readable until the Wait):
// the builder frees neither it nor its prefetched instance early, and releases the offloaded
// instance only at its Wait.
TEST(ScheduleBuilder, ReadsBetweenAnOffloadAndItsWaitAreNotLast) {
    const Graph g = small_chain();
    const ValueId r0 = g.node(1).output;
    ScheduleBuilder b(g);
    b.compute(0);
    b.compute(1);
    b.offload(r0);  // r0 leaves while fc1 still reads it
    b.compute(2);
    b.wait(r0);
    b.compute(3);
    b.backward(3);
    b.prefetch(r0);
    b.wait(r0);
    b.backward(2);
    b.backward(1);
    b.backward(0);
    const Schedule s = b.finish();
    ASSERT_NO_THROW(validate(g, s)) << to_text(g, s);
    const Instruction O{InstrKind::Offload, r0}, P{InstrKind::Prefetch, r0}, W{InstrKind::Wait, r0};
    // values: 0 x, 1 fc0, 2 r0, 3 fc1, 4 loss.
    const std::vector<Instruction> expected = {C(0), C(1), F(1), O, C(2), W,    C(3), F(4),
                                               B(3), F(3), P,    W, B(2), B(1), F(2), B(0)};
    EXPECT_EQ(s.code, expected) << to_text(g, s);
    const Simulation sim = simulate(g, s, CostModel{});
    EXPECT_EQ(sim.offloads, 1);
    EXPECT_EQ(sim.prefetches, 1);
    EXPECT_EQ(sim.host_peak_bytes, g.value(r0).bytes);
}

TEST(Validator, NamesTheInstructionAndTheReason) {
    const Graph g = small_chain();
    EXPECT_EQ(schedule_error(g, {C(1)}),
              "instruction 0: compute 'r0': its input 'fc0' is not live (never computed, or "
              "freed)");
    EXPECT_EQ(schedule_error(g, {C(0), C(0)}),
              "instruction 1: compute 'fc0': its output is already live; free it before "
              "computing it again");
    EXPECT_EQ(schedule_error(g, {C(0), F(1), F(1)}),
              "instruction 2: free 'fc0': it is not live (double free)");
    EXPECT_EQ(schedule_error(g, {F(1)}), "instruction 0: free 'fc0': it was never computed");
    EXPECT_EQ(schedule_error(g, {F(0)}),
              "instruction 0: free 'x': graph inputs stay live for the whole step");
    EXPECT_EQ(schedule_error(g, {C(0), C(1), C(2), C(3), B(3), B(1)}),
              "instruction 5: backward 'r0': its gradient is incomplete; consumer 'fc1' has not "
              "run its backward");
    EXPECT_EQ(schedule_error(g, {C(0), C(1), C(2), C(3), B(3), F(2), B(2)}),
              "instruction 6: backward 'fc1' needs its input 'r0', which is not live; recompute "
              "it first");
    EXPECT_EQ(schedule_error(g, {C(0), C(1), C(2), C(3), B(3), B(2), F(2), B(1)}),
              "instruction 7: backward 'r0' needs its own output, which is not live; recompute "
              "it first");
    EXPECT_EQ(schedule_error(g, {C(0), C(1), C(2), C(3), B(3), B(2), B(1)}),
              "instruction 7: the schedule ends without the backward of 'fc0'");
    EXPECT_EQ(schedule_error(g, {C(0), C(1), C(2), C(3), B(3), B(3)}),
              "instruction 5: backward 'loss' runs a second time");
    EXPECT_EQ(schedule_error(g, {C(9)}), "instruction 0: node id 9 does not exist");
}

TEST(Validator, BackwardsMustRunInCanonicalOrder) {
    const Graph g = diamond();
    // nodes: 0 a, 1 b, 2 sum, 3 loss. Running a's backward before b's changes nothing
    // mathematically, but would change the accumulation order in a shared input's gradient.
    EXPECT_EQ(schedule_error(g, {C(0), C(1), C(2), C(3), B(3), B(2), B(0), B(1)}),
              "instruction 7: backward 'b' is out of the canonical order: backwards run in "
              "decreasing node order, and 'a' already ran");
    EXPECT_EQ(schedule_error(g, {C(0), C(1), C(2), C(3), B(3), B(2), B(1), B(0)}), "");
}

TEST(Liveness, PeakIsTakenInsideInstructionsAndAddsUpByHand) {
    const Graph g = small_chain();
    ScheduleBuilder b(g);
    for (int n = 0; n < 4; ++n) b.compute(n);
    for (int n = 3; n >= 0; --n) b.backward(n);
    const Schedule s = b.finish();  // C0 C1 F1 C2 C3 F4 B3 F3 B2 B1 F2 B0
    const Simulation sim = simulate(g, s, CostModel{});
    // params 2·(8·8 + 8)·4 = 576, input 4·8·4 = 128, each activation 128, the loss 4.
    // B0 (instruction 11) holds params, input, r0's... no: r0 died at F2. At B0: 704 base,
    // fc0's output gradient 128, fc1's parameter gradients 288, and fc0's new ones 288 → 1408.
    EXPECT_EQ(sim.peak_bytes, 1408u);
    EXPECT_EQ(sim.peak_instruction, 11);
    // Between instructions the live bytes never exceed 1280 after B0: the peak is inside B0.
    EXPECT_EQ(sim.timeline.back().bytes, 0u);
    EXPECT_EQ(sim.activation_peak_bytes(), 128u * 2 + 4u);
}

TEST(Graph, RejectsBadNetworksWithTheNodeName) {
    Graph g("bad");
    g.add_input("x", DType::F32, {4, 8});
    g.add_node("fc0", OpKind::Linear, std::vector<std::string>{"x"},
               {{"out_features", int64_t{8}}});
    EXPECT_THROW(g.add_node("fc0", OpKind::Relu, std::vector<std::string>{"x"}), Error);
    try {
        g.add_node("oops", OpKind::Relu, std::vector<std::string>{"nothing"});
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'oops'"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("'nothing'"), std::string::npos);
    }
    try {
        g.add_node("sum", OpKind::Add, std::vector<std::string>{"x", "fc0"});
        g.add_node("bad_add", OpKind::Add, std::vector<std::string>{"x", "x"});
        Graph h("mismatch");
        h.add_input("x", DType::F32, {4, 8});
        h.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"},
                   {{"out_features", int64_t{3}}});
        h.add_node("sum", OpKind::Add, std::vector<std::string>{"x", "fc"});
        FAIL() << "shape mismatch not detected";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("node 'sum'"), std::string::npos) << e.what();
    }
    Graph noloss("noloss");
    noloss.add_input("x", DType::F32, {4, 8});
    noloss.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"},
                    {{"out_features", int64_t{3}}});
    EXPECT_THROW(noloss.finalize(), Error);
}

TEST(Graph, RefusesSizesThatOverflowBeforeAllocating) {
    Graph g("huge");
    try {
        g.add_input("x", DType::F32, {int64_t{1} << 40, int64_t{1} << 30});
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace rl
