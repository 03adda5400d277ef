// Replays every input the fuzzers (fuzz/run) ever crashed on, kept under tests/fixtures/fuzz/
// <target>/: each must now load or be refused with rl::Error, never crash. Under the asan preset
// this also holds them free of memory errors and undefined behaviour.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/errors.h"
#include "engine/networks/network_json.h"
#include "engine/networks/onnx_import.h"
#include "engine/networks/presets.h"
#include "engine/params.h"
#include "engine/units.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

namespace fs = std::filesystem;

const fs::path kCases = fs::path(REMATLAB_SOURCE_DIR) / "tests" / "fixtures" / "fuzz";

std::vector<fs::path> cases(const char* target) {
    std::vector<fs::path> out;
    if (fs::is_directory(kCases / target))
        for (const auto& e : fs::directory_iterator(kCases / target))
            if (e.is_regular_file() && e.path().filename().string().front() != '.')
                out.push_back(e.path());
    return out;
}

std::string read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Loaded or refused with a message; anything else (another exception, a crash) fails.
template <class F>
void loads_or_refuses(const fs::path& file, F&& load) {
    SCOPED_TRACE(file.filename().string());
    try {
        load(read_bytes(file));
    } catch (const Error& e) {
        EXPECT_GT(std::string(e.what()).size(), 0u);
    }
}

TEST(FuzzRegressions, NetworkJson) {
    for (const auto& f : cases("network_json"))
        loads_or_refuses(f, [](const std::string& text) {
            (void)network_to_json(network_from_json(text, "case.json"));
        });
}

TEST(FuzzRegressions, Onnx) {
    for (const auto& f : cases("onnx"))
        loads_or_refuses(f, [](const std::string& bytes) {
            OnnxImportOptions opt;
            opt.max_tensor_bytes = uint64_t{64} << 20;  // as the fuzz target
            (void)network_from_onnx(bytes, "case.onnx", opt);
        });
}

TEST(FuzzRegressions, Specs) {
    for (const auto& f : cases("specs"))
        loads_or_refuses(f, [](const std::string& text) {
            try {
                (void)parse_bytes(text);
            } catch (const Error&) {
            }
            const Spec spec = parse_spec(text);
            for (const PresetInfo& p : presets()) {
                try {
                    (void)ParamValues::resolve(p.schema, spec);
                } catch (const Error&) {
                }
            }
            for (const Strategy* s : strategies()) {
                try {
                    (void)ParamValues::resolve(s->schema(), spec);
                } catch (const Error&) {
                }
            }
        });
}

}  // namespace
}  // namespace rl
