#include "engine/liveness.h"

#include "engine/errors.h"
#include "engine/ops/op.h"

namespace rl {

const char* category_name(Category c) {
    switch (c) {
        case Category::Parameters:
            return "parameters";
        case Category::ParamGrads:
            return "parameter gradients";
        case Category::Inputs:
            return "inputs";
        case Category::Activations:
            return "activations";
        case Category::ActivationGrads:
            return "activation gradients";
        case Category::Workspace:
            return "workspace";
        case Category::Count:
            break;
    }
    return "?";
}

TiedScratch tied_scratch(const Graph& g, NodeId n, uint64_t op_workspace) {
    constexpr uint64_t kAlign = 64;
    auto aligned = [](uint64_t b) { return (b + kAlign - 1) / kAlign * kAlign; };
    const Node& node = g.node(n);
    TiedScratch t;
    t.offset.assign(node.params.size(), -1);
    t.total = op_workspace;
    for (size_t k = 0; k < node.params.size(); ++k) {
        const Param& p = g.param(node.params[k]);
        if (p.owner == n) continue;
        t.total = aligned(t.total);
        t.offset[k] = static_cast<int64_t>(t.total);
        t.total += p.bytes;
    }
    return t;
}

LivenessTables::LivenessTables(const Graph& g) {
    const auto n_nodes = static_cast<size_t>(g.num_nodes());
    fwd_workspace.resize(n_nodes);
    bwd_workspace.resize(n_nodes);
    bwd_op_workspace.resize(n_nodes);
    residual_inputs.resize(n_nodes);
    residual_output.resize(n_nodes);
    needs_backward.resize(n_nodes);
    in_place_inputs.assign(n_nodes, 0);
    grad_contributions.assign(static_cast<size_t>(g.num_values()), 0);
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const Node& node = g.node(n);
        const OpDef& def = op_def(node.op);
        const auto i = static_cast<size_t>(n);
        fwd_workspace[i] = def.fwd_workspace ? def.fwd_workspace(g, node) : 0;
        bwd_op_workspace[i] = def.bwd_workspace ? def.bwd_workspace(g, node) : 0;
        bwd_workspace[i] = tied_scratch(g, n, bwd_op_workspace[i]).total;
        const Residuals r = def.residuals(g, node);
        residual_inputs[i] = r.inputs;
        residual_output[i] = r.output;
        needs_backward[i] = g.needs_backward(n);
        const Value& out = g.value(node.output);
        for (size_t k = 0; k < node.inputs.size(); ++k) {
            const Value& in = g.value(node.inputs[k]);
            if (((def.in_place_inputs >> k) & 1u) && !in.is_input() && in.bytes == out.bytes &&
                in.dtype == out.dtype)
                in_place_inputs[i] |= 1u << k;
        }
        if (needs_backward[i]) {
            ++backward_count;
            for (ValueId in : node.inputs)
                if (g.value(in).requires_grad) ++grad_contributions[static_cast<size_t>(in)];
        }
    }
}

Liveness::Liveness(const Graph& g, const LivenessTables& t, const Schedule& s, bool in_place)
    : g_(g),
      t_(t),
      s_(s),
      in_place_(s.size(), -1),
      act_live_(static_cast<size_t>(g.num_values()), 0),
      grad_live_(static_cast<size_t>(g.num_values()), 0),
      backwarded_(static_cast<size_t>(g.num_nodes()), 0),
      handed_over_(static_cast<size_t>(g.num_values()), 0),
      side_(static_cast<size_t>(g.num_values()), 0),
      computes_(static_cast<size_t>(g.num_nodes()), 0),
      pending_(t.grad_contributions),
      last_backward_(g.num_nodes()) {
    size_t max_inputs = 0;
    for (const Node& n : g.nodes()) max_inputs = std::max(max_inputs, n.inputs.size());
    accumulate_.assign(max_inputs, 0);
    // The in-place rule (liveness.h): a pointwise Compute takes over the buffer of the first
    // eligible input that the run of Frees right after it releases. Decided here, from the
    // schedule alone, so every walk of one schedule makes the same choices.
    for (size_t i = 0; in_place && i < s.size(); ++i) {
        const Instruction& ins = s.code[i];
        if (ins.kind != InstrKind::Compute || ins.target < 0 || ins.target >= g.num_nodes())
            continue;
        const uint32_t mask = t.in_place_inputs[static_cast<size_t>(ins.target)];
        const Node& node = g.node(ins.target);
        for (size_t k = 0; mask && k < node.inputs.size() && in_place_[i] < 0; ++k) {
            if (!((mask >> k) & 1u)) continue;
            for (size_t j = i + 1; j < s.size() && s.code[j].kind == InstrKind::Free; ++j)
                if (s.code[j].target == node.inputs[k]) {
                    in_place_[i] = static_cast<int8_t>(k);
                    break;
                }
        }
    }
}

