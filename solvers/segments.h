#pragma once
// Segment checkpointing, shared by sqrt-n and periodic (Chen, Xu, Zhang, Guestrin 2016,
// "Training Deep Nets with Sublinear Memory Cost", §4).
//
// Given checkpoint nodes b1 < b2 < … < bk, all of them segment boundaries (nothing before bi is
// read after it): the forward runs every node once and keeps only the boundaries' outputs and
// what the last segment needs; then, from the last segment to the first, each segment's interior
// is recomputed from the boundary before it and its nodes run their backwards. The last segment
// is not recomputed: its activations are still there from the forward.
//
// Worked example, chain of 6 nodes, checkpoints {1, 3}: forward 0..5 keeps out(1), out(3) and
// what 4, 5 need; backward 5, 4; recompute 2; backward 3, 2; recompute 0; backward 1, 0.
// Recompute = nodes 0 and 2 (the interiors of the first two segments).
#include <vector>

#include "engine/graph.h"
#include "engine/schedule.h"

namespace rl {

// `checkpoints` must be sorted segment boundaries (engine/graph_algorithms.h).
Schedule segment_schedule(const Graph& g, const std::vector<NodeId>& checkpoints);

// Picks `segments` segments of about equal activation bytes from `candidates` (sorted
// boundaries): returns the segments−1 boundaries closest to the byte quantiles.
std::vector<NodeId> even_checkpoints(const Graph& g, const std::vector<NodeId>& candidates,
                                     int segments);

}  // namespace rl
