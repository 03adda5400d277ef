#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "engine/errors.h"
#include "engine/graph_compare.h"
#include "engine/networks/network_json.h"
#include "engine/networks/presets.h"
#include "engine/ops/op.h"
#include "engine/test_util.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

using testing::contains;
using testing::error_of;
using testing::read_bytes;

// A small valid file; tests break one thing at a time.
const char* kSmall = R"({
  "format": "rematlab-network",
  "version": 1,
  "name": "small",
  "seed": 3,
  "inputs": [
    {"name": "x", "dtype": "f32", "shape": [4, 8]}
  ],
  "nodes": [
    {"name": "fc", "op": "linear", "inputs": ["x"], "attrs": {"out_features": 8}, "tags": ["dot"]},
    {"name": "act", "op": "relu", "inputs": ["fc"]},
    {"name": "loss", "op": "sum_squares", "inputs": ["act"]}
  ]
}
)";

std::string small_with(const std::string& from, const std::string& to) {
    std::string s = kSmall;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
}

std::string load_error(const std::string& text) {
    return error_of([&] { network_from_json(text, "net.json"); });
}

// The preset specs written to resources/networks/ as examples.
// The source tree (a compile definition set by tests/CMakeLists.txt).
std::optional<fs::path> source_dir() {
    const fs::path src = REMATLAB_SOURCE_DIR;
    if (fs::exists(src / "resources")) return src;
    return std::nullopt;
}

const std::vector<std::pair<std::string, std::string>> kExamples = {
    {"tiny-mlp.json", "mlp:depth=3,width=16,batch=4"},
    {"tiny-transformer.json", "transformer:layers=1,d_model=16,heads=2,seq=4,batch=2,vocab=8"},
};

TEST(NetworkJson, ReadsASmallFile) {
    const Graph g = network_from_json(kSmall);
    EXPECT_EQ(g.name(), "small");
    EXPECT_EQ(g.seed(), 3u);
    EXPECT_TRUE(g.finalized());
    EXPECT_EQ(g.num_nodes(), 3);
    EXPECT_EQ(g.num_params(), 2);
    EXPECT_EQ(g.node(0).tags, std::vector<std::string>{"dot"});
    EXPECT_EQ(g.node(0).attrs.get_int("out_features"), 8);
    EXPECT_EQ(g.output_of(0).shape, (Shape{4, 8}));
}

TEST(NetworkJson, EveryPresetRoundTripsExactly) {
    for (const auto& p : presets()) {
        for (const std::string& spec : {p.name, p.name + ":seed=9"}) {
            SCOPED_TRACE(spec);
            const Graph g = build_preset(parse_spec(spec));
            const std::string text = network_to_json(g);
            const Graph back = network_from_json(text, spec);
            testing::expect_same_graph(g, back);
            EXPECT_EQ(network_to_json(back), text);
        }
    }
}

TEST(NetworkJson, WriterIsPrettyWithOneNodePerLine) {
    const Graph g = build_preset(parse_spec("mlp:depth=1,width=4,batch=2"));
    const std::string text = network_to_json(g);
    EXPECT_EQ(text, R"({
  "format": "rematlab-network",
  "version": 1,
  "name": "mlp:depth=1,width=4,batch=2",
  "seed": 1,
  "inputs": [
    {"name": "x", "dtype": "f32", "shape": [2, 4]}
  ],
  "nodes": [
    {"name": "block0.fc", "op": "linear", "inputs": ["x"], "attrs": {"out_features": 4}, "tags": ["dot", "block0", "fc"]},
    {"name": "block0.act", "op": "relu", "inputs": ["block0.fc"], "tags": ["block0", "act"]},
    {"name": "loss", "op": "sum_squares", "inputs": ["block0.act"], "tags": ["loss"]}
  ]
}
)");
}

TEST(NetworkJson, AttrTypesRoundTrip) {
    Graph g("attrs", 2);
    g.add_input("a", DType::F32, {2, 3, 4});
    g.add_input("labels", DType::I32, {6}, 5);
    g.add_node("t", OpKind::Transpose, std::vector<std::string>{"a"},
               Attrs{{"perm", std::vector<int64_t>{0, 2, 1}}, {"note", std::string("a \"b\"\n")}});
    g.add_node("r", OpKind::Reshape, std::vector<std::string>{"t"},
               Attrs{{"shape", std::vector<int64_t>{-1, 4}}});
    g.add_node("ln", OpKind::LayerNorm, std::vector<std::string>{"r"}, Attrs{{"eps", 1e-6}});
    g.add_node("fc", OpKind::Linear, std::vector<std::string>{"ln"},
               Attrs{{"out_features", int64_t{5}}, {"bias", int64_t{0}}}, {"dot", "héad"});
    g.add_node("loss", OpKind::CrossEntropy, std::vector<std::string>{"fc", "labels"});
    g.finalize();
    const std::string text = network_to_json(g);
    const Graph back = network_from_json(text);
    testing::expect_same_graph(g, back);
    EXPECT_EQ(network_to_json(back), text);
    EXPECT_EQ(back.num_params(), 3);  // layernorm weight + bias, linear weight (no bias)
    EXPECT_TRUE(contains(text, "\"classes\": 5")) << text;
}

