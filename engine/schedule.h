#pragma once
// The one format every strategy produces and every consumer (simulator, executor, views) reads:
// a flat list of instructions over the network's values.
//
//   Compute(n)   run node n's forward; the first time is the forward pass, again = recompute
//   Free(v)      release activation v (a node output)
//   Backward(n)  consume n's output gradient and its residuals; accumulate the gradients of its
//                inputs and write its parameter gradients; the output gradient dies here
//   Offload(v)   start copying activation v from the device to host memory on the copy stream
//                (the host buffer is taken now; the device buffer stays readable)
//   Prefetch(v)  start copying offloaded v back to the device (the device buffer is taken now,
//                and may not be read until the copy completes)
//   Wait(v)      the compute stream waits until v's copy has completed; then the side the copy
//                left is released (an offload frees v's device buffer, a prefetch its host one)
//
// So a value is on exactly one side, or in flight between the two, and the time a transfer
// costs the step is only the compute stream's wait (engine/liveness.h has the rules).
//
// Every schedule issues its Backwards in one canonical order — decreasing node index, a reverse
// topological order — so gradients accumulate in the same order under every strategy.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/graph.h"

namespace rl {

enum class InstrKind : uint8_t { Compute, Free, Backward, Offload, Prefetch, Wait };

// Whether an instruction of this kind names a value (Free and the copies) rather than a node.
constexpr bool targets_value(InstrKind k) {
    return k == InstrKind::Free || k == InstrKind::Offload || k == InstrKind::Prefetch ||
           k == InstrKind::Wait;
}
constexpr bool is_copy(InstrKind k) {
    return k == InstrKind::Offload || k == InstrKind::Prefetch || k == InstrKind::Wait;
}

struct Instruction {
    InstrKind kind;
    int32_t target;  // node for Compute/Backward, value for Free
    bool operator==(const Instruction&) const = default;
};

struct Schedule {
    std::vector<Instruction> code;
    size_t size() const { return code.size(); }
};

// "compute block3.mlp.act", "free block3.mlp.fc1", "backward block3.mlp.fc1"
std::string describe(const Graph& g, const Instruction& ins);
// One instruction per line, numbered.
std::string to_text(const Graph& g, const Schedule& s);

// Builds a schedule from the order of Computes and Backwards a strategy chooses, then inserts
// each Free right after the last read of that value's instance (a value is read by the Computes
// that consume it and by the Backwards that hold it as a residual). Everything a strategy keeps
// or drops follows from where it places its (re)computations — as in Checkmate, where the S
// matrix follows from R.
class ScheduleBuilder {
  public:
    explicit ScheduleBuilder(const Graph& g) : g_(g) {}
    void compute(NodeId n) { seq_.push_back({InstrKind::Compute, n}); }
    void backward(NodeId n) { seq_.push_back({InstrKind::Backward, n}); }
    Schedule finish() const;

    // Offload and prefetch, placed by the strategy: the builder inserts no Free for a value
    // whose device instance ends with an offload (its Wait releases it; reads between the
    // Offload and that Wait are allowed), and a prefetched instance is freed after its last read
    // like a computed one.
    void offload(ValueId v) { seq_.push_back({InstrKind::Offload, v}); }
    void prefetch(ValueId v) { seq_.push_back({InstrKind::Prefetch, v}); }
    void wait(ValueId v) { seq_.push_back({InstrKind::Wait, v}); }

  private:
    const Graph& g_;
    std::vector<Instruction> seq_;
};

// Plain backprop (`none`): every node computed once in order, every backward in the canonical
// order, each value freed after its last read.
Schedule backprop_schedule(const Graph& g);

// The node an instruction is about: its target, or for one naming a value the value's producer
// (kNoId for a graph input).
NodeId node_of(const Graph& g, const Instruction& ins);

// Throws rl::ScheduleError (instruction index and reason) for an illegal schedule: an input not
// live, a double compute or free, an incomplete gradient, a backward out of canonical order, a
// residual not live, a missing backward; and for the copies: a free or a second copy of a value
// in flight, a read of a value on the host or still being prefetched, a wait with no copy, or a
// schedule that ends with a copy in flight.
void validate(const Graph& g, const Schedule& s);

}  // namespace rl
