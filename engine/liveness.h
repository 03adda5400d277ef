#pragma once
// The memory rules, written once and shared by the simulator and the executor (as ggml's
// allocator shares its measure and allocate passes). Both walk a schedule through Liveness; the
// simulator's visitor adds up bytes, the executor's allocates real buffers and runs kernels. So
// the predicted timeline and the measured one are the same sequence of events, and predicted
// peak == measured peak, to the byte.
//
// Rules: parameters and graph inputs are live for the whole run; an activation is live from its
// Compute to its Free; a value's gradient is live from its first accumulation until its
// producer's Backward ends; a parameter gradient from its owner's Backward to the end of the run;
// workspace only inside its instruction. Inside an instruction the order is: allocate the output
// or the new gradients, allocate workspace, run the kernel, release workspace, release the dead
// output gradient.
//
// In-place forwards. A Compute of a pointwise op (OpDef::in_place_inputs: relu, gelu, tanh,
// sigmoid, sin, cos, dropout, add) writes its output over an input's buffer, allocating nothing,
// when that input
//   - is an activation (not a graph input) of the output's size and dtype, and
//   - is freed by the run of Free instructions that directly follows this Compute (for schedules
//     from ScheduleBuilder: this Compute is the input's last read).
// The first such input slot wins. That input then stops being live at the Compute, and its Free
// releases nothing (its bytes now belong to the output, released by the output's own Free).
// This is what PyTorch's `relu_` does, decided from the schedule: a value's buffer is reused only
// when nothing reads it afterwards, so the bits every kernel sees are unchanged. It only lowers
// live bytes (by the output's size, from the Compute to the input's Free), so a memory model
// that ignores it (rotor's DP, DTR's replay) still gives a safe upper bound; Liveness can walk a
// schedule with the rule off to charge exactly that bound.
//
// Pieces. A solver that measures part of a schedule in isolation (rotor's stages,
// solvers/rotor.h) starts the walk with resume() instead of begin(): what is live before the
// piece (its activations, and the backwards already done with the gradients they left) is given,
// and the same step() rules apply from there.
//
// Offload (two pools). Besides the device pool above, offloaded activations live in a host
// pool, counted apart (MemoryPeak::host_peak_bytes; the device peak never includes them). A
// value is on the device, on the host, or in flight between them:
//   Offload(v)   v must be readable on the device and not already copied; its host buffer is
//                taken (host_allocate) and the copy starts (begin_copy). v stays readable.
//   Wait(v)      after an Offload: wait_copy, then v's device buffer is released; v is on the
//                host only. After a Prefetch: wait_copy, then v's host buffer is released; v is
//                readable on the device again.
//   Prefetch(v)  v must be on the host only; its device buffer is taken (allocate, counted in
//                the device peak from here) and the copy starts; v may not be read until its
//                Wait.
//   Free(v)      of a value on the host only releases the host buffer. A Free of a value in
//                flight, a read of a value on the host or in flight to the device, a Compute of
//                a value held on the host, and a step that ends with a copy in flight are errors.
// Bytes change hands only at these instructions, never when a copy happens to finish, so the
// predicted and the measured peaks of both pools agree to the byte; the copy's timing only
// decides how long a Wait stalls the compute stream.
//
// Tied parameters. A parameter read by several nodes (Param::readers) has one gradient. Its
// owner, the last reader, creates it at its Backward, which runs first (backwards run in
// decreasing node order). Each earlier reader's kernel writes its share into scratch placed
// after the op's own backward workspace, and the executor adds that share into the gradient
// right after the kernel: the sum of the uses, always in the same order, so gradients stay
// bitwise equal across strategies. The scratch is counted in LivenessTables::bwd_workspace.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/schedule.h"

