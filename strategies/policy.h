#pragma once
// `policy`: JAX's jax.checkpoint (alias jax.remat) with the saveable policies of
// jax.checkpoint_policies, and a listing of the saved residuals that mirrors
// jax.ad_checkpoint.print_saved_residuals. docs/policies.md gives the semantics and how our ops
// map onto JAX's rules; this header is the API.
//
// A *saved residual* is a value the forward pass keeps for the backward pass. It is read off any
// schedule, whatever the strategy: the activations still live when the backward starts, the
// graph inputs a later instruction reads, and the parameters of nodes that run a backward (JAX
// lists the function's arguments). As in JAX, where print_saved_residuals(f, …) is asked about f
// without its loss, the loss's own backward is not part of it by default: values that only the
// loss's backward reads (the network output, the labels) are left out.
//
// Worked example (JAX's docs, our network: three layers y = linear(x, bias=0), s = sin(y)):
//   none                                  -> W1 W2 W3 x, y1 s1 y2 s2 y3
//   policy:regions=blocks,policy=nothing_saveable            -> W1 W2 W3 x, s1 s2
//   policy:regions=model,policy=dots_with_no_batch_dims_saveable -> W1 W2 W3 x, y1 y2 y3
//   policy:regions=model,policy=save_only_these_names,names=a  -> W1 W2 W3 x, named 'a' (s1)
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/liveness.h"
#include "engine/params.h"
#include "engine/schedule.h"

namespace rl {

enum class ResidualSource : uint8_t { Argument, Output, Named };

struct SavedResidual {
    std::string value;  // parameter, graph input or node (= its output value) name
    std::string type;   // "f32[256,1024]"
    uint64_t bytes = 0;
    ResidualSource source = ResidualSource::Output;
    // "from the argument x", "output of gelu from block3.mlp.act", "named 'a' from block0.sin"
    std::string origin;
};

struct SavedResiduals {
    // Parameters (in parameter order), then graph inputs, then activations in node order.
    std::vector<SavedResidual> rows;
    uint64_t total_bytes = 0;
};

struct ResidualOptions {
    // Node tags shown as "named '…'" (our analog of jax.ad_checkpoint.checkpoint_name); a node
    // carrying several is shown under the first in this list.
    std::vector<std::string> names;
    // Also count what only the loss's backward reads (its inputs), which JAX's listing of f
    // leaves out.
    bool include_loss = false;
};

// Checkpoint regions as jax.checkpoint and torch.utils.checkpoint run them, the one rule both
// `policy` and the PyTorch plan export (analysis/plan_export) schedule by: region[n] is node n's
// region (negative: none). The forward runs once; inside a region a value is kept when
// `saved` marks it (nullptr: nothing) or when something outside the region reads it after the
// forward (another region, as its input, or an outside node's backward); the rest is recomputed
// when the region's first backward comes, down to kept values and the region's inputs.
struct RegionCheckpoint {
    Schedule schedule;                // only when build_schedule
    std::vector<uint8_t> recomputed;  // per node: recomputed once in the backward
};
RegionCheckpoint region_checkpoint(const Graph& g, const LivenessTables& t,
                                   const std::vector<int>& region,
                                   const std::vector<uint8_t>* saved, bool build_schedule);

SavedResiduals saved_residuals(const Graph& g, const Schedule& s, const ResidualOptions& opt = {});

// One line per residual, "f32[5,4] from the argument W1.weight", then the total bytes.
std::string format_saved_residuals(const SavedResiduals& r);

// The names a strategy spec marks as checkpoint names, for ResidualOptions::names: the `names`,
// `names1` and `names2` values of a `policy` spec, split at '|'; empty for other strategies.
std::vector<std::string> checkpoint_names(const Spec& strategy);

}  // namespace rl
