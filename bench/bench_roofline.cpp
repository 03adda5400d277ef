// Every op against its roofline, on this machine, in one run.
//
// For each network given (presets at working sizes by default, or any network spec: an ONNX
// model too), every node's forward and backward are timed on the CPU backend (the profiled cost
// model: median of --repeats runs) and set against what the op's FLOPs and bytes allow
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
// A second table holds the GEMM layers (linear, matmul) to the raw GEMM of their own shapes: each
// product a node's forward or backward runs (Y = X·Wᵀ; dX = dY·W and dW = dYᵀ·X, dX only when the
// input needs a gradient; matmul's per batch, over the batch's distinct operands) is timed alone
// on every GEMM library available, in the same run and on the same buffers' sizes, median of
// --repeats, and the fastest library per shape is the reference. "of raw" = raw time / layer time:
// 1.0 means the layer costs nothing beyond its products on the best library this machine has,
// whichever the kernels use. The 512³ rate of the first table is a library's best case; thin
// products (a few rows, a short K) run below it on every library, and this table does not count
// that against the layer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "engine/cost_model.h"
#include "engine/errors.h"
#include "engine/gemm.h"
#include "engine/networks/presets.h"
#include "engine/ops/op.h"

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
    int64_t count = 1;  // times it runs (matmul's batch)
    auto key() const { return std::make_tuple(trans_a, trans_b, m, n, k, count); }
};

// The products of a linear or matmul node's forward (dir 0) or backward (dir 1), as
// engine/cpu/dense.cpp runs them.
std::vector<Product> products_of(const rl::Graph& g, const rl::Node& node, int dir) {
    std::vector<Product> out;
    const rl::Shape& x = g.value(node.inputs[0]).shape;
    const rl::Shape& y = g.value(node.output).shape;
    const bool grad_a = g.value(node.inputs[0]).requires_grad;
    if (node.op == rl::OpKind::Linear) {
        const int64_t in = x[-1], rows = x.numel() / in, outf = y[-1];
        if (dir == 0) return {{false, true, rows, outf, in, 1}};
        if (grad_a) out.push_back({false, false, rows, in, outf, 1});  // dX = dY·W
        out.push_back({true, false, outf, in, rows, 1});               // dW = dYᵀ·X
        return out;
    }
    const bool tb = node.attrs.get_int("transpose_b", 0) != 0;
    const int64_t b = x[0], m = x[1], k = x[2], n = y[2];
    if (dir == 0) return {{false, tb, m, n, k, b}};
    if (grad_a) out.push_back({false, !tb, m, k, n, b});
    if (g.value(node.inputs[1]).requires_grad)
        out.push_back(tb ? Product{true, false, n, k, m, b} : Product{true, false, k, n, m, b});
    return out;
}

// The median time of one product on `lib`, after a warm-up, in ms. A batched product (matmul's,
// count > 1) runs over `count` distinct operands, as the layer does, and its time is the batch's
// divided by count: timed on one set of buffers, its operands stayed in cache and the layer
// looked 2x slower than its products (attention's [64 x 128 x 32] products, 2026-12-03).
double time_product(rl::GemmLibrary lib, const Product& p, int repeats) {
    const int64_t a_size = p.m * p.k, b_size = p.k * p.n, c_size = p.m * p.n, count = p.count;
    std::vector<float> a(static_cast<size_t>(a_size * count), 0.25f),
        b(static_cast<size_t>(b_size * count), 0.5f), c(static_cast<size_t>(c_size * count));
    const int64_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n;
    std::vector<double> ms;
    for (int r = 0; r <= repeats; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < count; ++i)
            rl::sgemm_on(lib, p.trans_a, p.trans_b, p.m, p.n, p.k, 1.f, a.data() + i * a_size, lda,
                         b.data() + i * b_size, ldb, 0.f, c.data() + i * c_size, p.n);
        const double t =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (r) ms.push_back(t / static_cast<double>(count));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// Per shape, the fastest library's median time and its name, and the time on the library the
// kernels use for a product of that size (rl::gemm_library_for; cached: layers repeat shapes).
struct RawGemm {
    struct Times {
        double fastest_ms = 1e30, chosen_ms = 0;
        std::string fastest;
    };
    int repeats = 5;
    std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t>, Times> seen;
    std::map<std::string, int> wins;  // products won per library
    const Times& of(const Product& p) {
        auto it = seen.find(p.key());
        if (it == seen.end()) {
            Times t;
            for (const rl::GemmLibraryInfo& i : rl::gemm_libraries()) {
                if (!i.available) continue;
                const double ms = time_product(i.library, p, repeats);
                if (ms < t.fastest_ms)
                    t.fastest_ms = ms, t.fastest = rl::gemm_library_name(i.library);
                if (i.library == rl::gemm_library_for(p.m, p.n, p.k)) t.chosen_ms = ms;
            }
            it = seen.emplace(p.key(), t).first;
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
            const CostModel measured = CostModel::profiled(g, *backend, repeats);
            for (NodeId n = 0; n < static_cast<NodeId>(g.num_nodes()); ++n) {
                const Node& node = g.node(n);
                const OpDef& d = op_def(node.op);
                const OpCost c = d.cost ? d.cost(g, node) : OpCost{};
                const std::string where = node.name + " (" + spec.substr(0, spec.find(':')) + ")";
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
                    if (node.op == OpKind::Linear || node.op == OpKind::MatMul) {
                        double raw_ms = 0, chosen_ms = 0;
                        for (const Product& p : products_of(g, node, dir)) {
                            const RawGemm::Times& t = raw.of(p);
                            raw_ms += t.fastest_ms * static_cast<double>(p.count);
                            chosen_ms += t.chosen_ms * static_cast<double>(p.count);
                        }
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
                    if (d.name == nodes_of)
                        std::printf("%-40s %-22s %s %9.4f ms  %5.2f of roofline (%s)\n",
                                    where.c_str(), format_dims(g.output_of(n).shape).c_str(),
                                    dir == 0 ? "fwd" : "bwd", ms, roof / ms,
                                    compute_ms > memory_ms ? "GEMM" : "memory");
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
                "shape (%zu shapes; fastest: %s):\n",
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
