// Plans out (analysis/plan_export.h): module paths from PyTorch's ONNX scopes, the regions a plan
// maps to, exact / approximated / refused exports, and the emitted Python and JAX text — parsed
// by Python's own parser where /usr/bin/python3 exists, every module path it names checked
// against the network.
#include "analysis/plan_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "engine/liveness.h"
#include "engine/networks/onnx_import.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

struct Exported {
    Graph g;
    Plan plan;
    PlanExport e;
};

Exported export_of(Graph g, const std::string& network, const std::string& strategy) {
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    Plan plan = plan_with(g, costs, parse_spec(strategy));
    PlanExport e = export_plan(g, network, strategy, plan, costs);
    return {std::move(g), std::move(plan), std::move(e)};
}

Exported export_of(const std::string& network, const std::string& strategy) {
    return export_of(load_network(network), network, strategy);
}

// Whether some node of g lies in module `path` ("" = the whole model).
bool module_exists(const Graph& g, const std::string& path) {
    for (NodeId n = 0; n < g.loss_node(); ++n) {
        const std::string p = module_path_of(g, n);
        if (path.empty() || p == path || (p.size() > path.size() && p.rfind(path + ".", 0) == 0))
            return true;
    }
    return false;
}

// Runs /usr/bin/python3 on `script` with `input` on stdin; returns stdout+stderr, sets rc.
std::string python(const std::string& script, const std::string& input, int& rc) {
    const auto dir = std::filesystem::temp_directory_path();
    const std::string tag = std::to_string(::getpid());
    const auto in = dir / ("plan_export_in_" + tag);
    const auto py = dir / ("plan_export_py_" + tag + ".py");
    std::ofstream(in) << input;
    std::ofstream(py) << script;
    FILE* pipe = popen(
        (std::string(kPython) + " " + py.string() + " < " + in.string() + " 2>&1").c_str(), "r");
    std::string out;
    char buf[4096];
    while (pipe && fgets(buf, sizeof buf, pipe)) out += buf;
    rc = pipe ? pclose(pipe) : -1;
    std::filesystem::remove(in);
    std::filesystem::remove(py);
    return out;
}

// Parses `text` with Python's ast and prints the literal values of the module-level names the
// emitted files define, as JSON.
const char* kLiterals = R"PY(
import ast, json, sys
tree = ast.parse(sys.stdin.read())
out = {}
for node in tree.body:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        try:
            out[node.targets[0].id] = ast.literal_eval(node.value)
        except ValueError:
            pass
