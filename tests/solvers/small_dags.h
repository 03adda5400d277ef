#pragma once
// Small hand-built DAGs for the MILP tests (test_checkmate.cpp, test_checkmate_offload.cpp):
// activations large against parameters (a tall batch over narrow layers), 8 to 10 nodes, small
// enough for an exhaustive search over every schedule.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/graph.h"

namespace rl::testing {

inline Attrs out_features(int64_t n) {
    return Attrs{{"out_features", n}};
}

inline NodeId node(Graph& g, const std::string& name, OpKind op, const std::vector<ValueId>& ins,
                   Attrs attrs = {}) {
    return g.add_node(name, op, ins, std::move(attrs));
}
inline ValueId out(const Graph& g, NodeId n) {
    return g.node(n).output;
}

inline Graph chain_graph() {  // 8 nodes: linear/tanh alternating, widths varying
    Graph g("chain");
    ValueId x = g.add_input("x", DType::F32, {32, 4});
    const int64_t widths[] = {8, 6, 12, 4};
    for (int i = 0; i < 4; ++i) {
        const NodeId l =
            node(g, "l" + std::to_string(i), OpKind::Linear, {x}, out_features(widths[i]));
        x = out(g, l);
        if (i < 3) x = out(g, node(g, "t" + std::to_string(i), OpKind::Tanh, {x}));
    }
    node(g, "loss", OpKind::SumSquares, {x});
    g.finalize();
    return g;
}

inline Graph diamond_graph() {  // 9 nodes: one value feeding two branches that rejoin
    Graph g("diamond");
    const ValueId x = g.add_input("x", DType::F32, {32, 4});
    const NodeId a = node(g, "a", OpKind::Linear, {x}, out_features(8));
    const NodeId r = node(g, "r", OpKind::Relu, {out(g, a)});
    const NodeId b1 = node(g, "b1", OpKind::Linear, {out(g, r)}, out_features(12));
    const NodeId c1 = node(g, "c1", OpKind::Tanh, {out(g, b1)});
    const NodeId b2 = node(g, "b2", OpKind::Linear, {out(g, r)}, out_features(12));
    const NodeId c2 = node(g, "c2", OpKind::Gelu, {out(g, b2)});
    const NodeId s = node(g, "s", OpKind::Add, {out(g, c1), out(g, c2)});
    const NodeId o = node(g, "o", OpKind::Linear, {out(g, s)}, out_features(4));
    node(g, "loss", OpKind::SumSquares, {out(g, o)});
    g.finalize();
    return g;
}

inline Graph skip_graph() {  // 9 nodes: two residual blocks
    Graph g("skip");
    const ValueId x = g.add_input("x", DType::F32, {32, 4});
    const NodeId l0 = node(g, "l0", OpKind::Linear, {x}, out_features(8));
    const NodeId a0 = node(g, "a0", OpKind::Relu, {out(g, l0)});
    const NodeId l1 = node(g, "l1", OpKind::Linear, {out(g, a0)}, out_features(8));
    const NodeId a1 = node(g, "a1", OpKind::Tanh, {out(g, l1)});
    const NodeId s1 = node(g, "s1", OpKind::Add, {out(g, a0), out(g, a1)});
    const NodeId l2 = node(g, "l2", OpKind::Linear, {out(g, s1)}, out_features(8));
    const NodeId a2 = node(g, "a2", OpKind::Gelu, {out(g, l2)});
    const NodeId s2 = node(g, "s2", OpKind::Add, {out(g, s1), out(g, a2)});
    node(g, "loss", OpKind::SumSquares, {out(g, s2)});
    g.finalize();
    return g;
}

inline Graph
attention_graph() {  // 10 nodes: q, k, v, scores, softmax, context, projection, residual
    Graph g("attention");
    const ValueId x = g.add_input("x", DType::F32, {2, 8, 4});
    const NodeId q = node(g, "q", OpKind::Linear, {x}, out_features(8));
    const NodeId k = node(g, "k", OpKind::Linear, {x}, out_features(8));
    const NodeId v = node(g, "v", OpKind::Linear, {x}, out_features(8));
    const NodeId sc = node(g, "scores", OpKind::MatMul, {out(g, q), out(g, k)},
                           Attrs{{"transpose_b", int64_t{1}}, {"alpha", 0.35}});
    const NodeId p = node(g, "probs", OpKind::Softmax, {out(g, sc)});
    const NodeId ctx = node(g, "ctx", OpKind::MatMul, {out(g, p), out(g, v)});
    const NodeId o = node(g, "proj", OpKind::Linear, {out(g, ctx)}, out_features(8));
    const NodeId r = node(g, "res", OpKind::Add, {out(g, o), out(g, v)});
    const NodeId a = node(g, "act", OpKind::Gelu, {out(g, r)});
    node(g, "loss", OpKind::SumSquares, {out(g, a)});
    g.finalize();
    return g;
}

// The four, named, for parameterised tests (INSTANTIATE_TEST_SUITE_P(..., ValuesIn(small_dags()),
// dag_name)).
struct NamedDag {
    std::string name;
    Graph (*build)();
};
inline std::vector<NamedDag> small_dags() {
    return {{"chain", chain_graph},
            {"diamond", diamond_graph},
            {"skip", skip_graph},
            {"attention", attention_graph}};
}
inline std::string dag_name(const ::testing::TestParamInfo<NamedDag>& info) {
    return info.param.name;
}

}  // namespace rl::testing
