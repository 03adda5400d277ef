#include "analysis/memory_view.h"

#include <algorithm>
#include <map>

#include "engine/errors.h"

namespace rl {

const char* memory_kind_name(MemoryKind k) {
    switch (k) {
        case MemoryKind::Parameters:
            return "parameters";
        case MemoryKind::ParamGrads:
            return "parameter gradients";
        case MemoryKind::Inputs:
            return "inputs";
        case MemoryKind::SavedActivations:
            return "saved activations";
        case MemoryKind::Recomputed:
            return "recomputed";
        case MemoryKind::ActivationGrads:
            return "activation gradients";
        case MemoryKind::Workspace:
            return "workspace";
        case MemoryKind::Count:
            break;
    }
    return "?";
}

Category engine_category(MemoryKind k) {
    switch (k) {
        case MemoryKind::Parameters:
            return Category::Parameters;
        case MemoryKind::ParamGrads:
            return Category::ParamGrads;
        case MemoryKind::Inputs:
            return Category::Inputs;
        case MemoryKind::SavedActivations:
        case MemoryKind::Recomputed:
            return Category::Activations;
        case MemoryKind::ActivationGrads:
            return Category::ActivationGrads;
        case MemoryKind::Workspace:
        case MemoryKind::Count:
            break;
    }
    return Category::Workspace;
}

uint64_t total_bytes(const KindBytes& b) {
    uint64_t t = 0;
    for (uint64_t x : b) t += x;
    return t;
}

namespace {

// Records every liveness event: the stacks after it and which buffer life it opens or closes.
class ReplayVisitor final : public MemoryVisitor {
  public:
    ReplayVisitor(const Graph& g, MemoryReplay& r) : g_(g), r_(r) {
        open_.resize(static_cast<size_t>(kNumCategories));
        open_[static_cast<size_t>(Category::Parameters)].assign(static_cast<size_t>(g.num_params()),
                                                                -1);
        open_[static_cast<size_t>(Category::ParamGrads)].assign(static_cast<size_t>(g.num_params()),
                                                                -1);
        for (Category c : {Category::Inputs, Category::Activations, Category::ActivationGrads})
            open_[static_cast<size_t>(c)].assign(static_cast<size_t>(g.num_values()), -1);
        open_[static_cast<size_t>(Category::Workspace)].assign(static_cast<size_t>(g.num_nodes()),
                                                               -1);
        computes_.assign(static_cast<size_t>(g.num_nodes()), 0);
    }

    int32_t instruction = -1;
    bool in_backward = false;

    // Called before each Compute is stepped: whether the output it makes is a recompute.
    void count_compute(NodeId n) { ++computes_[static_cast<size_t>(n)]; }

    void allocate(BufferRef b, uint64_t bytes) override {
        const long ev = next_event();
        open(b, kind_of(b), bytes, ev);
        current_[static_cast<size_t>(kind_of_open(b))] += bytes;
        push();
    }
    void release(BufferRef b, uint64_t bytes) override {
        const long ev = next_event();
        const MemoryKind k = kind_of_open(b);
        close(b, ev);
        current_[static_cast<size_t>(k)] -= bytes;
        push();
    }
    void hand_over(BufferRef from, BufferRef to, uint64_t bytes) override {
        const long ev = next_event();
        const MemoryKind from_kind = kind_of_open(from);
        close(from, ev);
        const MemoryKind to_kind = kind_of(to);
        open(to, to_kind, bytes, ev);
        current_[static_cast<size_t>(from_kind)] -= bytes;
        current_[static_cast<size_t>(to_kind)] += bytes;
        push();
    }
    void run_kernel(const Instruction&, bool) override {}

    void finish() {
        const long end = static_cast<long>(r_.stacks.size());
        for (BufferLife& l : r_.lives)
            if (l.end_event < 0) l.end_event = end;  // cannot happen after end(); kept safe
    }

