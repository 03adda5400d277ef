// The gpt preset (one tensor-parallel rank of a GPT, Korthikanti et al. 2023), the u8 dropout
// mask and the collectives it uses, and bf16/f16 graphs executed as their f32 copies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/ops/op.h"
#include "engine/rng.h"
#include "engine/schedule.h"
#include "engine/test_util.h"

namespace rl {
namespace {

using testing::contains;
using testing::error_of;

const std::string kSmall = "gpt:layers=2,d_model=16,heads=4,seq=4,batch=2,vocab=8";

// Forward in node order, then every Backward in reverse: what `none` does, without strategies.
const Node& gr_node(const Graph& g, const char* name) {
    return g.node(g.find_node(name).value());
}

Schedule plain_schedule(const Graph& g) {
    Schedule s;
    for (NodeId n = 0; n < g.num_nodes(); ++n) s.code.push_back({InstrKind::Compute, n});
    for (NodeId n = g.num_nodes() - 1; n >= 0; --n)
        if (g.needs_backward(n)) s.code.push_back({InstrKind::Backward, n});
    return s;
}

TEST(Gpt, ValidationErrorsSayWhatToChange) {
    EXPECT_TRUE(contains(error_of([] { load_network(kSmall + ",tp=3"); }),
                         "heads=4 is not divisible by tp=3"));
    EXPECT_TRUE(contains(error_of([] { load_network(kSmall + ",dtype=fp8"); }), "dtype"));
    EXPECT_TRUE(contains(error_of([] { load_network(kSmall + ",sp=1"); }), "needs tp > 1"));
    EXPECT_TRUE(contains(error_of([] { load_network("gpt:d_model=18,heads=4"); }),
                         "d_model=18 is not divisible by heads=4"));
    EXPECT_TRUE(contains(error_of([] {
                             load_network(
                                 "gpt:layers=1,d_model=16,heads=4,seq=6,batch=1,tp=4,sp=1,vocab=8");
                         }),
                         "seq=6 is not divisible by tp=4"));
    EXPECT_TRUE(contains(error_of([] { load_network(kSmall + ",dropout=1"); }), "dropout"));
    // 2^31 positions: the scores of one head alone overflow 2^62 bytes.
    const std::string huge = error_of(
        [] { load_network("gpt:layers=1,d_model=16,heads=4,seq=2147483648,batch=1,vocab=8"); });
    EXPECT_TRUE(contains(huge, "overflows 2^62")) << huge;
    EXPECT_TRUE(contains(huge, "gpt:")) << huge;
}

TEST(Gpt, Bf16ActivationsU8MasksF32Params) {
    const Graph g = load_network(kSmall);
    EXPECT_EQ(g.float_dtype(), DType::BF16);
    int masks = 0;
    for (const Node& n : g.nodes()) {
        const Value& out = g.value(n.output);
        if (n.op == OpKind::DropoutMask) {
            ++masks;
            EXPECT_EQ(out.dtype, DType::U8);
            EXPECT_EQ(out.bytes, static_cast<uint64_t>(out.shape.numel()));
        } else if (n.op != OpKind::CrossEntropy) {
            EXPECT_EQ(out.dtype, DType::BF16) << n.name;
            EXPECT_EQ(out.bytes, 2 * static_cast<uint64_t>(out.shape.numel())) << n.name;
        }
    }
    EXPECT_EQ(masks, 2 * 3);  // three dropouts per layer
    for (const Param& p : g.params())
        EXPECT_EQ(p.bytes, 4 * static_cast<uint64_t>(p.shape.numel()));
    const Graph f32 = g.with_float_dtype(DType::F32);
    EXPECT_EQ(f32.float_dtype(), DType::F32);
    EXPECT_GT(f32.activation_bytes(), g.activation_bytes());
    // The kernels compute in f32: executing the bf16 graph itself is refused with the way out.
    const std::string e = error_of([&] { RunData::seeded(g); });
    EXPECT_TRUE(contains(e, "with_float_dtype")) << e;
}

TEST(Gpt, TensorParallelRankSplitsHeadsAndColumns) {
    const Graph g = load_network(kSmall + ",tp=2");
    const Graph sp = load_network(kSmall + ",tp=2,sp=1");
    auto shape = [](const Graph& gr, const char* n) {
        return gr.output_of(*gr.find_node(n)).shape;
    };
    EXPECT_EQ(shape(g, "block0.attn.q"), (Shape{8, 8}));          // h/t columns
    EXPECT_EQ(shape(g, "block0.mlp.fc1"), (Shape{8, 32}));        // 4h/t
    EXPECT_EQ(shape(g, "block0.attn.scores"), (Shape{4, 4, 4}));  // b·a/t heads
    EXPECT_EQ(shape(g, "block0.ln1"), (Shape{8, 16}));            // replicated
    EXPECT_EQ(shape(sp, "block0.ln1"), (Shape{4, 16}));           // sharded along the sequence
    EXPECT_EQ(shape(sp, "block0.attn.f"), (Shape{8, 16}));        // all-gathered
    for (const Graph* gr : {&g, &sp})
        for (const Node& n : gr->nodes())
            if (n.op == OpKind::Collective) {
                EXPECT_EQ(op_def(n.op).cost(*gr, n).fwd_flops, 0);
                EXPECT_EQ(op_def(n.op).cost(*gr, n).bwd_flops, 0);
            }
    const Node& gather = gr_node(sp, "block0.attn.f");
    EXPECT_TRUE(gather.has_tag("sp_gather"));
    EXPECT_TRUE(gr_node(g, "block0.attn.probs_drop_mask").has_tag("attn_core"));
    EXPECT_FALSE(gr_node(g, "block0.attn.drop_mask").has_tag("attn_core"));
}

// A [rows, cols] value computed from the graph's input by a linear layer: the graph then has a
// parameter to train, which every runnable network needs.
ValueId trained_rows(Graph& g, int64_t rows, int64_t cols) {
    const ValueId in = g.add_input("in", DType::F32, {rows, 3});
    return g
        .node(g.add_node("fc", OpKind::Linear, std::vector<ValueId>{in},
                         Attrs{{"out_features", cols}}))
        .output;
}

// dropout(x, dropout_mask(x)) reads the mask a node keyed by the mask node's name drew; the same
// bits as dropout(x) hashing its own mask under that name, forward and backward.
// The mask node's bytes against the hash element by element, over several of the kernels'
// chunks (16384 elements) and a tail shorter than a vector, at one and two threads.
TEST(Gpt, DropoutMaskBytesAreTheHashsOverChunksAndTails) {
    Graph g("mask", 5);
    const ValueId x = trained_rows(g, 151, 171);
    const NodeId m =
        g.add_node("m", OpKind::DropoutMask, std::vector<ValueId>{x}, Attrs{{"p", 0.3}});
    const NodeId d = g.add_node("d", OpKind::Dropout, std::vector<ValueId>{x, g.node(m).output},
                                Attrs{{"p", 0.3}});
    g.add_node("loss", OpKind::SumSquares, std::vector<ValueId>{g.node(d).output});
    g.finalize();
    const int64_t n = 151 * 171;
    const uint64_t key = dropout_key(g.seed(), "m");
    const uint32_t threshold = dropout_threshold(0.3);
    for (int threads : {1, 2}) {
        auto backend = make_cpu_backend(threads);
        void* in = backend->allocate(static_cast<uint64_t>(n) * 4);
        void* out = backend->allocate(static_cast<uint64_t>(n));
        std::memset(out, 7, static_cast<size_t>(n));  // neither 0 nor 1
        const void* inputs[] = {in};
        backend->forward({g, g.node(m), inputs, nullptr, out, nullptr});
        std::vector<uint8_t> keep(static_cast<size_t>(n));
        backend->copy_to_host(keep.data(), out, keep.size());
        int64_t kept = 0;
        for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(keep[static_cast<size_t>(i)],
                      dropout_keeps(key, static_cast<uint64_t>(i), threshold) ? 1 : 0)
                << i << " at " << threads << " threads";
            kept += keep[static_cast<size_t>(i)];
        }
        EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(n), 0.7, 0.01);
        backend->release(in);
        backend->release(out);
    }
}

