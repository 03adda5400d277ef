// `policy`: JAX's jax.checkpoint semantics with saveable policies (JAX documentation,
// "Gradient checkpointing with jax.checkpoint (jax.remat)", and jax.checkpoint_policies).
//
// The user marks remat regions — each block, the whole model, or runs of tagged nodes — and a
// policy decides which values computed inside a region may be saved. The forward pass runs every
// node once. Inside a region only its inputs, the saveable values its backward needs (directly or
// to recompute others), and its outputs that something outside the region still needs are kept;
// when the backward enters the region (its first Backward in canonical order), every other value
// its backwards read is recomputed from those, in node order, as JAX reruns the region's forward
// in its backward. Outside regions the strategy behaves like `none`. Backwards keep the
// canonical order, so gradients are bitwise those of `none`.
//
// Worked example, mlp with act=gelu, block i = {fc_i, gelu_i}, regions=blocks,
// policy=nothing_saveable: the forward keeps x and each block's output gelu_i (the next block's
// input). Entering block i in the backward, fc_i is recomputed from gelu_{i-1}, because gelu_i's
// backward reads its input fc_i; fc_i's backward reads gelu_{i-1}, which is kept. With
// policy=dots_saveable the fc outputs are saved instead, nothing is recomputed, and the memory is
// that of `none`.
#include "strategies/policy.h"

#include <algorithm>
#include <map>
#include <optional>

#include "engine/errors.h"
#include "engine/liveness.h"
#include "engine/ops/op.h"
#include "engine/units.h"
#include "solvers/offload_pass.h"
#include "strategies/builtin.h"

