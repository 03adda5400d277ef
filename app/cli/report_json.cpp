// The --json output: one object per evaluation, one per line.
#include <nlohmann/json.hpp>

#include "cli/report.h"
#include "engine/networks/slice_narrowing.h"

namespace rl::cli {

namespace {

nlohmann::json common(const ReportContext& ctx, const std::string& strategy) {
    nlohmann::json j;
    j["network"] = ctx.network;
    j["strategy"] = strategy;
    j["params"] = ctx.graph.param_bytes();
    j["narrowed_nodes"] = narrowed_node_count(ctx.graph);
    j["threads"] = ctx.threads;
    j["repeat"] = ctx.repeat;
    j["cap"] = ctx.cap;
    j["cost_model"] = ctx.cost_model;
    if (!ctx.gemm.empty()) j["gemm"] = ctx.gemm;
    if (!ctx.gemm_small.empty()) j["gemm_small"] = ctx.gemm_small;
    if (!ctx.gemm_thin.empty()) j["gemm_thin"] = ctx.gemm_thin;
    if (!ctx.gemm.empty()) {
        nlohmann::json moved = nlohmann::json::object();
        for (const auto& [lib, count] : ctx.gemm_moved) moved[lib] = count;
        j["gemm_per_shape"] = {
            {"on", ctx.gemm_per_shape}, {"shapes", ctx.gemm_shapes}, {"moved", moved}};
    }
    return j;
}

std::string describe_at(const Graph& g, const Schedule& s, int32_t index) {
    if (index < 0 || static_cast<size_t>(index) >= s.size()) return {};
    return describe(g, s.code[static_cast<size_t>(index)]);
}

}  // namespace

std::string evaluation_json(const ReportContext& ctx, const Evaluation& e,
                            const Evaluation* baseline, const PerLayerReport* per_layer) {
    const Graph& g = ctx.graph;
    const Plan& plan = e.plan;
    const Simulation& sim = e.predicted;
    nlohmann::json j = common(ctx, e.strategy);
    j["valid"] = schedule_valid(g, plan.schedule);
    j["status"] = plan_status_name(plan.status);
    j["solve_ms"] = plan.solve_ms;
    if (plan.budget) j["budget"] = *plan.budget;
    if (plan.min_feasible_budget) j["min_feasible_budget"] = *plan.min_feasible_budget;
    if (!plan.method.empty()) j["method"] = plan.method;
    if (!plan.message.empty()) j["plan_message"] = plan.message;  // how it was found, or not
    if (plan.lower_bound_ms) j["lower_bound_ms"] = *plan.lower_bound_ms;
    if (plan.lower_bound_ms && !plan.bound_class.empty()) j["bound_class"] = plan.bound_class;
    if (plan.gap) j["gap"] = *plan.gap;
    // The nodes whose outputs the plan keeps as segment boundaries (sqrt-n, periodic, ...), so
    // another framework can checkpoint the same segments.
    nlohmann::json checkpoints = nlohmann::json::array();
    for (NodeId n : plan.checkpoints) checkpoints.push_back(g.node(n).name);
    j["checkpoints"] = std::move(checkpoints);
    j["instructions"] = plan.schedule.size();
    j["computes"] = sim.computes;
    j["recomputes"] = sim.recomputes;
    j["backwards"] = sim.backwards;
    j["frees"] = sim.frees;
    j["dtype"] = std::string(dtype_name(g.float_dtype()));
    j["predicted_peak_bytes"] = sim.peak_bytes;
    j["predicted_activation_peak_bytes"] = sim.activation_peak_bytes();
    j["predicted_forward_ms"] = sim.forward_ms;
    j["predicted_recompute_ms"] = sim.recompute_ms;
    j["predicted_backward_ms"] = sim.backward_ms;
    j["predicted_total_ms"] = sim.total_ms();
    // Offload (engine/schedule.h): the host pool and the copies. Zero without offload.
    j["host_peak_bytes"] = sim.host_peak_bytes;
    j["offloaded_bytes"] = sim.offloaded_bytes;
    j["prefetched_bytes"] = sim.prefetched_bytes;
    j["predicted_transfer_ms"] = sim.transfer_ms;
    j["predicted_stall_ms"] = sim.stall_ms;
    j["peak_instruction_index"] = sim.peak_instruction;
    j["peak_instruction"] = describe_at(g, plan.schedule, sim.peak_instruction);
    if (e.predicted_executed) {  // bf16/f16 network executed as its f32 copy
        j["executed_dtype"] = "f32";
        j["predicted_executed_peak_bytes"] = e.predicted_executed->peak_bytes;
        j["predicted_executed_activation_peak_bytes"] =
            e.predicted_executed->activation_peak_bytes();
    }
    if (e.measured) {
        const Execution& m = *e.measured;
        j["measured_peak_bytes"] = m.peak_bytes;
        j["measured_peak_instruction"] = describe_at(g, plan.schedule, m.peak_instruction);
        j["activation_peak_bytes"] = m.activation_peak_bytes();
        j["forward_ms"] = m.forward_ms;
        j["recompute_ms"] = m.recompute_ms;
        j["backward_ms"] = m.backward_ms;
        j["total_ms"] = m.total_ms;
        j["cpu_ms"] = m.cpu_ms;
        j["measured_host_peak_bytes"] = m.host_peak_bytes;
        j["measured_offloaded_bytes"] = m.offloaded_bytes;
        j["transfer_ms"] = m.transfer_ms;
        j["stall_ms"] = m.stall_ms;
        if (e.times) {  // the spread over the timed repeats (analysis/measure.h)
            const MeasuredTimes& t = *e.times;
            j["timed_repeats"] = t.total.samples;
            j["spread"] = "min-max";
            const std::pair<const char*, const Spread*> spreads[] = {{"forward_ms", &t.forward},
                                                                     {"recompute_ms", &t.recompute},
                                                                     {"backward_ms", &t.backward},
                                                                     {"total_ms", &t.total},
                                                                     {"cpu_ms", &t.cpu}};
            for (const auto& [name, sp] : spreads) {
                j[std::string(name) + "_min"] = sp->min;
                j[std::string(name) + "_max"] = sp->max;
            }
            if (baseline && baseline->times) {
                const Overhead o = overhead_against(t.total, baseline->times->total);
                j["overhead_percent"] = o.percent;
                j["overhead_within_noise"] = o.within_noise;
            }
        }
        j["loss"] = m.loss;
        j["grads_bitwise_equal_to_none"] = e.grads_bitwise_equal_to_none;
        j["max_abs_grad_diff_vs_none"] = e.max_abs_grad_diff_vs_none;
    }
    if (per_layer) {
        // Bytes each block's nodes leave live for the backward (before the first Backward).
        nlohmann::json layers = nlohmann::json::array();
        for (const LayerActivations& l : per_layer->layers) {
            nlohmann::json kept = nlohmann::json::array();
            for (const KeptValue& k : l.kept)
                kept.push_back({{"value", g.value(k.value).name}, {"bytes", k.bytes}});
            layers.push_back({{"block", l.block}, {"bytes", l.bytes}, {"kept", std::move(kept)}});
        }
        j["per_layer"] = {{"layers", std::move(layers)},
                          {"outside_blocks_bytes", per_layer->outside_blocks_bytes},
                          {"before_instruction", per_layer->first_backward}};
        if (!per_layer->layers.empty())  // one block's worth: the middle block's
            j["per_layer_bytes"] = per_layer->layers[per_layer->layers.size() / 2].bytes;
    }
    if (e.device_memory) {  // the CUDA driver's view, beside the tracking allocator's peak
        const DeviceMemory& d = *e.device_memory;
        j["device"] = d.device;
        j["driver_peak_delta_bytes"] = d.driver_peak_delta();
        j["device_reserved_peak_bytes"] = d.reserved_peak;
        j["device_overhead_bytes"] = d.overhead;
    }
    return j.dump();
}

std::string failure_json(const ReportContext& ctx, const CompareRow& row) {
    nlohmann::json j = common(ctx, row.strategy);
    j["valid"] = false;
    j["status"] = row.status;
    j["error"] = row.message;
    j["exit_code"] = row.exit_code;
    if (row.min_feasible_budget) j["min_feasible_budget"] = *row.min_feasible_budget;
    return j.dump();
}

}  // namespace rl::cli