def plain(v):  # tuple keys (a run) as "parent|first|last"
    if isinstance(v, dict):
        return {k if isinstance(k, str) else "|".join(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v
print(json.dumps(plain(out)))
)PY";

nlohmann::json parsed_literals(const std::string& text) {
    int rc = 0;
    const std::string out = python(kLiterals, text, rc);
    EXPECT_EQ(rc, 0) << "Python could not parse the emitted text:\n" << out << "\n---\n" << text;
    if (rc != 0) return nlohmann::json::object();
    return nlohmann::json::parse(out);
}

bool have_python() {
    return ::access(kPython, X_OK) == 0;
}

TEST(PlanExport, TorchModulePathFromOnnxScopes) {
    EXPECT_EQ(torch_module_path("/layer1/layer1.0/conv1/Conv"), "layer1.0.conv1");
    EXPECT_EQ(torch_module_path("/layer1/layer1.0/Add"), "layer1.0");
    EXPECT_EQ(torch_module_path("/features/features.0/features.0.0/Conv"), "features.0.0");
    // MobileNetV2's InvertedResidual: features.1.conv is a Sequential inside features.1.
    EXPECT_EQ(torch_module_path("/features/features.1/conv/conv.0/conv.0.0/Conv"),
              "features.1.conv.0.0");
    EXPECT_EQ(torch_module_path("/Flatten"), "");
    EXPECT_EQ(torch_module_path("/fc"), "fc");  // a fused node is named after its module
    EXPECT_EQ(torch_module_path("/h/h.0/attn/MatMul_1"), "h.0.attn");
    EXPECT_EQ(torch_module_path("block0.fc"), "block0.fc");  // our own names are module paths
}

TEST(PlanExport, SqrtNOnMlpIsRunsOfBlocksEndingAtItsCheckpoints) {
    const Exported x = export_of("mlp:depth=8,width=16,batch=4", "sqrt-n");
    ASSERT_TRUE(x.e.refusal.empty()) << x.e.refusal;
    ASSERT_FALSE(x.e.regions.empty());
    EXPECT_TRUE(x.e.exact) << x.e.approximation;
    EXPECT_EQ(x.e.wrapped_activation_peak_bytes, x.e.predicted_activation_peak_bytes);
    // Each run ends with the block whose output sqrt-n keeps as a checkpoint.
    std::set<std::string> checkpoint_blocks;
    for (NodeId c : x.plan.checkpoints)
        checkpoint_blocks.insert(x.g.node(c).name.substr(0, x.g.node(c).name.find('.')));
    for (const ModuleRegion& r : x.e.regions) {
        EXPECT_TRUE(r.run);
        EXPECT_EQ(r.path, "");
        EXPECT_TRUE(checkpoint_blocks.count(r.last)) << r.last;
    }
    // The wrapping recomputes nothing the plan keeps.
    std::set<NodeId> planned;
    for (const auto& v : x.e.recomputed) planned.insert(v.node);
    for (NodeId n : x.e.wrapped_recomputed) EXPECT_TRUE(planned.count(n)) << x.g.node(n).name;
}

TEST(PlanExport, PerBlockPolicyIsOneCheckpointPerBlock) {
    const Exported x = export_of("resmlp:depth=4,width=16,batch=4",
                                 "policy:regions=blocks,policy=nothing_saveable");
    ASSERT_EQ(x.e.regions.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
        EXPECT_FALSE(x.e.regions[i].run);
        EXPECT_EQ(x.e.regions[i].path, "block" + std::to_string(i));
    }
    EXPECT_TRUE(x.e.exact) << x.e.approximation;
}

// A residual block reads its input twice (layernorm and the residual add): an nn.Sequential cannot
// pass it, so its children are never a run (found by scripts/plan-check, where apply() refused
// the run block0.ln..block0.fc1 of resmlp's dots_saveable plan).
TEST(PlanExport, AResidualBlockIsNotAChainOfItsChildren) {
    const Exported x =
        export_of("resmlp:depth=4,width=16,batch=4", "policy:regions=blocks,policy=dots_saveable");
    for (const ModuleRegion& r : x.e.regions)
        EXPECT_TRUE(!r.run || r.path.empty()) << r.path << ": " << r.first << ".." << r.last;
}

TEST(PlanExport, NoneNeedsNoWrapping) {
    const Exported x = export_of("mlp:depth=4,width=8,batch=2", "none");
    EXPECT_TRUE(x.e.regions.empty());
    EXPECT_TRUE(x.e.recomputed.empty());
    EXPECT_TRUE(x.e.exact);
    // Kept: exactly the outputs some backward reads (relu's output, linear's input), not the
    // linear outputs, which only relu's forward reads.
    std::set<NodeId> read_by_backward;
    const LivenessTables t(x.g);
    for (NodeId n = 0; n < x.g.num_nodes(); ++n)
        for_each_residual(x.g, t, n, [&](ValueId v) {
            const NodeId p = x.g.value(v).producer;
            if (p != kNoId && p != x.g.loss_node()) read_by_backward.insert(p);
        });
    std::set<NodeId> kept;
    for (const auto& v : x.e.kept) kept.insert(v.node);
    EXPECT_EQ(kept, read_by_backward);
    EXPECT_EQ(kept.size(), 4u);  // the four relu outputs
}

TEST(PlanExport, ApproximationStatesTheSimulatedDifference) {
    // sqrt-n cuts the transformer inside its blocks (after the attention residual): no module
    // holds exactly those segments, so the wrapping differs and says by how much.
    const std::string net = "transformer:layers=4,d_model=32,heads=4,seq=8,batch=2,vocab=64";
    const Exported x = export_of(net, "sqrt-n");
    ASSERT_TRUE(x.e.refusal.empty());
    ASSERT_FALSE(x.e.exact);
    std::vector<int> region(static_cast<size_t>(x.g.num_nodes()), -1);
    for (size_t r = 0; r < x.e.regions.size(); ++r)
        for (NodeId n : x.e.regions[r].nodes) region[static_cast<size_t>(n)] = static_cast<int>(r);
    const Schedule s = wrapped_schedule(x.g, region);
    EXPECT_NO_THROW(validate(x.g, s));
    const Simulation sim = simulate(x.g, s, CostModel{});
    const Simulation planned = simulate(x.g, x.plan.schedule, CostModel{});
    EXPECT_EQ(x.e.difference_bytes(), static_cast<int64_t>(sim.activation_peak_bytes()) -
                                          static_cast<int64_t>(planned.activation_peak_bytes()));
    EXPECT_NE(x.e.approximation.find(std::to_string(std::abs(x.e.difference_bytes())) + " B"),
              std::string::npos)
        << x.e.approximation;
    EXPECT_NE(plan_torch(x.g, x.e).find("approximated"), std::string::npos);
}

// mlp:depth=3 with a hand-made plan that frees block0.act after the forward and recomputes it
// alone before block1.fc's backward: wrapping block0.act (or block0) would keep its output, as
// block1.fc's backward outside reads it, so no checkpoint region recomputes it.
TEST(PlanExport, RefusesARecomputationNoModuleExpresses) {
    Graph g = load_network("mlp:depth=3,width=8,batch=2");
    ScheduleBuilder b(g);
    for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);
    const NodeId act0 = *g.find_node("block0.act");
    for (NodeId n = g.num_nodes() - 1; n >= 0; --n) {
        if (n == *g.find_node("block1.fc")) b.compute(act0);
        b.backward(n);
    }
    Plan plan;
    plan.schedule = b.finish();
    ASSERT_NO_THROW(validate(g, plan.schedule));
    const PlanExport e = export_plan(g, "mlp", "hand-made", plan, CostModel{});
    ASSERT_FALSE(e.refusal.empty());
    EXPECT_NE(e.refusal.find("'block0.act'"), std::string::npos) << e.refusal;
    EXPECT_THROW((void)plan_torch(g, e), PlanRefused);
    // JSON and JAX still describe the plan; the JSON says why PyTorch cannot take it.
    const auto j = nlohmann::json::parse(plan_json(g, e));
    EXPECT_FALSE(j["torch"]["exportable"].get<bool>());
    EXPECT_EQ(j["recomputed"].size(), 1u);
    EXPECT_EQ(j["recomputed"][0]["node"], "block0.act");
    EXPECT_NO_THROW((void)plan_jax(g, e));
}

