#include "engine/schedule.h"

#include <algorithm>

#include "engine/errors.h"
#include "engine/liveness.h"
#include "engine/ops/op.h"

namespace rl {

std::string describe(const Graph& g, const Instruction& ins) {
    switch (ins.kind) {
        case InstrKind::Compute:
            return "compute " + g.node(ins.target).name;
        case InstrKind::Free:
            return "free " + g.value(ins.target).name;
        case InstrKind::Backward:
            return "backward " + g.node(ins.target).name;
        case InstrKind::Offload:
            return "offload " + g.value(ins.target).name;
        case InstrKind::Prefetch:
            return "prefetch " + g.value(ins.target).name;
        case InstrKind::Wait:
            return "wait " + g.value(ins.target).name;
    }
    return "?";
}

NodeId node_of(const Graph& g, const Instruction& ins) {
    return targets_value(ins.kind) ? g.value(ins.target).producer : ins.target;
}

std::string to_text(const Graph& g, const Schedule& s) {
    std::string out;
    const int width = static_cast<int>(std::to_string(s.size()).size());
    for (size_t i = 0; i < s.size(); ++i) {
        std::string idx = std::to_string(i);
        out += std::string(static_cast<size_t>(width) - idx.size(), ' ') + idx + "  " +
               describe(g, s.code[i]) + "\n";
    }
    return out;
}

Schedule ScheduleBuilder::finish() const {
    const LivenessTables t(g_);
    // Walk backwards: the first read met (from the end) of a value instance is its last read;
    // the Free goes right after it. A Compute of a value with no later read frees it at once.
    std::vector<uint8_t> read_later(static_cast<size_t>(g_.num_values()), 0);
    std::vector<std::vector<ValueId>> frees_after(seq_.size());
    auto read = [&](size_t pos, ValueId v) {
        if (g_.value(v).is_input() || read_later[static_cast<size_t>(v)]) return;
        read_later[static_cast<size_t>(v)] = 1;
        frees_after[pos].push_back(v);
    };
    // Which Waits close an offload: walking backwards from one, the device instance ends there,
    // so reads between the Offload and its Wait (the device buffer stays readable) are not last.
    std::vector<uint8_t> closes_offload(seq_.size(), 0);
    {
        std::vector<uint8_t> offloading(static_cast<size_t>(g_.num_values()), 0);
        for (size_t pos = 0; pos < seq_.size(); ++pos) {
            const Instruction& ins = seq_[pos];
            if (!is_copy(ins.kind)) continue;
            auto& o = offloading[static_cast<size_t>(ins.target)];
            if (ins.kind == InstrKind::Wait)
                closes_offload[pos] = o;
            else
                o = ins.kind == InstrKind::Offload;
        }
    }
    for (size_t pos = seq_.size(); pos-- > 0;) {
        const Instruction& ins = seq_[pos];
        if (ins.kind == InstrKind::Wait && closes_offload[pos]) {
            read_later[static_cast<size_t>(ins.target)] = 1;
            continue;
        }
        if (ins.kind == InstrKind::Offload) {
            // The device instance ends at the offload's Wait: no Free for it, and reads before
            // the offload are not its last.
            read_later[static_cast<size_t>(ins.target)] = 1;
            continue;
        }
        if (ins.kind == InstrKind::Prefetch) {
            // A new device instance starts here; earlier reads belong to the offloaded one. (An
            // instance prefetched and never read is left to the end of the step.)
            read_later[static_cast<size_t>(ins.target)] = 0;
            continue;
        }
        if (ins.kind == InstrKind::Wait || ins.kind == InstrKind::Free) continue;
        const Node& n = g_.node(ins.target);
        if (ins.kind == InstrKind::Compute) {
            if (!read_later[static_cast<size_t>(n.output)]) frees_after[pos].push_back(n.output);
            read_later[static_cast<size_t>(n.output)] = 0;  // earlier instances are distinct
            for (ValueId in : n.inputs) read(pos, in);
        } else {
            for_each_residual(g_, t, ins.target, [&](ValueId v) { read(pos, v); });
        }
    }
    Schedule s;
    s.code.reserve(seq_.size() * 2);
    for (size_t pos = 0; pos < seq_.size(); ++pos) {
        s.code.push_back(seq_[pos]);
        // Frees in value order, so equal sequences always give equal schedules.
        auto& f = frees_after[pos];
        std::sort(f.begin(), f.end());
        for (ValueId v : f) s.code.push_back({InstrKind::Free, v});
    }
    return s;
}

namespace {
class NullVisitor final : public MemoryVisitor {
  public:
    void allocate(BufferRef, uint64_t) override {}
    void release(BufferRef, uint64_t) override {}
    void run_kernel(const Instruction&, bool) override {}
};
}  // namespace

void validate(const Graph& g, const Schedule& s) {
    const LivenessTables t(g);
    Liveness live(g, t, s);
    NullVisitor v;
    live.begin(v);
    for (size_t i = 0; i < s.size(); ++i) live.step(static_cast<long>(i), v);
    live.end(static_cast<long>(s.size()), v);
}

Schedule backprop_schedule(const Graph& g) {
    ScheduleBuilder b(g);
    for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);
    for (NodeId n = g.num_nodes() - 1; n >= 0; --n)
        if (g.needs_backward(n)) b.backward(n);
    return b.finish();
}

}  // namespace rl