void Liveness::begin(MemoryVisitor& v) {
    for (ParamId p = 0; p < g_.num_params(); ++p)
        v.allocate({Category::Parameters, p}, g_.param(p).bytes);
    for (ValueId in : g_.inputs()) {
        act_live_[static_cast<size_t>(in)] = 1;
        v.allocate({Category::Inputs, in}, g_.value(in).bytes);
    }
}

void Liveness::resume(const LiveStart& start, MemoryVisitor& v) {
    begin(v);
    if (start.backwards_done_from != kNoId) {
        for (NodeId n = g_.num_nodes() - 1; n >= start.backwards_done_from && n >= 0; --n) {
            const auto ni = static_cast<size_t>(n);
            if (!t_.needs_backward[ni]) continue;
            backwarded_[ni] = 1;
            ++backwards_done_;
            last_backward_ = n;
            for (ValueId in : g_.node(n).inputs)
                if (g_.value(in).requires_grad) --pending_[static_cast<size_t>(in)];
            for (ParamId p : g_.node(n).params)
                v.allocate({Category::ParamGrads, p}, g_.param(p).bytes);
        }
        // A gradient is live from its first accumulation until its producer's Backward.
        for (ValueId x = 0; x < g_.num_values(); ++x) {
            const auto xi = static_cast<size_t>(x);
            const Value& val = g_.value(x);
            if (!val.requires_grad || pending_[xi] == t_.grad_contributions[xi]) continue;
            if (val.producer != kNoId && backwarded_[static_cast<size_t>(val.producer)]) continue;
            grad_live_[xi] = 1;
            v.allocate({Category::ActivationGrads, x}, val.bytes);
        }
    }
    for (ValueId a : start.activations) {
        const auto ai = static_cast<size_t>(a);
        if (act_live_[ai]) continue;  // a graph input, or named twice
        act_live_[ai] = 1;
        v.allocate({Category::Activations, a}, g_.value(a).bytes);
    }
}

namespace {
std::string quoted(const std::string& s) {
    return "'" + s + "'";
}
std::string or_else(std::string why, const char* otherwise) {
    return why.empty() ? std::string(otherwise) : why;
}
}  // namespace

// Why v cannot be read now when it is on the host or in flight; "" otherwise (the caller says
// why then).
std::string Liveness::not_readable(ValueId v) const {
    switch (static_cast<Side>(side_[static_cast<size_t>(v)])) {
        case Side::Host:
            return ", which is offloaded to the host; prefetch it and wait for the copy first";
        case Side::ToDevice:
            return ", whose prefetch has not completed; wait for it first";
        case Side::Device:
        case Side::ToHost:
            break;
    }
    return {};
}

void Liveness::step_copy(long index, const Instruction& ins, MemoryVisitor& v) {
    const ValueId target = ins.target;
    const char* verb = ins.kind == InstrKind::Offload    ? "offload "
                       : ins.kind == InstrKind::Prefetch ? "prefetch "
                                                         : "wait ";
    if (target < 0 || target >= g_.num_values())
        throw ScheduleError(index, std::string(verb) + "of value id " + std::to_string(target) +
                                       ", which does not exist");
    const Value& val = g_.value(target);
    const auto ti = static_cast<size_t>(target);
    const auto side = static_cast<Side>(side_[ti]);
    const std::string what = verb + quoted(val.name);
    if (val.is_input())
        throw ScheduleError(index, what + ": graph inputs stay on the device for the whole step");
    switch (ins.kind) {
        case InstrKind::Offload:
            if (side == Side::ToHost || side == Side::Host)
                throw ScheduleError(index, what + ": it is already offloaded");
            if (side == Side::ToDevice)
                throw ScheduleError(index, what + ": its prefetch has not completed");
            if (!act_live_[ti]) throw ScheduleError(index, what + ": it is not live on the device");
            side_[ti] = static_cast<uint8_t>(Side::ToHost);
            v.host_allocate(target, val.bytes);
            v.begin_copy(ins, target, val.bytes);
            return;
        case InstrKind::Prefetch:
            if (side != Side::Host)
                throw ScheduleError(
                    index, what + (side == Side::ToHost ? ": its offload has not completed; wait "
                                                          "for it first"
                                   : side == Side::ToDevice
                                       ? ": it is already being prefetched"
                                       : ": it is not on the host (never offloaded)"));
            side_[ti] = static_cast<uint8_t>(Side::ToDevice);
            v.allocate({Category::Activations, target}, val.bytes);
            v.begin_copy(ins, target, val.bytes);
            return;
        case InstrKind::Wait:
            if (side == Side::ToHost) {
                v.wait_copy(ins, target);
                side_[ti] = static_cast<uint8_t>(Side::Host);
                act_live_[ti] = 0;
                v.release({Category::Activations, target}, val.bytes);
            } else if (side == Side::ToDevice) {
                v.wait_copy(ins, target);
                side_[ti] = static_cast<uint8_t>(Side::Device);
                act_live_[ti] = 1;
                v.host_release(target, val.bytes);
            } else {
                throw ScheduleError(index, what + ": no copy of it is in flight");
            }
            return;
        default:
            return;
    }
}