// A network named as PyTorch's ONNX exporter names nodes: a ModuleList `layers` of two-layer
// blocks, one of which calls its relu twice (scopes "relu" and "relu_1").
Graph onnx_style_network(int blocks) {
    Graph g("onnx-style", 1);
    g.add_input("input", DType::F32, Shape{2, 8});
    std::string x = "input";
    for (int i = 0; i < blocks; ++i) {
        const std::string p = "/layers/layers." + std::to_string(i) + "/";
        g.add_node(p + "fc1", OpKind::Linear, std::vector<std::string>{x}, {{"out_features", 8}});
        g.add_node(p + "relu/Relu", OpKind::Relu, std::vector<std::string>{p + "fc1"});
        g.add_node(p + "fc2", OpKind::Linear, std::vector<std::string>{p + "relu/Relu"},
                   {{"out_features", 8}});
        g.add_node(p + "relu_1/Relu", OpKind::Relu, std::vector<std::string>{p + "fc2"});
        x = p + "relu_1/Relu";
    }
    g.add_node("/head", OpKind::Linear, std::vector<std::string>{x}, {{"out_features", 4}});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"/head"});
    g.finalize();
    return g;
}

TEST(PlanExport, OnnxScopesMapToModulesAndRepeatedCallsToTheirModule) {
    const Graph g = onnx_style_network(2);
    EXPECT_EQ(module_path_of(g, *g.find_node("/layers/layers.1/relu_1/Relu")), "layers.1.relu");
    EXPECT_EQ(module_path_of(g, *g.find_node("/layers/layers.1/fc2")), "layers.1.fc2");
    EXPECT_EQ(module_path_of(g, *g.find_node("/head")), "head");
}

TEST(PlanExport, SegmentsOfAModuleListAreRunsOfItsChildren) {
    const Exported x = export_of(onnx_style_network(6), "onnx-style", "sqrt-n");
    ASSERT_TRUE(x.e.refusal.empty()) << x.e.refusal;
    ASSERT_FALSE(x.e.regions.empty());
    for (const ModuleRegion& r : x.e.regions) {
        EXPECT_TRUE(r.run || r.path.rfind("layers.", 0) == 0) << r.path;
        if (r.run) {
            EXPECT_EQ(r.path, "layers");
            EXPECT_EQ(r.first.rfind("layers.", 0), 0u) << r.first;
        }
    }
    EXPECT_TRUE(x.e.onnx_paths);
}