  private:
    long next_event() const { return static_cast<long>(r_.stacks.size()); }
    long& slot(BufferRef b) {
        return open_[static_cast<size_t>(b.category)][static_cast<size_t>(b.id)];
    }
    MemoryKind kind_of(BufferRef b) const {
        switch (b.category) {
            case Category::Parameters:
                return MemoryKind::Parameters;
            case Category::ParamGrads:
                return MemoryKind::ParamGrads;
            case Category::Inputs:
                return MemoryKind::Inputs;
            case Category::Activations: {
                const NodeId p = g_.value(b.id).producer;
                return computes_[static_cast<size_t>(p)] > 1 ? MemoryKind::Recomputed
                                                             : MemoryKind::SavedActivations;
            }
            case Category::ActivationGrads:
                return MemoryKind::ActivationGrads;
            case Category::Workspace:
            case Category::Count:
                break;
        }
        return MemoryKind::Workspace;
    }
    MemoryKind kind_of_open(BufferRef b) {
        const long at = slot(b);
        if (at < 0) throw Error("memory replay: a release of a buffer that is not live");
        return r_.lives[static_cast<size_t>(at)].kind;
    }
    void open(BufferRef b, MemoryKind k, uint64_t bytes, long ev) {
        BufferLife l;
        l.buffer = b;
        l.kind = k;
        l.bytes = bytes;
        l.begin_event = ev;
        l.end_event = -1;
        l.begin_instruction = instruction;
        l.forward_phase = !in_backward;
        slot(b) = static_cast<long>(r_.lives.size());
        r_.lives.push_back(l);
    }
    void close(BufferRef b, long ev) {
        long& at = slot(b);
        BufferLife& l = r_.lives[static_cast<size_t>(at)];
        l.end_event = ev;
        l.end_instruction = instruction;
        at = -1;
    }
    void push() {
        r_.stacks.push_back(current_);
        r_.event_instruction.push_back(instruction);
        const uint64_t t = total_bytes(current_);
        if (t > r_.peak_bytes || r_.peak_event < 0) {
            r_.peak_bytes = t;
            r_.peak_event = static_cast<long>(r_.stacks.size()) - 1;
        }
    }

