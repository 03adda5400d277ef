// libFuzzer target: the ONNX importer, from protobuf parsing to the finished Graph. Every input
// must either load or be refused with rl::Error. The per-tensor limit is lowered so that the
// fuzzer spends its time on structure rather than on allocating what a file claims.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/errors.h"
#include "engine/networks/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string bytes(reinterpret_cast<const char*>(data), size);
    rl::OnnxImportOptions opt;
    opt.max_tensor_bytes = uint64_t{64} << 20;
    try {
        (void)rl::network_from_onnx(bytes, "fuzz.onnx", opt);
    } catch (const rl::Error&) {
    }
    return 0;
}
