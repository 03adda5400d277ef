#pragma once
// The versioned JSON network format (docs/network-format.md):
//   { "format": "rematlab-network", "version": 1, "name": "...", "seed": 1,
//     "inputs": [ {"name": "x", "dtype": "f32", "shape": [32, 64]},
//                 {"name": "labels", "dtype": "i32", "shape": [32], "classes": 10} ],
//     "nodes":  [ {"name": "fc0", "op": "linear", "inputs": ["x"],
//                  "attrs": {"out_features": 64}, "tags": ["dot", "block0"]}, ... ] }
// Parameters are not listed: each op declares its own, named "<node>.<suffix>".
#include <string>

#include "engine/graph.h"

namespace rl {

// Throws rl::Error: malformed JSON with line and column; unknown op with the valid names; shape
// mismatches naming the node; a newer format version. `origin` names the source in messages.
Graph network_from_json(const std::string& text, const std::string& origin = "<string>");
Graph load_network_file(const std::string& path);
std::string network_to_json(const Graph& g);
// Writes to a temporary file beside `path`, then renames it: never a half-written file.
void save_network_file(const Graph& g, const std::string& path);

}  // namespace rl