    const Graph& g_;
    MemoryReplay& r_;
    KindBytes current_{};
    std::vector<std::vector<long>> open_;  // per category and id: index into lives, or −1
    std::vector<int32_t> computes_;
};

}  // namespace

MemoryReplay replay_memory(const Graph& g, const Schedule& s) {
    MemoryReplay r;
    const LivenessTables t(g);
    ReplayVisitor v(g, r);
    Liveness live(g, t, s);
    live.begin(v);
    r.first_event.reserve(s.size() + 1);
    for (size_t i = 0; i < s.size(); ++i) {
        r.first_event.push_back(static_cast<long>(r.stacks.size()));
        v.instruction = static_cast<int32_t>(i);
        const Instruction& ins = s.code[i];
        if (ins.kind == InstrKind::Compute) v.count_compute(ins.target);
        v.in_backward = ins.kind == InstrKind::Backward;
        live.step(static_cast<long>(i), v);
    }
    r.first_event.push_back(static_cast<long>(r.stacks.size()));
    v.instruction = -1;
    v.in_backward = false;
    live.end(static_cast<long>(s.size()), v);
    v.finish();
    return r;
}

long MemoryReplay::highest_event_of(long index) const {
    if (index < 0 || index + 1 >= static_cast<long>(first_event.size()))
        throw Error("instruction #" + std::to_string(index) + " is outside the schedule (0 to " +
                    std::to_string(static_cast<long>(first_event.size()) - 2) + ")");
    const long b = first_event[static_cast<size_t>(index)];
    const long e = first_event[static_cast<size_t>(index) + 1];
    // An instruction with no event of its own (a Free of a handed-over buffer) is seen at the
    // state before it.
    if (b == e) return b - 1;
    long best = b;
    for (long ev = b + 1; ev < e; ++ev)
        if (bytes_at(ev) > bytes_at(best)) best = ev;
    return best;
}

std::vector<KindBytes> measured_stacks(const MemoryReplay& r,
                                       const std::vector<TimelinePoint>& measured) {
    if (measured.size() > r.stacks.size())
        throw Error("the measured timeline has " + std::to_string(measured.size()) +
                    " points but the schedule makes " + std::to_string(r.stacks.size()) +
                    " memory events: it is not this schedule's run");
    std::vector<KindBytes> out;
    out.reserve(measured.size());
    for (size_t i = 0; i < measured.size(); ++i) {
        const uint64_t want = total_bytes(r.stacks[i]);
        if (measured[i].instruction != r.event_instruction[i] || measured[i].bytes != want)
            throw Error("measured point " + std::to_string(i) + " (instruction #" +
                        std::to_string(measured[i].instruction) + ", " +
                        std::to_string(measured[i].bytes) + " bytes) differs from the replay (#" +
                        std::to_string(r.event_instruction[i]) + ", " + std::to_string(want) +
                        " bytes): it is not this schedule's run");
        out.push_back(r.stacks[i]);
    }
    return out;
}

const char* tensor_fate_name(TensorFate f) {
    switch (f) {
        case TensorFate::Kept:
            return "kept";
        case TensorFate::Recomputed:
            return "recomputed";
        case TensorFate::FreedThenRecomputed:
            return "freed, recomputed later";
        case TensorFate::Freed:
            return "freed";
    }
    return "?";
}

std::string LiveTensor::fate_text() const {
    const auto at = [](long i) {
        std::string t(1, '#');
        t += std::to_string(i);
        return t;
    };
    const std::string freed = freed_at >= 0 ? "freed at " + at(freed_at) : "live to the end";
    switch (fate) {
        case TensorFate::Kept:
            if (kind == MemoryKind::Parameters || kind == MemoryKind::Inputs)
                return "kept (whole run)";
            return "kept, " + freed;
        case TensorFate::Recomputed:
            return "recomputed at " + at(since) + ", " + freed;
        case TensorFate::FreedThenRecomputed:
            return freed + ", recomputed at " + at(recomputed_at);
        case TensorFate::Freed:
            return freed;
    }
    return freed;
}

namespace {

std::string buffer_name(const Graph& g, const BufferLife& l) {
    switch (l.buffer.category) {
        case Category::Parameters:
            return g.param(l.buffer.id).name;
        case Category::ParamGrads:
            return "grad " + g.param(l.buffer.id).name;
        case Category::Inputs:
        case Category::Activations:
            return g.value(l.buffer.id).name;
        case Category::ActivationGrads:
            return "grad " + g.value(l.buffer.id).name;
        case Category::Workspace:
        case Category::Count:
            break;
    }
    return g.node(l.buffer.id).name + (l.forward_phase ? " forward" : " backward") + " workspace";
}

long first_backward(const Schedule& s) {
    for (size_t i = 0; i < s.size(); ++i)
        if (s.code[i].kind == InstrKind::Backward) return static_cast<long>(i);
    return static_cast<long>(s.size());
}

long next_compute(const Schedule& s, NodeId n, long after) {
    for (size_t i = static_cast<size_t>(after + 1); i < s.size(); ++i)
        if (s.code[i].kind == InstrKind::Compute && s.code[i].target == n)
            return static_cast<long>(i);
    return -1;
}

}  // namespace

LiveSet live_set_at_event(const Graph& g, const Schedule& s, const MemoryReplay& r, long event) {
    if (event < 0 || event >= static_cast<long>(r.stacks.size()))
        throw Error("memory event " + std::to_string(event) + " is outside the run (0 to " +
                    std::to_string(static_cast<long>(r.stacks.size()) - 1) + ")");
    LiveSet set;
    set.event = event;
    set.instruction = r.event_instruction[static_cast<size_t>(event)];
    set.bytes = r.bytes_at(event);
    const long backward_begins = first_backward(s);
    for (const BufferLife& l : r.lives) {
        if (l.begin_event > event || l.end_event <= event) continue;
        LiveTensor t;
        t.name = buffer_name(g, l);
        t.kind = l.kind;
        t.bytes = l.bytes;
        t.since = l.begin_instruction;
        t.freed_at = l.end_instruction;
        if (l.kind == MemoryKind::Parameters || l.kind == MemoryKind::Inputs) {
            t.fate = TensorFate::Kept;
        } else if (l.kind == MemoryKind::Recomputed) {
            t.fate = TensorFate::Recomputed;
        } else if (l.kind == MemoryKind::SavedActivations) {
            const NodeId p = g.value(l.buffer.id).producer;
            const long again = l.end_instruction >= 0 ? next_compute(s, p, l.end_instruction) : -1;
            if (again >= 0) {
                t.fate = TensorFate::FreedThenRecomputed;
                t.recomputed_at = again;
            } else if (l.end_instruction < 0 || l.end_instruction > backward_begins) {
                t.fate = TensorFate::Kept;  // saved into the backward
            } else {
                t.fate = TensorFate::Freed;
            }
        } else {
            t.fate = TensorFate::Freed;
        }
        set.tensors.push_back(std::move(t));
    }
    std::sort(set.tensors.begin(), set.tensors.end(), [](const LiveTensor& a, const LiveTensor& b) {
        if (a.bytes != b.bytes) return a.bytes > b.bytes;
        return a.name < b.name;
    });
    return set;
}

LiveSet live_set_at(const Graph& g, const Schedule& s, const MemoryReplay& r, long index) {
    return live_set_at_event(g, s, r, r.highest_event_of(index));
}

LiveSet live_set_at_peak(const Graph& g, const Schedule& s, const MemoryReplay& r) {
    return live_set_at_event(g, s, r, r.peak_event);
}

LiveSetDiff diff_live_sets(const LiveSet& a, const LiveSet& b) {
    LiveSetDiff d;
    std::map<std::string, const LiveTensor*> in_b;
    for (const LiveTensor& t : b.tensors) in_b[t.name] = &t;
    for (const LiveTensor& t : a.tensors) {
        const auto it = in_b.find(t.name);
        if (it != in_b.end() && it->second->bytes == t.bytes) {
            d.common_bytes += t.bytes;
            in_b.erase(it);
            continue;
        }
        LiveSetDiffEntry e;
        e.name = t.name;
        e.kind_a = t.kind;
        e.bytes_a = t.bytes;
        d.only_a.push_back(e);
    }
    for (const LiveTensor& t : b.tensors) {
        if (!in_b.count(t.name)) continue;  // matched above
        LiveSetDiffEntry e;
        e.name = t.name;
        e.kind_b = t.kind;
        e.bytes_b = t.bytes;
        d.only_b.push_back(e);
    }
    d.delta = static_cast<int64_t>(a.bytes) - static_cast<int64_t>(b.bytes);
    return d;
}

}  // namespace rl
