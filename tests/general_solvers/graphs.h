#pragma once
// Small abstract graphs for the general-problem tests, written here (the published benchmark
// graphs are GPL-3.0 inputs that stay outside the repository).
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/networks/abstract_graph.h"

namespace rl::general::testing {

// "prefix" + number, built by append: GCC 12 warns falsely (-Wrestrict) on `"f" + to_string(i)`.
inline std::string numbered(const char* prefix, int i) {
    std::string s(prefix);
    s.append(std::to_string(i));
    return s;
}

// A random layered DAG after Moccasin's generator in spirit: `n` nodes in order, each node after
// the first reads one to three earlier nodes (at least its predecessor in a random earlier
// window), random durations and output sizes.
inline AbstractGraph random_dag(int n, uint32_t seed, int window = 4) {
    std::mt19937 rng(seed);
    std::vector<AbstractNode> nodes;
    std::vector<std::pair<int32_t, int32_t>> edges;
    for (int v = 0; v < n; ++v) {
        AbstractNode node;
        node.name = numbered("n", v);
        node.duration = 1 + static_cast<double>(rng() % 9);
        node.out_bytes = 1 + rng() % 20;
        nodes.push_back(node);
        if (v == 0) continue;
        const int fan = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < fan; ++k) {
            const int lo = std::max(0, v - window);
            const int u = lo + static_cast<int>(rng() % static_cast<uint32_t>(v - lo));
            edges.emplace_back(u, v);
        }
    }
    return make_abstract_graph(numbered("random", static_cast<int>(seed)), std::move(nodes), edges);
}

// A training graph in Checkmate's shape: forward chain f0..f(k-1), loss, backward chain with
// b_i reading f_i (its residual) and b_(i+1).
inline AbstractGraph train_chain(int k, uint64_t act_bytes = 10, uint64_t grad_bytes = 10) {
    std::vector<AbstractNode> nodes;
    std::vector<std::pair<int32_t, int32_t>> edges;
    for (int i = 0; i < k; ++i) nodes.push_back({numbered("f", i), 1.0 + i, act_bytes, false});
    nodes.push_back({"loss", 1, 1, false});
    for (int i = k - 1; i >= 0; --i) nodes.push_back({numbered("b", i), 2.0, grad_bytes, true});
    for (int i = 1; i < k; ++i) edges.emplace_back(i - 1, i);
    edges.emplace_back(k - 1, k);
    // b_i at index k + (k - i)
    for (int i = k - 1; i >= 0; --i) {
        const int b = k + (k - i);
        edges.emplace_back(i, b);
        edges.emplace_back(b - 1, b);  // the gradient from b_(i+1) (or the loss)
    }
    return make_abstract_graph(numbered("train_chain", k), std::move(nodes), edges);
}

}  // namespace rl::general::testing
