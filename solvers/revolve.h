#pragma once
// `revolve:slots=s` — binomial checkpointing: A. Griewank and A. Walther, "Algorithm 799:
// revolve: an implementation of checkpointing for the reverse or adjoint mode of computational
// differentiation", ACM TOMS 26(1), 2000 (and Griewank 1992, "Achieving logarithmic growth of
// temporal and spatial complexity in reverse automatic differentiation").
//
// Griewank's model. A chain of l steps F_1..F_l maps state x_{i-1} to x_i. Reversing step i
// (its adjoint) needs x_{i-1}. There are s checkpoint slots, and the initial state x_0 occupies
// one of them; besides the slots there is one working state, the one being advanced. Actions:
// advance the working state one step (a forward evaluation), store it in a free slot, restore it
// from a slot, release a slot, and turn: reverse step i from the working state x_{i-1}. The
// minimal number of advances is
//     t(l,s) = r·l − β(s+1, r−1),   β(s,r) = C(s+r, s),   r such that β(s,r−1) < l ≤ β(s,r)
// (r is the repetition number: no step is advanced more than r times). The schedule here is
// Griewank's recursive one: from a stored x_a with s slots, advance to x_j, store it, reverse
// (j, b] with the s−1 remaining slots, release x_j, then reverse (a, j] with s slots; with one
// slot, advance to x_{b−1}, turn, restore x_a, repeat. A split j in
//     [max(β(s,r−2), l−β(s−1,r)), min(β(s,r−1), l−β(s−1,r−1))]   (offsets from a, l = b−a)
// gives a left part of repetition r−1 and a right part of repetition r with s−1 slots, and by
// Pascal's rule their costs add up to exactly t(l,s).
//
// Our chain (`chain:l=…`: layer0..layer{l-1}, then the loss). Step i is node layer{i-1}; x_0 is
// the graph input x and x_i the output of layer{i-1}. Turning step i is Backward(layer{i-1}),
// which reads only its input x_{i-1}. In Griewank's model every turn also re-runs F_i "taped";
// here only the first turn (step l) computes anything: layer{l-1}, whose output feeds the loss,
// then the loss node, then Backward(loss), Backward(layer{l-1}). Hence on `chain:l=…`
//     Computes of layer nodes = t(l,s) + 1,   Computes in the whole plan = t(l,s) + 2
// (the loss node's single Compute is the +2; with l = 1 there is nothing to advance, t = 0, and
// the plan is Compute layer0, Compute loss).
//
// Worked example, l = 4, s = 2 (x_0 in one slot, one slot free): β(2,1) = 3 < 4 ≤ β(2,2) = 6,
// so r = 2 and t = 2·4 − C(4,3) = 4. Split range [max(1, 4−3), min(3, 4−2)] = [1, 2]; we take
// the largest, j = 2:
//     advance x0→x2 (layer0, layer1), store x2; advance x2→x3 (layer2);
//     turn 4: compute layer3, loss; backward loss, layer3;    restore x2, turn 3: backward layer2
//     release x2, restore x0, advance x0→x1 (layer0), store x1: turn 2: backward layer1
//     release x1, restore x0, turn 1: backward layer0
// Advances 2 + 1 + 1 = 4 = t; layer Computes 5 = t+1; Computes 6 = t+2 (one recompute, layer0).
// At most two slots (x0 and one of x1, x2) hold states at once; the live layer outputs are at
// most s+1 (s−1 stored, the working state, and the one being computed).
//
// Other networks. The network is cut at its segment boundaries (engine/graph_algorithms.h
// segment_boundaries, b_1 < … < b_k); stage i is the nodes (b_{i-1}, b_i] and x_i the output of
// b_i; the nodes after b_k (the head and the loss) join the first turn. Advancing a stage
// computes all its nodes; turning stage i recomputes the nodes of the stage that its backwards
// read, and what those need (as solvers/segments.cpp does), including b_i itself when its
// backward reads its own output (relu, tanh, …) and stages have been advanced since x_i was last
// used. Revolve is then optimal only in the number of stage advances for s slots — not in time
// (stages differ in cost, turns recompute stage interiors) nor in bytes (stages differ in size).
// The plan is marked Optimal only on a homogeneous chain: single-node stages of one op kind, equal
// output bytes and forward cost, whose backward reads only their input.
//
// slots=0 (the default) means max(1, ceil(sqrt(k))) for k stages; any s ≥ 1 is feasible, and
// s ≥ k stores every state (no recomputation).
#include <cstdint>
#include <vector>

#include "engine/graph.h"
#include "engine/schedule.h"

namespace rl::revolve {

// β(s, r) = C(s+r, s) for r ≥ 0, 0 for r < 0. Saturates at kSaturated instead of overflowing.
constexpr uint64_t kSaturated = uint64_t{1} << 62;
uint64_t beta(int64_t s, int64_t r);
// The repetition number: the smallest r ≥ 0 with β(s, r) ≥ l (s ≥ 1, l ≥ 1).
int64_t repetition(int64_t l, int64_t s);
// t(l, s): the minimal number of advances to reverse l steps with s slots (x_0 in one of them).
int64_t min_advances(int64_t l, int64_t s);

struct Action {
    enum class Kind : uint8_t {
        Advance,  // advance the working state to x_index (index − current forward evaluations)
        Store,    // store the working state x_index in a free slot
        Restore,  // working state := x_index, which is in a slot
        Release,  // free the slot holding x_index
        Turn,     // reverse step index from the working state x_{index-1}
    };
    Kind kind;
    int64_t index;
    bool operator==(const Action&) const = default;
};

// Griewank's schedule for l ≥ 1 steps and s ≥ 1 slots: Store(0) first, Release(0) last, Turn(l)
// … Turn(1) in that order, exactly t(l, s) advanced steps, never more than s slots in use.
std::vector<Action> actions(int64_t l, int64_t s);

// The stages revolve plays on: the segment boundaries of g (the steps' last nodes).
std::vector<NodeId> stage_ends(const Graph& g);

// The schedule of `acts` (from actions(k, s), k = stage_ends(g).size()) on g's stages.
Schedule schedule(const Graph& g, const std::vector<NodeId>& ends, const std::vector<Action>& acts);

}  // namespace rl::revolve
