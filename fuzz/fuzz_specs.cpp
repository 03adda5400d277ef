// libFuzzer target: the SPEC parsers. The input is one spec text ("name:key=value,…"): it is
// parsed, then resolved against every preset's and every strategy's schema (each value read
// back with its typed getter), and given to parse_bytes. Only rl::Error may come out.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/errors.h"
#include "engine/networks/presets.h"
#include "engine/params.h"
#include "engine/units.h"
#include "strategies/strategy.h"

namespace {

void read_all(const rl::ParamSchema& schema, const rl::Spec& spec) {
    try {
        const rl::ParamValues v = rl::ParamValues::resolve(schema, spec);
        for (const rl::ParamSpec& p : schema) {
            if (!v.has(p.key)) continue;
            switch (p.type) {
                case rl::ParamType::Int:
                    (void)v.get_int(p.key);
                    break;
                case rl::ParamType::Bytes:
                    (void)v.get_bytes(p.key);
                    break;
                case rl::ParamType::Float:
                    (void)v.get_float(p.key);
                    break;
                case rl::ParamType::Choice:
                case rl::ParamType::String:
                    (void)v.get_string(p.key);
                    break;
            }
        }
    } catch (const rl::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        (void)rl::parse_bytes(text);
    } catch (const rl::Error&) {
    }
    rl::Spec spec;
    try {
        spec = rl::parse_spec(text);
        (void)rl::format_spec(spec);
    } catch (const rl::Error&) {
        return 0;
    }
    for (const rl::PresetInfo& p : rl::presets()) read_all(p.schema, spec);
    for (const rl::Strategy* s : rl::strategies()) read_all(s->schema(), spec);
    return 0;
}