struct EmitCase {
    std::string network, strategy;
};

class EmittedText : public ::testing::TestWithParam<EmitCase> {};

TEST_P(EmittedText, ParsesAsPythonAndNamesOnlyModulesOfTheNetwork) {
    if (!have_python()) GTEST_SKIP() << kPython << " is not installed: cannot parse the text";
    const EmitCase& c = GetParam();
    const Exported x = c.network == "onnx-style"
                           ? export_of(onnx_style_network(6), c.network, c.strategy)
                           : export_of(c.network, c.strategy);
    ASSERT_TRUE(x.e.refusal.empty()) << x.e.refusal;

    const nlohmann::json torch = parsed_literals(plan_torch(x.g, x.e));
    ASSERT_TRUE(torch.contains("MODULES") && torch.contains("RUNS")) << torch.dump();
    EXPECT_EQ(torch["STRATEGY"], c.strategy);
    EXPECT_EQ(torch["MODULES"].size() + torch["RUNS"].size(), x.e.regions.size());
    for (const auto& m : torch["MODULES"])
        EXPECT_TRUE(module_exists(x.g, m.get<std::string>())) << m;
    for (const auto& run : torch["RUNS"]) {
        ASSERT_EQ(run.size(), 3u);
        for (const auto& m : run) EXPECT_TRUE(module_exists(x.g, m.get<std::string>())) << m;
    }

    // Every region a selective checkpoint saves ops in is one of MODULES or RUNS.
    ASSERT_TRUE(torch.contains("SAVE_OPS")) << torch.dump();
    for (const auto& [key, ops] : torch["SAVE_OPS"].items()) {
        bool listed = false;
        for (const auto& m : torch["MODULES"]) listed = listed || m == key;
        for (const auto& run : torch["RUNS"])
            listed = listed || run[0].get<std::string>() + "|" + run[1].get<std::string>() + "|" +
                                       run[2].get<std::string>() ==
                                   key;
        EXPECT_TRUE(listed) << key;
        EXPECT_FALSE(ops.empty());
    }

    const nlohmann::json jax = parsed_literals(plan_jax(x.g, x.e));
    ASSERT_TRUE(jax.contains("SAVED_NAMES")) << jax.dump();
    EXPECT_EQ(jax["SAVED_NAMES"].size(), x.e.kept.size());
    uint64_t bytes = 0;
    for (const auto& name : jax["SAVED_NAMES"]) {
        const auto n = x.g.find_node(name.get<std::string>());
        ASSERT_TRUE(n) << name;
        bytes += x.g.output_of(*n).bytes;
    }
    EXPECT_EQ(jax["SAVED_BYTES"].get<uint64_t>(), bytes);
    // A plan with offloads lists them apart (none saved and offloaded both), with their bytes.
    EXPECT_EQ(jax.contains("OFFLOADED_NAMES"), !x.e.offloaded.empty());
    if (jax.contains("OFFLOADED_NAMES")) {
        EXPECT_EQ(jax["OFFLOADED_NAMES"].size(), x.e.offloaded.size());
        uint64_t host = 0;
        for (const auto& name : jax["OFFLOADED_NAMES"]) {
            const auto n = x.g.find_node(name.get<std::string>());
            ASSERT_TRUE(n) << name;
            host += x.g.output_of(*n).bytes;
            for (const auto& saved : jax["SAVED_NAMES"]) EXPECT_NE(saved, name);
        }
        EXPECT_EQ(jax["OFFLOADED_BYTES"].get<uint64_t>(), host);
    }
    for (const auto& region : jax["REGIONS"])
        for (const auto& name : region) EXPECT_TRUE(x.g.find_node(name.get<std::string>())) << name;
}

INSTANTIATE_TEST_SUITE_P(
    Plans, EmittedText,
    ::testing::Values(
        EmitCase{"mlp:depth=8,width=16,batch=4", "sqrt-n"},
        EmitCase{"mlp:depth=8,width=16,batch=4", "none"},
        EmitCase{"resmlp:depth=4,width=16,batch=4", "periodic:k=2"},
        EmitCase{"resmlp:depth=4,width=16,batch=4",
                 "policy:regions=blocks,policy=nothing_saveable"},
        EmitCase{"transformer:layers=2,d_model=32,heads=4,seq=8,batch=2,vocab=64", "sqrt-n"},
        EmitCase{"onnx-style", "sqrt-n"},
        EmitCase{"transformer:layers=2,d_model=32,heads=4,seq=8,batch=2,vocab=64",
                 "policy:regions=blocks,policy=dots_saveable"},
        EmitCase{"mlp:depth=8,width=16,batch=4",
                 "policy:policy=save_and_offload_only_these_names,names=fc,offload_names=act"}));

