#include "solvers/offload_pass.h"

#include <algorithm>
#include <map>

#include "engine/cancel.h"
#include "engine/errors.h"
#include "engine/liveness.h"
#include "engine/simulator.h"

namespace rl {

namespace {

bool is_kernel(const Instruction& ins) {
    return ins.kind == InstrKind::Compute || ins.kind == InstrKind::Backward;
}

}  // namespace

std::vector<OffloadGap> offload_gaps(const Graph& g, const Schedule& s) {
    const LivenessTables t(g);
    const long n = static_cast<long>(s.size());
    // kernels_before[i]: kernels among instructions < i.
    std::vector<long> kernels_before(static_cast<size_t>(n) + 1, 0);
    for (long i = 0; i < n; ++i)
        kernels_before[static_cast<size_t>(i) + 1] =
            kernels_before[static_cast<size_t>(i)] +
            (is_kernel(s.code[static_cast<size_t>(i)]) ? 1 : 0);
    // Per value: the start of its current instance and its last read so far; the widest gap.
    std::vector<long> last(static_cast<size_t>(g.num_values()), -1);
    std::vector<OffloadGap> best(static_cast<size_t>(g.num_values()));
    auto consider = [&](ValueId v, long a, long b) {
        const long inside =
            kernels_before[static_cast<size_t>(b)] - kernels_before[static_cast<size_t>(a) + 1];
        if (inside < 3) return;  // one to overlap the offload, two the prefetch
        OffloadGap& cur = best[static_cast<size_t>(v)];
        if (cur.value < 0 || b - a > cur.before - cur.after) cur = {v, a, b};
    };
    for (long i = 0; i < n; ++i) {
        const Instruction& ins = s.code[static_cast<size_t>(i)];
        if (is_copy(ins.kind)) continue;  // a schedule with copies already: leave them be
        for_each_read(g, t, ins, [&](ValueId v) {
            if (g.value(v).is_input()) return;
            long& l = last[static_cast<size_t>(v)];
            if (l >= 0) consider(v, l, i);
            l = i;
        });
        if (ins.kind == InstrKind::Compute)
            last[static_cast<size_t>(g.node(ins.target).output)] = i;
        if (ins.kind == InstrKind::Free) last[static_cast<size_t>(ins.target)] = -1;
    }
    std::vector<OffloadGap> out;
    for (const OffloadGap& gap : best)
        if (gap.value >= 0) out.push_back(gap);
    return out;
}

Schedule insert_offloads(const Graph& g, const Schedule& s, const std::vector<OffloadGap>& gaps) {
    const long n = static_cast<long>(s.size());
    // Instructions to put before instruction i (i == n: at the end), in the order added.
    std::map<long, std::vector<Instruction>> before;
    auto kernel_after = [&](long a) {  // the first kernel after a
        for (long i = a + 1; i < n; ++i)
            if (is_kernel(s.code[static_cast<size_t>(i)])) return i;
        return n;
    };
    auto kernels_back = [&](long b, int k) {  // the k-th kernel before b
        for (long i = b - 1; i >= 0; --i)
            if (is_kernel(s.code[static_cast<size_t>(i)]) && --k == 0) return i;
        return -1L;
    };
    // After instruction i and the Frees that directly follow it: so a Compute keeps its in-place
    // Frees adjacent (engine/liveness.h).
    auto past_frees = [&](long i) {
        long j = i + 1;
        while (j < n && s.code[static_cast<size_t>(j)].kind == InstrKind::Free) ++j;
        return j;
    };
    for (const OffloadGap& gap : gaps) {
        if (gap.value < 0 || gap.value >= g.num_values() || gap.after < 0 || gap.before > n ||
            gap.after >= gap.before)
            throw Error("offload gap of value " + std::to_string(gap.value) +
                        " is not a gap of "
                        "this schedule");
        const long k1 = kernel_after(gap.after);
        const long p = kernels_back(gap.before, 2);
        if (k1 >= gap.before || p <= k1)
            throw Error("offload of '" + g.value(gap.value).name +
                        "': too few kernels between its reads to overlap the copies");
        before[past_frees(gap.after)].push_back({InstrKind::Offload, gap.value});
        before[past_frees(k1)].push_back({InstrKind::Wait, gap.value});
        before[p].push_back({InstrKind::Prefetch, gap.value});
        before[gap.before].push_back({InstrKind::Wait, gap.value});
    }
    Schedule out;
    out.code.reserve(s.size() + 4 * gaps.size());
    for (long i = 0; i <= n; ++i) {
        if (auto it = before.find(i); it != before.end())
            for (const Instruction& ins : it->second) out.code.push_back(ins);
        if (i < n) out.code.push_back(s.code[static_cast<size_t>(i)]);
    }
    return out;
}

std::optional<OffloadPassResult> offload_to_budget(const Graph& g, const Schedule& s,
                                                   const CostModel& costs, uint64_t budget) {
    const std::vector<OffloadGap> gaps = offload_gaps(g, s);
    std::vector<OffloadGap> chosen;
    std::vector<uint8_t> used(gaps.size(), 0);
    OffloadPassResult r;
    r.schedule = s;
    SimulateOptions so;
    so.record_timeline = false;
    for (;;) {
        const Simulation sim = simulate(g, r.schedule, costs, so);
        if (sim.peak_bytes <= budget) return r;
        // The peak's instruction in the original schedule: count the original instructions
        // before it.
        long original = 0;
        for (long i = 0; i < sim.peak_instruction; ++i)
            if (!is_copy(r.schedule.code[static_cast<size_t>(i)].kind)) ++original;
        long pick = -1;
        for (size_t k = 0; k < gaps.size(); ++k) {
            if (used[k] || gaps[k].after >= original || gaps[k].before <= original) continue;
            if (pick < 0 ||
                g.value(gaps[k].value).bytes > g.value(gaps[static_cast<size_t>(pick)].value).bytes)
                pick = static_cast<long>(k);
        }
        if (pick < 0) return std::nullopt;
        used[static_cast<size_t>(pick)] = 1;
        chosen.push_back(gaps[static_cast<size_t>(pick)]);
        r.offloaded.push_back(gaps[static_cast<size_t>(pick)].value);
        r.schedule = insert_offloads(g, s, chosen);
    }
}

std::optional<OffloadedPick> cheapest_offloaded(const Graph& g, const CostModel& costs,
                                                uint64_t budget,
                                                const std::vector<Schedule>& candidates) {
    std::optional<OffloadedPick> pick;
    SimulateOptions so;
    so.record_timeline = false;
    for (size_t k = 0; k < candidates.size(); ++k) {
        throw_if_cancelled();
        auto r = offload_to_budget(g, candidates[k], costs, budget);
        if (!r || r->offloaded.empty()) continue;
        Simulation sim = simulate(g, r->schedule, costs, so);
        const double added = sim.recompute_ms + sim.stall_ms;
        if (pick && added >= pick->added_ms - 1e-9 * std::max(1.0, pick->added_ms)) continue;
        pick = OffloadedPick{std::move(r->schedule), k, std::move(r->offloaded), std::move(sim),
                             added};
    }
    return pick;
}

}  // namespace rl
