// Every op against its roofline, on this machine, in one run.
//
// For each network given (presets at working sizes by default, or any network spec: an ONNX
// model too), every node's forward and backward are timed on the CPU backend (the profiled cost
// model: median of --repeats runs, its data left in the caches by the previous run, as the raw
// products below are timed) and set against what the op's FLOPs and bytes allow
// (OpDef::cost) at the rates measured in the same run: the GEMM rate of the library the kernels
// use (engine/gemm.h) and the memory bandwidth of a large copy. Roofline time =
// max(FLOPs / GEMM rate, bytes / bandwidth); achieved fraction = roofline time / measured time
// (1.0 is at the roofline; GEMM-bound ops are held to the GEMM's own rate, so a linear layer at
// 0.9 runs at 90 % of the raw GEMM). Rows are per op kind and direction, summed over every
// network, sorted by measured time; the worst single node of each row is named.
//
//   bench_roofline [--threads N] [--repeats N] [--rounds N] [--markdown] [--nodes OP]
//                  [NETWORK ...]
// --rounds (3): each network is profiled and its layers' products timed that many times over;
// a layer's time is the median over the rounds, and its ratio to its products (below) the
// median of the rounds' ratios, with their range, so that each ratio sets times taken at the
// same moments against each other. Single runs of a network's convolutions moved by up to 25 %
// between processes on an idle host (ResNet-18's backward 8.8–12.4 ms, 2026-12-05).
// --nodes OP also prints every node of that op (its output shape, each direction's time and
// fraction of its roofline).
//
// A second table holds the GEMM layers (linear, matmul, and convolutions but the depthwise ones)
// to the raw GEMM of their own shapes: each product a node's forward or backward runs (Y = X·Wᵀ;
// dX = dY·W and dW = dYᵀ·X, dX only when the input needs a gradient; matmul's per batch, over the
// batch's distinct operands; a convolution's per chunk of images and group, on its im2col
// matrix, so im2col, col2im, the bias and the images' gathering count as the layer's) is run
// without the layer, the node's products one after another in the layer's order on buffers of
// its sizes, the forward's and the backward's alternating as the layer's are profiled, on every
// GEMM library available, in the same run, each product timed apart within the list, median
// of --repeats; the sum of each product's fastest library is the reference (per product since
// 2026-12-05, when the kernels began to choose the library per product shape: a per-node
// reference, one library for all of a node's products, had read 1.17 of raw for ResNeXt-101's
// convolutions' backward once they mixed). "of raw" = raw time / layer time: 1.0 means the layer
// costs nothing beyond its products, each on the best library this machine has for it,
// whichever the kernels use. The 512³ rate of the first table is a library's best case; thin
// products (a few rows, a short K) run below it on every library, and this table does not count
// that against the layer.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "engine/cost_model.h"
#include "engine/errors.h"
#include "engine/gemm.h"
#include "engine/networks/presets.h"
#include "engine/ops/op.h"
#include "engine/ops/window.h"

