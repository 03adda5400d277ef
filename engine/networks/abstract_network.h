#pragma once
// Abstract benchmark graphs (Checkmate's and Moccasin's node-link JSON, abstract_graph.h) as a
// network: a *plan-only* Graph (Graph::plan_only) whose node i is the graph's node i, an
// `opaque` op (engine/ops/opaque.cpp) with the node's output bytes and its duration, reading its
// predecessors. There are no graph inputs, parameters, losses or Backward instructions: the
// training graphs hold their backward nodes explicitly (tagged "backward", the others
// "forward"), so a schedule is Computes and Frees only, and the engine's liveness rules
// (engine/liveness.h) then charge exactly the general problem's memory model
// (solvers/general/general_problem.h): while v is computed, v's output plus the outputs still
// needed; a node without successors is freed right after its computation (ScheduleBuilder puts
// that Free there); nothing else.
//
// The node's duration is its forward cost (CostModel::analytic reads it, kind "durations"), in
// the file's units: Moccasin's are abstract, Checkmate's its cost_cpu.
#include <string>

#include "engine/graph.h"
#include "engine/networks/abstract_graph.h"

namespace rl {

// The plan-only network of `a`. Node names are the file's, made unique ("name#index") where a
// name repeats or is empty. Throws rl::Error when a size does not fit.
Graph network_from_abstract(const general::AbstractGraph& a);

// The abstract graph of a plan-only network of opaque nodes (the inverse of the above, names as
// the network has them): what the general solvers plan. Throws rl::Error for any other network.
general::AbstractGraph abstract_graph_of(const Graph& g);

}  // namespace rl