TEST(NetworkJson, FloatAttrsKeepEveryBit) {
    const Graph g = build_preset(parse_spec("transformer:d_model=24,heads=4"));  // alpha=1/sqrt(6)
    const Graph back = network_from_json(network_to_json(g));
    const double a = g.node(*g.find_node("block0.attn.scores")).attrs.get_float("alpha", 0);
    const double b = back.node(*back.find_node("block0.attn.scores")).attrs.get_float("alpha", 0);
    EXPECT_EQ(a, b);
}

TEST(NetworkJson, MalformedJsonReportsLineAndColumn) {
    // Line 4 is `  "name": smal,`: the bad literal starts at column 11; nlohmann stops after it.
    std::string e = load_error(small_with("\"small\"", "smal"));
    EXPECT_TRUE(contains(e, "net.json:4:11: malformed JSON")) << e;
    // A missing comma between two fields on line 3/4: the error is at the string on line 4.
    e = load_error(small_with("\"version\": 1,", "\"version\": 1"));
    EXPECT_TRUE(contains(e, "net.json:4:")) << e;
    EXPECT_TRUE(contains(e, "expected '}'")) << e;
    e = load_error("{\n  \"format\": \"rematlab-network\",\n  \"nodes\": [1, 2,\n");
    EXPECT_TRUE(contains(e, "net.json:4:1: malformed JSON")) << e;
    EXPECT_TRUE(contains(e, "end of input")) << e;
    e = load_error("");
    EXPECT_TRUE(contains(e, "net.json:1:1: malformed JSON")) << e;
}

// A number that overflows a double is no syntax error: nlohmann throws out_of_range (no position)
// instead of parse_error. It must still come out as our error with the line and column.
TEST(NetworkJson, NumberOverflowReportsLineAndColumn) {
    // Line 5 is `  "seed": 99999999999E9999,`; the number starts at column 11.
    std::string e = load_error(small_with("\"seed\": 3", "\"seed\": 99999999999E9999"));
    EXPECT_TRUE(contains(e, "net.json:5:11: malformed JSON")) << e;
    EXPECT_TRUE(contains(e, "number overflow parsing '99999999999E9999'")) << e;
    EXPECT_FALSE(contains(e, "json.exception")) << e;
    // In an attribute (line 10, column 89), and negative.
    e = load_error(small_with("\"out_features\": 8}", "\"out_features\": 8, \"eps\": -1e400}"));
    EXPECT_TRUE(contains(e, "net.json:10:89:")) << e;
    EXPECT_TRUE(contains(e, "'-1e400'")) << e;
    // On its own.
    e = load_error("1E9999");
    EXPECT_TRUE(contains(e, "net.json:1:1:")) << e;
}

// A weight of 2^31 x 2^31 floats has 2^62 elements (the element limit) but 2^64 bytes, which
// wrapped to 0 and let the network load with a parameter of no bytes.
TEST(NetworkJson, TensorBytesBeyond2To62AreRefused) {
    std::string text = small_with("[4, 8]", "[4, 2147483648]");
    const std::string fc = "\"out_features\": 8";
    text.replace(text.find(fc), fc.size(), "\"out_features\": 2147483648");
    const std::string e = load_error(text);
    EXPECT_TRUE(contains(e, "net.json")) << e;
    EXPECT_TRUE(contains(e, "overflows 2^62")) << e;
}

TEST(NetworkJson, FormatAndVersionAreChecked) {
    std::string e = load_error(small_with("rematlab-network", "other"));
    EXPECT_TRUE(contains(e, "not a RematLab network file")) << e;
    e = load_error("[1, 2]");
    EXPECT_TRUE(contains(e, "JSON object")) << e;
    e = load_error(small_with("\"version\": 1", "\"version\": 2"));
    EXPECT_TRUE(contains(e, "version 2") && contains(e, "upgrade RematLab")) << e;
    // A newer version is reported as such even when it has fields this version does not know.
    e = load_error(small_with("\"version\": 1,", "\"version\": 7, \"future\": true,"));
    EXPECT_TRUE(contains(e, "version 7") && contains(e, "upgrade")) << e;
    e = load_error(small_with("\"version\": 1", "\"version\": 0"));
    EXPECT_TRUE(contains(e, "\"version\" must be 1 or more")) << e;
    e = load_error(small_with("\"version\": 1", "\"version\": \"1\""));
    EXPECT_TRUE(contains(e, "\"version\" must be an integer")) << e;
    e = load_error(small_with("  \"version\": 1,\n", ""));
    EXPECT_TRUE(contains(e, "missing field \"version\"")) << e;
}

