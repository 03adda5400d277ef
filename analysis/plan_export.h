#pragma once
// Plans out: a strategy's plan as something a PyTorch or JAX user applies to their own model —
// what `rematlab-cli export-plan` writes and File → Export plan saves.
//
// PyTorch checkpoints *module regions*: torch.utils.checkpoint.checkpoint(fn, *args,
// use_reentrant=False) around a submodule's forward keeps the region's inputs, drops every value
// computed inside it, and reruns the region in the backward, keeping what the region's backwards
// read. A plan is *segment-shaped* when its recomputation is a set of such regions. Regions are
// the network's modules — a node's module path is its name ("block0.fc": module "block0.fc"
// inside "block0"), or, for an ONNX model exported by PyTorch, the scope in its node name
// ("/layer1/layer1.0/conv1/Conv" → "layer1.0.conv1", torch_module_path) — and runs of
// consecutive children of a parent that calls them as a chain (an nn.Sequential, or a ModuleList
// looped over), which a single checkpoint wraps.
//
// How a plan maps to regions (export_plan): R = the nodes the plan recomputes. From the root
// down, a module is wrapped when wrapping it would recompute something and only nodes in R
// (what "wrapping" recomputes is modelled by wrapped_schedule, the checkpoint's own rule);
// otherwise, in a chain parent, the longest runs of consecutive children that qualify are
// wrapped, and the rest is visited child by child. The regions chosen give a schedule of their
// own; it is simulated, and its activation peak (what autograd holds: saved tensors and
// checkpoint inputs) compared with the plan's. Equal: the export is exact. Different: it is an
// approximation, and the difference in bytes is stated. No region at all while the plan
// recomputes something: the plan is refused for PyTorch (PlanRefused), with the reason.
//
// Worked example, mlp:depth=6 under sqrt-n (checkpoints block1.act, block3.act): R = block0.*,
// block1.fc, block2.*, block3.fc. Root's children block0..block5 form a chain; the run
// block0..block1 qualifies (its recomputation — block0.act, block1.fc — lies in R), block0..block2
// does not (it would recompute block1.act, which the plan keeps), so the regions are the runs
// block0..block1 and block2..block3; block4 and block5 stay plain, like sqrt-n's last segment.
//
// JAX remats by policy: jax.checkpoint(f, policy=save_only_these_names(...)) saves exactly the
// values whose checkpoint_name is listed. The JAX export lists the values the plan keeps for the
// backward (live when its first backward starts), by our node name, with their bytes. A plan
// with offloads (optimal:offload=1, min-cut:offload=1, policy's offload policies) lists the
// values it offloads apart, and its policy is save_and_offload_only_these_names(saved,
// offloaded, offload_src="device", offload_dst="pinned_host"). PyTorch's checkpoint has no
// per-value offload (save_on_cpu moves every saved tensor of a region), so the PyTorch export
// keeps them on the device and says so, with the bytes it holds more.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cost_model.h"
#include "engine/errors.h"
#include "engine/graph.h"
#include "engine/schedule.h"
#include "solvers/plan.h"

namespace rl {

enum class PlanFormat { Torch, Jax, Json };

// "torch", "jax" or "json"; throws rl::Error listing them otherwise.
PlanFormat parse_plan_format(std::string_view text);
// The file extension each format is written with: ".py" (torch, jax) or ".json".
std::string_view plan_format_extension(PlanFormat f);

// A plan PyTorch's checkpoint cannot express (no module region matches its recomputation).
class PlanRefused : public Error {
  public:
    using Error::Error;
};

// The PyTorch module path of an ONNX node name written by PyTorch's exporter: the scope without
// the op ("/layer1/layer1.0/conv1/Conv" → "layer1.0.conv1"; "/features/features.0/features.0.0/
// Conv" → "features.0.0"; "/Flatten" → ""). The exporter names each scope by the module's
// qualified name from its last non-numeric atom on, so "layer1.0" under "layer1" is "layer1.0",
// not "layer1.layer1.0". A second call of one module has its scope suffixed ("relu_1"): left as
// is here; export_plan maps it back to the module when it sees both.
std::string torch_module_path(std::string_view onnx_node_name);

struct ModuleRegion {
    // A single module: `path` ("" = the whole model). A run: the consecutive children
    // `first`..`last` (their full paths) of `path`.
    std::string path;
    bool run = false;
    std::string first, last;
    std::vector<NodeId> nodes;  // every node inside, in node order
    // PyTorch 2.4 and later (selective checkpoint): the aten ops whose outputs this region
    // saves — the kinds of the values the plan keeps inside it — and those nodes. Empty: the
    // region is checkpointed whole.
    std::vector<std::string> save_ops;
    std::vector<NodeId> saved;
};

struct ExportedValue {
    NodeId node = kNoId;
    uint64_t bytes = 0;
    int times = 1;  // recomputed: how many times
};

struct PlanExport {
    std::string network, strategy;
    PlanStatus status = PlanStatus::Heuristic;
    bool onnx_paths = false;  // module paths from PyTorch's ONNX scope names

