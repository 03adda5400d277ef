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
//   bench_roofline [--threads N] [--repeats N] [--markdown] [--nodes OP] [NETWORK ...]
// --nodes OP also prints every node of that op (its output shape, each direction's time and
// fraction of its roofline).
//
// A second table holds the GEMM layers (linear, matmul, and convolutions but the depthwise ones)
// to the raw GEMM of their own shapes: each product a node's forward or backward runs (Y = X·Wᵀ;
// dX = dY·W and dW = dYᵀ·X, dX only when the input needs a gradient; matmul's per batch, over the
// batch's distinct operands; a convolution's per chunk of images and group, on its im2col
// matrix, so im2col, col2im, the bias and the images' gathering count as the layer's) is run
// without the layer, the node's products one after another in the layer's order on buffers of
// its sizes, on every GEMM library available, in the same run, median of --repeats; the fastest
// library for the node is the reference. "of raw" = raw time / layer time: 1.0 means the layer
// costs nothing beyond its products on the best library this machine has, whichever the kernels
// use. The 512³ rate of the first table is a library's best case; thin
// products (a few rows, a short K) run below it on every library, and this table does not count
// that against the layer.
#include <algorithm>
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

// The median time, in ms, of a node's products run one after another as the layer runs them,
// after a warm-up: each on buffers of its own of the layer's sizes, a batched product (matmul's,
// a convolution's chunks and groups, count > 1) over `count` distinct operands (a_sets weights,
// c_sets outputs, added into after their first product, as a convolution's weight gradient is
// over its chunks). `lib` empty: each product on the library the kernels use for its size
// (rl::gemm_library_for). Timed one by one on one set of buffers, a product's operands stayed in
// cache: attention's batched products looked 2x faster than the layer (2026-12-03), and a 1×1
// convolution on 2×2 planes, whose weight gradient and input gradient each stream 8 MB, 2x faster
// (ResNeXt-50's last stage, 2026-12-04), where run in sequence they evict each other's operands.
double time_products(std::optional<rl::GemmLibrary> lib, const std::vector<Product>& ps,
                     int repeats) {
    struct Buffers {
        std::vector<float> a, b, c;
    };
    std::vector<Buffers> bufs;
    for (const Product& p : ps)
        bufs.push_back({std::vector<float>(static_cast<size_t>(p.m * p.k * p.distinct_a()), 0.25f),
                        std::vector<float>(static_cast<size_t>(p.k * p.n * p.count), 0.5f),
                        std::vector<float>(static_cast<size_t>(p.m * p.n * p.distinct_c()))});
    std::vector<double> ms;
    for (int r = 0; r <= repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (size_t q = 0; q < ps.size(); ++q) {
            const Product& p = ps[q];
            const int64_t a_sets = p.distinct_a(), c_sets = p.distinct_c();
            const int64_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n;
            const rl::GemmLibrary l = lib ? *lib : rl::gemm_library_for(p.m, p.n, p.k);
            for (int64_t i = 0; i < p.count; ++i)
                rl::sgemm_on(l, p.trans_a, p.trans_b, p.m, p.n, p.k, 1.f,
                             bufs[q].a.data() + (i % a_sets) * p.m * p.k, lda,
                             bufs[q].b.data() + i * p.k * p.n, ldb, i < c_sets ? 0.f : 1.f,
                             bufs[q].c.data() + (i % c_sets) * p.m * p.n, p.n);
        }
        const double t =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (r) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Per node and direction (its list of products: layers repeat them), the fastest library's
// median time for the list and its name, and the time on the libraries the kernels use.
struct RawGemm {
    struct Times {
        double fastest_ms = 1e30, chosen_ms = 0;
        std::string fastest;
    };
    int repeats = 5;
    std::map<std::vector<decltype(Product{}.key())>, Times> seen;
    std::map<std::string, int> wins;  // product lists won per library
    const Times& of(const std::vector<Product>& ps) {
        std::vector<decltype(Product{}.key())> key;
        for (const Product& p : ps) key.push_back(p.key());
        auto it = seen.find(key);
        if (it == seen.end()) {
            Times t;
            for (const rl::GemmLibraryInfo& i : rl::gemm_libraries()) {
                if (!i.available) continue;
                const double ms = time_products(i.library, ps, repeats);
                if (ms < t.fastest_ms)
                    t.fastest_ms = ms, t.fastest = rl::gemm_library_name(i.library);
            }
            t.chosen_ms = time_products(std::nullopt, ps, repeats);
            it = seen.emplace(key, t).first;
            wins[t.fastest] += 1;
        }
        return it->second;
    }
};

struct RawRow {
    double layer_ms = 0, raw_ms = 0, chosen_ms = 0;
    int nodes = 0;
    double worst_fraction = 1e30;
    std::string worst_node;
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
    int threads = 1, repeats = 7;
    bool markdown = false;
    std::string nodes_of;  // --nodes: an op whose nodes are listed one by one
    std::vector<std::string> networks;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--threads" || a == "--repeats") && i + 1 < argc) {
            const int v = std::atoi(argv[++i]);
            if (v < 1) {
                std::fprintf(stderr, "bench_roofline: %s takes a positive integer\n", a.c_str());
                return 2;
            }
            (a == "--threads" ? threads : repeats) = v;
        } else if (a == "--nodes" && i + 1 < argc) {
            nodes_of = argv[++i];
        } else if (a == "--markdown") {
            markdown = true;
        } else if (a.rfind("--", 0) == 0) {
            std::fprintf(stderr,
                         "bench_roofline: unknown option %s\nusage: bench_roofline [--threads N] "
                         "[--repeats N] [--markdown] [--nodes OP] [NETWORK ...]\n",
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
        RawGemm raw;
        raw.repeats = repeats;
        double total_ms = 0;
        for (const std::string& spec : networks) {
            const Graph g = load_network(spec);
            // Hot, as the raw products are timed: every node as if its parameters stayed in
            // the cache (the profile `run` makes times them from memory where they leave it).
            const CostModel measured =
                CostModel::profiled(g, *backend, repeats, std::numeric_limits<uint64_t>::max());
            for (NodeId n = 0; n < static_cast<NodeId>(g.num_nodes()); ++n) {
                const Node& node = g.node(n);
                const OpDef& d = op_def(node.op);
                const OpCost c = d.cost ? d.cost(g, node) : OpCost{};
                const std::string where = node.name + " (" + network_label(spec) + ")";
                for (int dir = 0; dir < 2; ++dir) {
                    const double ms = dir == 0 ? measured.forward_ms(n) : measured.backward_ms(n);
                    const double flops = dir == 0 ? c.fwd_flops : c.bwd_flops;
                    const double bytes = dir == 0 ? c.fwd_bytes : c.bwd_bytes;
                    if (ms <= 0 || (flops <= 0 && bytes <= 0)) continue;
                    const double compute_ms = flops / (rates.gflops * 1e6);
                    const double memory_ms = bytes / (rates.gbps * 1e6);
                    const double roof = std::max(compute_ms, memory_ms);
                    Row& r = rows[std::string(d.name) + (dir == 0 ? " fwd" : " bwd")];
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
                    const std::vector<Product> products = node.op == OpKind::Linear ||
                                                                  node.op == OpKind::MatMul ||
                                                                  node.op == OpKind::Conv2d
                                                              ? products_of(g, node, dir)
                                                              : std::vector<Product>{};
                    double raw_ms = 0, chosen_ms = 0;  // the products alone: fastest, ours
                    if (!products.empty()) {
                        const RawGemm::Times& t = raw.of(products);
                        raw_ms = t.fastest_ms;
                        chosen_ms = t.chosen_ms;
                        RawRow& rr = raw_rows[std::string(d.name) + (dir == 0 ? " fwd" : " bwd")];
                        rr.layer_ms += ms;
                        rr.raw_ms += raw_ms;
                        rr.chosen_ms += chosen_ms;
                        rr.nodes += 1;
                        if (raw_ms / ms < rr.worst_fraction) {
                            rr.worst_fraction = raw_ms / ms;
                            rr.worst_node = where + " " + format_dims(g.output_of(n).shape);
                        }
                    }
                    if (d.name == nodes_of) {
                        std::printf("%-40s %-22s %s %9.4f ms  %5.2f of roofline (%s)",
                                    where.c_str(), format_dims(g.output_of(n).shape).c_str(),
                                    dir == 0 ? "fwd" : "bwd", ms, roof / ms,
                                    compute_ms > memory_ms ? "GEMM" : "memory");
                        if (raw_ms > 0)
                            std::printf("  %5.2f of raw GEMM (%.4f ms; %.4f ms on ours)",
                                        raw_ms / ms, raw_ms, chosen_ms);
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
            "%d thread%s, median of %d runs per node\n",
            gemm_choice().summary().c_str(), rates.gflops, rates.gbps, threads,
            threads == 1 ? "" : "s", repeats);
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
            std::string wins;
            for (const auto& [lib, count] : raw.wins)
                wins += (wins.empty() ? "" : ", ") + lib + " " + std::to_string(count);
            std::printf(
                "\nGEMM layers against the raw GEMM of their own shapes, fastest library per "
                "node (%zu distinct nodes; fastest: %s):\n",
                raw.seen.size(), wins.c_str());
            if (markdown)
                std::printf(
                    "\n| op | nodes | layer ms | raw GEMM ms, fastest | of raw | raw on ours ms "
                    "| of that | worst node (of raw) |\n|---|---|---|---|---|---|---|---|\n");
            else
                std::printf("%-22s %5s %10s %12s %7s %12s %7s  %s\n", "op", "nodes", "layer ms",
                            "raw fastest", "of raw", "raw chosen", "of that",
                            "worst node (of raw)");
            for (const auto& [name, r] : raw_rows) {
                if (markdown)
                    std::printf("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %s (%.2f) |\n",
                                name.c_str(), r.nodes, r.layer_ms, r.raw_ms, r.raw_ms / r.layer_ms,
                                r.chosen_ms, r.chosen_ms / r.layer_ms, r.worst_node.c_str(),
                                r.worst_fraction);
                else
                    std::printf("%-22s %5d %10.2f %12.2f %7.2f %12.2f %7.2f  %s (%.2f)\n",
                                name.c_str(), r.nodes, r.layer_ms, r.raw_ms, r.raw_ms / r.layer_ms,
                                r.chosen_ms, r.chosen_ms / r.layer_ms, r.worst_node.c_str(),
                                r.worst_fraction);
            }
        }
    } catch (const Error& e) {
        std::fprintf(stderr, "bench_roofline: %s\n", e.what());
        return 1;
    }
    return 0;
}
