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
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
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
        double total_ms = 0;
        for (const std::string& spec : networks) {
            const Graph g = load_network(spec);
            const CostModel measured = CostModel::profiled(g, *backend, repeats);
            for (NodeId n = 0; n < static_cast<NodeId>(g.num_nodes()); ++n) {
                const Node& node = g.node(n);
                const OpDef& d = op_def(node.op);
                const OpCost c = d.cost ? d.cost(g, node) : OpCost{};
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
                        r.worst_node = node.name + " (" + spec.substr(0, spec.find(':')) + ")";
                    }
                    total_ms += ms;
                    if (d.name == nodes_of)
                        std::printf(
                            "%-40s %-22s %s %9.4f ms  %5.2f of roofline (%s)\n",
                            (node.name + " (" + spec.substr(0, spec.find(':')) + ")").c_str(),
                            format_dims(g.output_of(n).shape).c_str(), dir == 0 ? "fwd" : "bwd", ms,
                            roof / ms, compute_ms > memory_ms ? "GEMM" : "memory");
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
    } catch (const Error& e) {
        std::fprintf(stderr, "bench_roofline: %s\n", e.what());
        return 1;
    }
    return 0;
}
