#pragma once
// Graph algorithms over Boost.Graph views of the network (no hand-written versions of what
// Boost.Graph provides).
#include <vector>

#include "engine/graph.h"

namespace rl {

// A topological order of the nodes (Boost's topological_sort over the data dependencies).
std::vector<NodeId> topological_order(const Graph& g);

// Nodes whose output is an articulation point of the undirected dependency graph over values
// (graph inputs and node outputs): removing the value disconnects the network. Sorted.
std::vector<NodeId> articulation_nodes(const Graph& g);

// Articulation nodes that also cut the stored node order: every node before it is consumed no
// later than it, so the network splits into contiguous segments at it. These are the candidate
// segment boundaries of Chen et al.'s sqrt(n) checkpointing. The loss is never one. Sorted.
std::vector<NodeId> segment_boundaries(const Graph& g);

}  // namespace rl
