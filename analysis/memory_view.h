#pragma once
// The memory-profiler views, Qt-free (what heaptrack's and PyTorch memory_viz's users expect):
// the memory timeline stacked by category, the live set at a moment (largest first, with each
// tensor's fate), and the difference of two live sets ("why is this one higher").
//
// Everything here replays the schedule through engine/liveness, the one memory model the
// simulator and the executor share, so one liveness event here is one point of
// Simulation::timeline and of Execution::timeline (same order, same bytes), and the categories
// of a point add up to its bytes exactly.
//
// Worked example: mlp:depth=2 under a plan that frees block0.act in the forward and recomputes
// it for block1.fc's backward. At that backward the live set reads, largest first:
//    block1.fc.weight        parameters            kept (whole run)
//    block0.act              recomputed            recomputed at #11, freed at #13
//    grad block1.fc          activation gradients  freed at #12
//    …
// and the stack at the same point puts block0.act's bytes under "recomputed", not under "saved
// activations", which hold the values computed once in the forward.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/graph.h"
#include "engine/liveness.h"
#include "engine/schedule.h"

namespace rl {

// The engine's allocator categories, with activations split by how their buffer was made.
enum class MemoryKind : uint8_t {
    Parameters,
    ParamGrads,
    Inputs,
    SavedActivations,  // computed in the forward (the first Compute of the node)
    Recomputed,        // made by a second or later Compute of the node
    ActivationGrads,
    Workspace,
    Count
};
constexpr int kNumMemoryKinds = static_cast<int>(MemoryKind::Count);
// "parameters", "parameter gradients", "inputs", "saved activations", "recomputed",
// "activation gradients", "workspace".
const char* memory_kind_name(MemoryKind k);
// The engine category a kind refines (SavedActivations and Recomputed: Activations).
Category engine_category(MemoryKind k);

using KindBytes = std::array<uint64_t, kNumMemoryKinds>;
uint64_t total_bytes(const KindBytes& b);

// One buffer's life, from the event that allocated it (or took it over in place) to the event
// that released it (or handed it to an in-place output).
struct BufferLife {
    BufferRef buffer{Category::Parameters, 0};
    MemoryKind kind = MemoryKind::Parameters;
    uint64_t bytes = 0;
    long begin_event = 0, end_event = 0;                // live for events [begin, end)
    long begin_instruction = -1, end_instruction = -1;  // -1: before the run / at its end
    bool forward_phase = true;  // workspace: the Compute's (true) or the Backward's (false)
};

// The whole schedule replayed once: every event and every buffer life.
struct MemoryReplay {
    std::vector<int32_t> event_instruction;  // per event (−1: before the first / after the last)
    std::vector<KindBytes> stacks;           // per event: live bytes by kind after it
    std::vector<BufferLife> lives;           // in order of allocation
    uint64_t peak_bytes = 0;
    long peak_event = -1;
    // Per instruction: its events are [first_event[i], first_event[i + 1]) (size + 1 entries,
    // the last one is where the end-of-run releases begin).
    std::vector<long> first_event;
    uint64_t bytes_at(long event) const { return total_bytes(stacks[static_cast<size_t>(event)]); }
    // The event inside instruction `index` with the most live bytes (the peak inside it).
    // Throws rl::Error for an index outside the schedule.
    long highest_event_of(long index) const;
};
// Throws ScheduleError for an illegal schedule (as simulate does).
MemoryReplay replay_memory(const Graph& g, const Schedule& s);

// The stacks of a measured timeline: the executor records the same events in the same order (a
// cap failure cuts it short). Throws rl::Error, naming the point, where the measured timeline
// does not follow the replay (a different schedule or graph).
std::vector<KindBytes> measured_stacks(const MemoryReplay& r,
                                       const std::vector<TimelinePoint>& measured);

// ---- the live set at a moment ----

enum class TensorFate : uint8_t {
    Kept,                 // a parameter or input, or an activation computed once and saved
                          // until its last backward read
    Recomputed,           // this copy was made by a recompute
    FreedThenRecomputed,  // freed, and computed again later
    Freed,                // freed (a transient activation, a gradient, workspace)
};
const char* tensor_fate_name(TensorFate f);  // "kept", "recomputed", "freed, recomputed later",
                                             // "freed"

struct LiveTensor {
    std::string name;  // the value's / parameter's name; workspace: "<node> workspace"
    MemoryKind kind = MemoryKind::Parameters;
    uint64_t bytes = 0;
    TensorFate fate = TensorFate::Kept;
    long since = -1;                // instruction that made it (−1: before the run)
    long freed_at = -1;             // instruction that releases it (−1: at the end of the run)
    long recomputed_at = -1;        // FreedThenRecomputed: the next Compute of its node
    std::string fate_text() const;  // "kept", "recomputed at #11, freed at #13", "freed at #4"
};

struct LiveSet {
    long event = -1;
    long instruction = -1;
    uint64_t bytes = 0;               // == the sum of the tensors' bytes == the timeline's point
    std::vector<LiveTensor> tensors;  // largest first; ties by name
};
LiveSet live_set_at_event(const Graph& g, const Schedule& s, const MemoryReplay& r, long event);
// At the highest point inside instruction `index`.
LiveSet live_set_at(const Graph& g, const Schedule& s, const MemoryReplay& r, long index);
// At the peak.
LiveSet live_set_at_peak(const Graph& g, const Schedule& s, const MemoryReplay& r);

// ---- why one live set is higher than another ----

struct LiveSetDiffEntry {
    std::string name;
    MemoryKind kind_a = MemoryKind::Parameters, kind_b = MemoryKind::Parameters;
    uint64_t bytes_a = 0, bytes_b = 0;  // 0 where the set does not hold it
    int64_t delta() const { return static_cast<int64_t>(bytes_a) - static_cast<int64_t>(bytes_b); }
};
struct LiveSetDiff {
    std::vector<LiveSetDiffEntry> only_a, only_b;  // largest first
    uint64_t common_bytes = 0;                     // held by both (same name and size)
    int64_t delta = 0;                             // a.bytes − b.bytes
};
// Tensors are matched by name (the same graph under two schedules). Invariant:
// delta == Σ only_a.bytes_a − Σ only_b.bytes_b, and a.bytes == common_bytes + Σ only_a.bytes_a.
LiveSetDiff diff_live_sets(const LiveSet& a, const LiveSet& b);

}  // namespace rl
