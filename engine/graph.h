#pragma once
// The graph IR: a DAG of forward ops. Nodes are stored in a topological order (a node's inputs
// are always defined before it), so "reverse node index" is the canonical backward order.
//
// A *value* is a tensor: a graph input (data or labels; always live, never recomputed) or the
// single output of a node. A *node* has an op kind, attributes, input values, one output value,
// parameters it owns (created from the op's declaration), a unique name and free-form tags (the
// analog of jax.ad_checkpoint.checkpoint_name). The last node is the loss, with a scalar output.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/attrs.h"
#include "engine/ops/op_kind.h"
#include "engine/shape.h"

namespace rl {

using ValueId = int32_t;
using NodeId = int32_t;
using ParamId = int32_t;
constexpr int32_t kNoId = -1;

// How a parameter's initial values are drawn (deterministically, from the graph seed and the
// parameter's name), or that they were given (weights read from a model file).
enum class ParamInit : uint8_t { FanInUniform, Ones, Zeros, Given };

// A parameter's layout in the model file it was read from, where that differs from ours: an
// ONNX MatMul weight stored [in, out] that `linear` holds as [out, in], a bias stored [1, out].
// What --dump-grads and --dump-weights write, so that a file named after an initializer has that
// initializer's shape and element order.
struct StoredLayout {
    Dims dims;                // the file's shape: as many elements as the parameter
    bool transposed = false;  // the file holds the transpose of our (rank-2) values
};

struct Param {
    std::string name;  // "<node>.<suffix>", e.g. "block0.fc.weight", unless given (ParamSource)
    Shape shape;
    uint64_t bytes = 0;
    ParamInit init = ParamInit::FanInUniform;
    int64_t fan_in = 1;
    // The node whose Backward creates the gradient: the parameter's last reader. A tied parameter
    // (ParamSource::tie) is read by several nodes, `readers` in node order; backwards run in
    // decreasing node order, so the last reader overwrites the gradient and the earlier ones
    // add their shares to it, in that fixed order (liveness.h, "Tied parameters").
    NodeId owner = kNoId;
    std::vector<NodeId> readers;
    // ParamInit::Given: shape.numel() values, row-major; shared so that copying a graph is cheap.
    std::shared_ptr<const std::vector<float>> values;
    std::optional<StoredLayout> stored = std::nullopt;  // none: the file's layout is ours
};

// The shape a parameter has in its model file (its own shape when it has no StoredLayout).
Shape stored_shape(const Param& p);
// `values` (p.shape.numel() of them, our layout) in the file's element order.
std::vector<float> to_stored_layout(const Param& p, const float* values);

// Where a node's parameter comes from when not from the op's defaults: a name that replaces
// "<node>.<suffix>" (e.g. an ONNX initializer's name) and/or initial values. Empty name: the
// default name; null values: seeded as the op declares.
// With `tie`, `name` names a parameter an earlier node already has, which this node reads too
// (tied weights: GPT-2's output head is its token embedding); its shape must equal the one
// this node declares, and `values` must be null.
struct ParamSource {
    std::string name;
    std::shared_ptr<const std::vector<float>> values;
    bool tie = false;
    std::optional<StoredLayout> stored = std::nullopt;  // the layout in the file they came from
};

struct Value {
    std::string name;  // graph inputs: their own name; node outputs: the node's name
    DType dtype = DType::F32;
    Shape shape;
    uint64_t bytes = 0;
    NodeId producer = kNoId;        // kNoId for graph inputs
    bool requires_grad = false;     // some parameter lies upstream of it
    int64_t label_classes = 0;      // i32 inputs: labels are drawn from [0, label_classes)
    std::vector<NodeId> consumers;  // each consuming node once, in node order
    bool is_input() const { return producer == kNoId; }
};

struct Node {
    std::string name;
    OpKind op = OpKind::Linear;
    Attrs attrs;
    std::vector<ValueId> inputs;
    ValueId output = kNoId;
    std::vector<ParamId> params;
    std::vector<std::string> tags;
    bool has_tag(std::string_view t) const;
};

class Graph {
  public:
    explicit Graph(std::string name = "network", uint64_t seed = 0);

