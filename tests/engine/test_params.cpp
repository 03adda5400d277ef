#include <gtest/gtest.h>

#include "engine/errors.h"
#include "engine/params.h"
#include "engine/test_util.h"

namespace rl {
namespace {

using testing::contains;
using testing::error_of;

ParamSchema test_schema() {
    ParamSchema s;
    s.push_back({"depth", ParamType::Int, "8", "number of layers", {}, 1, 1000});
    s.push_back({"budget", ParamType::Bytes, "", "memory budget", {}, 1024, INT64_MAX});
    s.push_back({"ratio", ParamType::Float, "0.5", "a ratio", {}, 0, INT64_MAX});
    s.push_back({"act", ParamType::Choice, "relu", "activation", {"relu", "gelu"}, 0, INT64_MAX});
    s.push_back({"names", ParamType::String, "", "node names, '|'-separated", {}, 0, INT64_MAX});
    return s;
}

TEST(Spec, ParsesNameAndArgs) {
    Spec s = parse_spec("mlp");
    EXPECT_EQ(s.name, "mlp");
    EXPECT_TRUE(s.args.empty());
    s = parse_spec("mlp:depth=32,width=1024");
    EXPECT_EQ(s.name, "mlp");
    ASSERT_EQ(s.args.size(), 2u);
    EXPECT_EQ(s.args[0], (std::pair<std::string, std::string>{"depth", "32"}));
    EXPECT_EQ(s.args[1], (std::pair<std::string, std::string>{"width", "1024"}));
    s = parse_spec(" policy : names = a|b , k= ");
    EXPECT_EQ(s.name, "policy");
    EXPECT_EQ(s.args[0].second, "a|b");
    EXPECT_EQ(s.args[1].first, "k");
    EXPECT_EQ(s.args[1].second, "");
    EXPECT_TRUE(parse_spec("mlp:").args.empty());
}

TEST(Spec, FormatRoundTrips) {
    for (const char* text : {"mlp", "mlp:depth=32", "policy:names=a|b,mode=x"})
        EXPECT_EQ(format_spec(parse_spec(text)), text);
}

TEST(Spec, MalformedSpecsAreErrors) {
    EXPECT_TRUE(contains(error_of([] { parse_spec("mlp:depth"); }), "'depth' has no '='"));
    EXPECT_TRUE(contains(error_of([] { parse_spec("mlp:=3"); }), "empty key"));
    EXPECT_TRUE(contains(error_of([] { parse_spec("mlp:a=1,a=2"); }), "'a' is given twice"));
    EXPECT_TRUE(contains(error_of([] { parse_spec("mlp:a=1,,b=2"); }), "empty item"));
    EXPECT_TRUE(contains(error_of([] { parse_spec(":a=1"); }), "no name"));
    EXPECT_TRUE(contains(error_of([] { parse_spec(""); }), "no name"));
}

TEST(ParamValues, DefaultsAreFilledIn) {
    const auto v = ParamValues::resolve(test_schema(), parse_spec("x:depth=3"));
    EXPECT_EQ(v.get_int("depth"), 3);
    EXPECT_DOUBLE_EQ(v.get_float("ratio"), 0.5);
    EXPECT_EQ(v.get_string("act"), "relu");
    EXPECT_FALSE(v.has("budget"));  // no default
    EXPECT_FALSE(v.has("names"));
    EXPECT_TRUE(v.has("depth"));
    EXPECT_EQ(v.all().size(), 3u);
    EXPECT_TRUE(contains(error_of([&] { v.get_bytes("budget"); }), "'budget' has no value"));
}

TEST(ParamValues, TypedValues) {
    const auto v = ParamValues::resolve(
        test_schema(), parse_spec("x:depth=+12,budget=1.5GiB,ratio=1e-3,act=gelu,names=a|b"));
    EXPECT_EQ(v.get_int("depth"), 12);
    EXPECT_EQ(v.get_bytes("budget"), 3ull << 29);
    EXPECT_DOUBLE_EQ(v.get_float("ratio"), 1e-3);
    EXPECT_EQ(v.get_string("act"), "gelu");
    EXPECT_EQ(v.get_string("names"), "a|b");
}

TEST(ParamValues, UnknownKeyListsValidKeys) {
    const std::string e =
        error_of([] { ParamValues::resolve(test_schema(), parse_spec("mlp:dept=3")); });
    EXPECT_TRUE(contains(e, "mlp")) << e;
    EXPECT_TRUE(contains(e, "unknown parameter 'dept'")) << e;
    EXPECT_TRUE(contains(e, "depth, budget, ratio, act, names")) << e;
}

TEST(ParamValues, BadValuesNameKeyValueAndWhatIsAccepted) {
    auto err = [](const char* spec) {
        return error_of([&] { ParamValues::resolve(test_schema(), parse_spec(spec)); });
    };
    std::string e = err("mlp:depth=abc");
    EXPECT_TRUE(contains(e, "'depth'") && contains(e, "'abc'") && contains(e, "integer")) << e;
    e = err("mlp:depth=0");
    EXPECT_TRUE(contains(e, "out of range") && contains(e, "from 1 to 1000")) << e;
    e = err("mlp:depth=1001");
    EXPECT_TRUE(contains(e, "out of range")) << e;
    e = err("mlp:depth=99999999999999999999");
    EXPECT_TRUE(contains(e, "not an integer")) << e;
    e = err("mlp:depth=3.5");
    EXPECT_TRUE(contains(e, "not an integer")) << e;
    e = err("mlp:budget=lots");
    EXPECT_TRUE(contains(e, "'budget'") && contains(e, "'lots'") && contains(e, "512MiB")) << e;
    e = err("mlp:budget=100");
    EXPECT_TRUE(contains(e, "out of range") && contains(e, ">= 1024")) << e;
    e = err("mlp:ratio=half");
    EXPECT_TRUE(contains(e, "'ratio'") && contains(e, "not a number")) << e;
    e = err("mlp:ratio=nan");
    EXPECT_TRUE(contains(e, "not a number")) << e;
    e = err("mlp:act=swish");
    EXPECT_TRUE(contains(e, "'swish'") && contains(e, "one of relu, gelu")) << e;
}

TEST(ParamValues, DescribeSchemaHasOneLinePerParameter) {
    const std::string d = describe_schema(test_schema());
    EXPECT_TRUE(contains(d, "  depth=8")) << d;
    EXPECT_TRUE(contains(d, "int")) << d;
    EXPECT_TRUE(contains(d, "number of layers")) << d;
    EXPECT_TRUE(contains(d, "budget=?")) << d;
    EXPECT_TRUE(contains(d, "relu|gelu")) << d;
    size_t lines = 0;
    for (char c : d) lines += c == '\n';
    EXPECT_EQ(lines, test_schema().size());
    // Columns line up: the type column starts at the same offset on every line.
    const size_t first = d.find("int");
    const size_t second = d.find("bytes");
    const size_t line2 = d.find('\n') + 1;
    EXPECT_EQ(first, second - line2);
}

}  // namespace
}  // namespace rl
