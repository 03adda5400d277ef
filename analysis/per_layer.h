#pragma once
// What one layer of a network costs in activation memory under a schedule: the activations the
// forward leaves live for the backward (live just before the schedule's first Backward),
// grouped by the block tag ("block3") of the node that produced them. This is the quantity of
// Korthikanti et al.'s Table 2 ("Reducing Activation Recomputation in Large Transformer Models",
// MLSys 2023, arXiv 2205.05198): activation memory per transformer layer.
//
// Counting by producer: block i's output is kept as the input of block i+1's first LayerNorm (or
// of the final one) and is counted in block i, while block i's own input is counted in block i-1.
// So every block, the first and the last included, counts one layer's worth.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/schedule.h"

namespace rl {

struct KeptValue {
    ValueId value = kNoId;
    uint64_t bytes = 0;
};

struct LayerActivations {
    std::string block;  // "block0", …
    uint64_t bytes = 0;
    std::vector<KeptValue> kept;  // in value order
};

struct PerLayerReport {
    std::vector<LayerActivations> layers;  // in block order
    uint64_t outside_blocks_bytes = 0;     // kept activations of untagged nodes (head, final LN)
    long first_backward = -1;              // the instruction the counts are taken before
};

// Throws rl::Error when the schedule has no Backward (nothing is kept for it).
PerLayerReport per_layer_activations(const Graph& g, const Schedule& s);

}  // namespace rl
