#pragma once
// What an op *is*, independent of any backend: shape inference, the parameters it owns, the
// residuals its backward reads, the workspace it needs, and its cost in FLOPs and bytes moved.
// Kernels live with the backends (engine/cpu/ for the CPU).
//
// Residuals are what checkpointing reasons about: an op's backward may read some of its inputs
// and/or its output. linear reads its input (for dW) — its output is not needed; relu, tanh,
// sigmoid and softmax read their output; gelu reads its input; add reads nothing.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/graph.h"

namespace rl {

struct ParamDecl {
    std::string suffix;  // "weight", "bias"
    Shape shape;
    ParamInit init = ParamInit::FanInUniform;
    int64_t fan_in = 1;
};

struct Inferred {
    DType dtype = DType::F32;
    Shape shape;
    std::vector<ParamDecl> params;
};

struct Residuals {
    uint32_t inputs = 0;  // bit i set: the backward reads input i
    bool output = false;  // the backward reads the node's output
    bool reads_input(int i) const { return (inputs >> i) & 1u; }
};

struct OpCost {
    double fwd_flops = 0, bwd_flops = 0;
    double fwd_bytes = 0, bwd_bytes = 0;  // memory traffic, for the roofline
};

// Context for the hooks below: the graph (for input shapes) and the node being declared. During
// inference `node.output` is not set yet.
struct OpDef {
    std::string_view name;   // stable name used in files and on the command line
    std::string_view about;  // one line for `rematlab-cli networks`
    int min_inputs = 1, max_inputs = 1;
    bool is_loss = false;
    bool is_dot = false;  // a matmul-like op (the `dot` tag, dots_saveable)
    // Throws rl::Error with a message that names the problem (the caller adds the node name).
    Inferred (*infer)(const Graph& g, const Node& n) = nullptr;
    Residuals (*residuals)(const Graph& g, const Node& n) = nullptr;
    uint64_t (*fwd_workspace)(const Graph& g, const Node& n) = nullptr;  // null: none
    uint64_t (*bwd_workspace)(const Graph& g, const Node& n) = nullptr;  // null: none
    OpCost (*cost)(const Graph& g, const Node& n) = nullptr;
    // Bit i set: the forward is pointwise in input i (output element j reads only element j of
    // each input), so its kernel gives the same bits when the output buffer *is* input i's (on
    // every backend: no __restrict__ on those kernels' pointers). Liveness then lets the output
    // take over input i's buffer at a Compute after which the schedule frees input i at once
    // (engine/liveness.h, "In-place forwards").
    uint32_t in_place_inputs = 0;
    // Bit i set: input i is a *derivative input* — a value the forward already computed for the
    // backward to read (JAX's sin saves cos x from its jvp: sin(x, d = cos(x))). No gradient
    // flows through it; Graph::finalize requires that it reach the loss through no other path.
    uint32_t derivative_inputs = 0;
};

// The collectives of one tensor-parallel rank (ops/collective.cpp); throws for an unknown kind.
enum class CollectiveKind : uint8_t { AllReduceGrad, AllReduce, AllGather, ReduceScatter };
CollectiveKind collective_kind(const Node& n);

const OpDef& op_def(OpKind k);
std::string_view op_name(OpKind k);
std::optional<OpKind> op_from_name(std::string_view name);
// "linear, matmul, add, …" — for error messages that list the valid names.
std::string op_names_joined();

}  // namespace rl