namespace rl {

namespace {

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    size_t from = 0;
    while (from <= s.size()) {
        size_t bar = s.find('|', from);
        if (bar == std::string::npos) bar = s.size();
        std::string item = s.substr(from, bar - from);
        const auto b = item.find_first_not_of(' ');
        const auto e = item.find_last_not_of(' ');
        if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
        from = bar + 1;
    }
    return out;
}

bool has_any_tag(const Node& n, const std::vector<std::string>& tags) {
    return std::any_of(tags.begin(), tags.end(),
                       [&](const std::string& t) { return n.has_tag(t); });
}

// --- policies -------------------------------------------------------------------------------

enum class PolicyKind {
    Everything,
    Nothing,
    Dots,
    DotsNoBatchDims,
    OnlyNames,
    AnyNamesBut,
    AnythingExcept,
    Both,
    OffloadNames,  // save_and_offload_only_these_names
    OffloadDots,   // offload_dot_with_no_batch_dims
};

struct PolicyName {
    const char* name;
    PolicyKind kind;
};
constexpr PolicyName kPolicies[] = {
    {"everything_saveable", PolicyKind::Everything},
    {"nothing_saveable", PolicyKind::Nothing},
    {"dots_saveable", PolicyKind::Dots},
    {"checkpoint_dots", PolicyKind::Dots},
    {"dots_with_no_batch_dims_saveable", PolicyKind::DotsNoBatchDims},
    {"checkpoint_dots_with_no_batch_dims", PolicyKind::DotsNoBatchDims},
    {"save_only_these_names", PolicyKind::OnlyNames},
    {"save_any_names_but_these", PolicyKind::AnyNamesBut},
    {"save_anything_except_these_names", PolicyKind::AnythingExcept},
    {"save_from_both_policies", PolicyKind::Both},
    {"save_and_offload_only_these_names", PolicyKind::OffloadNames},
    {"offload_dot_with_no_batch_dims", PolicyKind::OffloadDots},
};

std::vector<std::string> policy_choices(bool with_both) {
    std::vector<std::string> out;
    for (const PolicyName& p : kPolicies)
        if (with_both || (p.kind != PolicyKind::Both && p.kind != PolicyKind::OffloadNames &&
                          p.kind != PolicyKind::OffloadDots))
            out.emplace_back(p.name);
    return out;
}

PolicyKind policy_kind(const std::string& name) {
    for (const PolicyName& p : kPolicies)
        if (name == p.name) return p.kind;
    throw Error("policy: unknown policy '" + name + "'");  // the schema's Choice check ran first
}

struct Policy {
    PolicyKind kind = PolicyKind::Dots;
    std::vector<std::string> names;
    std::vector<std::string> offload_names;  // save_and_offload_only_these_names
    std::vector<Policy> both;                // the two policies of save_from_both_policies
};

// JAX's dots_with_no_batch_dims_saveable saves a dot_general whose dimension numbers have no
// batch dimensions (an axis paired across both operands that is neither contracted nor free).
// linear (x[..., in] · Wᵀ) contracts the feature axis against a 2-D weight: x's leading axes are
// free dimensions, as in x @ W in JAX — no batch dimensions. matmul ([B,M,K]·[B,K,N]) pairs its
// leading axis B across both operands: a batch dimension, even when B is 1. Other ops flagged
// is_dot (a convolution) are not dot_generals, so this policy does not save them.
bool dot_without_batch_dims(const Node& n) {
    return n.op == OpKind::Linear;
}

bool saveable(const Policy& p, const Node& n) {
    switch (p.kind) {
        case PolicyKind::Everything:
            return true;
        case PolicyKind::Nothing:
            return false;
        case PolicyKind::Dots:
            return op_def(n.op).is_dot;
        case PolicyKind::DotsNoBatchDims:
            return dot_without_batch_dims(n);
        case PolicyKind::OnlyNames:
            return has_any_tag(n, p.names);
        case PolicyKind::AnyNamesBut:
            return !n.tags.empty() && !has_any_tag(n, p.names);
        case PolicyKind::AnythingExcept:  // tagged or not: only the names are recomputed
            return !has_any_tag(n, p.names);
        case PolicyKind::Both:
            return saveable(p.both[0], n) || saveable(p.both[1], n);
        case PolicyKind::OffloadNames:  // saved on the device, or saved and offloaded
            return has_any_tag(n, p.names) || has_any_tag(n, p.offload_names);
        case PolicyKind::OffloadDots:
            return dot_without_batch_dims(n);
    }
    return false;
}

// JAX's offload policies: which saved values go to host memory (offload_src "device",
// offload_dst "pinned_host") rather than stay on the device.
bool offloaded(const Policy& p, const Node& n) {
    switch (p.kind) {
        case PolicyKind::OffloadNames:
            return has_any_tag(n, p.offload_names);
        case PolicyKind::OffloadDots:
            return dot_without_batch_dims(n);
        default:
            return false;
    }
}

Policy make_policy(const Graph& g, const std::string& name, const std::string& names_key,
                   const ParamValues& params) {
    Policy p;
    p.kind = policy_kind(name);
    if (p.kind == PolicyKind::OffloadNames) {
        auto read = [&](const std::string& key) {
            std::vector<std::string> out =
                params.has(key) ? split_list(params.get_string(key)) : std::vector<std::string>{};
            for (const std::string& t : out)
                if (std::none_of(g.nodes().begin(), g.nodes().end(),
                                 [&](const Node& n) { return n.has_tag(t); }))
                    throw Error("policy: " + key + " names '" + t +
                                "', but no node of this network carries that tag; see the tags "
                                "with `rematlab-cli network --network SPEC`");
            return out;
        };
        p.names = read("names");
        p.offload_names = read("offload_names");
        if (p.offload_names.empty())
            throw Error("policy: " + name +
                        " needs offload_names=a|b, the node tags whose values are saved in host "
                        "memory (and names=a|b for those saved on the device), e.g. policy=" +
                        name + ",offload_names=act");
        return p;
    }
    if (p.kind != PolicyKind::OnlyNames && p.kind != PolicyKind::AnyNamesBut &&
        p.kind != PolicyKind::AnythingExcept)
        return p;
    p.names = params.has(names_key) ? split_list(params.get_string(names_key))
                                    : std::vector<std::string>{};
    if (p.names.empty())
        throw Error("policy: " + name + " needs " + names_key +
                    "=a|b, the node tags it names (e.g. policy=" + name + "," + names_key +
                    "=attn)");
    for (const std::string& t : p.names)
        if (std::none_of(g.nodes().begin(), g.nodes().end(),
                         [&](const Node& n) { return n.has_tag(t); }))
            throw Error("policy: " + names_key + " names '" + t +
                        "', but no node of this network carries that tag; see the tags with "
                        "`rematlab-cli network --network SPEC` (the JSON lists each node's tags)");
    return p;
}

Policy read_policy(const Graph& g, const ParamValues& params) {
    const std::string name = params.get_string("policy");
    if (policy_kind(name) != PolicyKind::Both) return make_policy(g, name, "names", params);
    if (!params.has("policy1") || !params.has("policy2"))
        throw Error(
            "policy: save_from_both_policies needs policy1= and policy2= (and names1=/names2= "
            "for a policy that takes names), e.g. "
            "policy=save_from_both_policies,policy1=dots_saveable,policy2=save_only_these_names,"
            "names2=act");
    Policy p;
    p.kind = PolicyKind::Both;
    p.both.push_back(make_policy(g, params.get_string("policy1"), "names1", params));
    p.both.push_back(make_policy(g, params.get_string("policy2"), "names2", params));
    return p;
}

// --- regions --------------------------------------------------------------------------------

constexpr int kNoRegion = -1;

bool is_block_tag(const std::string& t) {
    return t.size() > 5 && t.compare(0, 5, "block") == 0 &&
           std::all_of(t.begin() + 5, t.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Region id per node (kNoRegion outside). The loss is never in a region: like JAX's f, a region
// ends before the loss.
std::vector<int> find_regions(const Graph& g, const ParamValues& params) {
    std::vector<int> region(static_cast<size_t>(g.num_nodes()), kNoRegion);
    const std::string kind = params.get_string("regions");
    const NodeId loss = g.loss_node();
    if (kind == "model") {
        for (NodeId n = 0; n < loss; ++n) region[static_cast<size_t>(n)] = 0;
    } else if (kind == "blocks") {
        std::map<std::string, int> ids;
        for (NodeId n = 0; n < loss; ++n)
            for (const std::string& t : g.node(n).tags)
                if (is_block_tag(t)) {
                    const auto [it, added] = ids.emplace(t, static_cast<int>(ids.size()));
                    region[static_cast<size_t>(n)] = it->second;
                    break;
                }
    } else {  // tags: a run of consecutive nodes whose first matching tag is the same
        const std::vector<std::string> tags =
            params.has("tags") ? split_list(params.get_string("tags")) : std::vector<std::string>{};
        if (tags.empty())
            throw Error(
                "policy: regions=tags needs tags=a|b, the node tags whose nodes form the "
                "remat regions (e.g. regions=tags,tags=mlp)");
        int next = 0;
        std::optional<size_t> prev;
        for (NodeId n = 0; n < loss; ++n) {
            std::optional<size_t> match;
            for (size_t i = 0; i < tags.size() && !match; ++i)
                if (g.node(n).has_tag(tags[i])) match = i;
            if (match) {
                if (match != prev) ++next;
                region[static_cast<size_t>(n)] = next - 1;
            }
            prev = match;
        }
        if (next == 0)
            throw Error(
                "policy: no node carries any of the tags '" + params.get_string("tags") +
                "' given for regions=tags; see the tags with `rematlab-cli network --network "
                "SPEC` (the JSON lists each node's tags)");
    }
    return region;
}

// --- the schedule ---------------------------------------------------------------------------

}  // namespace

RegionCheckpoint region_checkpoint(const Graph& g, const LivenessTables& t,
                                   const std::vector<int>& region,
                                   const std::vector<uint8_t>* saved, bool build_schedule) {
    const auto n_nodes = static_cast<size_t>(g.num_nodes());
    auto region_of = [&](NodeId n) { return region[static_cast<size_t>(n)]; };

    // kept[n]: node n's forward output serves every later read (never recomputed). Outside
    // regions everything is kept, as under `none`. Inside, a value is kept when the region may
    // save it, or when something outside its region may read it after the forward: a node of
    // another region (it is that region's input) or an outside node whose backward reads it.
    std::vector<uint8_t> kept(n_nodes, 1);
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const int r = region_of(n);
        if (r < 0 || (saved && (*saved)[static_cast<size_t>(n)])) continue;
        bool needed_outside = false;
        for (NodeId c : g.output_of(n).consumers) {
            if (region_of(c) == r) continue;
            if (region_of(c) >= 0) needed_outside = true;
            const Node& cn = g.node(c);
            for (size_t i = 0; i < cn.inputs.size(); ++i)
                if (cn.inputs[i] == g.node(n).output && t.needs_backward[static_cast<size_t>(c)] &&
                    t.reads_input(c, i))
                    needed_outside = true;
        }
        kept[static_cast<size_t>(n)] = needed_outside ? 1 : 0;
    }

    RegionCheckpoint out;
    out.recomputed.assign(n_nodes, 0);
    int regions = 0;
    for (int r : region) regions = std::max(regions, r + 1);
    std::vector<uint8_t> entered(static_cast<size_t>(regions), 0);
    ScheduleBuilder b(g);
    if (build_schedule)
        for (NodeId n = 0; n < g.num_nodes(); ++n) b.compute(n);
    for (NodeId n = g.num_nodes() - 1; n >= 0; --n) {
        if (!t.needs_backward[static_cast<size_t>(n)]) continue;
        const int r = region_of(n);
        if (r >= 0 && !entered[static_cast<size_t>(r)]) {
            entered[static_cast<size_t>(r)] = 1;
            // What the region's backwards read that was not kept, and what recomputing that
            // needs in turn, down to kept values and the region's inputs.
            std::vector<ValueId> stack;
            auto need = [&](ValueId v) {
                const NodeId p = g.value(v).producer;
                if (p == kNoId || region_of(p) != r || kept[static_cast<size_t>(p)] ||
                    out.recomputed[static_cast<size_t>(p)])
                    return;
                out.recomputed[static_cast<size_t>(p)] = 1;
                stack.push_back(v);
            };
            for (NodeId m = 0; m < g.num_nodes(); ++m)
                if (region_of(m) == r && t.needs_backward[static_cast<size_t>(m)])
                    for_each_residual(g, t, m, need);
            while (!stack.empty()) {
                const ValueId v = stack.back();
                stack.pop_back();
                for (ValueId in : g.node(g.value(v).producer).inputs) need(in);
            }
            if (build_schedule)
                for (NodeId m = 0; m < g.num_nodes(); ++m)
                    if (region_of(m) == r && out.recomputed[static_cast<size_t>(m)]) b.compute(m);
        }
        if (build_schedule) b.backward(n);
    }
    if (build_schedule) out.schedule = b.finish();
    return out;
}

namespace {

Schedule policy_schedule(const Graph& g, const std::vector<int>& region, const Policy& policy) {
    const LivenessTables t(g);
    std::vector<uint8_t> saveable_nodes(static_cast<size_t>(g.num_nodes()), 0);
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        saveable_nodes[static_cast<size_t>(n)] = saveable(policy, g.node(n)) ? 1 : 0;
    return region_checkpoint(g, t, region, &saveable_nodes, true).schedule;
}

class PolicyStrategy final : public Strategy {
  public:
    std::string_view name() const override { return "policy"; }
    std::string_view about() const override {
        return "JAX's jax.checkpoint: remat regions (blocks, the model, or tagged nodes) keep "
               "what a saveable policy allows and recompute the rest in the backward";
    }
    ParamSchema schema() const override {
        ParamSpec regions{"regions",
                          ParamType::Choice,
                          "blocks",
                          "remat regions: each block (nodes sharing a blockN tag), the whole "
                          "model (all but the loss), or runs of nodes carrying tags=",
                          {"blocks", "model", "tags"}};
        ParamSpec tags{"tags",
                       ParamType::String,
                       "",
                       "for regions=tags: node tags, a|b; consecutive nodes matching the same tag "
                       "form one region",
                       {}};
        ParamSpec policy{"policy", ParamType::Choice, "dots_saveable",
                         "what a region may save (jax.checkpoint_policies)", policy_choices(true)};
        ParamSpec names{"names",
                        ParamType::String,
                        "",
                        "for save_only_these_names / save_any_names_but_these / "
                        "save_anything_except_these_names: node tags, a|b",
                        {}};
        ParamSpec p1{"policy1", ParamType::Choice, "",
                     "for save_from_both_policies: the first policy", policy_choices(false)};
        ParamSpec p2{"policy2", ParamType::Choice, "",
                     "for save_from_both_policies: the second policy", policy_choices(false)};
        ParamSpec n1{"names1", ParamType::String, "", "names of policy1, a|b", {}};
        ParamSpec n2{"names2", ParamType::String, "", "names of policy2, a|b", {}};
        ParamSpec off{"offload_names",
                      ParamType::String,
                      "",
                      "for save_and_offload_only_these_names: node tags, a|b, whose values are "
                      "saved in host memory (offloaded after their forward, prefetched for the "
                      "backward; solvers/offload_pass.h places the copies)",
                      {}};
        return {regions, tags, policy, names, p1, p2, n1, n2, off};
    }

