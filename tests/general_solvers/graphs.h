#pragma once
// Small abstract graphs for the general-problem tests, written here (the published benchmark
// graphs are GPL-3.0 inputs that stay outside the repository).
#include <cstdint>
#include <cstdlib>
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

// The folder of Checkmate's and Moccasin's benchmark graphs (REMATLAB_REMAT_GRAPHS), or "" when
// it is not set: the tests that read it skip then.
inline std::string published_graphs_dir() {
    const char* dir = std::getenv("REMATLAB_REMAT_GRAPHS");
    return dir ? dir : "";
}
inline constexpr const char* kNoPublishedGraphs =
    "REMATLAB_REMAT_GRAPHS is not set (the folder of Checkmate's and Moccasin's benchmark graphs)";

// The peaks without recomputation listed in that folder's README (computed independently of
// this project), by file.
inline const std::vector<std::pair<std::string, uint64_t>>& listed_no_remat_peaks() {
    static const std::vector<std::pair<std::string, uint64_t>> listed{
        {"random_layered_n100_w0.27_nlv0.75_ed0.2_scd0.14.json", 46319},
        {"random_layered_n250_w0.43_nlv0.75_ed0.2_scd0.14.json", 146840},
        {"random_layered_n500_w0.36_nlv0.75_ed0.2_scd0.14.json", 284439},
        {"random_layered_n1000_w0.31_nlv0.75_ed0.2_scd0.14.json", 608619},
        {"ResNet50_mlsys_256_224x224x3_train_nx.json", 38059356160ull},
        {"fcn_8_vgg_mlsys_32_416x608x3_train_nx.json", 13484795520ull}};
    return listed;
}

}  // namespace rl::general::testing