    std::vector<ExportedValue> kept;        // on the device when the first backward starts
    std::vector<ExportedValue> offloaded;   // copied to the host somewhere in the plan
    std::vector<ExportedValue> recomputed;  // nodes the plan computes more than once
    uint64_t predicted_peak_bytes = 0, predicted_activation_peak_bytes = 0;

    // The PyTorch wrapping: its regions and what our simulator predicts for it.
    std::vector<ModuleRegion> regions;
    std::vector<NodeId> wrapped_recomputed;  // what the wrapping recomputes
    uint64_t wrapped_peak_bytes = 0, wrapped_activation_peak_bytes = 0;
    bool exact = true;  // the wrapping's activation peak equals the plan's
    // The wrapping recomputes exactly the nodes the plan recomputes that a backward reads (the
    // plan may also recompute intermediates on the way; a checkpoint reruns them unsaved).
    bool same_recomputation = true;
    std::string refusal;  // non-empty: no wrapping expresses the plan, and why
    // Non-empty: what the wrapping does differently from the plan, in bytes.
    std::string approximation;
    // With the regions' save_ops (selective checkpoint, PyTorch 2.4 and later): the activation
    // peak our simulator predicts; 0 when no region saves anything.
    uint64_t selective_activation_peak_bytes = 0;
    bool has_selective() const { return selective_activation_peak_bytes != 0; }

    int64_t difference_bytes() const {
        return static_cast<int64_t>(wrapped_activation_peak_bytes) -
               static_cast<int64_t>(predicted_activation_peak_bytes);
    }
};

// The module path of node n as export_plan uses it (see torch_module_path); "" for the loss and,
// in an ONNX model, for nodes outside any module.
std::string module_path_of(const Graph& g, NodeId n);

// What checkpointing `regions` (region id per node, -1 outside) does, by the rule of PyTorch's
// non-reentrant checkpoint: the forward keeps a region's inputs and the values something outside
// the region reads in its backward; entering the region's backward, it recomputes what the
// region's backwards read, from those. Backwards keep the canonical order.
// `saved`, when given (per node), marks values a region saves as a selective checkpoint's policy
// does (they are kept, not recomputed).
Schedule wrapped_schedule(const Graph& g, const std::vector<int>& regions,
                          const std::vector<uint8_t>* saved = nullptr);
// The aten op (PyTorch's dispatcher name, without "aten.") whose outputs are a node of kind `op`
// under autograd, as a selective checkpoint's policy sees them; "" when there is none we know.
std::string_view aten_ops_of(OpKind op);

// Maps `plan` to module regions and simulates the wrapping (see the top of this file). Never
// throws for a plan it cannot wrap: `refusal` says why.
PlanExport export_plan(const Graph& g, const std::string& network_spec,
                       const std::string& strategy_spec, const Plan& plan, const CostModel& costs);

// The three formats. plan_torch throws PlanRefused when `e.refusal` is set.
std::string plan_json(const Graph& g, const PlanExport& e);
std::string plan_torch(const Graph& g, const PlanExport& e);
std::string plan_jax(const Graph& g, const PlanExport& e);
std::string plan_text(const Graph& g, const PlanExport& e, PlanFormat f);

// One line for a terminal: exact, or approximated by N bytes.
std::string plan_export_summary(const PlanExport& e);

}  // namespace rl
