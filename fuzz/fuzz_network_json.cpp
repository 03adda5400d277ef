// libFuzzer target: the JSON network loader (docs/network-format.md). Every input must either
// load or be refused with rl::Error; a loaded network must also write back out.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/errors.h"
#include "engine/networks/network_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const rl::Graph g = rl::network_from_json(text, "fuzz.json");
        (void)rl::network_to_json(g);
    } catch (const rl::Error&) {
    }
    return 0;
}