namespace {

struct Row {
    double measured_ms = 0, roofline_ms = 0, flops = 0, bytes = 0;
    int nodes = 0;
    double worst_fraction = 1e30;
    std::string worst_node;
    bool gemm_bound = false;
};

// One product, as sgemm takes it.
struct Product {
    bool trans_a = false, trans_b = false;
    int64_t m = 0, n = 0, k = 0;
    int64_t count = 1;   // times it runs (matmul's batch)
    int64_t a_sets = 0;  // distinct A operands among them (a convolution's weights: one per
                         // group, read again by every chunk of images); 0: count
    int64_t c_sets = 0;  // distinct outputs (a convolution's weight gradient: one per group,
                         // added into by every chunk); 0: count
    auto key() const { return std::make_tuple(trans_a, trans_b, m, n, k, count, a_sets, c_sets); }
    int64_t distinct_a() const { return a_sets > 0 ? a_sets : count; }
    int64_t distinct_c() const { return c_sets > 0 ? c_sets : count; }
};

// A linear layer's products on [rows, in] inputs to `out` features, forward (dir 0) or backward,
// as engine/cpu/dense.cpp runs them (linear_products_forward/backward).
std::vector<Product> linear_products(int64_t rows, int64_t in, int64_t out, int dir, bool grad_x) {
    if (dir == 0) return {{false, true, rows, out, in, 1}};
    std::vector<Product> ps;
    if (grad_x) ps.push_back({false, false, rows, in, out, 1});  // dX = dY·W
    ps.push_back({true, false, out, in, rows, 1});               // dW = dYᵀ·X
    return ps;
}

// The products of a convolution that takes the GEMM path (not depthwise), as engine/cpu/conv.cpp
// runs them: per chunk of images (Conv2dGeometry::images_per_gemm) and group, forward
// Y = W·cols [og, K]·[K, m·P]; backward dW += dY·colsᵀ, and dcols = Wᵀ·dY when the input needs a
// gradient (for a 1×1 stride-1 convolution that is dX itself, K = C/groups), or, where dX is a
// correlation of dY (Conv2dGeometry::input_grad_by_correlation), dX = W̃·im2col(dY); for windows
// without overlap (Conv2dGeometry::patches) the same products on Pᵀ = cols: Y = W·Pᵀ, dW = dY·P,
// dP = dYᵀ·W. The chunks of m images and the last, shorter one are two shapes.
std::vector<Product> conv_products(const rl::Graph& g, const rl::Node& node, int dir) {
    const rl::Conv2dGeometry c = rl::conv2d_geometry(g, node);
    if (c.depthwise()) return {};
    if (c.linear_like())  // as a linear layer on [N, C]
        return linear_products(c.n, c.c, c.out_c, dir, g.value(node.inputs[0]).requires_grad);
    const int64_t nb = c.images_per_gemm(), plane = c.oh * c.ow, og = c.out_per_group();
    const int64_t k = c.patch();
    const bool grad_x = g.value(node.inputs[0]).requires_grad;
    std::vector<Product> out;
    for (const auto& [m, chunks] : {std::pair{nb, c.n / nb}, std::pair{c.n % nb, int64_t{1}}}) {
        if (m == 0 || chunks == 0) continue;
        const int64_t count = chunks * c.groups, cols = m * plane;
        if (c.patches()) {  // one group
            if (dir == 0) {
                out.push_back({false, true, og, cols, k, count, 1});
                continue;
            }
            out.push_back({false, false, og, k, cols, count, 0, 1});
            if (grad_x) out.push_back({true, false, cols, k, og, count});
            continue;
        }
        if (dir == 0) {
            out.push_back({false, false, og, cols, k, count, c.groups});
            continue;
        }
        out.push_back({false, true, og, k, cols, count, 0, c.groups});
        if (grad_x && c.input_grad_by_correlation())  // dX = W̃·im2col(dY): [C/g, og·kh·kw]
            out.push_back({false, false, c.c_per_group(), m * c.h * c.w, og * c.win.kh * c.win.kw,
                           count, c.groups});
        else if (grad_x)
            out.push_back({true, false, k, cols, og, count, c.groups});
    }
    return out;
}

// The products of a linear or matmul node's forward (dir 0) or backward (dir 1), as
// engine/cpu/dense.cpp runs them; a convolution's as conv_products.
std::vector<Product> products_of(const rl::Graph& g, const rl::Node& node, int dir) {
    if (node.op == rl::OpKind::Conv2d) return conv_products(g, node, dir);
    std::vector<Product> out;
    const rl::Shape& x = g.value(node.inputs[0]).shape;
    const rl::Shape& y = g.value(node.output).shape;
    const bool grad_a = g.value(node.inputs[0]).requires_grad;
    if (node.op == rl::OpKind::Linear)
        return linear_products(x.numel() / x[-1], x[-1], y[-1], dir, grad_a);
    const bool tb = node.attrs.get_int("transpose_b", 0) != 0;
    const int64_t b = x[0], m = x[1], k = x[2], n = y[2];
    if (dir == 0) return {{false, tb, m, n, k, b}};
    if (grad_a) out.push_back({false, !tb, m, k, n, b});
    if (g.value(node.inputs[1]).requires_grad)
        out.push_back(tb ? Product{true, false, n, k, m, b} : Product{true, false, k, n, m, b});
    return out;
}

// The median times, in ms, of a node's forward and backward products (`phases`: the forward's
// list, then the backward's when the node has one), each list run one after another as the
// layer runs it, the lists alternating as the profile runs the layer's forward and backward
// (CostModel::profiled), after a warm-up: each product on buffers of its own of the layer's
// sizes, a batched product (matmul's, a convolution's chunks and groups, count > 1) over `count`
// distinct operands (a_sets weights, c_sets outputs, added into after their first product, as
// a convolution's weight gradient is over its chunks). `lib` empty: each product on the
// library the kernels use for its shape (rl::gemm_library_for). Timed one by one on one set of
// buffers, a product's operands stayed in cache: attention's batched products looked 2x faster
// than the layer (2026-12-03), and a 1×1 convolution on 2×2 planes, whose weight gradient and
// input gradient each stream 8 MB, 2x faster (ResNeXt-50's last stage, 2026-12-04), where run in
// sequence they evict each other's operands. A direction repeated alone kept its operands in
// the cache where the layer's other direction evicts them between two runs: ViT-B/32's patch
// embedding, 18.9 MB of weights and weight gradient, read 0.64–0.86 of raw backward
// (2026-12-05).
std::vector<std::vector<double>> time_products(std::optional<rl::GemmLibrary> lib,
                                               const std::vector<std::vector<Product>>& phases,
                                               int repeats) {
    struct Buffers {
        std::vector<float> a, b, c;
    };
    std::vector<std::vector<Buffers>> bufs(phases.size());
    for (size_t f = 0; f < phases.size(); ++f)
        for (const Product& p : phases[f])
            bufs[f].push_back(
                {std::vector<float>(static_cast<size_t>(p.m * p.k * p.distinct_a()), 0.25f),
                 std::vector<float>(static_cast<size_t>(p.k * p.n * p.count), 0.5f),
                 std::vector<float>(static_cast<size_t>(p.m * p.n * p.distinct_c()))});
    std::vector<std::vector<std::vector<double>>> ms(phases.size());  // phase, product, run
    for (size_t f = 0; f < phases.size(); ++f) ms[f].resize(phases[f].size());
    for (int r = 0; r <= repeats; ++r) {
        for (size_t f = 0; f < phases.size(); ++f) {
            for (size_t q = 0; q < phases[f].size(); ++q) {
                const auto t0 = std::chrono::steady_clock::now();
                const Product& p = phases[f][q];
                Buffers& b = bufs[f][q];
                const int64_t a_sets = p.distinct_a(), c_sets = p.distinct_c();
                const int64_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n;
                const rl::GemmLibrary l =
                    lib ? *lib
                        : rl::gemm_library_for(p.trans_a, p.trans_b, p.m, p.n, p.k, lda, ldb, p.n);
                for (int64_t i = 0; i < p.count; ++i)
                    rl::sgemm_on(l, p.trans_a, p.trans_b, p.m, p.n, p.k, 1.f,
                                 b.a.data() + (i % a_sets) * p.m * p.k, lda,
                                 b.b.data() + i * p.k * p.n, ldb, i < c_sets ? 0.f : 1.f,
                                 b.c.data() + (i % c_sets) * p.m * p.n, p.n);
                const double t =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
                if (r) ms[f][q].push_back(t);
            }
        }
    }
    std::vector<std::vector<double>> medians(phases.size());
    for (size_t f = 0; f < phases.size(); ++f)
        for (std::vector<double>& m : ms[f]) {
            std::sort(m.begin(), m.end());
            medians[f].push_back(m[m.size() / 2]);
        }
    return medians;
}

// Per node (its forward's and backward's lists of products: layers repeat them), per direction
// the sum over its products of the fastest library's median time for each, and the time on the
// libraries the kernels use for each product's shape (rl::gemm_library_for).
struct RawGemm {
    struct Times {
        double fastest_ms = 0, chosen_ms = 0;
    };
    int repeats = 5;
    using Key = std::vector<std::vector<decltype(Product{}.key())>>;
    std::map<Key, std::vector<Times>> seen;
    std::map<std::string, int> wins;  // products won per library
    const std::vector<Times>& of(const std::vector<std::vector<Product>>& phases) {
        Key key;
        for (const auto& ps : phases) {
            key.emplace_back();
            for (const Product& p : ps) key.back().push_back(p.key());
        }
        auto it = seen.find(key);
        if (it == seen.end()) {
            std::vector<Times> t(phases.size());
            // Per phase and product, the fastest library's median and its name.
            std::vector<std::vector<std::pair<double, std::string>>> best(phases.size());
            for (size_t f = 0; f < phases.size(); ++f) best[f].assign(phases[f].size(), {1e30, ""});
            for (const rl::GemmLibraryInfo& i : rl::gemm_libraries()) {
                if (!i.available) continue;
                const auto ms = time_products(i.library, phases, repeats);
                for (size_t f = 0; f < phases.size(); ++f)
                    for (size_t q = 0; q < phases[f].size(); ++q)
                        if (ms[f][q] < best[f][q].first)
                            best[f][q] = {ms[f][q], rl::gemm_library_name(i.library)};
            }
            const auto chosen = time_products(std::nullopt, phases, repeats);
            for (size_t f = 0; f < phases.size(); ++f) {
                t[f].fastest_ms = 0;
                for (size_t q = 0; q < phases[f].size(); ++q) {
                    t[f].fastest_ms += best[f][q].first;
                    t[f].chosen_ms += chosen[f][q];
                    wins[best[f][q].second] += 1;
                }
            }
            it = seen.emplace(key, t).first;
        }
        return it->second;
    }
};

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// A row of the raw-GEMM table: per round, its layers' and their products' summed times, so
// that each round's ratio sets times taken in the same moments against each other.
struct RawRow {
    std::vector<double> layer_ms, raw_ms, chosen_ms;  // per round
    int nodes = 0;
    double worst_fraction = 1e30;
    std::string worst_node;
    void add(size_t round, double layer, double raw, double chosen) {
        for (auto* v : {&layer_ms, &raw_ms, &chosen_ms})
            if (v->size() <= round) v->resize(round + 1);
        layer_ms[round] += layer, raw_ms[round] += raw, chosen_ms[round] += chosen;
    }
    // Median over rounds of `num`/layer, and its range.
    std::tuple<double, double, double> ratio(const std::vector<double>& num) const {
        std::vector<double> r;
        for (size_t i = 0; i < layer_ms.size(); ++i) r.push_back(num[i] / layer_ms[i]);
        const auto [lo, hi] = std::minmax_element(r.begin(), r.end());
        return {median_of(r), *lo, *hi};
    }
};

// A network's short name in the tables: a preset's name ("resnet"), a model file's name without
// its extension, or its folder's when the file is a generic "model.onnx" (zoo-check's cache).
std::string network_label(const std::string& spec) {
    const size_t colon = spec.find(':');
    if (colon != std::string::npos && spec.find('/') == std::string::npos)
        return spec.substr(0, colon);
    std::string path = spec;
    std::string base = path.substr(path.find_last_of('/') + 1);
    if (base == "model.onnx" && path.find('/') != std::string::npos) {
        path.resize(path.find_last_of('/'));
        return path.substr(path.find_last_of('/') + 1);
    }
    return base.substr(0, base.rfind('.'));
}

const std::vector<std::string> kDefaultNetworks = {
    "mlp:depth=8,width=1024,batch=512",
    "transformer:layers=2,d_model=256,heads=4,seq=128,batch=8,vocab=1000",
    "resnet:depth=18,width=32,size=56,batch=8",
    "mobilenet:width=16,size=56,batch=8",
    "vgg:depth=11,width=16,size=32,batch=8,hidden=256",
    "unet:depth=3,channels=16,size=64,batch=4",
};

}  // namespace