// A plan with offloads: the values it copies to the host are listed apart from the kept ones (a
// value is one or the other), JAX gets the offload policy, and the PyTorch export, which keeps
// them on the device, says so with the bytes.
TEST(PlanExport, OffloadsAreListedApartAndThePyTorchExportSaysItKeepsThem) {
    const Exported x =
        export_of("mlp:depth=8,width=16,batch=4",
                  "policy:policy=save_and_offload_only_these_names,names=fc,offload_names=act");
    SimulateOptions quiet;
    quiet.record_timeline = false;
    const Simulation sim = simulate(x.g, x.plan.schedule, CostModel{}, quiet);
    ASSERT_GT(sim.offloads, 0);
    ASSERT_FALSE(x.e.offloaded.empty());
    uint64_t host = 0;
    for (const auto& v : x.e.offloaded) {
        host += v.bytes;
        for (const auto& k : x.e.kept) EXPECT_NE(k.node, v.node);
    }
    EXPECT_EQ(host, sim.offloaded_bytes);  // each offloaded once here
    const std::string jax = plan_jax(x.g, x.e);
    EXPECT_NE(jax.find("save_and_offload_only_these_names("), std::string::npos) << jax;
    EXPECT_NE(jax.find("offload_dst=\"pinned_host\""), std::string::npos) << jax;
    EXPECT_EQ(jax.find("Offload names: none"), std::string::npos) << jax;
    const auto json = nlohmann::json::parse(plan_json(x.g, x.e));
    EXPECT_EQ(json.at("offloaded").size(), x.e.offloaded.size());
    EXPECT_EQ(json.at("offloaded_bytes").get<uint64_t>(), host);
    // The wrapping keeps on the device what the plan offloads: more bytes, and it says why.
    EXPECT_FALSE(x.e.exact);
    EXPECT_GT(x.e.difference_bytes(), 0);
    EXPECT_NE(x.e.approximation.find("offloads " + std::to_string(x.e.offloaded.size())),
              std::string::npos)
        << x.e.approximation;
    // And a plan without offloads says it has none.
    const Exported plain = export_of("mlp:depth=8,width=16,batch=4", "sqrt-n");
    EXPECT_TRUE(plain.e.offloaded.empty());
    EXPECT_NE(plan_jax(plain.g, plain.e).find("Offload names: none"), std::string::npos);
}

// dots_saveable keeps the linear outputs inside each block and recomputes the rest: wrapping a
// module whole recomputes the linears too; a selective checkpoint saves the addmm/mm outputs —
// every linear of the region, as an op-level policy does — and recomputes no linear.
TEST(PlanExport, DotsSaveableGetsASelectivePolicyForLinears) {
    const Exported x = export_of("transformer:layers=2,d_model=32,heads=4,seq=8,batch=2,vocab=64",
                                 "policy:regions=blocks,policy=dots_saveable");
    ASSERT_TRUE(x.e.refusal.empty()) << x.e.refusal;
    ASSERT_TRUE(x.e.has_selective());
    EXPECT_FALSE(x.e.exact);  // checkpointed whole, the linears are recomputed
    std::vector<int> region(static_cast<size_t>(x.g.num_nodes()), -1);
    std::vector<uint8_t> saved(static_cast<size_t>(x.g.num_nodes()), 0);
    for (size_t r = 0; r < x.e.regions.size(); ++r) {
        const ModuleRegion& m = x.e.regions[r];
        for (NodeId n : m.nodes) region[static_cast<size_t>(n)] = static_cast<int>(r);
        if (m.save_ops.empty()) continue;
        EXPECT_NE(std::find(m.save_ops.begin(), m.save_ops.end(), "addmm"), m.save_ops.end());
        for (NodeId n : m.nodes)  // every linear of the region is saved, nothing else of it
            EXPECT_EQ(std::count(m.saved.begin(), m.saved.end(), n) == 1,
                      x.g.node(n).op == OpKind::Linear || x.g.node(n).op == OpKind::MatMul)
                << x.g.node(n).name;
        for (NodeId n : m.saved) saved[static_cast<size_t>(n)] = 1;
    }
    const Schedule s = wrapped_schedule(x.g, region, &saved);
    EXPECT_NO_THROW(validate(x.g, s));
    EXPECT_EQ(simulate(x.g, s, CostModel{}).activation_peak_bytes(),
              x.e.selective_activation_peak_bytes);
    std::vector<int> computes(static_cast<size_t>(x.g.num_nodes()), 0);
    for (const Instruction& ins : s.code)
        if (ins.kind == InstrKind::Compute) ++computes[static_cast<size_t>(ins.target)];
    for (NodeId n = 0; n < x.g.num_nodes(); ++n) {
        if (saved[static_cast<size_t>(n)]) {
            EXPECT_EQ(computes[static_cast<size_t>(n)], 1) << x.g.node(n).name;
        }
    }
    const auto j = nlohmann::json::parse(plan_json(x.g, x.e));
    EXPECT_EQ(j["torch"]["selective"]["predicted_activation_peak_bytes"].get<uint64_t>(),
              x.e.selective_activation_peak_bytes);
}

