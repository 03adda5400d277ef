// Replays the regression cases of each fuzz target, kept under tests/fixtures/fuzz/<target>/:
// the malformed seed inputs tests/fixtures/fuzz/make-cases writes, and every input the fuzzers
// (fuzz/run) ever crashed on. Under the asan preset this also holds them free of memory errors
// and undefined behaviour. What each file must do follows from its name:
//   ok-*                                        loads
//   crash-*, timeout-*, oom-*, leak-*, slow-unit-*   loads or is refused with rl::Error
//   anything else (seed-*)                      is refused with rl::Error naming the file
// Any other exception, or a crash, fails; so does a target with no cases at all.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/errors.h"
#include "engine/networks/network_json.h"
#include "engine/networks/onnx_import.h"
#include "engine/networks/presets.h"
#include "engine/params.h"
#include "engine/test_util.h"
#include "engine/units.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

using testing::read_bytes;

namespace fs = std::filesystem;

const fs::path kCases = fs::path(REMATLAB_SOURCE_DIR) / "tests" / "fixtures" / "fuzz";

std::vector<fs::path> cases(const std::string& target) {
    std::vector<fs::path> out;
    if (fs::is_directory(kCases / target))
        for (const auto& e : fs::directory_iterator(kCases / target))
            if (e.is_regular_file() && e.path().filename().string().front() != '.')
                out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

enum class Expect { Loads, Refused, Either };

Expect expectation(const fs::path& file) {
    const std::string name = file.filename().string();
    auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
    if (starts("ok-")) return Expect::Loads;
    for (const char* p : {"crash-", "timeout-", "oom-", "leak-", "slow-unit-"})
        if (starts(p)) return Expect::Either;
    return Expect::Refused;
}

// Runs `load` on every case of `target` and checks the outcome its name asks for. `origin` is
// the name the loader is given: a refusal must say it (where the problem is).
template <class F>
void replay(const std::string& target, const std::string& origin, F&& load) {
    const std::vector<fs::path> files = cases(target);
    ASSERT_FALSE(files.empty()) << "no regression cases in " << (kCases / target)
                                << "; run tests/fixtures/fuzz/make-cases";
    int refused = 0;
    for (const fs::path& file : files) {
        SCOPED_TRACE(file.filename().string());
        const Expect expect = expectation(file);
        try {
            load(read_bytes(file));
            EXPECT_NE(expect, Expect::Refused) << "a malformed input was accepted";
        } catch (const Error& e) {
            ++refused;
            const std::string what = e.what();
            EXPECT_NE(expect, Expect::Loads) << what;
            EXPECT_NE(what.find(origin), std::string::npos)
                << "the error does not say where: " << what;
            for (const char* leak :
                 {"json.exception", "unexpected failure", "basic_string", "vector::"})
                EXPECT_EQ(what.find(leak), std::string::npos) << "a library's message: " << what;
        }
    }
    EXPECT_GT(refused, 0);
}

TEST(FuzzRegressions, NetworkJson) {
    replay("network_json", "case.json", [](const std::string& text) {
        (void)network_to_json(network_from_json(text, "case.json"));
    });
}

TEST(FuzzRegressions, Onnx) {
    if (!onnx_import_available()) GTEST_SKIP() << "built with -DREMATLAB_ONNX=OFF";
    replay("onnx", "case.onnx", [](const std::string& bytes) {
        OnnxImportOptions opt;
        opt.max_tensor_bytes = uint64_t{64} << 20;  // as the fuzz target
        (void)network_from_onnx(bytes, "case.onnx", opt);
    });
}

// A spec is refused when it does not parse, names neither a preset nor a strategy, or does not
// resolve against the schema of the one it names: what the CLI checks before any work. Every
// other schema is tried too (as the fuzz target does), for crashes only.
TEST(FuzzRegressions, Specs) {
    replay("specs", "", [](const std::string& text) {
        try {
            (void)parse_bytes(text);
        } catch (const Error&) {
        }
        const Spec spec = parse_spec(text);
        (void)format_spec(spec);
        bool preset = false, strategy = false;
        for (const PresetInfo& p : presets()) {
            try {
                (void)ParamValues::resolve(p.schema, spec);
            } catch (const Error&) {
            }
            preset = preset || p.name == spec.name;
        }
        for (const Strategy* s : strategies()) {
            try {
                (void)ParamValues::resolve(s->schema(), spec);
            } catch (const Error&) {
            }
            strategy = strategy || s->name() == spec.name;
        }
        if (preset)
            (void)build_preset(spec);
        else if (strategy)
            (void)ParamValues::resolve(find_strategy(spec.name).schema(), spec);
        else
            throw Error("'" + spec.name + "' names no preset and no strategy");
    });
}

}  // namespace
}  // namespace rl
