// `policy` (JAX's jax.checkpoint with saveable policies) and the saved-residuals listing.
//
// The reference sets come from JAX's documentation ("Gradient checkpointing with jax.checkpoint
// (jax.remat)"), where print_saved_residuals is run on f = g∘g∘g, g(W, x) = sin(W·x), with
// W1 5×4, W2 6×5, W3 7×6 and x of 4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/network_json.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/policy.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

// JAX's f: x [4]; layer i: y_i = linear(x, bias=0) (W_i [out, in], as JAX's jnp.dot(W, x)),
// c_i = cos(y_i), s_i = sin(y_i, c_i) — sin with its derivative computed in the forward, as
// JAX's jvp rule for sin does, so its backward reads c_i, not y_i; the layer outputs carry the
// names a, b, c; then a sum-of-squares loss (JAX's listing is of f alone; ours leaves the loss's
// own backward out, see policy.h). `with_derivative` false: plain sin(y_i), whose backward
// reads y_i.
Graph jax_network(bool with_derivative = true) {
    Graph g("jax_sin", 1);
    ValueId x = g.add_input("x", DType::F32, Shape{4});
    const int64_t outs[] = {5, 6, 7};
    const char* names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; ++i) {
        const std::string layer = "layer" + std::to_string(i + 1);
        const std::string block = "block" + std::to_string(i);
        const NodeId dot =
            g.add_node(layer + ".dot", OpKind::Linear, std::vector<ValueId>{x},
                       Attrs{{"out_features", outs[i]}, {"bias", int64_t{0}}}, {"dot", block});
        const ValueId y = g.node(dot).output;
        std::vector<ValueId> sin_inputs = {y};
        if (with_derivative)
            sin_inputs.push_back(g.node(g.add_node(layer + ".cos", OpKind::Cos,
                                                   std::vector<ValueId>{y}, {}, {block}))
                                     .output);
        const NodeId sin =
            g.add_node(layer + ".sin", OpKind::Sin, sin_inputs, {}, {block, names[i]});
        x = g.node(sin).output;
    }
    g.add_node("loss", OpKind::SumSquares, std::vector<ValueId>{x}, {}, {"loss"});
    g.finalize();
    return g;
}

using Row = std::pair<std::string, std::string>;  // type, what it is

// Our rows, reduced to what JAX's listing says of each: its type and "argument", "output of
// <op>" or "named '<name>'".
std::vector<Row> listing(const Graph& g, const std::string& spec, bool include_loss = false) {
    const Spec s = parse_spec(spec);
    const Plan p = plan_with(g, CostModel::analytic(g, DeviceRates{}), s);
    EXPECT_NE(p.status, PlanStatus::Infeasible) << p.message;
    validate(g, p.schedule);
    ResidualOptions opt;
    opt.names = checkpoint_names(s);
    opt.include_loss = include_loss;
    const SavedResiduals r = saved_residuals(g, p.schedule, opt);
    std::vector<Row> out;
    uint64_t total = 0;
    for (const SavedResidual& row : r.rows) {
        total += row.bytes;
        std::string what = row.origin.substr(0, row.origin.find(" from"));
        if (row.source == ResidualSource::Argument) what = "argument";
        out.emplace_back(row.type, what);
    }
    EXPECT_EQ(total, r.total_bytes);
    return out;
}

const std::vector<Row> kArguments = {{"f32[5,4]", "argument"},
                                     {"f32[6,5]", "argument"},
                                     {"f32[7,6]", "argument"},
                                     {"f32[4]", "argument"}};

std::vector<Row> arguments_plus(std::vector<Row> rest) {
    std::vector<Row> out = kArguments;
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
}

TEST(PolicyJax, NoCheckpointSavesTheArgumentsSinAndCos) {
    // JAX: the arguments, then f32[5] sin, f32[5] cos, f32[6] sin, f32[6] cos, f32[7] cos
    // (ours lists activations in node order: each layer's cos before its sin).
    const Graph g = jax_network();
    const std::vector<Row> jax = arguments_plus({{"f32[5]", "output of cos"},
                                                 {"f32[5]", "output of sin"},
                                                 {"f32[6]", "output of cos"},
                                                 {"f32[6]", "output of sin"},
                                                 {"f32[7]", "output of cos"}});
    EXPECT_EQ(listing(g, "none"), jax);
    // And the same set under a policy that saves everything.
    EXPECT_EQ(listing(g, "policy:regions=model,policy=everything_saveable"), listing(g, "none"));
}

