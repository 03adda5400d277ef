#pragma once
// Recompute or offload on a chain: an exact dynamic program over keep / offload / recompute per
// value, after Beaumont, Eyraud-Dubois, Shilova, "Efficient Combination of Rematerialization and
// Offloading for Training DNNs" (POFO, NeurIPS 2021), in a class of schedules of our own that
// keeps every transfer's cost local, so the program decomposes exactly.
//
// THE CHAIN. A network whose node i reads only graph inputs and node i-1's output v_i (mlp,
// chain): values v_0 … v_{n-1}, v_{n-1} the loss. Node i's backward reads v_{i-1} when its op
// declares its input a residual (reads_in) and v_i when it declares its output (reads_out).
//
// THE CLASS. Each value v_0 … v_{n-2} is Kept, Offloaded or Recomputed. The Kept and Offloaded
// ones are boundaries r_1 < r_2 < …; the edge (r → b) between two consecutive boundaries (r = -1
// for the graph input, b = n-1 for the loss) is run as:
//   forward   [Offload v_r]  compute r+1 … b, freeing each run value after its one forward read
//             [Wait v_r]     (the copy overlaps the edge's computes; then v_r leaves the device)
//   backward  [Prefetch v_r] for i = b … r+1: when node i's backward needs a run value that is
//             gone, recompute r+1 … (the highest it needs) once, keeping what backwards read;
//             [Wait v_r] just before v_r's first read; backward i; free what was last read
//             [Wait v_r] at the end when nothing in the edge read it
// Forward parts run edge by edge upwards, backward parts downwards. Every copy is issued and
// waited inside one part, so the copy stream is idle at each part's start and a part's time is
// its own: computes + recomputes + backwards + the stalls of its copies, which the engine's
// simulator (engine/simulator.h) times the same way. Kept everywhere is `none`; Recompute
// everywhere between Kept values is Chen's segments.
//
// THE MEMORY MODEL, in bytes on the device, an upper bound of engine/liveness.h's rules for
// these schedules: a constant — parameters, inputs and the largest workspace — plus the live
// values of the schedule (an in-flight offload's device buffer counted until its Wait, a
// prefetch's from its issue), plus, during node i's backward, the gradients of v_i and v_{i-1}
// (before it, v_i's), plus the parameter gradients of the backwards run so far (node i's from
// its backward on). In-place forwards (liveness.h) are ignored, so the engine's peak is at most
// the model's. Inside an edge, the live values are the edge's own plus the Kept boundaries
// below it (every one of them is live then), and the parameter gradients at its backward's
// start are those of the nodes above it, so
//   peak = max over edges of (constant + Kept bytes below r + the edge's own peak),
// and the program is exact for the model: over boundaries upwards, keeping for each (boundary,
// mode) the Pareto set of (Kept bytes so far, time), with no rounding at all.
// tests/solvers/test_offload_chain.cpp checks it against an exhaustive search over all 3^(n-1)
// assignments, walked instruction by instruction (offload_chain_evaluate), on chains of up to
// 8 values, and the schedules against the engine's simulator.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/cost_model.h"
#include "engine/graph.h"
#include "engine/schedule.h"

namespace rl {

enum class ValueChoice : uint8_t { Keep, Offload, Recompute };
const char* value_choice_name(ValueChoice c);

struct OffloadChain {
    int32_t n = 0;                       // nodes (the last computes the loss)
    std::vector<uint64_t> bytes;         // |v_i|
    std::vector<uint64_t> grad_bytes;    // the gradient of v_i (0 when it needs none)
    std::vector<double> fwd_ms, bwd_ms;  // per node
    std::vector<uint8_t> reads_in, reads_out, has_backward;  // per node
    std::vector<uint64_t> param_grad_bytes;  // per node: the parameter gradients its backward makes
    uint64_t const_fwd = 0, const_bwd = 0;   // the model's constants (above)
    TransferRates link;
};

// The chain of `g` with these costs, or nullopt (and `why`) when g is not a chain.
std::optional<OffloadChain> offload_chain(const Graph& g, const CostModel& costs,
                                          std::string* why = nullptr);

struct ChainCost {
    uint64_t peak = 0;  // the model's device peak
    double ms = 0;      // computes + recomputes + backwards + stalls
    double stall_ms = 0;
};

// The model's cost of one assignment (choices.size() == n-1), by walking its whole program.
ChainCost offload_chain_evaluate(const OffloadChain& c, const std::vector<ValueChoice>& choices);

struct ChainSolution {
    std::vector<ValueChoice> choices;
    ChainCost cost;
};
// The assignment of least time whose model peak is at most `budget` (ties, within rounding:
// the lower model peak); nullopt when none fits. `allow_offload` false: Keep and Recompute only.
std::optional<ChainSolution> solve_offload_chain(const OffloadChain& c, uint64_t budget,
                                                 bool allow_offload = true);
// The smallest model peak any assignment reaches (every value offloaded or recomputed varies;
// found by the same program at a budget search).
uint64_t offload_chain_min_peak(const OffloadChain& c, bool allow_offload = true);

// The schedule of `g` (the chain offload_chain(g) returned) for an assignment.
Schedule offload_chain_schedule(const Graph& g, const OffloadChain& c,
                                const std::vector<ValueChoice>& choices);

}  // namespace rl