// Dropout's kernels, masked and hashing their own mask, against the rule written out one element
// at a time, bit for bit: y = x·scale where kept and +0 where dropped; dX = dY·scale or +0, and
// accumulating, fma(dY, scale, dX) where kept and dX untouched where dropped. Over 2.5 of the
// kernels' chunks (16384 elements) and a tail shorter than any vector, with NaNs, infinities and
// -0s in x, dY and the starting dX, at one and two threads.
TEST(Gpt, DropoutKernelsFollowTheRuleBitForBit) {
    const int64_t n = 11 * 3725;  // 15 past the last 16-float vector
    Graph g("drop", 3);
    const ValueId x = trained_rows(g, 11, 3725);
    const NodeId mk =
        g.add_node("d", OpKind::DropoutMask, std::vector<ValueId>{x}, Attrs{{"p", 0.3}});
    const NodeId masked = g.add_node("dm", OpKind::Dropout,
                                     std::vector<ValueId>{x, g.node(mk).output}, Attrs{{"p", 0.3}});
    const NodeId hashed =
        g.add_node("d_hash", OpKind::Dropout, std::vector<ValueId>{x}, Attrs{{"p", 0.3}});
    const NodeId sum = g.add_node(
        "sum", OpKind::Add, std::vector<ValueId>{g.node(masked).output, g.node(hashed).output});
    g.add_node("loss", OpKind::SumSquares, std::vector<ValueId>{g.node(sum).output});
    g.finalize();
    const uint64_t key_masked = dropout_key(g.seed(), "d");
    const uint64_t key_hashed = dropout_key(g.seed(), "d_hash");
    const uint32_t threshold = dropout_threshold(0.3);
    const float scale = static_cast<float>(1.0 / (1 - 0.3));
    SplitMix64 rng(9);
    std::vector<float> xs(n), dy(n), dx0(n);
    const float specials[] = {-0.0f, 0.0f, std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(), -1e-40f};
    for (int64_t i = 0; i < n; ++i) {
        const bool special = rng.below(16) == 0;
        xs[i] = special ? specials[rng.below(5)] : rng.symmetric() * 3;
        dy[i] = rng.below(16) == 0 ? specials[rng.below(5)] : rng.symmetric();
        dx0[i] = rng.below(16) == 0 ? specials[rng.below(5)] : rng.symmetric();
    }
    for (int threads : {1, 2}) {
        auto backend = make_cpu_backend(threads);
        std::vector<uint8_t> keep(n);
        {
            const void* in[] = {xs.data()};
            backend->forward({g, g.node(mk), in, nullptr, keep.data(), nullptr});
        }
        for (const NodeId node : {masked, hashed}) {
            const uint64_t key = node == masked ? key_masked : key_hashed;
            const void* in[] = {xs.data(), keep.data()};
            std::vector<float> y(n, 7.0f);
            backend->forward({g, g.node(node), in, nullptr, y.data(), nullptr});
            for (const bool acc : {false, true}) {
                std::vector<float> dx = dx0;
                float* grads[] = {dx.data(), nullptr};
                const bool accumulate[] = {acc, false};
                backend->backward({g, g.node(node), in, nullptr, nullptr, dy.data(), grads,
                                   accumulate, nullptr, nullptr});
                for (int64_t i = 0; i < n; ++i) {
                    const bool kept = dropout_keeps(key, static_cast<uint64_t>(i), threshold);
                    const float want_y = kept ? xs[i] * scale : 0.0f;
                    const float want_dx = acc ? (kept ? std::fma(dy[i], scale, dx0[i]) : dx0[i])
                                              : (kept ? dy[i] * scale : 0.0f);
                    ASSERT_EQ(0, std::memcmp(&y[i], &want_y, 4))
                        << g.node(node).name << " y at " << i << ", " << threads << " threads";
                    ASSERT_EQ(0, std::memcmp(&dx[i], &want_dx, 4))
                        << g.node(node).name << " dx at " << i << (acc ? ", accumulating" : "")
                        << ", " << threads << " threads";
                }
            }
        }
    }
}