TEST(PolicyJax, PlainSinSavesItsInputInsteadOfCos) {
    // Without the derivative input, sin's backward reads y: the linear output takes cos's place
    // (same types and bytes).
    const Graph g = jax_network(false);
    EXPECT_EQ(listing(g, "none"), arguments_plus({{"f32[5]", "output of linear"},
                                                  {"f32[5]", "output of sin"},
                                                  {"f32[6]", "output of linear"},
                                                  {"f32[6]", "output of sin"},
                                                  {"f32[7]", "output of linear"}}));
}

TEST(PolicyJax, DerivativeInputGivesTheSameGradientsAsPlainSin) {
    // cos y computed in the forward and read by the backward, or computed in the backward:
    // the same expression dY * cos(y), so the same bits.
    std::vector<std::vector<float>> grads[2];
    for (int with = 0; with < 2; ++with) {
        const Graph g = jax_network(with != 0);
        EXPECT_EQ(g.output_of(*g.find_node("layer1.dot")).requires_grad, true);
        if (with) {
            EXPECT_FALSE(g.output_of(*g.find_node("layer1.cos")).requires_grad);
        }
        const Plan p = plan_with(g, CostModel{}, parse_spec("none"));
        auto backend = make_cpu_backend(1);
        grads[with] = execute(g, p.schedule, *backend, RunData::seeded(g)).param_grads;
    }
    ASSERT_EQ(grads[0].size(), 3u);
    EXPECT_EQ(grads[0], grads[1]);
}

TEST(PolicyJax, EachLayerCheckpointedSavesTheArgumentsAndTwoSinOutputs) {
    const Graph g = jax_network();
    const std::vector<Row> want =
        arguments_plus({{"f32[5]", "output of sin"}, {"f32[6]", "output of sin"}});
    EXPECT_EQ(listing(g, "policy:regions=blocks,policy=nothing_saveable"), want);
    // Regions from the layer tags give the same regions.
    EXPECT_EQ(listing(g, "policy:regions=tags,tags=block0|block1|block2,policy=nothing_saveable"),
              want);
}

TEST(PolicyJax, DotsWithNoBatchDimsOnTheWholeFunctionSavesTheThreeDots) {
    const Graph g = jax_network();
    // JAX: "output of dot_general"; our dot with no batch dimensions is linear.
    const std::vector<Row> want = arguments_plus({{"f32[5]", "output of linear"},
                                                  {"f32[6]", "output of linear"},
                                                  {"f32[7]", "output of linear"}});
    EXPECT_EQ(listing(g, "policy:regions=model,policy=dots_with_no_batch_dims_saveable"), want);
    EXPECT_EQ(listing(g, "policy:regions=model,policy=dots_saveable"), want);
}

TEST(PolicyJax, SaveOnlyTheseNamesSavesTheArgumentsAndNamedA) {
    const Graph g = jax_network();
    EXPECT_EQ(listing(g, "policy:regions=model,policy=save_only_these_names,names=a"),
              arguments_plus({{"f32[5]", "named 'a'"}}));
    // Nothing saveable on the whole function: only its inputs.
    EXPECT_EQ(listing(g, "policy:regions=model,policy=nothing_saveable"), kArguments);
}

TEST(PolicyJax, FormattedListingAndTotal) {
    const Graph g = jax_network();
    const Spec spec = parse_spec("policy:regions=model,policy=save_only_these_names,names=a");
    const Plan p = plan_with(g, CostModel{}, spec);
    ResidualOptions opt;
    opt.names = checkpoint_names(spec);
    EXPECT_EQ(opt.names, (std::vector<std::string>{"a"}));
    const SavedResiduals r = saved_residuals(g, p.schedule, opt);
    // 4 bytes an element: 20 + 30 + 42 + 4 argument elements, 5 for 'a'.
    EXPECT_EQ(r.total_bytes, 4u * (20 + 30 + 42 + 4 + 5));
    EXPECT_EQ(format_saved_residuals(r),
              "f32[5,4] from the argument layer1.dot.weight\n"
              "f32[6,5] from the argument layer2.dot.weight\n"
              "f32[7,6] from the argument layer3.dot.weight\n"
              "f32[4]   from the argument x\n"
              "f32[5]   named 'a' from layer1.sin\n"
              "total 404 bytes (404 B) in 5 residuals\n");
}

