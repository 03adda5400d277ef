#pragma once
// Where one node shows up in a schedule: the instructions that compute it (the forward's first
// computation), recompute it and run its backward, and where each of them lies on a memory
// timeline — what the memory chart marks when a node is selected in the schedule views.
//
// Both steps are single passes (over the schedule, then over the timeline), so selecting a node
// of a 100k-instruction schedule costs well under a millisecond or two; nothing is precomputed.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/graph.h"
#include "engine/schedule.h"
#include "ui/snapshots.h"

namespace rl::ui {

enum class MarkKind : uint8_t { Compute, Recompute, Backward };
const char* mark_kind_name(MarkKind k);  // "compute", "recompute", "backward"

struct NodeMark {
    long instruction = -1;
    MarkKind kind = MarkKind::Compute;
    // Where the instruction shows on a timeline: the live bytes after its last event, and a time
    // midway between that event and the next one — on the stretch of line the hover read-out
    // names this instruction for. An instruction with no event of its own (nothing allocated or
    // freed) sits where the next event is, at the bytes live before it. Unset before
    // place_marks, or when the timeline has no event at or after the instruction.
    std::optional<double> time_ms;
    double bytes = 0;
};

// The Compute and Backward instructions of `node`, in schedule order: the first Compute is
// MarkKind::Compute, every later one MarkKind::Recompute. Empty for a node out of range.
std::vector<NodeMark> node_marks(const Schedule& s, NodeId node);

// Sets time_ms / bytes of each mark from `t` (see NodeMark); one pass over the timeline.
void place_marks(std::vector<NodeMark>& marks, const Timeline& t);

// The node an instruction is about: its target for Compute / Backward, the producer of the value
// a Free releases (-1 for a graph input or an index out of range).
NodeId instruction_node(const Graph& g, const Schedule& s, long instruction);

// The first instruction at or after `from` that computes, recomputes or runs the backward of
// `node`; wraps around to the schedule's start; -1 when the node has none.
long next_instruction_of(const Schedule& s, NodeId node, long from);

}  // namespace rl::ui