    // Every policy on the network: for each kind of region the network has (blocks when some
    // node carries a blockN tag, always the whole model), the policies that take no names, then
    // save_only_these_names for each other tag a node of a region carries. everything_saveable
    // is `none` under any regions, so it appears once. Left out: save_any_names_but_these and
    // save_from_both_policies (their combinations of tags are too many to enumerate) and the
    // aliases checkpoint_dots*.
    std::vector<Spec> sweep_range(const Graph& g) const override {
        const NodeId loss = g.loss_node();
        bool blocks = false;
        std::vector<std::string> tags;
        for (NodeId n = 0; n < loss; ++n)
            for (const std::string& t : g.node(n).tags) {
                blocks = blocks || is_block_tag(t);
                if (!is_block_tag(t) && std::find(tags.begin(), tags.end(), t) == tags.end())
                    tags.push_back(t);
            }
        std::sort(tags.begin(), tags.end());
        std::vector<Spec> out;
        auto add = [&](const std::string& regions, const std::string& policy,
                       const std::string& names) {
            Spec s{"policy", {{"regions", regions}, {"policy", policy}}};
            if (!names.empty()) s.args.emplace_back("names", names);
            out.push_back(std::move(s));
        };
        add("model", "everything_saveable", "");
        for (const std::string regions : {"blocks", "model"}) {
            if (regions == "blocks" && !blocks) continue;
            for (const char* policy :
                 {"nothing_saveable", "dots_with_no_batch_dims_saveable", "dots_saveable"})
                add(regions, policy, "");
            for (const std::string& t : tags) add(regions, "save_only_these_names", t);
            // Korthikanti et al.'s selective recomputation, where a preset tags the attention core
            if (regions == "blocks" &&
                std::find(tags.begin(), tags.end(), "attn_core") != tags.end())
                add(regions, "save_anything_except_these_names", "attn_core");
        }
        return out;
    }