TEST(PolicyJax, IncludeLossAddsWhatOnlyTheLossReads) {
    const Graph g = jax_network();
    std::vector<Row> without = listing(g, "none");
    const std::vector<Row> with = listing(g, "none", true);
    without.emplace_back("f32[7]", "output of sin");  // s3, the loss's input
    EXPECT_EQ(with, without);
}

TEST(PolicyResiduals, CheckpointNamesOnlyForPolicySpecs) {
    EXPECT_EQ(checkpoint_names(parse_spec(
                  "policy:policy=save_from_both_policies,policy1=save_only_these_names,names1=a|b,"
                  "policy2=save_any_names_but_these,names2=b|c")),
              (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_TRUE(checkpoint_names(parse_spec("sqrt-n:segments=2")).empty());
}

TEST(PolicyResiduals, ListingWorksForAnyStrategy) {
    // sqrt-n keeps its checkpoints and the last segment; its listing is smaller than none's and
    // every row is a kept activation or an argument.
    const Graph g = load_network("mlp:depth=8,width=16,batch=4");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const SavedResiduals none =
        saved_residuals(g, plan_with(g, costs, parse_spec("none")).schedule);
    const Plan sq = plan_with(g, costs, parse_spec("sqrt-n"));
    const SavedResiduals sqrt_n = saved_residuals(g, sq.schedule);
    EXPECT_LT(sqrt_n.total_bytes, none.total_bytes);
    for (NodeId c : sq.checkpoints) {
        const std::string name = g.node(c).name;
        EXPECT_TRUE(std::any_of(sqrt_n.rows.begin(), sqrt_n.rows.end(),
                                [&](const SavedResidual& r) { return r.value == name; }))
            << name;
    }
    // none on an mlp with relu: relu's backward reads its output, linear's its input, so every
    // relu output is saved (the last for its own backward, too) and no linear output.
    int relu_rows = 0;
    for (const SavedResidual& r : none.rows) {
        if (r.origin.rfind("output of relu", 0) == 0) ++relu_rows;
        EXPECT_EQ(r.origin.find("output of linear"), std::string::npos) << r.origin;
    }
    EXPECT_EQ(relu_rows, 8);
}

// ---------------------------------------------------------------------------------------------
// Semantics on the presets

std::vector<std::string> activation_rows(const Graph& g, const Schedule& s) {
    std::vector<std::string> out;
    for (const SavedResidual& r : saved_residuals(g, s).rows)
        if (r.source != ResidualSource::Argument) out.push_back(r.value);
    return out;
}

TEST(Policy, EverythingSaveableIsNone) {
    // JAX: everything_saveable is "as if jax.checkpoint were not being used at all".
    for (const char* net :
         {"mlp:depth=4,width=8,batch=2,act=gelu", "resmlp:depth=2,width=8,batch=2",
          "transformer:layers=2,d_model=8,heads=2,seq=4,batch=2,vocab=8"}) {
        const Graph g = load_network(net);
        const Schedule none = plan_with(g, CostModel{}, parse_spec("none")).schedule;
        for (const char* regions : {"blocks", "model"}) {
            const Schedule all =
                plan_with(
                    g, CostModel{},
                    parse_spec(std::string("policy:policy=everything_saveable,regions=") + regions))
                    .schedule;
            EXPECT_EQ(all.code, none.code) << net << " " << regions;
        }
    }
}

TEST(Policy, NothingSaveableKeepsOnlyTheRegionInputs) {
    // mlp with gelu, block i = {fc_i, gelu_i}: block i's input is gelu_{i-1} (x for block 0).
    // gelu_3 feeds only the loss, whose own backward the listing leaves out.
    const Graph g = load_network("mlp:depth=4,width=8,batch=2,act=gelu");
    const Plan p = plan_with(g, CostModel{}, parse_spec("policy:policy=nothing_saveable"));
    EXPECT_EQ(activation_rows(g, p.schedule),
              (std::vector<std::string>{"block0.act", "block1.act", "block2.act"}));
    const Simulation sim = simulate(g, p.schedule, CostModel{});
    EXPECT_EQ(sim.recomputes, 4);  // each fc_i, read by gelu_i's backward
    // On the whole model: only x; every fc and every gelu but the last is recomputed.
    const Plan m =
        plan_with(g, CostModel{}, parse_spec("policy:regions=model,policy=nothing_saveable"));
    EXPECT_TRUE(activation_rows(g, m.schedule).empty());
    EXPECT_EQ(simulate(g, m.schedule, CostModel{}).recomputes, 4 + 3);
}

TEST(Policy, DotsSaveableSavesTheDotOutputsTheBackwardNeeds) {
    // With gelu (which reads its input), dots_saveable keeps the fc outputs: nothing to
    // recompute, the memory of none.
    const Graph g = load_network("mlp:depth=4,width=8,batch=2,act=gelu");
    const Plan p = plan_with(g, CostModel{}, parse_spec("policy:policy=dots_saveable"));
    EXPECT_EQ(simulate(g, p.schedule, CostModel{}).recomputes, 0);
    EXPECT_EQ(p.schedule.code, plan_with(g, CostModel{}, parse_spec("none")).schedule.code);
}

TEST(Policy, NoBatchDimsLeavesTheAttentionMatmulsToRecompute) {
    const Graph g = load_network("transformer:layers=2,d_model=16,heads=2,seq=4,batch=2,vocab=8");
    auto saved = [&](const std::string& policy) {
        return activation_rows(
            g, plan_with(g, CostModel{}, parse_spec("policy:regions=blocks,policy=" + policy))
                   .schedule);
    };
    auto has = [](const std::vector<std::string>& rows, const std::string& name) {
        return std::find(rows.begin(), rows.end(), name) != rows.end();
    };
    const auto dots = saved("dots_saveable");
    const auto no_batch = saved("dots_with_no_batch_dims_saveable");
    // softmax reads its output, so recomputing probs needs the scores: dots_saveable saves the
    // batched matmul's output; the no-batch-dims policy recomputes it from q and k.
    EXPECT_TRUE(has(dots, "block0.attn.scores"));
    EXPECT_FALSE(has(no_batch, "block0.attn.scores"));
    EXPECT_FALSE(has(no_batch, "block0.attn.ctx"));
    // The projections have no batch dimension and are saved by both.
    for (const char* n : {"block0.mlp.fc1", "block1.attn.q"}) {
        EXPECT_TRUE(has(dots, n)) << n;
        EXPECT_TRUE(has(no_batch, n)) << n;
    }
}

TEST(Policy, SimulatedPeakFallsAsLessIsSaved) {
    const Graph g = load_network("mlp:depth=16,width=32,batch=16,act=gelu");
    auto peak = [&](const std::string& spec) {
        return simulate(g, plan_with(g, CostModel{}, parse_spec(spec)).schedule, CostModel{})
            .activation_peak_bytes();
    };
    const uint64_t none = peak("none");
    const uint64_t blocks = peak("policy:policy=nothing_saveable");
    const uint64_t model = peak("policy:regions=model,policy=nothing_saveable");
    EXPECT_LT(blocks, none);
    // Each block keeps only its input (one of its two activations) and recomputes the other:
    // about half of none.
    EXPECT_LE(blocks * 10, none * 6);
    // The whole model as one region reruns its forward at once in the backward, so everything
    // is live again then. On this mlp every value is one that none keeps, so the rerun holds at
    // most what none holds.
    EXPECT_LE(model, none);
}

TEST(Policy, ParameterErrorsSayWhatToDo) {
    const Graph g = load_network("mlp:depth=2,width=8,batch=2");
    auto message = [&](const std::string& spec) -> std::string {
        try {
            plan_with(g, CostModel{}, parse_spec(spec));
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    };
    EXPECT_NE(message("policy:policy=save_only_these_names").find("names=a|b"), std::string::npos);
    EXPECT_NE(message("policy:policy=save_only_these_names,names=nope").find("'nope'"),
              std::string::npos);
    EXPECT_NE(message("policy:regions=tags").find("tags=a|b"), std::string::npos);
    EXPECT_NE(message("policy:regions=tags,tags=nope").find("nope"), std::string::npos);
    EXPECT_NE(message("policy:policy=save_from_both_policies").find("policy1="), std::string::npos);
    EXPECT_NE(message("policy:policy=no_such_policy").find("no_such_policy"), std::string::npos);
    EXPECT_NE(message("policy:policy=save_from_both_policies,policy1=save_from_both_policies,"
                      "policy2=nothing_saveable"),
              "");
}

// ---------------------------------------------------------------------------------------------
// Every policy on every preset: valid, predicted peak == measured, gradients bitwise those of
// none.

struct Case {
    std::string network, strategy;
};
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.network << " / " << c.strategy;
}

std::vector<Case> preset_cases() {
    const std::vector<std::string> nets = {
        "mlp:depth=4,width=8,batch=2", "mlp:depth=3,width=8,batch=2,act=gelu",
        "chain:l=5,width=8,batch=2", "resmlp:depth=2,width=8,batch=2",
        "transformer:layers=2,d_model=8,heads=2,seq=4,batch=2,vocab=8"};
    // Names every preset carries: "dot" on the matmul-like nodes.
    const std::vector<std::string> specs = {
        "policy:regions=blocks,policy=everything_saveable",
        "policy:regions=blocks,policy=nothing_saveable",
        "policy:regions=model,policy=nothing_saveable",
        "policy:regions=blocks,policy=checkpoint_dots",
        "policy:regions=model,policy=dots_with_no_batch_dims_saveable",
        "policy:regions=tags,tags=dot,policy=nothing_saveable",
        "policy:regions=model,policy=save_only_these_names,names=dot",
        "policy:regions=blocks,policy=save_any_names_but_these,names=dot",
        "policy:regions=model,policy=save_from_both_policies,policy1=nothing_saveable,"
        "policy2=save_only_these_names,names2=dot",
    };
    std::vector<Case> out;
    for (const auto& n : nets)
        for (const auto& s : specs) out.push_back({n, s});
    return out;
}

class PolicyOnPresets : public ::testing::TestWithParam<Case> {};

TEST_P(PolicyOnPresets, ValidPeakMatchesExecutionAndGradientsMatchNone) {
    const Case& c = GetParam();
    const Graph g = load_network(c.network);
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Plan plan = plan_with(g, costs, parse_spec(c.strategy));
    ASSERT_NE(plan.status, PlanStatus::Infeasible) << plan.message;
    ASSERT_NO_THROW(validate(g, plan.schedule));
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    const Simulation sim = simulate(g, plan.schedule, costs);
    const Execution run = execute(g, plan.schedule, *backend, data);
    EXPECT_EQ(sim.peak_bytes, run.peak_bytes);
    const Plan none = plan_with(g, costs, parse_spec("none"));
    const Execution ref = execute(g, none.schedule, *backend, data);
    ASSERT_EQ(ref.param_grads.size(), run.param_grads.size());
    for (size_t p = 0; p < ref.param_grads.size(); ++p)
        EXPECT_EQ(0, std::memcmp(ref.param_grads[p].data(), run.param_grads[p].data(),
                                 ref.param_grads[p].size() * sizeof(float)))
            << g.param(static_cast<ParamId>(p)).name;
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, PolicyOnPresets, ::testing::ValuesIn(preset_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                             std::string s = info.param.network + "__" + info.param.strategy;
                             for (char& ch : s)
                                 if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                             return s;
                         });

TEST(PolicyJax, ExecutesWithGradientsEqualToNone) {
    const Graph g = jax_network();
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    const Execution ref =
        execute(g, plan_with(g, CostModel{}, parse_spec("none")).schedule, *backend, data);
    for (const char* spec : {"policy:regions=blocks,policy=nothing_saveable",
                             "policy:regions=model,policy=save_only_these_names,names=a"}) {
        const Plan p = plan_with(g, CostModel{}, parse_spec(spec));
        const Execution run = execute(g, p.schedule, *backend, data);
        EXPECT_EQ(run.peak_bytes, simulate(g, p.schedule, CostModel{}).peak_bytes) << spec;
        for (size_t i = 0; i < ref.param_grads.size(); ++i)
            EXPECT_EQ(ref.param_grads[i], run.param_grads[i]) << spec;
    }
}

// JAX's save_anything_except_these_names saves every residual but the named ones, untagged
// nodes' included; save_any_names_but_these saves only tagged ones. act0 here has no tag.
TEST(Policy, SaveAnythingExceptTheseNamesSavesUntaggedValuesToo) {
    const Graph g = network_from_json(R"({
  "format": "rematlab-network", "version": 1, "name": "t", "seed": 1,
  "inputs": [{"name": "x", "dtype": "f32", "shape": [4, 8]}],
  "nodes": [
    {"name": "fc0", "op": "linear", "inputs": ["x"], "attrs": {"out_features": 8}, "tags": ["a"]},
    {"name": "act0", "op": "tanh", "inputs": ["fc0"]},
    {"name": "fc1", "op": "linear", "inputs": ["act0"], "attrs": {"out_features": 8}, "tags": ["a"]},
    {"name": "act1", "op": "tanh", "inputs": ["fc1"], "tags": ["b"]},
    {"name": "loss", "op": "sum_squares", "inputs": ["act1"]}
  ]
})",
                                      "t.json");
    auto saved = [&](const std::string& policy) {
        const Plan p =
            plan_with(g, CostModel{}, parse_spec("policy:regions=model,policy=" + policy));
        std::vector<std::string> names;
        for (const SavedResidual& r : saved_residuals(g, p.schedule).rows)
            if (g.find_node(r.value)) names.push_back(r.value);
        return names;
    };
    // act0 (untagged) is read by its tanh's and fc1's backwards: kept by the first policy,
    // recomputed from x under the second (fc0, tagged a, is not saveable under either).
    const auto except = saved("save_anything_except_these_names,names=a");
    const auto any_but = saved("save_any_names_but_these,names=a");
    EXPECT_NE(std::find(except.begin(), except.end(), "act0"), except.end());
    EXPECT_EQ(std::find(any_but.begin(), any_but.end(), "act0"), any_but.end());
    for (const auto* list : {&except, &any_but})
        EXPECT_EQ(std::find(list->begin(), list->end(), "fc0"), list->end());
}