TEST(NetworkJson, UnknownOpNamesNodeAndListsOps) {
    const std::string e = load_error(small_with("\"op\": \"relu\"", "\"op\": \"relux\""));
    EXPECT_TRUE(contains(e, "net.json: node 1 ('act')")) << e;
    EXPECT_TRUE(contains(e, "unknown op \"relux\"")) << e;
    EXPECT_TRUE(contains(e, op_names_joined())) << e;
    EXPECT_TRUE(contains(op_names_joined(), "linear")) << op_names_joined();
}

TEST(NetworkJson, MissingAndMistypedFieldsNameTheNode) {
    std::string e = load_error(small_with("\"op\": \"relu\", ", ""));
    EXPECT_TRUE(contains(e, "node 1 ('act'): missing field \"op\"")) << e;
    e = load_error(small_with("\"name\": \"act\", ", ""));
    EXPECT_TRUE(contains(e, "node 1: missing field \"name\"")) << e;
    e = load_error(small_with("\"inputs\": [\"fc\"]", "\"inputs\": \"fc\""));
    EXPECT_TRUE(contains(e, "node 1 ('act'): \"inputs\" must be an array")) << e;
    e = load_error(small_with("\"inputs\": [\"fc\"]", "\"inputs\": [\"fc\"], \"atrs\": {}"));
    EXPECT_TRUE(contains(e, "node 1 ('act'): unknown field \"atrs\"")) << e;
    e = load_error(small_with("{\"out_features\": 8}", "{\"out_features\": {\"a\": 1}}"));
    EXPECT_TRUE(contains(e, "node 0 ('fc'): attribute \"out_features\" must be")) << e;
    e = load_error(small_with("{\"out_features\": 8}", "{\"out_features\": [1.5]}"));
    EXPECT_TRUE(contains(e, "integers only")) << e;
    e = load_error(small_with("\"dtype\": \"f32\"", "\"dtype\": \"f8\""));
    EXPECT_TRUE(contains(e, "input 0 ('x'): unknown dtype \"f8\"")) << e;
    e = load_error(small_with("[4, 8]", "[4, 0]"));
    EXPECT_TRUE(contains(e, "'x'") && contains(e, "not positive")) << e;
    e = load_error(small_with("\"inputs\": [\"fc\"]", "\"inputs\": [\"nope\"]"));
    EXPECT_TRUE(contains(e, "node 'act'") && contains(e, "'nope' is not defined")) << e;
}

TEST(NetworkJson, ShapeMismatchNamesTheNode) {
    std::string e = load_error(
        small_with("{\"out_features\": 8}", "{\"out_features\": 8, \"in_features\": 5}"));
    EXPECT_TRUE(contains(e, "net.json: node 'fc' (linear)")) << e;

    e = load_error(R"({
  "format": "rematlab-network",
  "version": 1,
  "inputs": [
    {"name": "x", "dtype": "f32", "shape": [4, 8]},
    {"name": "y", "dtype": "f32", "shape": [4, 7]}
  ],
  "nodes": [
    {"name": "fc", "op": "linear", "inputs": ["x"], "attrs": {"out_features": 8}},
    {"name": "sum", "op": "add", "inputs": ["fc", "y"]},
    {"name": "loss", "op": "sum_squares", "inputs": ["sum"]}
  ]
})");
    EXPECT_TRUE(contains(e, "net.json: node 'sum' (add)")) << e;
    EXPECT_TRUE(contains(e, "[4,8]") && contains(e, "[4,7]")) << e;
}

TEST(NetworkJson, GraphErrorsAreReported) {
    // Loss not last.
    const std::string e = load_error(
        small_with("{\"name\": \"loss\", \"op\": \"sum_squares\", \"inputs\": [\"act\"]}",
                   "{\"name\": \"loss\", \"op\": \"sum_squares\", \"inputs\": [\"act\"]},\n"
                   "    {\"name\": \"more\", \"op\": \"relu\", \"inputs\": [\"act\"]}"));
    EXPECT_TRUE(contains(e, "net.json:") && contains(e, "loss")) << e;
}

class NetworkFiles : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = fs::temp_directory_path() /
               ("rematlab-json-" +
                std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override { fs::remove_all(dir_); }
    fs::path dir_;
};