    Plan plan(const Graph& g, const CostModel&, const ParamValues& params) const override {
        const Policy policy = read_policy(g, params);
        const std::vector<int> region = find_regions(g, params);
        Plan p;
        p.status = PlanStatus::Heuristic;
        p.schedule = policy_schedule(g, region, policy);
        for (const SavedResidual& r : saved_residuals(g, p.schedule).rows)
            if (r.source != ResidualSource::Argument)
                if (auto n = g.find_node(r.value)) p.checkpoints.push_back(*n);
        if (policy.kind == PolicyKind::OffloadNames || policy.kind == PolicyKind::OffloadDots) {
            // The saved values the policy offloads, across their widest gap (forward to
            // backward); one whose gap holds too few kernels to hide a copy stays on the device.
            std::vector<OffloadGap> gaps;
            for (const OffloadGap& gap : offload_gaps(g, p.schedule)) {
                const NodeId n = g.value(gap.value).producer;
                if (n != kNoId && offloaded(policy, g.node(n))) gaps.push_back(gap);
            }
            int asked = 0;
            for (const Node& n : g.nodes()) asked += offloaded(policy, n) ? 1 : 0;
            p.schedule = insert_offloads(g, p.schedule, gaps);
            p.message = std::to_string(gaps.size()) + " of the " + std::to_string(asked) +
                        " values the policy offloads are offloaded (the others have no gap "
                        "between their reads wide enough to hide a copy)";
        }
        return p;
    }
};

std::string argument_row_origin(const std::string& name) {
    return "from the argument " + name;
}

}  // namespace

// --- saved residuals ------------------------------------------------------------------------

SavedResiduals saved_residuals(const Graph& g, const Schedule& s, const ResidualOptions& opt) {
    const LivenessTables t(g);
    const auto& code = s.code;
    size_t cut = code.size();  // where the backward starts
    for (size_t i = 0; i < code.size(); ++i)
        if (code[i].kind == InstrKind::Backward) {
            cut = i;
            break;
        }
    const bool skip_loss = !opt.include_loss && cut < code.size();
    if (skip_loss) {
        ++cut;  // past the loss's Backward and the Frees of what only it read
        while (cut < code.size() && code[cut].kind == InstrKind::Free) ++cut;
    }

    std::vector<uint8_t> live(static_cast<size_t>(g.num_values()), 0);
    for (size_t i = 0; i < cut; ++i) {
        const Instruction& ins = code[i];
        if (ins.kind == InstrKind::Compute)
            live[static_cast<size_t>(g.node(ins.target).output)] = 1;
        else if (ins.kind == InstrKind::Free)
            live[static_cast<size_t>(ins.target)] = 0;
    }
    std::vector<uint8_t> input_read(static_cast<size_t>(g.num_values()), 0);
    std::vector<uint8_t> backward_later(static_cast<size_t>(g.num_nodes()), 0);
    for (size_t i = cut; i < code.size(); ++i) {
        const Instruction& ins = code[i];
        if (targets_value(ins.kind)) continue;  // a Free, or a copy (offload)
        const Node& n = g.node(ins.target);
        const auto ni = static_cast<size_t>(ins.target);
        if (ins.kind == InstrKind::Compute) {
            for (ValueId in : n.inputs) input_read[static_cast<size_t>(in)] = 1;
            continue;
        }
        backward_later[ni] = 1;
        for (size_t k = 0; k < n.inputs.size(); ++k)
            if (t.reads_input(ins.target, k)) input_read[static_cast<size_t>(n.inputs[k])] = 1;
    }

    SavedResiduals out;
    auto add = [&](std::string value, DType dtype, const Shape& shape, uint64_t bytes,
                   ResidualSource source, std::string origin) {
        out.rows.push_back(
            {std::move(value), format_type(dtype, shape), bytes, source, std::move(origin)});
        out.total_bytes += bytes;
    };
    for (const Param& p : g.params())
        if (backward_later[static_cast<size_t>(p.owner)])
            add(p.name, DType::F32, p.shape, p.bytes, ResidualSource::Argument,
                argument_row_origin(p.name));
    for (ValueId v : g.inputs())
        if (input_read[static_cast<size_t>(v)]) {
            const Value& val = g.value(v);
            add(val.name, val.dtype, val.shape, val.bytes, ResidualSource::Argument,
                argument_row_origin(val.name));
        }
    for (const Node& n : g.nodes()) {
        if (!live[static_cast<size_t>(n.output)]) continue;
        const Value& val = g.value(n.output);
        const auto name = std::find_if(opt.names.begin(), opt.names.end(),
                                       [&](const std::string& t) { return n.has_tag(t); });
        if (name != opt.names.end())
            add(n.name, val.dtype, val.shape, val.bytes, ResidualSource::Named,
                "named '" + *name + "' from " + n.name);
        else
            add(n.name, val.dtype, val.shape, val.bytes, ResidualSource::Output,
                "output of " + std::string(op_name(n.op)) + " from " + n.name);
    }
    return out;
}

std::string format_saved_residuals(const SavedResiduals& r) {
    size_t width = 0;
    for (const SavedResidual& row : r.rows) width = std::max(width, row.type.size());
    std::string out;
    for (const SavedResidual& row : r.rows)
        out += row.type + std::string(width - row.type.size() + 1, ' ') + row.origin + "\n";
    out += "total " + std::to_string(r.total_bytes) + " bytes (" + format_bytes(r.total_bytes) +
           ") in " + std::to_string(r.rows.size()) + " residuals\n";
    return out;
}

std::vector<std::string> checkpoint_names(const Spec& strategy) {
    std::vector<std::string> out;
    if (strategy.name != "policy") return out;
    for (const auto& [key, value] : strategy.args)
        if (key == "names" || key == "names1" || key == "names2" || key == "offload_names")
            for (std::string& n : split_list(value))
                if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
    return out;
}

std::unique_ptr<Strategy> make_policy_strategy() {
    return std::make_unique<PolicyStrategy>();
}

}  // namespace rl
