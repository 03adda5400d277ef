#pragma once
// Built-in networks with parameters and a deterministic seed. Every node carries tags later
// policies use: "dot" for matmul-like ops, its block ("block3"), and its role ("mlp", "attn").
#include <string>
#include <string_view>
#include <vector>

#include "engine/graph.h"
#include "engine/params.h"

namespace rl {

struct PresetInfo {
    std::string name;
    std::string about;
    ParamSchema schema;  // every parameter has a default: small enough for a CPU run in seconds
};

const std::vector<PresetInfo>& presets();
// Throws rl::Error for an unknown preset (listing the valid names) or a bad parameter.
Graph build_preset(const Spec& spec);

// A network SPEC is a preset spec ("mlp:depth=32,width=1024"), the path of an ONNX model
// (ending in ".onnx": its weights come along, see onnx_import.h) or of a network file (anything
// else with a '/' or ending in ".json"). Throws rl::Error with what was wrong and where.
// An ONNX model's slices are moved up (slice_narrowing.h) unless `narrow_onnx_slices` is false:
// a plan exported for PyTorch or JAX must be made on the graph that framework runs.
Graph load_network(const std::string& spec, bool narrow_onnx_slices = true);
// Whether load_network reads `spec` as an ONNX model (and so narrows its slices by default).
bool is_onnx_spec(const std::string& spec);
// Whether load_network reads `spec` as a preset spec rather than a file: no '/', no ".json" or
// ".onnx" ending.
bool is_preset_spec(const std::string& spec);

}  // namespace rl
