#pragma once
// Teach mode, Qt-free: what a schedule does with each value and why, read off the schedule alone
// (with the ops' residual declarations and the cost model). The GUI's graph view, schedule matrix
// and teach panel, and `rematlab-cli explain`, all go through these functions.
//
// Worked example: mlp:depth=2 (block0.fc, block0.act, block1.fc, block1.act, loss; act = relu,
// whose backward reads its own output; linear's reads its input) under a plan that drops
// block0.act after the forward and recomputes it for block1.fc's backward:
//    0 compute block0.fc      "forward … no backward reads it: freed at #2 after block0.act read
//    it" 1 compute block0.act     "… freed at #4 … recomputed at #11 for the backward of block1.fc"
//    2 free block0.fc         "nothing reads it after compute block0.act (#1)…"
//    …
//   11 compute block0.act     "recompute: the backward of block1.fc (#12) reads it, and it was
//                              not kept (freed at #4); recomputing it from block0.fc's output …"
//   12 backward block1.fc     "reads block0.act (recomputed at #11); adds into the gradient of …"
#include <cstdint>
#include <string>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/schedule.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {

// ---- what happens to each node's output (the graph view's colours) ----

enum class NodeFate : uint8_t {
    Kept,        // computed once and still live when the backward begins (a saved value)
    Recomputed,  // computed more than once
    FreedEarly,  // computed once and freed during the forward: no backward reads it
    NotRun,      // never computed (not in the schedule)
};
const char* node_fate_name(NodeFate f);  // "kept", "recomputed", "freed early", "not run"

struct NodeUse {
    NodeFate fate = NodeFate::NotRun;
    int computes = 0;  // 1 = the forward only; recomputes = computes − 1
    long first_compute = -1, first_backward_read = -1;
};
std::vector<NodeUse> node_uses(const Graph& g, const Schedule& s);

// ---- the Checkmate-style matrix: rows are stages, columns nodes ----
//
// Stage 0 is the forward (every instruction before the first Backward); stage k ≥ 1 is the k-th
// Backward, the (re)computations just before it and the Frees just after it (the Frees of what
// that Backward read last).
struct ScheduleMatrix {
    enum Flag : uint8_t {
        Computed = 1,    // first computation of the node in this stage
        Recomputed = 2,  // a computation again
        Kept = 4,        // the output is live when the stage begins
        Freed = 8,       // the output is freed in this stage
        Backward = 16,   // this stage runs the node's backward
    };
    int stages = 0, nodes = 0;
    std::vector<std::string> stage_names;       // "forward", "backward block3.fc", …
    std::vector<long> stage_first, stage_last;  // instruction range of each stage
    std::vector<NodeId> stage_node;             // the stage's Backward node (kNoId for stage 0)
    std::vector<uint8_t> cells;                 // stages × nodes, row-major
    uint8_t at(int stage, NodeId n) const {
        return cells[static_cast<size_t>(stage) * static_cast<size_t>(nodes) +
                     static_cast<size_t>(n)];
    }
    int stage_of(long instruction) const;  // -1 outside the schedule
};
ScheduleMatrix schedule_matrix(const Graph& g, const Schedule& s);
// The matrix as JSON: {"stages": [...], "nodes": [...], "cells": [[flags…]…], "flags": {...}}.
std::string schedule_matrix_json(const Graph& g, const ScheduleMatrix& m);

// ---- stepping (teach mode): the state after the first `position` instructions ----

struct ScheduleState {
    long position = 0;                // instructions applied
    std::vector<uint8_t> live;        // per value: an activation or input that is live
    std::vector<int32_t> computes;    // per node
    std::vector<uint8_t> backwarded;  // per node
    bool operator==(const ScheduleState&) const = default;
};

// Steps a schedule forward and backward one instruction at a time; back() undoes forward()
// exactly. Assumes a valid schedule (validate() first).
class ScheduleCursor {
  public:
    ScheduleCursor(const Graph& g, const Schedule& s);
    bool forward();  // false at the end
    bool back();     // false at the start
    void seek(long position);
    long position() const { return state_.position; }
    long size() const { return static_cast<long>(s_.size()); }
    const ScheduleState& state() const { return state_; }

  private:
    const Graph& g_;
    const Schedule& s_;
    ScheduleState state_;
};

// The same state, replayed from the start: what the cursor must agree with.
ScheduleState state_at(const Graph& g, const Schedule& s, long position);

// ---- the sentences ----

struct Explanation {
    long index = -1;
    Instruction instruction{InstrKind::Compute, kNoId};
    bool recompute = false;
    NodeId node = kNoId;  // the node the instruction is about (a Free: the value's producer)
    std::string what;     // "recompute block1.act"
    std::string why;      // the sentence(s)
    // Nodes the sentence names: the backward a recompute serves, the checkpoints it starts from,
    // the last reader of a freed value, the residuals of a backward.
    std::vector<NodeId> related;
    uint64_t live_bytes = 0;  // predicted live bytes after the instruction
    bool at_peak = false;     // the predicted peak happens inside this instruction
};

// Precomputes what every sentence needs in one pass (O(instructions + reads)); explain() is then
// cheap. Holds references: the arguments must outlive it.
class ScheduleExplainer {
  public:
    ScheduleExplainer(const Graph& g, const Plan& plan, const Simulation& sim,
                      const CostModel& costs);
    long size() const { return static_cast<long>(plan_.schedule.size()); }
    Explanation explain(long index) const;

  private:
    struct Read {
        long at;
        ValueId value;
    };
    std::string node_text(NodeId n) const;
    std::string value_text(ValueId v) const;
    std::string at_text(long index) const;
    std::string cost_text(double ms) const;
    long compute_before(NodeId n, long index) const;  // last Compute of n before index, or -1
    long compute_after(NodeId n, long index) const;   // next Compute of n after index, or -1
    long free_after(ValueId v, long index) const;     // next Free of v after index, or -1
    long last_read_before(ValueId v, long index, long since) const;
    void sources(ValueId v, long index, std::vector<ValueId>& out,
                 std::vector<uint8_t>& seen) const;
    std::string explain_compute(long i, Explanation& e) const;
    std::string explain_free(long i, Explanation& e) const;
    std::string explain_backward(long i, Explanation& e) const;

    const Graph& g_;
    const Plan& plan_;
    const Simulation& sim_;
    const CostModel& costs_;
    std::vector<uint32_t> residual_inputs_;
    std::vector<uint8_t> residual_output_;
    std::vector<std::vector<long>> computes_of_;  // per node: its Compute indices
    std::vector<std::vector<long>> frees_of_;     // per value: its Free indices
    std::vector<std::vector<long>> reads_of_;     // per value: instructions that read it
    std::vector<long> serves_;  // per Compute: the first Backward it is for (maybe through others)
    std::vector<long> direct_;  // per Compute: the first Backward that reads its output itself
    std::vector<uint64_t> live_after_;  // per instruction
    std::vector<uint8_t> checkpoint_;   // per node: in plan.checkpoints
    long first_backward_ = -1;
};

// "what: why" for one instruction; throws rl::Error for an index outside the schedule.
std::string explain_instruction(const Graph& g, const Plan& plan, const Simulation& sim,
                                const CostModel& costs, long index);

}  // namespace rl
