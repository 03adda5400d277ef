// The profiled cost model against a step: how far the predicted times are from the measured.
//
// For each network given, the profiled cost model (engine/cost_model.h, as `run` and the app
// make it) and `none`'s schedule run for real: a warm-up step, then --repeats timed steps. Each
// instruction's time in the step (the executor's instruction_ms, median over the steps) is set
// against the node's profiled time; the sums per direction and per op kind, their ratio
// (step / profile: 1.0 is a prediction on the mark), and the nodes the profile misses by the
// most milliseconds.
//
//   bench_cost_model [--threads N] [--repeats N] [NETWORK ...]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend.h"
#include "engine/cost_model.h"
#include "engine/errors.h"
#include "engine/executor.h"
#include "engine/networks/presets.h"
#include "engine/ops/op.h"
#include "strategies/strategy.h"

using namespace rl;

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

struct Sums {
    double profile = 0, step = 0;
};

void report(const std::string& spec, int threads, int repeats) {
    const Graph g = load_network(spec);
    auto backend = make_cpu_backend(threads);
    const CostModel prof = CostModel::profiled(g, *backend);
    const Plan plan = plan_with(g, prof, parse_spec("none"));
    const RunData data = RunData::seeded(g);
    ExecuteOptions opt;
    opt.keep_gradients = false;
    std::vector<std::vector<double>> per(plan.schedule.size());
    std::vector<double> totals;
    for (int r = 0; r <= repeats; ++r) {
        const Execution e = execute(g, plan.schedule, *backend, data, opt);
        if (r == 0) continue;  // warm-up
        for (size_t i = 0; i < per.size(); ++i) per[i].push_back(e.instruction_ms[i]);
        totals.push_back(e.total_ms);
    }
    Sums dir[2];
    std::map<std::string, Sums> by_op[2];
    std::vector<std::tuple<double, std::string>> misses;
    for (size_t i = 0; i < per.size(); ++i) {
        const Instruction& ins = plan.schedule.code[i];
        if (ins.kind == InstrKind::Free) continue;
        const int d = ins.kind == InstrKind::Compute ? 0 : 1;
        const double p = d == 0 ? prof.forward_ms(ins.target) : prof.backward_ms(ins.target);
        const double s = median(per[i]);
        dir[d].profile += p, dir[d].step += s;
        Sums& o = by_op[d][std::string(op_name(g.node(ins.target).op))];
        o.profile += p, o.step += s;
        misses.emplace_back(s - p, describe(g, ins));
    }
    std::printf("%s, %d thread(s), parameters %s the cache (%.1f MiB last level)\n", spec.c_str(),
                threads, parameters_leave_cache(g, last_level_cache_bytes()) ? "leave" : "stay in",
                static_cast<double>(last_level_cache_bytes()) / (1 << 20));
    const double profile = dir[0].profile + dir[1].profile;
    std::printf(
        "  step %.3f ms (median of %d), instructions %.3f, profile %.3f: step / profile "
        "%.2f (forward %.2f, backward %.2f)\n",
        median(totals), repeats, dir[0].step + dir[1].step, profile,
        (dir[0].step + dir[1].step) / profile, dir[0].step / dir[0].profile,
        dir[1].step / dir[1].profile);
    for (int d = 0; d < 2; ++d)
        for (const auto& [op, s] : by_op[d])
            if (s.step > 0.01 * (dir[0].step + dir[1].step))
                std::printf("  %-14s %s profile %8.3f step %8.3f (%.2f)\n", op.c_str(),
                            d ? "bwd" : "fwd", s.profile, s.step, s.step / s.profile);
    std::sort(misses.rbegin(), misses.rend());
    for (size_t i = 0; i < 5 && i < misses.size(); ++i)
        std::printf("  missed by %+.4f ms: %s\n", std::get<0>(misses[i]),
                    std::get<1>(misses[i]).c_str());
}

}  // namespace

int main(int argc, char** argv) {
    int threads = 1, repeats = 5;
    std::vector<std::string> networks;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if ((a == "--threads" || a == "--repeats") && i + 1 < argc) {
            (a == "--threads" ? threads : repeats) = std::max(1, std::atoi(argv[++i]));
        } else if (a.rfind("--", 0) == 0) {
            std::fprintf(stderr,
                         "bench_cost_model: unknown option '%s'\nusage: bench_cost_model "
                         "[--threads N] [--repeats N] [NETWORK ...]\n",
                         a.c_str());
            return 2;
        } else {
            networks.push_back(a);
        }
    }
    if (networks.empty())
        networks = {"mlp:depth=16,width=256,batch=256", "resnet:depth=18,width=16,size=32,batch=2",
                    "transformer:layers=4,d_model=256,heads=8,seq=128,batch=8,vocab=1024"};
    try {
        for (const std::string& n : networks) report(n, threads, repeats);
    } catch (const Error& e) {
        std::fprintf(stderr, "bench_cost_model: %s\n", e.what());
        return 1;
    }
    return 0;
}