TEST_F(NetworkFiles, SaveAndLoadRoundTrip) {
    const Graph g = build_preset(parse_spec("resmlp:depth=2"));
    const std::string path = (dir_ / "net.json").string();
    save_network_file(g, path);
    save_network_file(g, path);  // overwrite in place
    testing::expect_same_graph(g, load_network_file(path));
    testing::expect_same_graph(g, load_network(path));
    EXPECT_EQ(read_bytes(path), network_to_json(g));
    int files = 0;
    for (const auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file();
    EXPECT_EQ(files, 1);  // no temporary file left behind
}

TEST_F(NetworkFiles, LoadErrorsNameThePath) {
    const std::string path = (dir_ / "bad.json").string();
    { std::ofstream(path) << "{\n  \"format\": \"rematlab-network\",\n  oops\n}\n"; }
    std::string e = error_of([&] { load_network_file(path); });
    EXPECT_TRUE(contains(e, path + ":3:3: malformed JSON")) << e;
    e = error_of([&] { load_network_file((dir_ / "missing.json").string()); });
    EXPECT_TRUE(contains(e, "missing.json") && contains(e, "no such file")) << e;
    e = error_of([&] { load_network_file(dir_.string()); });
    EXPECT_TRUE(contains(e, "directory")) << e;
    e = error_of([&] {
        save_network_file(build_preset(parse_spec("chain")), (dir_ / "no" / "dir.json").string());
    });
    EXPECT_TRUE(contains(e, "dir.json")) << e;
}

TEST_F(NetworkFiles, RefusesHugeFiles) {
    const std::string path = (dir_ / "huge.json").string();
    {
        std::ofstream out(path);
        out << "{}";
    }
    fs::resize_file(path, (uint64_t{256} << 20) + 1);  // sparse: no real disk use
    const std::string e = error_of([&] { load_network_file(path); });
    EXPECT_TRUE(contains(e, "limited to 256 MiB")) << e;
}

// The example networks in resources/networks/ are written by our writer. This test keeps them
// current; run it with REMATLAB_UPDATE_EXAMPLES=1 to regenerate them after a format change.
TEST(NetworkExamples, ResourceFilesAreCurrent) {
    const auto src = source_dir();
    if (!src) GTEST_SKIP() << "the source tree moved since this test was built: rebuild it";
    const fs::path dir = *src / "resources" / "networks";
    const bool update = std::getenv("REMATLAB_UPDATE_EXAMPLES") != nullptr;
    for (const auto& [file, spec] : kExamples) {
        SCOPED_TRACE(file);
        const Graph g = build_preset(parse_spec(spec));
        if (update) {
            fs::create_directories(dir);
            save_network_file(g, (dir / file).string());
        }
        ASSERT_TRUE(fs::exists(dir / file)) << "run with REMATLAB_UPDATE_EXAMPLES=1";
        EXPECT_EQ(read_bytes(dir / file), network_to_json(g))
            << "stale example; run with REMATLAB_UPDATE_EXAMPLES=1";
        testing::expect_same_graph(g, load_network_file((dir / file).string()));
    }
}

TEST(NetworkExamples, DocumentationExampleLoads) {
    const auto src = source_dir();
    if (!src) GTEST_SKIP() << "the source tree moved since this test was built: rebuild it";
    const std::string doc = read_bytes(*src / "docs" / "network-format.md");
    const size_t begin = doc.find("```json\n");
    ASSERT_NE(begin, std::string::npos);
    const size_t end = doc.find("```", begin + 8);
    ASSERT_NE(end, std::string::npos);
    const Graph g = network_from_json(doc.substr(begin + 8, end - begin - 8), "network-format.md");
    EXPECT_EQ(g.name(), "two-layer");
    EXPECT_EQ(g.num_nodes(), 4);
}

// A bf16 input makes a bf16 network: every node output follows it, in half the bytes of f32;
// the file round-trips, and u8 (a dropout mask's type) is not an input type.
TEST(NetworkJson, Bf16InputMakesABf16Network) {
    const Graph g =
        network_from_json(small_with("\"dtype\": \"f32\"", "\"dtype\": \"bf16\""), "net.json");
    const Graph f = network_from_json(kSmall, "net.json");
    EXPECT_EQ(g.float_dtype(), DType::BF16);
    for (ValueId v = 0; v < g.num_values(); ++v) {
        EXPECT_EQ(g.value(v).dtype, DType::BF16) << g.value(v).name;
        EXPECT_EQ(2 * g.value(v).bytes, f.value(v).bytes) << g.value(v).name;
    }
    EXPECT_EQ(g.param_bytes(), f.param_bytes());  // parameters stay f32
    const Graph back = network_from_json(network_to_json(g), "again.json");
    EXPECT_EQ(back.float_dtype(), DType::BF16);
    const std::string e = load_error(small_with("\"dtype\": \"f32\"", "\"dtype\": \"u8\""));
    EXPECT_TRUE(contains(e, "input 0 ('x')") && contains(e, "dropout masks")) << e;
}

}  // namespace
}  // namespace rl
