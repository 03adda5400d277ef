#pragma once
// Moving slices up the graph: a node whose only reader is a slice computes just the part that is
// read. ViT's classifier reads one token of the last encoder block (torchvision's `x[:, 0]`), yet
// the block computes its MLP, its attention output projection and its queries for every token, and
// the backward multiplies the zero gradients of the unread tokens again. Moved up node by node, the
// slice leaves that block's MLP, projection and attention rows computing 1 token of 50 (ViT-B/32 at
// batch 2: 6 % fewer FLOPs in the step); the loss and every parameter's gradient stay those of the
// original graph.
//
// A slice `y = x[a: s..e]` whose input `x = P(…)` has no other reader becomes `y = P'(x_i[…])`:
// P runs on slices of its inputs and its output is y's shape. P may be
//   - pointwise (unary activations, add/sub/mul/div with broadcasting — an operand broadcast
//     along axis a is read whole — linear, and layernorm/softmax/l2_normalize on another axis
//     than the last one they normalize over),
//   - a layout op (transpose, reshape when the rows kept are whole rows of its input too),
//   - matmul (rows of its first operand; a batch range of both), concat on another axis,
//   - a slice on the same axis (the two become one).
// It stops at a value read by several nodes (after merging slices that are equal: the one kept
// is tagged; a slice that reads its input whole is dropped), at graph inputs and at everything else
// (convolutions, pools, batch norm, reductions, dropout: their outputs depend on other rows or on
// element positions).
//
// Each step keeps every surviving element's arithmetic (per-row ops see the same row; linear's
// and matmul's dot products keep their length), and the backward loses only terms that were
// zero. Bits may differ: a GEMM library blocks fewer rows differently (1e-6 of a gradient's
// scale on ViT-B/32). A move that would not give a valid graph is not made (the slice stays).
#include <string>
#include <vector>

#include "engine/graph.h"

namespace rl {

struct SliceNarrowing {
    Graph graph;                        // the rewritten graph, finalized
    std::vector<std::string> narrowed;  // nodes now computing part of their output, graph order
    double flops_before = 0, flops_after = 0;  // forward + backward, from the ops' cost models
};

// Tag added to every node the pass narrowed and to the slices it inserted above them.
inline constexpr const char* kNarrowedTag = "narrowed";

// The nodes of `g` this pass narrowed (tagged so; the slices it inserted are not counted).
int narrowed_node_count(const Graph& g);

// The rewrite of a finalized graph; returns it unchanged (narrowed empty) when no slice moves.
// Plan-only graphs are returned as they are.
SliceNarrowing narrow_slices(const Graph& g);

}  // namespace rl
