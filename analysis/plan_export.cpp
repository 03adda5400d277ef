// Plans out (see plan_export.h): module regions for PyTorch's checkpoint, a save_only_these_names
// policy for JAX, and the plan as data.
#include "analysis/plan_export.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "engine/errors.h"
#include "engine/liveness.h"
#include "engine/networks/slice_narrowing.h"
#include "engine/ops/op.h"
#include "engine/simulator.h"
#include "engine/units.h"
#include "strategies/policy.h"

namespace rl {

PlanFormat parse_plan_format(std::string_view text) {
    if (text == "torch") return PlanFormat::Torch;
    if (text == "jax") return PlanFormat::Jax;
    if (text == "json") return PlanFormat::Json;
    throw Error("unknown plan format '" + std::string(text) + "'; use torch, jax or json");
}

std::string_view plan_format_extension(PlanFormat f) {
    return f == PlanFormat::Json ? ".json" : ".py";
}

namespace {

// The bytes of a list of exported values (kept, offloaded).
uint64_t total_bytes(const std::vector<ExportedValue>& values) {
    uint64_t sum = 0;
    for (const auto& v : values) sum += v.bytes;
    return sum;
}

std::vector<std::string> split(std::string_view s, char sep) {
    std::vector<std::string> out;
    size_t from = 0;
    while (true) {
        const size_t at = s.find(sep, from);
        out.emplace_back(s.substr(from, at == std::string_view::npos ? s.npos : at - from));
        if (at == std::string_view::npos) return out;
        from = at + 1;
    }
}

std::string join(const std::vector<std::string>& atoms, size_t begin, size_t end) {
    std::string out;
    for (size_t i = begin; i < end; ++i) {
        if (i > begin) out += '.';
        out += atoms[i];
    }
    return out;
}

bool numeric(const std::string& atom) {
    return !atom.empty() &&
           std::all_of(atom.begin(), atom.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "relu_1" → "relu": a second call of module `relu`, as PyTorch's exporter names its scope.
std::optional<std::string> repeated_call_base(const std::string& atom) {
    const size_t us = atom.rfind('_');
    if (us == std::string::npos || us == 0 || !numeric(atom.substr(us + 1))) return std::nullopt;
    return atom.substr(0, us);
}

bool is_onnx_style(const Graph& g) {
    for (NodeId n = 0; n < g.loss_node(); ++n)
        if (!g.node(n).name.empty() && g.node(n).name[0] == '/') return true;
    return false;
}

}  // namespace

std::string torch_module_path(std::string_view name) {
    if (name.empty() || name[0] != '/') return std::string(name);
    std::vector<std::string> scopes = split(name.substr(1), '/');
    // The last part is the op ("Conv", "BatchNormalization", "Add_1"): ONNX op types are
    // CamelCase, module attributes by convention are not. A fused node is named after its
    // module alone ("/fc"), with no op part.
    if (!scopes.empty() && !scopes.back().empty() &&
        std::isupper(static_cast<unsigned char>(scopes.back()[0])))
        scopes.pop_back();
    std::vector<std::string> full;
    for (const std::string& scope : scopes) {
        if (scope.empty()) continue;
        const std::vector<std::string> atoms = split(scope, '.');
        // The scope is the qualified name from its last non-numeric atom on: "layer1.0" under
        // "layer1" continues it; "conv1" under "layer1.0" is a new atom.
        size_t k = full.size();
        while (k > 0 && numeric(full[k - 1])) --k;
        if (k > 0) --k;  // the last non-numeric atom
        const size_t tail = full.size() - k;
        bool continues = !full.empty() && atoms.size() > tail;
        for (size_t i = 0; continues && i < atoms.size(); ++i)
            continues = i < tail ? atoms[i] == full[k + i] : numeric(atoms[i]);
        if (continues) full.resize(k);
        full.insert(full.end(), atoms.begin(), atoms.end());
    }
    return join(full, 0, full.size());
}

namespace {

// The module structure of a network, from its node names (see plan_export.h).
struct Modules {
    bool onnx = false;
    std::vector<std::string> path;     // per node; the loss has none
    std::vector<uint8_t> in_module;    // per node: not the loss
    std::set<std::string> multi_call;  // modules called more than once (scopes "relu", "relu_1")

    explicit Modules(const Graph& g) {
        const auto n_nodes = static_cast<size_t>(g.num_nodes());
        onnx = is_onnx_style(g);
        path.resize(n_nodes);
        in_module.assign(n_nodes, 0);
        std::vector<std::vector<std::string>> raw(n_nodes);
        std::set<std::string> raw_prefixes;
        for (NodeId n = 0; n < g.loss_node(); ++n) {
            const std::string& name = g.node(n).name;
            std::string p;
            if (!onnx)
                p = name;
            else if (!name.empty() && name[0] == '/')
                p = torch_module_path(name);
            raw[static_cast<size_t>(n)] = p.empty() ? std::vector<std::string>{} : split(p, '.');
            const auto& atoms = raw[static_cast<size_t>(n)];
            for (size_t i = 1; i <= atoms.size(); ++i) raw_prefixes.insert(join(atoms, 0, i));
            in_module[static_cast<size_t>(n)] = 1;
        }
        for (NodeId n = 0; n < g.loss_node(); ++n) {
            std::vector<std::string> atoms = raw[static_cast<size_t>(n)];
            if (onnx)
                for (size_t i = 0; i < atoms.size(); ++i) {
                    const auto base = repeated_call_base(atoms[i]);
                    if (!base) continue;
                    const std::string parent = join(raw[static_cast<size_t>(n)], 0, i);
                    if (!raw_prefixes.count(parent.empty() ? *base : parent + "." + *base))
                        continue;
                    atoms[i] = *base;
                    multi_call.insert(join(atoms, 0, i + 1));
                }
            path[static_cast<size_t>(n)] = join(atoms, 0, atoms.size());
        }
    }

    static bool inside(const std::string& p, const std::string& m) {
        return m.empty() || p == m ||
               (p.size() > m.size() && p.compare(0, m.size(), m) == 0 && p[m.size()] == '.');
    }
    std::vector<NodeId> nodes_of(const std::string& m) const {
        std::vector<NodeId> out;
        for (NodeId n = 0; n < static_cast<NodeId>(path.size()); ++n)
            if (in_module[static_cast<size_t>(n)] && inside(path[static_cast<size_t>(n)], m))
                out.push_back(n);
        return out;
    }
    bool has_direct_nodes(const std::string& m) const {
        for (size_t n = 0; n < path.size(); ++n)
            if (in_module[n] && path[n] == m) return true;
        return false;
    }
    // Immediate children of m, ordered by their first node.
    std::vector<std::string> children(const std::string& m) const {
        std::vector<std::string> out;
        std::set<std::string> seen;
        const size_t depth = m.empty() ? 0 : split(m, '.').size();
        for (size_t n = 0; n < path.size(); ++n) {
            if (!in_module[n] || path[n] == m || !inside(path[n], m)) continue;
            const std::vector<std::string> atoms = split(path[n], '.');
            if (atoms.size() <= depth) continue;
            const std::string child = join(atoms, 0, depth + 1);
            if (seen.insert(child).second) out.push_back(child);
        }
        return out;
    }
    // Whether m calls its children as a chain: one value passes from each child to the next and
    // to nothing else, m runs no op of its own, and (for a PyTorch model) the children are
    // numbered, as in an nn.Sequential or a ModuleList.
    bool is_chain(const Graph& g, const std::string& m,
                  const std::vector<std::string>& kids) const {
        if (kids.size() < 2 || has_direct_nodes(m)) return false;
        if (onnx)
            for (const std::string& k : kids)
                if (!numeric(split(k, '.').back())) return false;
        std::vector<int> child_of(path.size(), -1);
        for (size_t c = 0; c < kids.size(); ++c)
            for (NodeId n : nodes_of(kids[c]))
                child_of[static_cast<size_t>(n)] = static_cast<int>(c);
        // What each child reads from outside itself: a Sequential passes one value; a ModuleList
        // loop (`x = layer(x, mask)`) may pass more, from outside the parent, the same to each.
        std::vector<uint8_t> in_parent(path.size(), 0);
        for (NodeId n : nodes_of(m)) in_parent[static_cast<size_t>(n)] = 1;
        for (size_t c = 0; c < kids.size(); ++c) {
            std::set<ValueId> from_outside;
            for (NodeId n : nodes_of(kids[c]))
                for (ValueId v : g.node(n).inputs) {
                    const NodeId p = g.value(v).producer;
                    if (p == kNoId || child_of[static_cast<size_t>(p)] != static_cast<int>(c))
                        from_outside.insert(v);
                }
            int from_siblings = 0;
            for (ValueId v : from_outside) {
                const NodeId p = g.value(v).producer;
                if (p != kNoId && in_parent[static_cast<size_t>(p)]) ++from_siblings;
            }
            if (c > 0 && from_siblings != 1) return false;
            if (!onnx && from_outside.size() != 1) return false;
        }
        for (size_t c = 0; c + 1 < kids.size(); ++c) {
            int leaving = 0;
            for (NodeId n : nodes_of(kids[c])) {
                bool read_outside = false;
                for (NodeId r : g.output_of(n).consumers) {
                    const int rc = child_of[static_cast<size_t>(r)];
                    if (rc == static_cast<int>(c)) continue;
                    if (rc != static_cast<int>(c + 1)) return false;
                    read_outside = true;
                }
                leaving += read_outside ? 1 : 0;
            }
            if (leaving != 1) return false;
        }
        return true;
    }
};

std::string names_sample(const Graph& g, const std::vector<NodeId>& nodes, size_t limit = 4) {
    std::string out;
    for (size_t i = 0; i < nodes.size() && i < limit; ++i)
        out += (i ? ", '" : "'") + g.node(nodes[i]).name + "'";
    if (nodes.size() > limit) out += " and " + std::to_string(nodes.size() - limit) + " more";
    return out;
}

ModuleRegion make_region(const std::string& path, std::vector<NodeId> nodes,
                         const std::string& first = {}, const std::string& last = {}) {
    ModuleRegion r;
    r.path = path;
    r.run = !first.empty();
    r.first = first;
    r.last = last;
    r.nodes = std::move(nodes);
    return r;
}

// Chooses the regions (see plan_export.h): top-down, a module whose wrapping recomputes only
// what the plan recomputes; in a chain parent, the longest qualifying runs of children.
class RegionFinder {
  public:
    RegionFinder(const Graph& g, const Modules& m, const LivenessTables& t,
                 const std::vector<uint8_t>& plan_recomputes)
        : g_(g), m_(m), t_(t), r_(plan_recomputes) {}

    std::vector<ModuleRegion> find() {
        visit("");
        cover_the_rest();
        return std::move(out_);
    }

  private:
    // Wrapping `nodes` recomputes something, and only what the plan recomputes.
    bool qualifies(const std::vector<NodeId>& nodes) const {
        if (nodes.empty()) return false;
        std::vector<int> region(static_cast<size_t>(g_.num_nodes()), -1);
        for (NodeId n : nodes) region[static_cast<size_t>(n)] = 0;
        const RegionCheckpoint w = region_checkpoint(g_, t_, region, nullptr, false);
        bool any = false;
        for (size_t n = 0; n < w.recomputed.size(); ++n) {
            if (!w.recomputed[n]) continue;
            if (!r_[n]) return false;
            any = true;
        }
        return any;
    }
    // A module its parent calls twice ("relu", "relu_1") is two checkpoints, not one region.
    bool single_call(const std::string& path) const { return !m_.multi_call.count(path); }
    void visit(const std::string& path) {
        const std::vector<NodeId> nodes = m_.nodes_of(path);
        if (nodes.empty()) return;
        if (single_call(path) && qualifies(nodes)) {
            out_.push_back(make_region(path, nodes));
            return;
        }
        const std::vector<std::string> kids = m_.children(path);
        const bool chain = m_.is_chain(g_, path, kids);
        std::vector<std::vector<NodeId>> kid_nodes;
        if (chain)
            for (const std::string& k : kids) kid_nodes.push_back(m_.nodes_of(k));
        for (size_t i = 0; i < kids.size();) {
            if (chain) {
                bool taken = false;
                for (size_t j = kids.size() - 1; j > i && !taken; --j) {
                    std::vector<NodeId> run;
                    for (size_t k = i; k <= j; ++k)
                        run.insert(run.end(), kid_nodes[k].begin(), kid_nodes[k].end());
                    std::sort(run.begin(), run.end());
                    if (qualifies(run)) {
                        out_.push_back(make_region(path, run, kids[i], kids[j]));
                        i = j + 1;
                        taken = true;
                    }
                }
                if (taken) continue;
            }
            visit(kids[i]);
            ++i;
        }
    }

    // Second pass, an approximation: a value the plan recomputes for a backward that no region
    // chosen above recomputes (every module around it would also recompute values the plan
    // keeps) gets the smallest module around it whose wrapping recomputes it, clear of the
    // regions already chosen — never the whole model, whose checkpoint lowers no peak (it
    // recomputes everything at once). It recomputes more than the plan; export_plan states the
    // bytes.
    void cover_the_rest() {
        const auto n_nodes = static_cast<size_t>(g_.num_nodes());
        std::vector<int> region(n_nodes, -1);
        std::vector<uint8_t> taken(n_nodes, 0);
        for (const ModuleRegion& r : out_)
            for (NodeId n : r.nodes) taken[static_cast<size_t>(n)] = 1;
        for (size_t n = 0; n < n_nodes; ++n) region[n] = taken[n] ? 0 : -1;
        const RegionCheckpoint covered = region_checkpoint(g_, t_, region, nullptr, false);
        std::vector<uint8_t> read_by_backward(n_nodes, 0);
        for (NodeId m = 0; m < g_.num_nodes(); ++m)
            if (t_.needs_backward[static_cast<size_t>(m)])
                for_each_residual(g_, t_, m, [&](ValueId v) {
                    if (g_.value(v).producer != kNoId)
                        read_by_backward[static_cast<size_t>(g_.value(v).producer)] = 1;
                });
        for (NodeId n = 0; n < g_.num_nodes(); ++n) {
            const auto i = static_cast<size_t>(n);
            if (!r_[i] || covered.recomputed[i] || !read_by_backward[i] || taken[i] ||
                !m_.in_module[i])
                continue;
            const std::string& p = m_.path[i];
            const std::vector<std::string> atoms =
                p.empty() ? std::vector<std::string>{} : split(p, '.');
            for (size_t depth = atoms.size() + 1; depth-- > 1;) {
                const std::string module = join(atoms, 0, depth);
                if (!single_call(module)) continue;
                const std::vector<NodeId> nodes = m_.nodes_of(module);
                if (std::any_of(nodes.begin(), nodes.end(),
                                [&](NodeId k) { return taken[static_cast<size_t>(k)] != 0; }))
                    break;  // every larger module holds a region already
                std::vector<int> alone(n_nodes, -1);
                for (NodeId k : nodes) alone[static_cast<size_t>(k)] = 0;
                if (!region_checkpoint(g_, t_, alone, nullptr, false).recomputed[i]) continue;
                out_.push_back(make_region(module, nodes));
                for (NodeId k : nodes) taken[static_cast<size_t>(k)] = 1;
                break;
            }
        }
        std::sort(out_.begin(), out_.end(), [](const ModuleRegion& a, const ModuleRegion& b) {
            return a.nodes.front() < b.nodes.front();
        });
    }

    const Graph& g_;
    const Modules& m_;
    const LivenessTables& t_;
    const std::vector<uint8_t>& r_;
    std::vector<ModuleRegion> out_;
};

}  // namespace

std::string module_path_of(const Graph& g, NodeId n) {
    return Modules(g).path[static_cast<size_t>(n)];
}

Schedule wrapped_schedule(const Graph& g, const std::vector<int>& regions,
                          const std::vector<uint8_t>* saved) {
    const LivenessTables t(g);
    return region_checkpoint(g, t, regions, saved, true).schedule;
}

std::string_view aten_ops_of(OpKind op) {
    // Under autograd F.linear is addmm (with a bias; 3-D inputs are flattened to it) or mm, our
    // batched matmul is bmm, a convolution is convolution; pointwise ops are themselves.
    switch (op) {
        case OpKind::Linear:
            return "addmm|mm";
        case OpKind::MatMul:
            return "bmm";
        case OpKind::Conv2d:
            return "convolution";
        case OpKind::Relu:
            return "relu";
        case OpKind::Gelu:
        case OpKind::GeluTanh:
            return "gelu";
        case OpKind::Tanh:
            return "tanh";
        case OpKind::Sigmoid:
            return "sigmoid";
        case OpKind::Softmax:
            return "_softmax";
        default:
            return "";
    }
}

PlanExport export_plan(const Graph& g, const std::string& network_spec,
                       const std::string& strategy_spec, const Plan& plan, const CostModel& costs) {
    PlanExport e;
    e.network = network_spec;
    e.strategy = strategy_spec;
    e.status = plan.status;
    const auto n_nodes = static_cast<size_t>(g.num_nodes());
    SimulateOptions quiet;
    quiet.record_timeline = false;
    const Simulation planned = simulate(g, plan.schedule, costs, quiet);
    e.predicted_peak_bytes = planned.peak_bytes;
    e.predicted_activation_peak_bytes = planned.activation_peak_bytes();

    // What the plan keeps (on the device as its first backward starts), offloads (copies to the
    // host anywhere) and recomputes.
    std::vector<uint8_t> live(static_cast<size_t>(g.num_values()), 0);
    std::vector<uint8_t> offloads(static_cast<size_t>(g.num_values()), 0);
    for (const Instruction& ins : plan.schedule.code)
        if (ins.kind == InstrKind::Offload) offloads[static_cast<size_t>(ins.target)] = 1;
    std::vector<int> computes(n_nodes, 0);
    bool backward_seen = false;
    for (const Instruction& ins : plan.schedule.code) {
        if (ins.kind == InstrKind::Backward && !backward_seen) {
            backward_seen = true;
            for (NodeId n = 0; n < g.loss_node(); ++n) {
                const auto v = static_cast<size_t>(g.node(n).output);
                if (offloads[v])
                    e.offloaded.push_back({n, g.output_of(n).bytes, 1});
                else if (live[v])
                    e.kept.push_back({n, g.output_of(n).bytes, 1});
            }
        }
        if (ins.kind == InstrKind::Compute) {
            ++computes[static_cast<size_t>(ins.target)];
            live[static_cast<size_t>(g.node(ins.target).output)] = 1;
        } else if (ins.kind == InstrKind::Free) {
            live[static_cast<size_t>(ins.target)] = 0;
        }
    }
    std::vector<uint8_t> plan_recomputes(n_nodes, 0);
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        if (computes[static_cast<size_t>(n)] > 1) {
            plan_recomputes[static_cast<size_t>(n)] = 1;
            e.recomputed.push_back({n, g.output_of(n).bytes, computes[static_cast<size_t>(n)] - 1});
        }

    const Modules modules(g);
    e.onnx_paths = modules.onnx;
    const LivenessTables t(g);
    e.regions = RegionFinder(g, modules, t, plan_recomputes).find();

    std::vector<int> region(n_nodes, -1);
    for (size_t r = 0; r < e.regions.size(); ++r)
        for (NodeId n : e.regions[r].nodes) region[static_cast<size_t>(n)] = static_cast<int>(r);
    const RegionCheckpoint w = region_checkpoint(g, t, region, nullptr, true);
    const Simulation wrapped = simulate(g, w.schedule, costs, quiet);
    e.wrapped_peak_bytes = wrapped.peak_bytes;
    e.wrapped_activation_peak_bytes = wrapped.activation_peak_bytes();
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        if (w.recomputed[static_cast<size_t>(n)]) e.wrapped_recomputed.push_back(n);

    if (e.regions.empty() && !e.recomputed.empty()) {
        std::vector<NodeId> r;
        for (const auto& v : e.recomputed) r.push_back(v.node);
        e.refusal = "the plan recomputes " + std::to_string(r.size()) + " node(s) (" +
                    names_sample(g, r) +
                    ") but no module of the network, nor a run of consecutive children of a "
                    "chain of modules, recomputes only what the plan recomputes when wrapped in "
                    "torch.utils.checkpoint: each would also recompute a value the plan keeps "
                    "(a plan that keeps single ops inside a region needs a selective policy). "
                    "Export it as json or jax, or choose a segment strategy (sqrt-n, periodic, "
                    "policy:regions=blocks,policy=nothing_saveable)";
        e.exact = false;
        return e;
    }
    e.exact = e.wrapped_activation_peak_bytes == e.predicted_activation_peak_bytes;

    // Selective checkpoint (PyTorch 2.4 and later): a region that recomputes values the plan
    // keeps saves, by op, the kinds of those values — every value of such a kind inside it, as
    // an op-level policy does.
    std::vector<uint8_t> plan_kept(n_nodes, 0);
    for (const auto& v : e.kept) plan_kept[static_cast<size_t>(v.node)] = 1;
    std::vector<uint8_t> saved(n_nodes, 0);
    bool any_saved = false;
    for (ModuleRegion& r : e.regions) {
        std::set<OpKind> kinds;
        bool known = true;
        for (NodeId n : r.nodes)
            if (plan_kept[static_cast<size_t>(n)] && w.recomputed[static_cast<size_t>(n)]) {
                kinds.insert(g.node(n).op);
                known = known && !aten_ops_of(g.node(n).op).empty();
            }
        if (kinds.empty() || !known) continue;
        std::set<std::string> ops;
        for (OpKind k : kinds)
            for (const std::string& op : split(aten_ops_of(k), '|')) ops.insert(op);
        r.save_ops.assign(ops.begin(), ops.end());
        for (NodeId n : r.nodes)
            if (kinds.count(g.node(n).op)) {
                r.saved.push_back(n);
                saved[static_cast<size_t>(n)] = 1;
                any_saved = true;
            }
    }
    if (any_saved) {
        const RegionCheckpoint ws = region_checkpoint(g, t, region, &saved, true);
        const uint64_t selective = simulate(g, ws.schedule, costs, quiet).activation_peak_bytes();
        // Worth a policy only when it comes closer to the plan than checkpointing whole does
        // (an op-level policy saves every value of a kind, which may overshoot).
        auto distance = [&](uint64_t b) {
            return b > e.predicted_activation_peak_bytes ? b - e.predicted_activation_peak_bytes
                                                         : e.predicted_activation_peak_bytes - b;
        };
        if (distance(selective) < distance(e.wrapped_activation_peak_bytes)) {
            e.selective_activation_peak_bytes = selective;
        } else {
            for (ModuleRegion& r : e.regions) {
                r.save_ops.clear();
                r.saved.clear();
            }
        }
    }
    std::vector<uint8_t> read_by_backward(n_nodes, 0);
    for (NodeId m = 0; m < g.num_nodes(); ++m)
        if (t.needs_backward[static_cast<size_t>(m)])
            for_each_residual(g, t, m, [&](ValueId v) {
                if (g.value(v).producer != kNoId)
                    read_by_backward[static_cast<size_t>(g.value(v).producer)] = 1;
            });
    std::vector<NodeId> only_plan, only_wrap;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const bool p = plan_recomputes[static_cast<size_t>(n)];
        const bool q = w.recomputed[static_cast<size_t>(n)];
        if (p && !q && read_by_backward[static_cast<size_t>(n)]) only_plan.push_back(n);
        if (q && !p) only_wrap.push_back(n);
    }
    e.same_recomputation = only_plan.empty() && only_wrap.empty();
    if (!e.exact) {
        const int64_t d = e.difference_bytes();
        std::string why;
        if (!only_plan.empty())
            why += "; the plan recomputes " + names_sample(g, only_plan) +
                   ", which no wrapped module recomputes alone";
        if (!only_wrap.empty())
            why += "; the wrapping recomputes " + names_sample(g, only_wrap) +
                   ", which the plan keeps";
        if (!e.offloaded.empty())
            why += "; the plan offloads " + std::to_string(e.offloaded.size()) + " value(s) (" +
                   format_bytes(total_bytes(e.offloaded)) +
                   ") to the host, which PyTorch's checkpoint keeps on the device (it has no "
                   "per-value offload)";
        else if (only_plan.empty() && only_wrap.empty())
            why += "; both recompute the same nodes, in a different order";
        e.approximation = "approximated: the wrapping's activation peak is " +
                          format_bytes(e.wrapped_activation_peak_bytes) + " (" +
                          std::to_string(e.wrapped_activation_peak_bytes) + " B), the plan's " +
                          format_bytes(e.predicted_activation_peak_bytes) + " (" +
                          std::to_string(e.predicted_activation_peak_bytes) + " B): " +
                          (d > 0 ? std::to_string(d) + " B more" : std::to_string(-d) + " B less") +
                          why;
    }
    return e;
}

std::string plan_export_summary(const PlanExport& e) {
    if (!e.refusal.empty()) return "refused for PyTorch: " + e.refusal;
    std::string s = std::to_string(e.regions.size()) + " checkpointed region(s); ";
    if (e.has_selective()) {
        const int64_t d = static_cast<int64_t>(e.selective_activation_peak_bytes) -
                          static_cast<int64_t>(e.predicted_activation_peak_bytes);
        s += "with PyTorch 2.4+'s selective checkpoint ";
        s += d == 0 ? std::string("exact (") + std::to_string(e.selective_activation_peak_bytes) +
                          " B); on older versions, "
                    : std::to_string(e.selective_activation_peak_bytes) + " B (" +
                          (d > 0 ? "+" : "") + std::to_string(d) + " B); on older versions, ";
    }
    if (e.exact)
        return s + "exact: the wrapping's activation peak equals the plan's, " +
               format_bytes(e.predicted_activation_peak_bytes) + " (" +
               std::to_string(e.predicted_activation_peak_bytes) + " B)" +
               (e.same_recomputation ? "" : ", though it recomputes other nodes");
    return s + e.approximation;
}

// --- text ------------------------------------------------------------------------------------

namespace {

// A Python string literal ("..." with escapes), for any name.
std::string py(std::string_view s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '\\' || c == '"') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
            static const char* hex = "0123456789abcdef";
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

// Text safe inside a Python comment: one line.
std::string comment(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    return out;
}

std::string value_note(const Graph& g, NodeId n) {
    const Value& v = g.output_of(n);
    return format_bytes(v.bytes) + "  " + format_type(v.dtype, v.shape) + "  " +
           std::string(op_name(g.node(n).op));
}

}  // namespace

std::string plan_json(const Graph& g, const PlanExport& e) {
    using nlohmann::ordered_json;
    ordered_json j;
    j["format"] = "rematlab-plan";
    j["version"] = 1;
    j["network"] = e.network;
    j["strategy"] = e.strategy;
    j["status"] = plan_status_name(e.status);
    j["predicted_peak_bytes"] = e.predicted_peak_bytes;
    j["predicted_activation_peak_bytes"] = e.predicted_activation_peak_bytes;
    j["module_paths"] = e.onnx_paths ? "pytorch-onnx-scopes" : "node-names";
    const Modules modules(g);
    auto value = [&](const ExportedValue& v, bool with_times) {
        ordered_json o;
        o["node"] = g.node(v.node).name;
        o["module"] = modules.path[static_cast<size_t>(v.node)];
        o["op"] = std::string(op_name(g.node(v.node).op));
        o["dtype"] = std::string(dtype_name(g.output_of(v.node).dtype));
        o["shape"] = g.output_of(v.node).shape.dims;
        o["bytes"] = v.bytes;
        if (with_times) o["times"] = v.times;
        return o;
    };
    for (const auto& [key, values] : {std::pair{"kept", &e.kept}, {"offloaded", &e.offloaded}}) {
        j[key] = ordered_json::array();
        for (const auto& v : *values) j[key].push_back(value(v, false));
        j[std::string(key) + "_bytes"] = total_bytes(*values);
    }
    j["recomputed"] = ordered_json::array();
    for (const auto& v : e.recomputed) j["recomputed"].push_back(value(v, true));
    ordered_json segments = ordered_json::array();
    for (const ModuleRegion& r : e.regions) {
        ordered_json s;
        s["kind"] = r.run ? "run" : "module";
        s["module"] = r.path;
        if (r.run) {
            s["first"] = r.first;
            s["last"] = r.last;
        }
        s["nodes"] = ordered_json::array();
        for (NodeId n : r.nodes) s["nodes"].push_back(g.node(n).name);
        if (!r.save_ops.empty()) {
            s["save_ops"] = r.save_ops;
            s["saved"] = ordered_json::array();
            for (NodeId n : r.saved) s["saved"].push_back(g.node(n).name);
        }
        segments.push_back(s);
    }
    j["segments"] = segments;
    ordered_json torch;
    torch["exportable"] = e.refusal.empty();
    if (!e.refusal.empty()) torch["refusal"] = e.refusal;
    torch["exact"] = e.exact;
    torch["same_recomputation"] = e.same_recomputation;
    torch["predicted_peak_bytes"] = e.wrapped_peak_bytes;
    torch["predicted_activation_peak_bytes"] = e.wrapped_activation_peak_bytes;
    torch["difference_bytes"] = e.difference_bytes();
    if (!e.approximation.empty()) torch["approximation"] = e.approximation;
    if (e.has_selective()) {
        ordered_json sel;
        sel["requires"] =
            "torch.utils.checkpoint.create_selective_checkpoint_contexts (PyTorch 2.4+)";
        sel["predicted_activation_peak_bytes"] = e.selective_activation_peak_bytes;
        sel["difference_bytes"] = static_cast<int64_t>(e.selective_activation_peak_bytes) -
                                  static_cast<int64_t>(e.predicted_activation_peak_bytes);
        torch["selective"] = sel;
    }
    j["torch"] = torch;
    return j.dump(2) + "\n";
}

std::string plan_torch(const Graph& g, const PlanExport& e) {
    (void)g;  // the regions carry the module paths
    if (!e.refusal.empty())
        throw PlanRefused("cannot export '" + e.strategy + "' on '" + e.network +
                          "' for PyTorch: " + e.refusal);
    std::ostringstream o;
    o << "# RematLab plan for PyTorch: " << comment(e.strategy) << " on " << comment(e.network)
      << "\n#\n"
      << "# apply(model) wraps the modules this plan recomputes in\n"
      << "# torch.utils.checkpoint.checkpoint(..., use_reentrant=False), in place, and returns\n"
      << "# the model. Module paths are "
      << (e.onnx_paths ? "those PyTorch's ONNX exporter wrote into the node names."
                       : "RematLab's node names (a node 'a.b' is module 'b' inside 'a').")
      << "\n# A run (parent, first, last) is one checkpoint around consecutive children of an\n"
      << "# nn.Sequential, or of an nn.ModuleList the parent calls in order, each child's output\n"
      << "# the next one's first argument (the usual `for block in self.blocks: x = block(x)`).\n"
      << "#\n"
      << "# RematLab predicts for this plan an activation peak of "
      << format_bytes(e.predicted_activation_peak_bytes) << " ("
      << e.predicted_activation_peak_bytes << " B; peak with parameters and gradients "
      << format_bytes(e.predicted_peak_bytes) << ").\n";
    if (e.exact)
        o << "# Exact: the wrapping below holds the same activation peak in our simulator.\n";
    else
        o << "# " << comment(e.approximation) << ".\n";
    o << "# What autograd holds differs from these figures by what PyTorch's own ops keep beside\n"
      << "# (layer norm's per-row statistics, max-pool indices, batch-norm statistics: a fixed\n"
      << "# offset, the same with and without the plan; RematLab's docs/plans.md has measured "
         "ones).\n"
      << "import torch\n"
      << "import torch.utils.checkpoint as _checkpoint\n\n"
      << "NETWORK = " << py(e.network) << "\n"
      << "STRATEGY = " << py(e.strategy) << "\n"
      << "EXACT = " << (e.exact ? "True" : "False") << "\n"
      << "PREDICTED_ACTIVATION_PEAK_BYTES = " << e.predicted_activation_peak_bytes << "\n"
      << "WRAPPED_ACTIVATION_PEAK_BYTES = " << e.wrapped_activation_peak_bytes << "\n\n";
    o << "# Single modules to checkpoint.\nMODULES = [\n";
    for (const ModuleRegion& r : e.regions)
        if (!r.run) o << "    " << py(r.path) << ",  # " << r.nodes.size() << " node(s)\n";
    o << "]\n\n# Runs of consecutive children, each one checkpoint: (parent, first, last).\n"
      << "RUNS = [\n";
    for (const ModuleRegion& r : e.regions)
        if (r.run)
            o << "    (" << py(r.path) << ", " << py(r.first) << ", " << py(r.last) << "),  # "
              << r.nodes.size() << " node(s)\n";
    o << "]\n";
    o << "\n# PyTorch 2.4 and later: the aten ops whose outputs a region saves under a selective\n"
      << "# checkpoint (torch.utils.checkpoint.create_selective_checkpoint_contexts): the kinds "
         "of\n"
      << "# the values the plan keeps inside it. Older versions checkpoint these regions whole.\n"
      << "SAVE_OPS = {\n";
    for (const ModuleRegion& r : e.regions) {
        if (r.save_ops.empty()) continue;
        o << "    ";
        if (r.run)
            o << "(" << py(r.path) << ", " << py(r.first) << ", " << py(r.last) << ")";
        else
            o << py(r.path);
        o << ": (";
        for (const std::string& op : r.save_ops) o << py(op) << ", ";
        o << "),  # saves " << r.saved.size() << " value(s)\n";
    }
    o << "}\n";
    if (e.has_selective())
        o << "# With them RematLab predicts an activation peak of "
          << format_bytes(e.selective_activation_peak_bytes) << " ("
          << e.selective_activation_peak_bytes << " B); checkpointed whole, "
          << format_bytes(e.wrapped_activation_peak_bytes) << " ("
          << e.wrapped_activation_peak_bytes << " B).\n";
    o << "SELECTIVE_ACTIVATION_PEAK_BYTES = "
      << (e.has_selective() ? e.selective_activation_peak_bytes : e.wrapped_activation_peak_bytes)
      << "\nHAS_SELECTIVE = hasattr(_checkpoint, \"create_selective_checkpoint_contexts\")\n";
    o << R"PY(

class PlanError(LookupError):
    """The model does not have the structure the plan was exported for."""


def _module(model, path):
    if not path:
        return model
    try:
        return model.get_submodule(path)
    except AttributeError as e:
        raise PlanError(f"RematLab plan ({STRATEGY} on {NETWORK}): the model has no submodule "
                        f"'{path}' ({e}); export the plan from this model's ONNX export, or from "
                        f"a RematLab network whose node names are its module paths") from None


def _selective_context(op_names):
    import functools
    packets = {getattr(torch.ops.aten, n) for n in op_names if hasattr(torch.ops.aten, n)}

    def policy_fn(ctx, op, *args, **kwargs):
        if getattr(op, "overloadpacket", op) in packets:
            return _checkpoint.CheckpointPolicy.MUST_SAVE
        return _checkpoint.CheckpointPolicy.PREFER_RECOMPUTE
    return functools.partial(_checkpoint.create_selective_checkpoint_contexts, policy_fn)


def _checkpointed(forward, save_ops=None):
    options = {"use_reentrant": False}
    if save_ops and HAS_SELECTIVE:
        options["context_fn"] = _selective_context(save_ops)

    def checkpointed_forward(*args, **kwargs):
        return _checkpoint.checkpoint(forward, *args, **options, **kwargs)
    return checkpointed_forward


def _passthrough(x, *args, **kwargs):
    return x


def _chain(forwards):
    def run(*args, **kwargs):
        y = forwards[0](*args, **kwargs)
        for f in forwards[1:]:
            y = f(y, *args[1:], **kwargs)
        return y
    return run


def apply(model):
    """Wraps the plan's regions of `model` in checkpoints, in place; returns `model`.

    Checks every module path first (PlanError names the first missing one) and changes nothing
    when one is missing. Parameter names, state_dict keys and hooks are unchanged: only forward
    methods are replaced."""
    singles = [_module(model, p) for p in MODULES]
    runs = []
    for parent, first, last in RUNS:
        p = _module(model, parent)
        if not isinstance(p, (torch.nn.Sequential, torch.nn.ModuleList)):
            raise PlanError(f"RematLab plan ({STRATEGY} on {NETWORK}): '{parent or 'the model'}' "
                            f"is a {type(p).__name__}, not an nn.Sequential or nn.ModuleList, so "
                            f"its children {first}..{last} cannot share one checkpoint")
        names = [name for name, _ in p.named_children()]
        a, b = first.rsplit(".", 1)[-1], last.rsplit(".", 1)[-1]
        if a not in names or b not in names or names.index(a) > names.index(b):
            raise PlanError(f"RematLab plan ({STRATEGY} on {NETWORK}): '{parent or 'the model'}' "
                            f"has no children {first}..{last} (it has {', '.join(names)})")
        runs.append([getattr(p, n) for n in names[names.index(a):names.index(b) + 1]])
    for m in singles + [c for run in runs for c in run]:
        if getattr(m, "_rematlab_plan", None):
            raise PlanError(f"RematLab plan ({STRATEGY} on {NETWORK}): a {type(m).__name__} is "
                            f"already checkpointed by a plan; apply a plan once per model")
    if SAVE_OPS and not HAS_SELECTIVE:
        import warnings
        warnings.warn(f"RematLab plan ({STRATEGY} on {NETWORK}): PyTorch {torch.__version__} has no "
                      f"selective checkpoint, so {len(SAVE_OPS)} region(s) are checkpointed whole: "
                      f"RematLab predicts an activation peak of {WRAPPED_ACTIVATION_PEAK_BYTES} B "
                      f"rather than {SELECTIVE_ACTIVATION_PEAK_BYTES} B", stacklevel=2)
    for m, path in zip(singles, MODULES):
        m.forward = _checkpointed(m.forward, SAVE_OPS.get(path))
        m._rematlab_plan = STRATEGY
    for run, key in zip(runs, RUNS):
        run[0].forward = _checkpointed(_chain([c.forward for c in run]), SAVE_OPS.get(tuple(key)))
        for c in run:
            c._rematlab_plan = STRATEGY
        for c in run[1:]:
            c.forward = _passthrough
    return model
)PY";
    return o.str();
}

std::string plan_jax(const Graph& g, const PlanExport& e) {
    std::ostringstream o;
    const uint64_t total = total_bytes(e.kept), host = total_bytes(e.offloaded);
    o << "# RematLab plan for JAX: " << comment(e.strategy) << " on " << comment(e.network)
      << "\n#\n"
      << "# The values this plan keeps for the backward, as checkpoint names: tag each value of\n"
      << "# your model with jax.ad_checkpoint.checkpoint_name(x, NAME), NAME our node name, and\n"
      << "# wrap it in jax.checkpoint(f, policy=POLICY); every other value is recomputed in the\n"
      << "# backward. JAX recomputes a checkpointed function's values together when its backward\n"
      << "# starts, so to stage the recomputation as this plan does, wrap each of REGIONS (the\n"
      << "# plan's recomputed segments) in its own jax.checkpoint with the same policy.\n"
      << (e.offloaded.empty()
              ? "# Offload names: none (this plan keeps every value on the device).\n"
              : "# Offload names: OFFLOADED_NAMES, the values this plan copies to host memory\n"
                "# for the backward (save_and_offload_only_these_names moves them to pinned host\n"
                "# memory in the forward and back for their backward).\n")
      << "#\n"
      << "# Kept: " << e.kept.size() << " value(s), " << format_bytes(total) << " (" << total
      << " B)";
    if (!e.offloaded.empty())
        o << "; offloaded: " << e.offloaded.size() << " value(s), " << format_bytes(host) << " ("
          << host << " B)";
    o << "; predicted activation peak " << format_bytes(e.predicted_activation_peak_bytes) << " ("
      << e.predicted_activation_peak_bytes << " B) on the device.\n"
      << "import jax\n\n"
      << "NETWORK = " << py(e.network) << "\n"
      << "STRATEGY = " << py(e.strategy) << "\n\n";
    auto names = [&](const char* what, const std::vector<ExportedValue>& values) {
        o << what << " = (\n";
        for (const auto& v : values)
            o << "    " << py(g.node(v.node).name) << ",  # " << comment(value_note(g, v.node))
              << "\n";
        o << ")\n";
    };
    names("SAVED_NAMES", e.kept);
    o << "SAVED_BYTES = " << total << "\n";
    if (e.offloaded.empty()) {
        o << "\nPOLICY = jax.checkpoint_policies.save_only_these_names(*SAVED_NAMES)\n\n";
    } else {
        names("OFFLOADED_NAMES", e.offloaded);
        o << "OFFLOADED_BYTES = " << host << "\n\n"
          << "POLICY = jax.checkpoint_policies.save_and_offload_only_these_names(\n"
          << "    names_which_can_be_saved=SAVED_NAMES,\n"
          << "    names_which_can_be_offloaded=OFFLOADED_NAMES,\n"
          << "    offload_src=\"device\",\n"
          << "    offload_dst=\"pinned_host\",\n"
          << ")\n\n";
    }
    o << "# Node names of each recomputed segment, in node order.\nREGIONS = (\n";
    for (const ModuleRegion& r : e.regions) {
        o << "    (  # " << comment(r.run ? r.first + " .. " + r.last : r.path) << "\n";
        for (NodeId n : r.nodes) o << "        " << py(g.node(n).name) << ",\n";
        o << "    ),\n";
    }
    o << ")\n\n\n"
      << "def remat(f):\n"
      << "    \"\"\"f under jax.checkpoint with this plan's policy.\"\"\"\n"
      << "    return jax.checkpoint(f, policy=POLICY)\n";
    return o.str();
}

std::string plan_text(const Graph& g, const PlanExport& e, PlanFormat f) {
    // PyTorch and JAX run the model's own graph; a plan made on one the ONNX import narrowed
    // (slice_narrowing.h) would name activations they keep in full, with other sizes.
    if (const int n = narrowed_node_count(g); n > 0 && f != PlanFormat::Json)
        throw Error(
            "this plan was made on the graph RematLab runs, in which the ONNX import "
            "narrowed " +
            std::to_string(n) +
            " nodes to the part a slice reads; PyTorch and JAX run them whole, so a plan "
            "for them must be made on the model's own graph: `rematlab-cli export-plan "
            "--network MODEL.onnx` does that (or export this one as JSON)");
    switch (f) {
        case PlanFormat::Torch:
            return plan_torch(g, e);
        case PlanFormat::Jax:
            return plan_jax(g, e);
        case PlanFormat::Json:
            return plan_json(g, e);
    }
    return {};
}

}  // namespace rl