    // --- building (throws rl::Error naming the node and the problem) ---
    ValueId add_input(const std::string& name, DType dtype, const Shape& shape,
                      int64_t label_classes = 0);
    // Infers the output shape and creates the op's parameters. Inputs by value name or id.
    // `params`, when given, overrides the op's parameters in declaration order (weight, bias):
    // at most one entry per declared parameter; each given name must be unique among the
    // parameters and each given values vector must hold exactly the parameter's element count.
    NodeId add_node(const std::string& name, OpKind op, const std::vector<ValueId>& inputs,
                    Attrs attrs = {}, std::vector<std::string> tags = {},
                    const std::vector<ParamSource>& params = {});
    NodeId add_node(const std::string& name, OpKind op, const std::vector<std::string>& inputs,
                    Attrs attrs = {}, std::vector<std::string> tags = {},
                    const std::vector<ParamSource>& params = {});
    // Checks the whole graph (last node is the only loss, every value is used, a parameter
    // exists) and computes consumers and requires_grad. Must be called before use.
    void finalize();
    bool finalized() const { return finalized_; }
    // A plan-only network (an abstract benchmark graph, engine/networks/abstract_network.h): its
    // nodes have no kernels and no parameters, and its backward is explicit in the DAG, so
    // nothing needs a Backward instruction; finalize() then asks for no loss and no parameter,
    // and lets several nodes end the graph. Set before finalize().
    void set_plan_only(bool on) { plan_only_ = on; }
    bool plan_only() const { return plan_only_; }

    // --- queries ---
    const std::string& name() const { return name_; }
    void set_name(std::string n) { name_ = std::move(n); }
    uint64_t seed() const { return seed_; }
    void set_seed(uint64_t s) { seed_ = s; }

    int num_nodes() const { return static_cast<int>(nodes_.size()); }
    int num_values() const { return static_cast<int>(values_.size()); }
    int num_params() const { return static_cast<int>(params_.size()); }
    const Node& node(NodeId n) const { return nodes_[static_cast<size_t>(n)]; }
    const Value& value(ValueId v) const { return values_[static_cast<size_t>(v)]; }
    const Param& param(ParamId p) const { return params_[static_cast<size_t>(p)]; }
    const std::vector<Node>& nodes() const { return nodes_; }
    const std::vector<Value>& values() const { return values_; }
    const std::vector<Param>& params() const { return params_; }
    const std::vector<ValueId>& inputs() const { return inputs_; }

    const Value& output_of(NodeId n) const { return value(node(n).output); }
    std::optional<ValueId> find_value(std::string_view name) const;
    std::optional<NodeId> find_node(std::string_view name) const;
    NodeId loss_node() const { return num_nodes() - 1; }
    // Whether the schedule must run this node's Backward (its output needs a gradient).
    bool needs_backward(NodeId n) const { return output_of(n).requires_grad; }

    // The activations' floating dtype (f32, bf16 or f16): that of the first floating value.
    // Parameters are always f32; i32 labels and u8 dropout masks keep their own types.
    DType float_dtype() const;
    // A copy whose floating values are `t`, with their byte counts recomputed. Planning uses the
    // network's own dtype; the CPU executes the f32 copy (every kernel is float32), and a
    // schedule of one is a schedule of the other (same nodes, same values).
    Graph with_float_dtype(DType t) const;

    uint64_t param_bytes() const;
    uint64_t input_bytes() const;
    uint64_t activation_bytes() const;  // sum of all node outputs
    double forward_flops() const;

  private:
    void check_total_bytes() const;

    std::string name_;
    uint64_t seed_;
    bool finalized_ = false;
    bool plan_only_ = false;
    std::vector<Node> nodes_;
    std::vector<Value> values_;
    std::vector<Param> params_;
    std::vector<ValueId> inputs_;
    std::unordered_map<std::string, ValueId> value_index_;  // names are unique across values
    std::unordered_set<std::string> param_names_;
};

}  // namespace rl