void Liveness::step(long index, MemoryVisitor& v) {
    const Instruction& ins = s_.code[static_cast<size_t>(index)];
    const int32_t target = ins.target;
    if (ins.kind == InstrKind::Free) {
        if (target < 0 || target >= g_.num_values())
            throw ScheduleError(
                index, "free of value id " + std::to_string(target) + ", which does not exist");
        const Value& val = g_.value(target);
        if (val.is_input())
            throw ScheduleError(
                index, "free " + quoted(val.name) + ": graph inputs stay live for the whole step");
        const auto ti = static_cast<size_t>(target);
        switch (static_cast<Side>(side_[ti])) {
            case Side::Device:
                break;
            case Side::Host:
                side_[ti] = 0;
                v.host_release(target, val.bytes);
                return;
            case Side::ToHost:
                throw ScheduleError(index, "free " + quoted(val.name) +
                                               ": its offload has not completed; wait for it "
                                               "(its Wait releases the device buffer)");
            case Side::ToDevice:
                throw ScheduleError(index, "free " + quoted(val.name) +
                                               ": its prefetch has not completed; wait for it "
                                               "first");
        }
        if (handed_over_[static_cast<size_t>(target)]) {
            // Its buffer went to the output of the in-place Compute just before: nothing to free.
            handed_over_[static_cast<size_t>(target)] = 0;
            return;
        }
        if (!act_live_[static_cast<size_t>(target)]) {
            const bool never = computes_[static_cast<size_t>(val.producer)] == 0;
            throw ScheduleError(
                index, "free " + quoted(val.name) + ": " +
                           (never ? "it was never computed" : "it is not live (double free)"));
        }
        act_live_[static_cast<size_t>(target)] = 0;
        v.release({Category::Activations, target}, val.bytes);
        return;
    }
    if (is_copy(ins.kind)) {
        step_copy(index, ins, v);
        return;
    }
    if (target < 0 || target >= g_.num_nodes())
        throw ScheduleError(index, "node id " + std::to_string(target) + " does not exist");
    const Node& node = g_.node(target);
    const auto ni = static_cast<size_t>(target);
    const Value& out = g_.value(node.output);

    if (ins.kind == InstrKind::Compute) {
        for (ValueId in : node.inputs)
            if (!act_live_[static_cast<size_t>(in)])
                throw ScheduleError(index, "compute " + quoted(node.name) + ": its input " +
                                               quoted(g_.value(in).name) +
                                               or_else(not_readable(in),
                                                       " is not live (never computed, or "
                                                       "freed)"));
        if (act_live_[static_cast<size_t>(node.output)])
            throw ScheduleError(index, "compute " + quoted(node.name) +
                                           ": its output is already live; free it before "
                                           "computing it again");
        if (side_[static_cast<size_t>(node.output)] != 0)
            throw ScheduleError(index, "compute " + quoted(node.name) +
                                           ": its output is held on the host (offloaded) or in "
                                           "flight; prefetch it, or free the host copy first");
        act_live_[static_cast<size_t>(node.output)] = 1;
        const int in_place = in_place_[static_cast<size_t>(index)];
        if (in_place >= 0) {
            const ValueId from = node.inputs[static_cast<size_t>(in_place)];
            act_live_[static_cast<size_t>(from)] = 0;
            handed_over_[static_cast<size_t>(from)] = 1;
            v.hand_over({Category::Activations, from}, {Category::Activations, node.output},
                        out.bytes);
        } else {
            v.allocate({Category::Activations, node.output}, out.bytes);
        }
        const uint64_t ws = t_.fwd_workspace[ni];
        if (ws) v.allocate({Category::Workspace, target}, ws);
        in_place_now_ = in_place;
        v.run_kernel(ins, computes_[ni] > 0);
        in_place_now_ = -1;
        if (ws) v.release({Category::Workspace, target}, ws);
        ++computes_[ni];
        return;
    }

    // Backward
    if (!t_.needs_backward[ni])
        throw ScheduleError(index, "backward " + quoted(node.name) +
                                       ": no parameter lies upstream of it, so it has no backward");
    if (backwarded_[ni])
        throw ScheduleError(index, "backward " + quoted(node.name) + " runs a second time");
    if (target >= last_backward_)
        throw ScheduleError(index, "backward " + quoted(node.name) +
                                       " is out of the canonical order: backwards run in "
                                       "decreasing node order, and " +
                                       quoted(g_.node(last_backward_).name) + " already ran");
    if (pending_[static_cast<size_t>(node.output)] != 0) {
        std::string missing;
        for (NodeId c : out.consumers)
            if (!backwarded_[static_cast<size_t>(c)]) {
                missing = g_.node(c).name;
                break;
            }
        throw ScheduleError(index, "backward " + quoted(node.name) +
                                       ": its gradient is incomplete; consumer " + quoted(missing) +
                                       " has not run its backward");
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
        const ValueId in = node.inputs[i];
        if (t_.reads_input(target, i) && !act_live_[static_cast<size_t>(in)])
            throw ScheduleError(
                index, "backward " + quoted(node.name) + " needs its input " +
                           quoted(g_.value(in).name) +
                           or_else(not_readable(in), ", which is not live; recompute it first"));
    }
    if (t_.residual_output[ni] && !act_live_[static_cast<size_t>(node.output)])
        throw ScheduleError(index, "backward " + quoted(node.name) + " needs its own output" +
                                       or_else(not_readable(node.output),
                                               ", which is not live; recompute it first"));

    if (target == g_.loss_node()) {
        grad_live_[static_cast<size_t>(node.output)] = 1;
        v.allocate({Category::ActivationGrads, node.output}, out.bytes);  // the seed dL/dL = 1
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
        const ValueId in = node.inputs[i];
        const auto vi = static_cast<size_t>(in);
        accumulate_[i] = 0;
        if (!g_.value(in).requires_grad) continue;
        if (grad_live_[vi]) {
            accumulate_[i] = 1;
        } else {
            grad_live_[vi] = 1;
            v.allocate({Category::ActivationGrads, in}, g_.value(in).bytes);
        }
        --pending_[vi];
    }
    for (ParamId p : node.params)  // a tied parameter's earlier readers add to the owner's
        if (g_.param(p).owner == target) v.allocate({Category::ParamGrads, p}, g_.param(p).bytes);
    const uint64_t ws = t_.bwd_workspace[ni];
    if (ws) v.allocate({Category::Workspace, target}, ws);
    v.run_kernel(ins, false);
    if (ws) v.release({Category::Workspace, target}, ws);
    grad_live_[static_cast<size_t>(node.output)] = 0;
    v.release({Category::ActivationGrads, node.output}, out.bytes);
    backwarded_[ni] = 1;
    last_backward_ = target;
    ++backwards_done_;
}