// revolve's nested recomputation keeps relu outputs inside the regions, but saving every relu of
// a region overshoots the plan further than checkpointing whole: no policy is offered.
TEST(PlanExport, NoSelectivePolicyWhenItDoesNotComeCloser) {
    const Exported x = export_of("mlp:depth=16,width=32,batch=8", "revolve");
    ASSERT_FALSE(x.e.exact);
    EXPECT_FALSE(x.e.has_selective());
    for (const ModuleRegion& r : x.e.regions) EXPECT_TRUE(r.save_ops.empty()) << r.path;
}

TEST(PlanExport, NamesWithQuotesStayOneStringLiteral) {
    if (!have_python()) GTEST_SKIP() << kPython << " is not installed: cannot parse the text";
    Graph g("quoted", 1);
    g.add_input("x", DType::F32, Shape{2, 4});
    g.add_node("a\"b\\c.fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", 4}});
    g.add_node("a\"b\\c.act", OpKind::Relu, std::vector<std::string>{"a\"b\\c.fc"});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"a\"b\\c.act"});
    g.finalize();
    const Exported x = export_of(std::move(g), "net\"work", "none");
    const nlohmann::json jax = parsed_literals(plan_jax(x.g, x.e));
    ASSERT_TRUE(jax.contains("SAVED_NAMES"));
    EXPECT_EQ(jax["NETWORK"], "net\"work");
    EXPECT_EQ(jax["SAVED_NAMES"][0], "a\"b\\c.act");
    (void)parsed_literals(plan_torch(x.g, x.e));
}

TEST(PlanExport, FormatNames) {
    EXPECT_EQ(parse_plan_format("torch"), PlanFormat::Torch);
    EXPECT_EQ(parse_plan_format("jax"), PlanFormat::Jax);
    EXPECT_EQ(parse_plan_format("json"), PlanFormat::Json);
    EXPECT_THROW((void)parse_plan_format("tf"), Error);
}

// A graph the ONNX import narrowed (slice_narrowing.h) is not the one PyTorch or JAX runs: their
// formats refuse it, naming the way to a plan on the model's own graph; JSON (RematLab's own
// plan) is written.
TEST(PlanExport, NarrowedGraphsAreRefusedForFrameworksAndWrittenAsJson) {
    if (!onnx_import_available()) GTEST_SKIP() << "built with -DREMATLAB_ONNX=OFF";
    const std::string vit = std::string(REMATLAB_SOURCE_DIR) + "/tests/fixtures/onnx/tiny_vit.onnx";
    const Exported cut = export_of(load_network(vit), vit, "sqrt-n");
    for (PlanFormat f : {PlanFormat::Torch, PlanFormat::Jax}) {
        try {
            plan_text(cut.g, cut.e, f);
            ADD_FAILURE() << "a narrowed graph's plan was written for a framework";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("rematlab-cli export-plan"), std::string::npos)
                << e.what();
        }
    }
    EXPECT_NE(plan_text(cut.g, cut.e, PlanFormat::Json).find("rematlab-plan"), std::string::npos);
    const Exported whole = export_of(load_network(vit, false), vit, "sqrt-n");
    EXPECT_NE(plan_text(whole.g, whole.e, PlanFormat::Torch).find("def apply(model):"),
              std::string::npos);
}

}  // namespace
}  // namespace rl
