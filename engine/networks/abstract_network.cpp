#include "engine/networks/abstract_network.h"

#include <unordered_set>

#include "engine/errors.h"

namespace rl {

Graph network_from_abstract(const general::AbstractGraph& a) {
    Graph g(a.name.empty() ? std::string("abstract") : a.name);
    g.set_plan_only(true);
    std::unordered_set<std::string> used;
    for (const general::AbstractNode& n : a.nodes) used.insert(n.name);
    std::unordered_set<std::string> taken;
    for (int32_t i = 0; i < a.size(); ++i) {
        const general::AbstractNode& n = a.nodes[static_cast<size_t>(i)];
        std::string name = n.name;
        if (name.empty() || taken.count(name)) {
            name = (name.empty() ? std::string("node") : name) + "#" + std::to_string(i);
            while (taken.count(name) || used.count(name)) name += "'";
        }
        taken.insert(name);
        if (n.out_bytes > static_cast<uint64_t>(INT64_MAX))
            throw Error("abstract graph '" + a.name + "': node '" + n.name + "' has " +
                        std::to_string(n.out_bytes) + " output bytes, more than a network holds");
        Attrs attrs;
        attrs.set("bytes", static_cast<int64_t>(n.out_bytes));
        attrs.set("duration", n.duration);
        std::vector<ValueId> inputs;
        inputs.reserve(a.preds[static_cast<size_t>(i)].size());
        for (int32_t p : a.preds[static_cast<size_t>(i)])
            inputs.push_back(g.node(p).output);  // node p's output value
        g.add_node(name, OpKind::Opaque, inputs, std::move(attrs),
                   {n.backward ? "backward" : "forward"});
    }
    g.finalize();
    return g;
}

general::AbstractGraph abstract_graph_of(const Graph& g) {
    if (!g.plan_only())
        throw Error("network '" + g.name() +
                    "' is not an abstract benchmark graph (it has kernels and a loss)");
    std::vector<general::AbstractNode> nodes;
    std::vector<std::pair<int32_t, int32_t>> edges;
    nodes.reserve(static_cast<size_t>(g.num_nodes()));
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const Node& node = g.node(n);
        if (node.op != OpKind::Opaque)
            throw Error("network '" + g.name() + "': node '" + node.name + "' is not opaque");
        nodes.push_back({node.name, node.attrs.get_float("duration", 0), g.output_of(n).bytes,
                         node.has_tag("backward")});
        for (ValueId in : node.inputs) edges.emplace_back(g.value(in).producer, n);
    }
    return general::make_abstract_graph(g.name(), std::move(nodes), edges);
}

}  // namespace rl