void Liveness::end(long index, MemoryVisitor& v) {
    for (ValueId x = 0; x < g_.num_values(); ++x) {
        const auto side = static_cast<Side>(side_[static_cast<size_t>(x)]);
        if (side == Side::ToHost || side == Side::ToDevice)
            throw ScheduleError(
                index, "the schedule ends with the " +
                           std::string(side == Side::ToHost ? "offload" : "prefetch") + " of " +
                           quoted(g_.value(x).name) + " in flight; wait for it");
    }
    if (backwards_done_ != t_.backward_count) {
        for (NodeId n = g_.num_nodes() - 1; n >= 0; --n)
            if (t_.needs_backward[static_cast<size_t>(n)] && !backwarded_[static_cast<size_t>(n)])
                throw ScheduleError(
                    index, "the schedule ends without the backward of " + quoted(g_.node(n).name));
    }
    for (const Node& node : g_.nodes())
        if (act_live_[static_cast<size_t>(node.output)]) {
            act_live_[static_cast<size_t>(node.output)] = 0;
            v.release({Category::Activations, node.output}, g_.value(node.output).bytes);
        }
    for (ValueId x = 0; x < g_.num_values(); ++x)
        if (side_[static_cast<size_t>(x)] == static_cast<uint8_t>(Side::Host)) {
            side_[static_cast<size_t>(x)] = 0;
            v.host_release(x, g_.value(x).bytes);
        }
    for (ParamId p = 0; p < g_.num_params(); ++p)
        if (backwarded_[static_cast<size_t>(g_.param(p).owner)])
            v.release({Category::ParamGrads, p}, g_.param(p).bytes);
    for (ValueId in : g_.inputs()) v.release({Category::Inputs, in}, g_.value(in).bytes);
    for (ParamId p = 0; p < g_.num_params(); ++p)
        v.release({Category::Parameters, p}, g_.param(p).bytes);
}

}  // namespace rl
