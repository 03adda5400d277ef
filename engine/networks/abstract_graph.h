#pragma once
// Abstract computation graphs: the benchmark graphs of Checkmate (Jain et al., MLSys 2020) and
// Moccasin (Bartan et al., ICML 2023). A node has a duration and the bytes of its output, and
// nothing else: no kernel, no shape, no parameters. Training graphs hold their backward nodes
// explicitly (a node flagged `backward`), so the whole training step is one DAG and the problem
// is the general one (solvers/general/general_problem.h), not our forward-graph one.
//
// Two networkx node-link JSON families are read:
//   Moccasin's random layered DAGs   nodes {name, out_cost, duration, param_cost}
//                                    links {"0": src, "1": dst}; graph.order = the node order
//   Checkmate's Keras graphs         nodes {id, name, backward, cost_cpu, cost_ram}
//                                    links {source, target}; ids are a topological order
// Nodes are renumbered 0..n-1 in the file's order (graph.order, or ascending id), so that node
// index = position in the order the budget is defined by.
#include <cstdint>
#include <string>
#include <vector>

namespace rl::general {

struct AbstractNode {
    std::string name;
    double duration = 0;     // time units of the file (Moccasin: abstract; Checkmate: cost_cpu)
    uint64_t out_bytes = 0;  // bytes of the output
    bool backward = false;   // an explicit backward node (Checkmate's train graphs)
};

struct AbstractGraph {
    std::string name;                                // graph.name, else the file's stem
    std::vector<AbstractNode> nodes;                 // index = position in the order
    std::vector<std::vector<int32_t>> preds, succs;  // sorted, no duplicates
    int32_t size() const { return static_cast<int32_t>(nodes.size()); }
    int64_t num_edges() const;
    double total_duration() const;  // each node once
};

// Builds the graph from nodes in topological order and edges (src < dst). Throws rl::Error for an
// edge that points backwards, to itself, or to a node that does not exist.
AbstractGraph make_abstract_graph(std::string name, std::vector<AbstractNode> nodes,
                                  const std::vector<std::pair<int32_t, int32_t>>& edges);

// Reads either family; throws rl::Error naming the file, what is wrong and where (the node or
// link index) for malformed JSON, missing or mistyped fields, unknown node references, duplicate
// ids, an order that is not a permutation or not topological, or a cycle.
AbstractGraph abstract_graph_from_json(const std::string& text, const std::string& origin);
AbstractGraph load_abstract_graph(const std::string& path);

}  // namespace rl::general