namespace rl {

// Where the scratch for node `n`'s shares of tied parameters lies in its backward workspace:
// one offset per parameter slot of the node (-1 for a parameter the node owns), after
// `op_workspace` bytes, each 64-byte aligned; `total` is the whole workspace.
struct TiedScratch {
    std::vector<int64_t> offset;
    uint64_t total = 0;
};
TiedScratch tied_scratch(const Graph& g, NodeId n, uint64_t op_workspace);

enum class Category : uint8_t {
    Parameters,
    ParamGrads,
    Inputs,
    Activations,
    ActivationGrads,
    Workspace,
    Count
};
constexpr int kNumCategories = static_cast<int>(Category::Count);
const char* category_name(Category c);

// The high-water mark of a step under these rules: predicted (Simulation) or measured
// (Execution), the same fields so the two compare field by field.
struct MemoryPeak {
    uint64_t peak_bytes = 0;
    int32_t peak_instruction = -1;  // the instruction inside which it is reached (-1: none)
    std::array<uint64_t, kNumCategories> peak_by_category{};  // each category's own high-water mark
    uint64_t host_peak_bytes = 0;  // the host pool's high-water mark (offloaded activations)
    uint64_t activation_peak_bytes() const {
        return peak_by_category[static_cast<size_t>(Category::Activations)];
    }
};

// Offload: the copies a step issues and the bytes they move each way, counted alike by the
// simulator (Simulation) and the executor (Execution) at each Offload and Prefetch.
struct CopyCounts {
    long offloads = 0, prefetches = 0;
    uint64_t offloaded_bytes = 0, prefetched_bytes = 0;
    void count(InstrKind kind, uint64_t bytes) {
        if (kind == InstrKind::Offload) {
            ++offloads;
            offloaded_bytes += bytes;
        } else {
            ++prefetches;
            prefetched_bytes += bytes;
        }
    }
};

// Which buffer an event is about. `id` is a ValueId (Inputs, Activations, ActivationGrads), a
// ParamId (Parameters, ParamGrads) or the node id (Workspace).
struct BufferRef {
    Category category;
    int32_t id;
};

class MemoryVisitor {
  public:
    virtual ~MemoryVisitor() = default;
    virtual void allocate(BufferRef b, uint64_t bytes) = 0;
    virtual void release(BufferRef b, uint64_t bytes) = 0;
    // The kernel of the current instruction runs now (Compute or Backward only).
    virtual void run_kernel(const Instruction& ins, bool recompute) = 0;
    // An in-place Compute: `to` (the output) takes over `from`'s buffer (an input), before the
    // kernel runs; no bytes change hands (the simulator and the executor record a timeline event).
    virtual void hand_over(BufferRef /*from*/, BufferRef /*to*/, uint64_t /*bytes*/) {}
    // The host pool (offload): value v's host buffer is taken or released.
    virtual void host_allocate(ValueId /*v*/, uint64_t /*bytes*/) {}
    virtual void host_release(ValueId /*v*/, uint64_t /*bytes*/) {}
    // An Offload or Prefetch (`ins`) starts copying v's `bytes` on the copy stream, after both
    // of its buffers are held.
    virtual void begin_copy(const Instruction& /*ins*/, ValueId /*v*/, uint64_t /*bytes*/) {}
    // A Wait: the compute stream waits for v's copy, before the side it left is released.
    virtual void wait_copy(const Instruction& /*ins*/, ValueId /*v*/) {}
};

// Per-graph tables the rules need, computed once.
struct LivenessTables {
    explicit LivenessTables(const Graph& g);
    std::vector<uint64_t> fwd_workspace, bwd_workspace;  // per node (bwd: with tied scratch)
    std::vector<uint64_t> bwd_op_workspace;              // per node: the op's own part
    std::vector<uint32_t> residual_inputs;               // per node, bit mask
    std::vector<uint8_t> residual_output;                // per node
    std::vector<uint8_t> needs_backward;                 // per node
    std::vector<int32_t> grad_contributions;             // per value: consumers that need backward
    std::vector<uint32_t> in_place_inputs;  // per node: input slots whose buffer the output may
                                            // take (pointwise op, same bytes, not a graph input)
    int32_t backward_count = 0;             // nodes that need a backward