// JAX's two offload policies: the same values saved as their device-only counterparts, so the
// same recomputation, but the offloaded ones leave the device between forward and backward:
// a lower device peak, host memory used, and the invariants on both pools and the gradients.
TEST(PolicyOffload, SavesLikeItsCounterpartButOnTheHost) {
    const Graph g = build_preset(parse_spec("transformer:layers=2,seq=64,batch=4"));
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    const Plan none = plan_with(g, costs, parse_spec("none"));
    const auto reference = execute(g, none.schedule, *backend, data).param_grads;
    const std::pair<const char*, const char*> pairs[] = {
        {"policy:policy=offload_dot_with_no_batch_dims",
         "policy:policy=dots_with_no_batch_dims_saveable"},
        {"policy:policy=save_and_offload_only_these_names,names=attn,offload_names=mlp",
         "policy:policy=save_only_these_names,names=attn|mlp"}};
    for (const auto& [offload, device] : pairs) {
        const Plan a = plan_with(g, costs, parse_spec(offload));
        const Plan b = plan_with(g, costs, parse_spec(device));
        const Simulation sa = simulate(g, a.schedule, costs), sb = simulate(g, b.schedule, costs);
        EXPECT_EQ(sa.recomputes, sb.recomputes) << offload;
        EXPECT_GT(sa.offloads, 0) << offload << ": " << a.message;
        EXPECT_GT(sa.host_peak_bytes, 0u) << offload;
        EXPECT_LT(sa.peak_bytes, sb.peak_bytes) << offload;
        const Execution e = execute(g, a.schedule, *backend, data);
        EXPECT_EQ(e.peak_bytes, sa.peak_bytes) << offload;
        EXPECT_EQ(e.host_peak_bytes, sa.host_peak_bytes) << offload;
        for (size_t p = 0; p < reference.size(); ++p)
            EXPECT_EQ(0, std::memcmp(reference[p].data(), e.param_grads[p].data(),
                                     reference[p].size() * sizeof(float)))
                << offload << " " << g.param(static_cast<ParamId>(p)).name;
    }
    // Without offload_names the policy says what it needs.
    try {
        plan_with(g, costs, parse_spec("policy:policy=save_and_offload_only_these_names"));
        ADD_FAILURE() << "accepted without offload_names";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("offload_names="), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace rl