int main(int argc, char** argv) {
    using namespace rl;
    int threads = 1, repeats = 7, rounds = 3;
    bool markdown = false;
    std::string nodes_of;  // --nodes: an op whose nodes are listed one by one
    std::vector<std::string> networks;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--threads" || a == "--repeats" || a == "--rounds") && i + 1 < argc) {
            const int v = std::atoi(argv[++i]);
            if (v < 1) {
                std::fprintf(stderr, "bench_roofline: %s takes a positive integer\n", a.c_str());
                return 2;
            }
            (a == "--threads" ? threads : a == "--repeats" ? repeats : rounds) = v;
        } else if (a == "--nodes" && i + 1 < argc) {
            nodes_of = argv[++i];
        } else if (a == "--markdown") {
            markdown = true;
        } else if (a.rfind("--", 0) == 0) {
            std::fprintf(stderr,
                         "bench_roofline: unknown option %s\nusage: bench_roofline [--threads N] "
                         "[--repeats N] [--rounds N] [--markdown] [--nodes OP] [NETWORK ...]\n",
                         a.c_str());
            return 2;
        } else {
            networks.push_back(a);
        }
    }
    if (networks.empty()) networks = kDefaultNetworks;
    try {
        auto backend = make_cpu_backend(threads);
        const DeviceRates rates = DeviceRates::measure_cpu();
        std::map<std::string, Row> rows;
        std::map<std::string, RawRow> raw_rows;
        std::map<std::string, int> wins;  // products won per library, over the rounds
        size_t distinct = 0;              // nodes of distinct products
        double total_ms = 0;
        for (const std::string& spec : networks) {
            // A network planned in bf16 or f16 runs as its f32 copy (the kernels' type): the
            // bytes, FLOPs and times below are that copy's.
            const Graph g = load_network(spec).with_float_dtype(DType::F32);
            const auto nodes = static_cast<size_t>(g.num_nodes());
            // Per round, node and direction: the layer's time, its products' on the fastest
            // library and on the kernels' (0 where it has none).
            using PerNode = std::vector<std::array<double, 2>>;
            std::vector<PerNode> layer(rounds, PerNode(nodes)), fastest(rounds, PerNode(nodes)),
                chosen(rounds, PerNode(nodes));
            for (size_t round = 0; round < static_cast<size_t>(rounds); ++round) {
                // Hot, as the raw products are timed: every node as if its parameters stayed
                // in the cache (the profile `run` makes times them from memory where they leave
                // it).
                const CostModel measured =
                    CostModel::profiled(g, *backend, repeats, std::numeric_limits<uint64_t>::max());
                RawGemm raw;  // each round times its own products
                raw.repeats = repeats;
                for (NodeId n = 0; n < static_cast<NodeId>(nodes); ++n) {
                    const auto i = static_cast<size_t>(n);
                    layer[round][i] = {measured.forward_ms(n), measured.backward_ms(n)};
                    const Node& node = g.node(n);
                    if (node.op != OpKind::Linear && node.op != OpKind::MatMul &&
                        node.op != OpKind::Conv2d)
                        continue;
                    std::vector<std::vector<Product>> phases{products_of(g, node, 0)};
                    if (measured.backward_ms(n) > 0) phases.push_back(products_of(g, node, 1));
                    const std::vector<RawGemm::Times>& t = raw.of(phases);
                    for (size_t dir = 0; dir < phases.size(); ++dir) {
                        if (phases[dir].empty()) continue;
                        fastest[round][i][dir] = t[dir].fastest_ms;
                        chosen[round][i][dir] = t[dir].chosen_ms;
                    }
                }
                for (const auto& [lib, count] : raw.wins) wins[lib] += count;
                if (round == 0) distinct += raw.seen.size();
            }
            for (NodeId n = 0; n < static_cast<NodeId>(nodes); ++n) {
                const auto i = static_cast<size_t>(n);
                const Node& node = g.node(n);
                const OpDef& d = op_def(node.op);
                const OpCost c = d.cost ? d.cost(g, node) : OpCost{};
                const std::string where = node.name + " (" + network_label(spec) + ")";
                for (int dir = 0; dir < 2; ++dir) {
                    // Over the rounds: the layer's median time, and each round's raw / layer.
                    std::vector<double> ms_r, of_raw, of_ours;
                    for (size_t round = 0; round < static_cast<size_t>(rounds); ++round) {
                        ms_r.push_back(layer[round][i][dir]);
                        if (fastest[round][i][dir] <= 0) continue;
                        of_raw.push_back(fastest[round][i][dir] / layer[round][i][dir]);
                        of_ours.push_back(chosen[round][i][dir] / layer[round][i][dir]);
                    }
                    const double ms = median_of(ms_r), median_of_raw = median_of(of_raw);
                    const std::string row = std::string(d.name) + (dir == 0 ? " fwd" : " bwd");
                    const double flops = dir == 0 ? c.fwd_flops : c.bwd_flops;
                    const double bytes = dir == 0 ? c.fwd_bytes : c.bwd_bytes;
                    if (ms <= 0 || (flops <= 0 && bytes <= 0)) continue;
                    const double compute_ms = flops / (rates.gflops * 1e6);
                    const double memory_ms = bytes / (rates.gbps * 1e6);
                    const double roof = std::max(compute_ms, memory_ms);
                    Row& r = rows[row];
                    r.measured_ms += ms;
                    r.roofline_ms += roof;
                    r.flops += flops;
                    r.bytes += bytes;
                    r.nodes += 1;
                    r.gemm_bound = r.gemm_bound || compute_ms > memory_ms;
                    if (roof / ms < r.worst_fraction) {
                        r.worst_fraction = roof / ms;
                        r.worst_node = where;
                    }
                    total_ms += ms;
                    if (!of_raw.empty()) {  // a GEMM layer: against its products alone
                        RawRow& rr = raw_rows[row];
                        for (size_t round = 0; round < static_cast<size_t>(rounds); ++round)
                            rr.add(round, layer[round][i][dir], fastest[round][i][dir],
                                   chosen[round][i][dir]);
                        rr.nodes += 1;
                        if (median_of_raw < rr.worst_fraction) {
                            rr.worst_fraction = median_of_raw;
                            rr.worst_node = where + " " + format_dims(g.output_of(n).shape);
                        }
                    }
                    if (d.name == nodes_of) {
                        std::printf("%-40s %-22s %s %9.4f ms  %5.2f of roofline (%s)",
                                    where.c_str(), format_dims(g.output_of(n).shape).c_str(),
                                    dir == 0 ? "fwd" : "bwd", ms, roof / ms,
                                    compute_ms > memory_ms ? "GEMM" : "memory");
                        if (!of_raw.empty()) {
                            const auto [lo, hi] = std::minmax_element(of_raw.begin(), of_raw.end());
                            std::printf(
                                "  %5.2f of raw GEMM (%.2f-%.2f over %d rounds; %.2f "
                                "of its products on ours)",
                                median_of_raw, *lo, *hi, rounds, median_of(of_ours));
                        }
                        std::printf("\n");
                    }
                }
            }
        }
        std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
        std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
            return a.second.measured_ms > b.second.measured_ms;
        });
        std::printf(
            "GEMM %s; rates measured in this run: GEMM %.1f GFLOP/s, bandwidth %.1f GB/s; "
            "%d thread%s, per node the median over %d rounds of the median of %d runs\n",
            gemm_choice().summary().c_str(), rates.gflops, rates.gbps, threads,
            threads == 1 ? "" : "s", rounds, repeats);
        if (markdown) {
            std::printf(
                "\n| op | nodes | share of time | bound by | achieved of roofline | "
                "GFLOP/s | GB/s | worst node (fraction) |\n|---|---|---|---|---|---|---|---|\n");
        } else {
            std::printf("%-22s %5s %7s %8s %9s %8s %7s  %s\n", "op", "nodes", "share", "bound",
                        "achieved", "GFLOP/s", "GB/s", "worst node (fraction)");
        }
        for (const auto& [name, r] : sorted) {
            const double share = 100.0 * r.measured_ms / total_ms;
            const double fraction = r.roofline_ms / r.measured_ms;
            const double gf = r.flops / (r.measured_ms * 1e6), gb = r.bytes / (r.measured_ms * 1e6);
            if (markdown)
                std::printf("| %s | %d | %.1f %% | %s | %.2f | %.1f | %.1f | %s (%.2f) |\n",
                            name.c_str(), r.nodes, share, r.gemm_bound ? "GEMM" : "memory",
                            fraction, gf, gb, r.worst_node.c_str(), r.worst_fraction);
            else
                std::printf("%-22s %5d %6.1f%% %8s %9.2f %8.1f %7.1f  %s (%.2f)\n", name.c_str(),
                            r.nodes, share, r.gemm_bound ? "GEMM" : "memory", fraction, gf, gb,
                            r.worst_node.c_str(), r.worst_fraction);
        }
        if (!raw_rows.empty()) {
            std::string won;
            for (const auto& [lib, count] : wins)
                won += (won.empty() ? "" : ", ") + lib + " " + std::to_string(count);
            std::printf(
                "\nGEMM layers against the raw GEMM of their own shapes, fastest library per "
                "product (%zu distinct nodes; fastest, products won over %d rounds: %s); "
                "times: "
                "medians over the rounds; of raw: the median of the rounds' ratios (their "
                "range):\n",
                distinct, rounds, won.c_str());
            if (markdown)
                std::printf(
                    "\n| op | nodes | layer ms | raw GEMM ms, fastest | of raw | raw on ours ms "
                    "| of that | worst node (of raw) |\n|---|---|---|---|---|---|---|---|\n");
            else
                std::printf("%-22s %5s %10s %12s %-16s %12s %-16s  %s\n", "op", "nodes", "layer ms",
                            "raw fastest", "of raw", "raw chosen", "of that",
                            "worst node (of raw)");
            for (const auto& [name, r] : raw_rows) {
                const auto [of_raw, raw_lo, raw_hi] = r.ratio(r.raw_ms);
                const auto [of_that, that_lo, that_hi] = r.ratio(r.chosen_ms);
                char raw_s[32], that_s[32];
                std::snprintf(raw_s, sizeof raw_s, "%.2f (%.2f-%.2f)", of_raw, raw_lo, raw_hi);
                std::snprintf(that_s, sizeof that_s, "%.2f (%.2f-%.2f)", of_that, that_lo, that_hi);
                std::printf(markdown ? "| %s | %d | %.2f | %.2f | %s | %.2f | %s | %s (%.2f) |\n"
                                     : "%-22s %5d %10.2f %12.2f %-16s %12.2f %-16s  %s (%.2f)\n",
                            name.c_str(), r.nodes, median_of(r.layer_ms), median_of(r.raw_ms),
                            raw_s, median_of(r.chosen_ms), that_s, r.worst_node.c_str(),
                            r.worst_fraction);
            }
        }
    } catch (const Error& e) {
        std::fprintf(stderr, "bench_roofline: %s\n", e.what());
        return 1;
    }
    return 0;
}