    // Whether node n's backward reads its input slot `slot` (a residual its op declares).
    bool reads_input(NodeId n, size_t slot) const {
        return ((residual_inputs[static_cast<size_t>(n)] >> slot) & 1u) != 0;
    }
};

// Calls f(value) for each value node n's backward reads: the input slots its op declares, in
// slot order, then its own output when declared. A value in two slots is passed twice.
template <typename F>
void for_each_residual(const Graph& g, const LivenessTables& t, NodeId n, F&& f) {
    const Node& node = g.node(n);
    for (size_t i = 0; i < node.inputs.size(); ++i)
        if (t.reads_input(n, i)) f(node.inputs[i]);
    if (t.residual_output[static_cast<size_t>(n)]) f(node.output);
}

// Calls f(value) for each value `ins` reads: a Compute its inputs, a Backward its residuals
// (for_each_residual), a Free nothing.
template <typename F>
void for_each_read(const Graph& g, const LivenessTables& t, const Instruction& ins, F&& f) {
    if (ins.kind == InstrKind::Compute) {
        for (ValueId in : g.node(ins.target).inputs) f(in);
    } else if (ins.kind == InstrKind::Backward) {
        for_each_residual(g, t, ins.target, f);
    } else if (ins.kind == InstrKind::Offload) {
        f(ins.target);  // the copy reads the device buffer
    }
}

// What is live before the first instruction of a piece of a schedule (Liveness::resume).
struct LiveStart {
    std::vector<ValueId> activations;  // live activations (graph inputs are live anyway)
    // Every node from this one on that needs a backward has run it (backwards run in decreasing
    // node order); kNoId: no backward has run.
    NodeId backwards_done_from = kNoId;
};

class Liveness {
  public:
    // `s` is the schedule that will be walked: the in-place rule reads the Frees after each
    // Compute. `in_place` false: every Compute allocates its output (the rule's upper bound).
    Liveness(const Graph& g, const LivenessTables& t, const Schedule& s, bool in_place = true);

    // Parameters and inputs come alive.
    void begin(MemoryVisitor& v);
    // Instead of begin(), to walk a piece of a schedule: parameters and inputs come alive, then
    // what the instructions before the piece left live: the backwards from
    // `start.backwards_done_from` on count as done (their parameter gradients are live, and the
    // gradients they accumulated into values whose producer's backward has not run), and
    // `start.activations` are live.
    void resume(const LiveStart& start, MemoryVisitor& v);
    // Applies instruction `index` of the schedule; throws ScheduleError(index, reason) when it is
    // illegal.
    void step(long index, MemoryVisitor& v);
    // Checks that every needed Backward ran; releases what is still live (activations left
    // over, parameter gradients, inputs, parameters).
    void end(long index, MemoryVisitor& v);

    bool activation_live(ValueId v) const { return act_live_[static_cast<size_t>(v)] != 0; }
    // During a Backward's run_kernel: whether input slot i's gradient accumulates.
    const std::vector<uint8_t>& accumulate_flags() const { return accumulate_; }
    int compute_count(NodeId n) const { return computes_[static_cast<size_t>(n)]; }
    // Where value v is now (offload).
    enum class Side : uint8_t { Device, ToHost, Host, ToDevice };
    Side side(ValueId v) const { return static_cast<Side>(side_[static_cast<size_t>(v)]); }
    // During a Compute's run_kernel: the input slot whose buffer the output took, or -1.
    int in_place_input() const { return in_place_now_; }
    // The input slot instruction `index` (a Compute) runs in place over, or -1.
    int in_place_input(long index) const { return in_place_[static_cast<size_t>(index)]; }

  private:
    const Graph& g_;
    const LivenessTables& t_;
    const Schedule& s_;
    std::vector<int8_t> in_place_;  // per instruction
    int in_place_now_ = -1;
    std::vector<uint8_t> act_live_, grad_live_, backwarded_;
    std::vector<uint8_t> handed_over_;  // per value: its buffer went to a consumer's output
    std::vector<uint8_t> side_;         // per value: a Side (Device when not offloaded)
    void step_copy(long index, const Instruction& ins, MemoryVisitor& v);
    std::string not_readable(ValueId v) const;  // why v cannot be read now, for an error
    std::vector<int32_t> computes_, pending_;
    std::vector<uint8_t> accumulate_;
    NodeId last_backward_;
    int32_t backwards_done_ = 0;
};

}  // namespace rl
