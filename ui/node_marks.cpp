#include "ui/node_marks.h"

#include <algorithm>
#include <cstdint>

namespace rl::ui {

const char* mark_kind_name(MarkKind k) {
    switch (k) {
        case MarkKind::Compute:
            return "compute";
        case MarkKind::Recompute:
            return "recompute";
        case MarkKind::Backward:
            return "backward";
    }
    return "?";
}

std::vector<NodeMark> node_marks(const Schedule& s, NodeId node) {
    std::vector<NodeMark> out;
    if (node < 0) return out;
    bool computed = false;
    for (size_t i = 0; i < s.code.size(); ++i) {
        const Instruction& ins = s.code[i];
        if (targets_value(ins.kind) || ins.target != node) continue;
        NodeMark m;
        m.instruction = static_cast<long>(i);
        if (ins.kind == InstrKind::Backward) {
            m.kind = MarkKind::Backward;
        } else {
            m.kind = computed ? MarkKind::Recompute : MarkKind::Compute;
            computed = true;
        }
        out.push_back(m);
    }
    return out;
}

void place_marks(std::vector<NodeMark>& marks, const Timeline& t) {
    for (NodeMark& m : marks) m.time_ms.reset();
    if (marks.empty()) return;
    // The last event of each marked instruction, in one pass over the timeline (a binary search
    // per event among the marks, which node_marks returns in instruction order).
    std::vector<long> order;
    order.reserve(marks.size());
    for (const NodeMark& m : marks) order.push_back(m.instruction);
    const bool sorted = std::is_sorted(order.begin(), order.end());
    std::vector<size_t> last(marks.size(), SIZE_MAX), next(marks.size(), SIZE_MAX);
    size_t passed = 0;  // sorted marks before the current event's instruction
    const size_t n = std::min(t.points.size(), t.instruction.size());
    for (size_t i = 0; i < n; ++i) {
        const long ins = t.instruction[i];
        if (ins < 0) continue;
        if (sorted) {
            auto it = std::lower_bound(order.begin(), order.end(), ins);
            for (; it != order.end() && *it == ins; ++it) last[size_t(it - order.begin())] = i;
            // Events come in instruction order: the first event after each earlier mark.
            for (; passed < order.size() && order[passed] < ins; ++passed) next[passed] = i;
        } else {
            for (size_t k = 0; k < marks.size(); ++k)
                if (marks[k].instruction == ins) last[k] = i;
        }
    }
    for (size_t k = 0; k < marks.size(); ++k) {
        NodeMark& m = marks[k];
        if (last[k] != SIZE_MAX) {
            // Midway along the stretch of line its last event starts (up to the next event): the
            // bytes after the instruction, at a time the hover read-out and a click attribute to
            // it.
            const size_t i = last[k];
            const double x0 = t.points[i].x;
            const double x1 = i + 1 < n ? std::max(x0, t.points[i + 1].x) : x0;
            m.time_ms = (x0 + x1) / 2;
            m.bytes = t.points[i].y;
        } else if (next[k] != SIZE_MAX) {
            // No event of its own (it allocates and frees nothing, e.g. in place): where the next
            // instruction's first event is, at the bytes live just before it.
            const size_t i = next[k];
            m.time_ms = t.points[i].x;
            m.bytes = t.points[i > 0 ? i - 1 : i].y;
        }
    }
}

NodeId instruction_node(const Graph& g, const Schedule& s, long instruction) {
    if (instruction < 0 || size_t(instruction) >= s.code.size()) return -1;
    const Instruction& ins = s.code[size_t(instruction)];
    if (!targets_value(ins.kind)) return ins.target;
    if (ins.target < 0 || ins.target >= static_cast<int32_t>(g.values().size())) return -1;
    const NodeId p = g.value(ins.target).producer;
    return p == kNoId ? -1 : p;
}

long next_instruction_of(const Schedule& s, NodeId node, long from) {
    const long n = static_cast<long>(s.code.size());
    if (node < 0 || n == 0) return -1;
    from = std::clamp(from, 0L, n);
    for (long pass = 0; pass < 2; ++pass) {
        const long lo = pass == 0 ? from : 0, hi = pass == 0 ? n : from;
        for (long i = lo; i < hi; ++i) {
            const Instruction& ins = s.code[size_t(i)];
            if (!targets_value(ins.kind) && ins.target == node) return i;
        }
    }
    return -1;
}

}  // namespace rl::ui