TEST(Gpt, MaskedDropoutMatchesHashedDropoutBitwise) {
    auto build = [](bool masked) {
        Graph g("drop", 7);
        const ValueId x = g.add_input("x", DType::F32, {6, 33});
        const NodeId fc = g.add_node("fc", OpKind::Linear, std::vector<ValueId>{x},
                                     Attrs{{"out_features", int64_t{33}}});
        const ValueId h = g.node(fc).output;
        if (masked) {
            const NodeId m =
                g.add_node("d", OpKind::DropoutMask, std::vector<ValueId>{h}, Attrs{{"p", 0.3}});
            const NodeId d =
                g.add_node("drop", OpKind::Dropout, std::vector<ValueId>{h, g.node(m).output},
                           Attrs{{"p", 0.3}});
            g.add_node("loss", OpKind::SumSquares, std::vector<ValueId>{g.node(d).output});
        } else {
            const NodeId d =
                g.add_node("d", OpKind::Dropout, std::vector<ValueId>{h}, Attrs{{"p", 0.3}});
            g.add_node("loss", OpKind::SumSquares, std::vector<ValueId>{g.node(d).output});
        }
        g.finalize();
        return g;
    };
    const Graph a = build(true), b = build(false);
    auto backend = make_cpu_backend(1);
    const Execution ra = execute(a, plain_schedule(a), *backend, RunData::seeded(a));
    const Execution rb = execute(b, plain_schedule(b), *backend, RunData::seeded(b));
    EXPECT_EQ(ra.loss, rb.loss);
    ASSERT_EQ(ra.param_grads.size(), rb.param_grads.size());
    for (size_t p = 0; p < ra.param_grads.size(); ++p)
        EXPECT_EQ(0, std::memcmp(ra.param_grads[p].data(), rb.param_grads[p].data(),
                                 ra.param_grads[p].size() * sizeof(float)));
    EXPECT_NE(ra.loss, 0.0);
    // A mask that is not a dropout_mask's output, or with another p, is refused.
    Graph bad("bad", 1);
    const ValueId x = bad.add_input("x", DType::F32, {2, 3});
    const NodeId m =
        bad.add_node("m", OpKind::DropoutMask, std::vector<ValueId>{x}, Attrs{{"p", 0.5}});
    EXPECT_TRUE(contains(error_of([&] {
                             bad.add_node("d", OpKind::Dropout,
                                          std::vector<ValueId>{x, bad.node(m).output},
                                          Attrs{{"p", 0.25}});
                         }),
                         "give both the same p"));
    EXPECT_TRUE(contains(error_of([&] {
                             bad.add_input("u", DType::U8, {2, 3});
                         }),
                         "dropout masks"));
}

}  // namespace
}  // namespace rl
