#include "engine/simulator.h"

#include <algorithm>

namespace rl {

namespace {

class CountingVisitor final : public MemoryVisitor {
  public:
    CountingVisitor(const Graph& g, Simulation& sim, const CostModel& costs, bool record)
        : g_(g),
          sim_(sim),
          costs_(costs),
          has_costs_(costs.size() > 0),
          record_(record),
          recomputed_(static_cast<size_t>(g.num_values()), 0) {}

    int32_t instruction = -1;

    void host_allocate(ValueId, uint64_t bytes) override {
        host_live_ += bytes;
        if (host_live_ > sim_.host_peak_bytes) sim_.host_peak_bytes = host_live_;
        if (record_) sim_.host_timeline.push_back({instruction, host_live_});
    }
    void host_release(ValueId, uint64_t bytes) override {
        host_live_ -= bytes;
        if (record_) sim_.host_timeline.push_back({instruction, host_live_});
    }
    void begin_copy(const Instruction& ins, ValueId v, uint64_t bytes) override {
        const bool to_host = ins.kind == InstrKind::Offload;
        sim_.count(ins.kind, bytes);
        const double ms = has_costs_ ? costs_.transfer().copy_ms(bytes, to_host) : 0.0;
        const double start = std::max(sim_.total_ms(), copy_free_at_);
        copy_free_at_ = start + ms;
        if (copy_end_.size() <= static_cast<size_t>(v))
            copy_end_.resize(static_cast<size_t>(v) + 1);
        copy_end_[static_cast<size_t>(v)] = copy_free_at_;
        sim_.transfer_ms += ms;
    }
    void wait_copy(const Instruction&, ValueId v) override {
        const double now = sim_.total_ms();
        const double end = copy_end_[static_cast<size_t>(v)];
        if (end > now) {
            sim_.stall_ms += end - now;
            sim_.stalls.emplace_back(instruction, end - now);
        }
    }
    void allocate(BufferRef b, uint64_t bytes) override {
        live_ += bytes;
        auto& c = by_category_[static_cast<size_t>(b.category)];
        c += bytes;
        auto& cp = sim_.peak_by_category[static_cast<size_t>(b.category)];
        if (c > cp) cp = c;
        if (live_ > sim_.peak_bytes) {
            sim_.peak_bytes = live_;
            sim_.peak_instruction = instruction;
        }
        if (record_) sim_.timeline.push_back({instruction, live_});
    }
    void release(BufferRef b, uint64_t bytes) override {
        live_ -= bytes;
        by_category_[static_cast<size_t>(b.category)] -= bytes;
        if (record_) sim_.timeline.push_back({instruction, live_});
    }
    // An in-place Compute changes no bytes; it still gets its event, as in the executor.
    void hand_over(BufferRef, BufferRef, uint64_t) override {
        if (record_) sim_.timeline.push_back({instruction, live_});
    }
    void run_kernel(const Instruction& ins, bool recompute) override {
        if (ins.kind == InstrKind::Compute) {
            const Node& node = g_.node(ins.target);
            bool inputs_kept = false;  // some input kept since the forward: read from memory
            for (ValueId in : node.inputs) inputs_kept |= !recomputed_[static_cast<size_t>(in)];
            const double ms = !has_costs_                ? 0.0
                              : recompute && inputs_kept ? costs_.recompute_ms(ins.target)
                                                         : costs_.forward_ms(ins.target);
            recomputed_[static_cast<size_t>(node.output)] = recompute;
            last_ms = ms;
            if (recompute) {
                ++sim_.recomputes;
                sim_.recompute_ms += ms;
            } else {
                sim_.forward_ms += ms;
            }
            ++sim_.computes;
        } else {
            ++sim_.backwards;
            last_ms = has_costs_ ? costs_.backward_ms(ins.target) : 0.0;
            sim_.backward_ms += last_ms;
        }
    }

    double last_ms = 0;  // the latest kernel's predicted time

  private:
    const Graph& g_;
    Simulation& sim_;
    const CostModel& costs_;
    bool has_costs_, record_;
    std::vector<char> recomputed_;  // per value: its latest instance made by a recompute
    uint64_t live_ = 0, host_live_ = 0;
    std::array<uint64_t, kNumCategories> by_category_{};
    double copy_free_at_ = 0;       // when the copy stream is next idle (ms into the step)
    std::vector<double> copy_end_;  // per value: when its latest copy ends
};

}  // namespace

Simulation simulate(const Graph& g, const Schedule& s, const CostModel& costs,
                    const SimulateOptions& opt) {
    const LivenessTables t(g);
    return simulate(g, t, s, costs, opt);
}

Simulation simulate(const Graph& g, const LivenessTables& t, const Schedule& s,
                    const CostModel& costs, const SimulateOptions& opt) {
    Simulation sim;
    if (opt.record_timeline) sim.timeline.reserve(s.size() + 2 * g.num_values());
    CountingVisitor v(g, sim, costs, opt.record_timeline);
    Liveness live(g, t, s);
    live.begin(v);
    if (opt.record_timeline) sim.instruction_ms.assign(s.size(), 0.0);
    for (size_t i = 0; i < s.size(); ++i) {
        v.instruction = static_cast<int32_t>(i);
        const Instruction& ins = s.code[i];
        if (ins.kind == InstrKind::Free) ++sim.frees;
        v.last_ms = 0;
        const double stalled = sim.stall_ms;
        live.step(static_cast<long>(i), v);
        if (opt.record_timeline) sim.instruction_ms[i] = v.last_ms + (sim.stall_ms - stalled);
    }
    v.instruction = -1;
    live.end(static_cast<long>(s.size()), v);
    return sim;
}

}  // namespace rl
