#include "engine/graph_algorithms.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/biconnected_components.hpp>
#include <boost/graph/topological_sort.hpp>
#include <iterator>

namespace rl {

std::vector<NodeId> topological_order(const Graph& g) {
    using Dag = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
    Dag dag(static_cast<size_t>(g.num_nodes()));
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        for (ValueId in : g.node(n).inputs)
            if (!g.value(in).is_input())
                boost::add_edge(static_cast<size_t>(g.value(in).producer), static_cast<size_t>(n),
                                dag);
    std::vector<size_t> reversed;
    boost::topological_sort(dag, std::back_inserter(reversed));
    return {reversed.rbegin(), reversed.rend()};
}

std::vector<NodeId> articulation_nodes(const Graph& g) {
    using Undirected = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
    Undirected ug(static_cast<size_t>(g.num_values()));
    for (const Node& n : g.nodes())
        for (ValueId in : n.inputs)
            boost::add_edge(static_cast<size_t>(in), static_cast<size_t>(n.output), ug);
    std::vector<size_t> points;
    boost::articulation_points(ug, std::back_inserter(points));
    std::vector<NodeId> out;
    for (size_t v : points) {
        const Value& val = g.value(static_cast<ValueId>(v));
        if (!val.is_input()) out.push_back(val.producer);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<NodeId> segment_boundaries(const Graph& g) {
    // last_use_before[a] = the latest consumer of any node before a.
    std::vector<NodeId> out;
    const std::vector<NodeId> art = articulation_nodes(g);
    size_t next = 0;
    NodeId reach = -1;
    for (NodeId n = 0; n < g.loss_node() && next < art.size(); ++n) {
        if (art[next] == n) {
            ++next;
            if (reach <= n) out.push_back(n);
        }
        for (NodeId c : g.output_of(n).consumers) reach = std::max(reach, c);
    }
    return out;
}

}  // namespace rl
