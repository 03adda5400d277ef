#pragma once
// Teach mode, Qt-free: what a schedule does with each value and why, read off the schedule alone
// (with the ops' residual declarations and the cost model). The GUI's graph view, schedule matrix
// and teach panel, and `rematlab-cli explain`, all go through these functions.
//
// Every sentence is rendered from a list of typed claims (Claim below) that state only what the
// schedule and the graph imply: what an instruction reads (a Backward: the residuals its op
// declares), which Compute made the copy it reads, why a recompute happens (the chain of real
// reads from its output to the Backward it serves), and that a freed value is not read before
// it is made again. tests/analysis/test_explain_claims.cpp holds every claim against the graph.
//
// Worked example: mlp:depth=2 (block0.fc, block0.act, block1.fc, block1.act, loss; relu's
// backward reads its own output, linear's its input) under a plan that drops block0.fc and
// block0.act after the forward and recomputes them for block1.fc's backward
// (tests/analysis/test_explain.cpp, ExplainHandChecked):
//    1 compute block0.act    "… It is not kept: freed at #4 once compute block1.fc (#3) has read
//                             it, and recomputed at #13 for the backward of block1.fc."
//    4 free block0.act       "Freed to save memory: its last read for now was compute block1.fc
//                             (#3); nothing reads it again before it is recomputed at #13 …"
//   12 compute block0.fc     "block0.fc is recomputed because recomputing block0.act (#13) reads
//                             it; block0.act is needed by the backward of block1.fc (#15).
//                             block0.fc was not kept (freed at #2). Recomputing it reads the
//                             input x, …"
//   13 compute block0.act    "block0.act is recomputed because the backward of block1.fc (#15)
//                             reads it. … Recomputing it reads block0.fc (recomputed at #12), …"
//   15 backward block1.fc    "reads its input block0.act (recomputed at #13); adds into the
//                             gradient of block0.act; …"
#include <cstdint>
#include <string>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/liveness.h"
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
// that Backward read last). On a plan-only network (no Backwards) stage t is the general
// problem's: the (re)computations up to node t's first computation and the Frees right after it.
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
    std::vector<uint8_t> live;        // per value: an activation or input live (engine/liveness)
    std::vector<int32_t> computes;    // per node
    std::vector<uint8_t> backwarded;  // per node
    bool operator==(const ScheduleState&) const = default;
};

// Steps a schedule forward and backward one instruction at a time; back() undoes forward()
// exactly. The live set follows engine/liveness.h (an in-place forward's input stops being live
// at that Compute). Throws ScheduleError for an invalid schedule.
class ScheduleCursor {
  public:
    // An activation that comes alive (live = 1) or stops being live (0) inside an instruction.
    struct Change {
        ValueId value;
        uint8_t live;
    };
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
    std::vector<std::vector<Change>> changes_;  // per instruction, in the order they happen
};

// The same state, walked from the start with engine/liveness: what the cursor must agree with.
// Throws ScheduleError when the first `position` instructions are invalid.
ScheduleState state_at(const Graph& g, const Schedule& s, long position);

// ---- the sentences ----

// One fact a sentence states, as data the sentence is rendered from, so that a test can hold
// every claim against the graph and the schedule (tests/analysis/test_explain.cpp walks every
// instruction of every strategy on the presets). Indices are instruction indices; -1 = none.
enum class ClaimKind : uint8_t {
    // Instruction `at` reads `value`: a Compute one of its node's inputs, a Backward one of the
    // residuals its op declares (engine/liveness for_each_residual).
    Reads,
    // The `value` instruction `at` reads was made by the Compute at `source`, with no Free of it
    // in between; `recomputed`: that Compute is not the node's first.
    ReadsFrom,
    // A link of a recompute's reason: the `value` made by the Compute at `source` is read by the
    // instruction at `at` (no Free in between). A recompute's links form a chain (each link's
    // `source` is the previous link's `at`) that ends at the Backward the recompute is for.
    ReadBy,
    // `value` is freed at `at`; its last read since it was made is the instruction at `source`
    // (-1: nothing read it).
    FreedAt,
    // Nothing reads `value` after its Free at `at` before the Compute at `source` makes it again
    // (-1: before the end of the step).
    NotReadUntil,
    // No Backward reads `value` after the Compute at `at` made it, up to `source` (the node's
    // next Compute; -1: the end of the step).
    NoBackwardReads,
    // The node making `value` is one of the plan's checkpoints.
    Checkpoint,
};
const char* claim_kind_name(ClaimKind k);

struct Claim {
    ClaimKind kind = ClaimKind::Reads;
    ValueId value = kNoId;
    long at = -1;
    long source = -1;
    bool recomputed = false;
    bool operator==(const Claim&) const = default;
};

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
    std::vector<Claim> claims;  // what `why` states about the schedule, in the order it says it
    uint64_t live_bytes = 0;    // predicted live bytes after the instruction
    bool at_peak = false;       // the predicted peak happens inside this instruction
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
    long reads_from(ValueId v, long index, Explanation& e) const;  // pushes Reads + ReadsFrom
    std::string reason_chain(long i, Explanation& e) const;
    std::string explain_compute(long i, Explanation& e) const;
    std::string explain_free(long i, Explanation& e) const;
    std::string explain_copy(long i, Explanation& e) const;
    std::string explain_backward(long i, Explanation& e) const;

    const Graph& g_;
    const Plan& plan_;
    const Simulation& sim_;
    const CostModel& costs_;
    LivenessTables tables_;
    std::vector<std::vector<long>> computes_of_;  // per node: its Compute indices
    std::vector<std::vector<long>> frees_of_;     // per value: its Free indices
    std::vector<std::vector<long>> reads_of_;     // per value: instructions that read it
    std::vector<long> serves_;  // per Compute: the first Backward it is for (maybe through others)
    std::vector<long> direct_;  // per Compute: the first Backward that reads its output itself
    std::vector<uint64_t> live_after_;   // per instruction
    std::vector<double> wait_stall_ms_;  // per instruction: how long a Wait stalls (predicted)
    std::vector<uint8_t> checkpoint_;    // per node: in plan.checkpoints
    long first_backward_ = -1;
};

// "what: why" for one instruction; throws rl::Error for an index outside the schedule.
std::string explain_instruction(const Graph& g, const Plan& plan, const Simulation& sim,
                                const CostModel& costs, long index);

}  // namespace rl
