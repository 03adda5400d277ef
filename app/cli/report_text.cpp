// Human output: the summary of one evaluation and the side-by-side table of `compare`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli/report.h"
#include "engine/errors.h"
#include "engine/gemm.h"
#include "engine/networks/slice_narrowing.h"
#include "engine/units.h"

namespace rl::cli {

namespace {

// "eigen", or "openblas (blis under 16 MFLOP; eigen thin)" when small or thin products run on
// another library, and "eigen (blis for 7 of 33 shapes by timing)" when the per-shape choice
// moved some.
std::string gemm_text(const ReportContext& ctx) {
    std::vector<std::string> others;
    if (!ctx.gemm_small.empty() && ctx.gemm_small != ctx.gemm)
        others.push_back(ctx.gemm_small + " under " + small_gemm_label());
    if (!ctx.gemm_thin.empty() && ctx.gemm_thin != ctx.gemm)
        others.push_back(ctx.gemm_thin + " thin");
    for (const auto& [lib, count] : ctx.gemm_moved)
        others.push_back(lib + " for " + std::to_string(count) + " of " +
                         std::to_string(ctx.gemm_shapes) + " shapes by timing");
    std::string text = ctx.gemm;
    for (size_t i = 0; i < others.size(); ++i) text += (i ? "; " : " (") + others[i];
    return others.empty() ? text : text + ")";
}

// Each row's message (why it failed or does not apply), under the table after a blank line.
void append_messages(std::ostream& out, const std::vector<CompareRow>& rows) {
    bool header = false;
    for (const CompareRow& r : rows) {
        if (r.message.empty()) continue;
        if (!header) out << '\n';
        header = true;
        out << r.strategy << ": " << r.message << '\n';
    }
}

std::string fixed(double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

std::string ms(double v) {
    return fixed(v, v < 10 ? 3 : v < 1000 ? 2 : 1);
}

// Terminal columns taken by a UTF-8 string (every code point counts one; our marks are narrow).
size_t display_width(const std::string& s) {
    return static_cast<size_t>(std::count_if(
        s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string describe_at(const Graph& g, const Schedule& s, int32_t index) {
    if (index < 0 || static_cast<size_t>(index) >= s.size()) return "outside any instruction";
    // Appended piecewise: g++ 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
    std::string text = "#";
    text += std::to_string(index);
    text += ' ';
    text += describe(g, s.code[static_cast<size_t>(index)]);
    return text;
}

class Table {
  public:
    explicit Table(std::vector<std::string> header, std::vector<bool> left_aligned)
        : left_(std::move(left_aligned)) {
        rows_.push_back(std::move(header));
    }
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

    std::string render() const {
        std::vector<size_t> width(rows_.front().size(), 0);
        for (const auto& r : rows_)
            for (size_t c = 0; c < r.size(); ++c)
                width[c] = std::max(width[c], display_width(r[c]));
        std::ostringstream out;
        auto line = [&](const std::vector<std::string>& r) {
            std::string text;
            for (size_t c = 0; c < r.size(); ++c) {
                const std::string pad(width[c] - display_width(r[c]), ' ');
                if (c > 0) text += "  ";
                text += left_[c] ? r[c] + pad : pad + r[c];
            }
            while (!text.empty() && text.back() == ' ') text.pop_back();
            out << text << '\n';
        };
        line(rows_.front());
        size_t total = 0;
        for (size_t w : width) total += w;
        out << std::string(total + 2 * (width.size() - 1), '-') << '\n';
        for (size_t i = 1; i < rows_.size(); ++i) line(rows_[i]);
        return out.str();
    }

  private:
    std::vector<bool> left_;
    std::vector<std::vector<std::string>> rows_;
};

// compare on a plan-only network (an abstract benchmark graph): nothing executes, so the table
// holds the predicted figures only; times are the graph's durations in its own units.
std::string predicted_table(const ReportContext& ctx, const std::vector<CompareRow>& rows,
                            const Evaluation* baseline) {
    const Graph& g = ctx.graph;
    std::ostringstream out;
    out << ctx.network << ": " << g.num_nodes()
        << " nodes, an abstract benchmark graph (plan-only: no kernels, so predicted figures "
           "only); times are its durations, in the file's own units\n\n";
    Table t({"strategy", "status", "computes", "recomputes", "pred. peak", "peak bytes", "fwd",
             "recomp", "total", "TDI", "vs none peak"},
            {true, true, false, false, false, false, false, false, false, false, false});
    for (const CompareRow& r : rows) {
        if (!r.eval) {
            t.add({r.strategy, r.status, "-", "-", "-", "-", "-", "-", "-", "-", "-"});
            continue;
        }
        const Simulation& sim = r.eval->predicted;
        const double base = sim.forward_ms;
        std::string vs = "-";
        if (baseline && baseline->predicted.peak_bytes > 0)
            vs = &*r.eval == baseline
                     ? std::string("baseline")
                     : fixed(100.0 * static_cast<double>(sim.peak_bytes) /
                                 static_cast<double>(baseline->predicted.peak_bytes),
                             1) +
                           " %";
        t.add({r.strategy, r.status, std::to_string(sim.computes), std::to_string(sim.recomputes),
               format_bytes(sim.peak_bytes), std::to_string(sim.peak_bytes), ms(sim.forward_ms),
               ms(sim.recompute_ms), ms(sim.total_ms()),
               fixed(base > 0 ? 100.0 * sim.recompute_ms / base : 0.0, 2) + " %", vs});
    }
    out << t.render();
    append_messages(out, rows);
    return out.str();
}

}  // namespace

bool schedule_valid(const Graph& g, const Schedule& s) {
    try {
        validate(g, s);
        return true;
    } catch (const Error&) {
        return false;
    }
}

std::string per_layer_text(const Graph& g, const PerLayerReport& r) {
    std::ostringstream out;
    out << "per layer    activations kept for the backward (live before instruction "
        << r.first_backward << "), " << dtype_name(g.float_dtype()) << ":\n";
    for (const LayerActivations& l : r.layers)
        out << "  " << l.block << "  " << l.bytes << " bytes (" << format_bytes(l.bytes) << ") in "
            << l.kept.size() << " tensors\n";
    out << "  outside blocks  " << r.outside_blocks_bytes << " bytes ("
        << format_bytes(r.outside_blocks_bytes) << ")\n";
    if (!r.layers.empty()) {
        const LayerActivations& mid = r.layers[r.layers.size() / 2];
        out << "one layer    " << mid.bytes << " bytes (" << mid.block << "):";
        for (const KeptValue& k : mid.kept)
            out << "\n  " << g.value(k.value).name << "  " << k.bytes;
        out << '\n';
    }
    return out.str();
}

std::string narrowed_note(const Graph& g) {
    const int n = narrowed_node_count(g);
    if (n == 0) return {};
    return " (" + std::to_string(n) + " of them narrowed to the part a slice reads: tag '" +
           kNarrowedTag + "')";
}

std::string evaluation_text(const ReportContext& ctx, const Evaluation& e) {
    const Graph& g = ctx.graph;
    const Plan& plan = e.plan;
    const Simulation& sim = e.predicted;
    std::ostringstream out;
    if (g.plan_only())  // an abstract benchmark graph: no parameters, inputs or kernels
        out << "network      " << ctx.network << ": " << g.num_nodes()
            << " nodes, an abstract benchmark graph (plan-only: no kernels; times are its "
               "durations, in the file's own units)\n";
    else
        out << "network      " << ctx.network << ": " << g.num_nodes() << " nodes"
            << narrowed_note(g) << ", parameters " << format_bytes(g.param_bytes()) << ", inputs "
            << format_bytes(g.input_bytes()) << '\n';
    out << "strategy     " << e.strategy << " (" << plan_status_name(plan.status) << ", planned in "
        << ms(plan.solve_ms) << " ms";
    if (!plan.method.empty()) out << " by " << plan.method;
    if (plan.budget) out << ", budget " << format_bytes(*plan.budget);
    if (plan.gap && *plan.gap > 0) {
        out << ", gap " << ms(100.0 * *plan.gap) << " % above the bound "
            << ms(*plan.lower_bound_ms) << (g.plan_only() ? " units" : " ms");
        if (!plan.bound_class.empty()) out << " (over the " << plan.bound_class << " class)";
    }
    out << "; cost model " << ctx.cost_model << ", " << ctx.threads << " thread"
        << (ctx.threads == 1 ? "" : "s");
    if (!ctx.gemm.empty()) out << ", GEMM " << gemm_text(ctx);
    out << ")\n";
    out << "schedule     " << plan.schedule.size() << " instructions: " << sim.computes
        << " computes (" << sim.recomputes << " recomputes), " << sim.backwards << " backwards, "
        << sim.frees << " frees; " << (schedule_valid(g, plan.schedule) ? "valid" : "INVALID")
        << '\n';
    if (e.measured) {
        const Execution& m = *e.measured;
        if (e.predicted_executed)  // planned in bf16/f16, executed as the f32 copy
            out << "planned      " << dtype_name(g.float_dtype()) << ": predicted peak "
                << format_bytes(e.predicted.peak_bytes) << ", activations "
                << format_bytes(e.predicted.activation_peak_bytes())
                << "; the CPU executes float32, so the figures below are the f32 copy's\n";
        const Simulation& sim = e.prediction_of_run();
        out << "peak         predicted " << format_bytes(sim.peak_bytes) << ", measured "
            << format_bytes(m.peak_bytes)
            << (m.peak_bytes == sim.peak_bytes
                    ? " (equal to the byte)"
                    : " (DIFFERENT: " + std::to_string(sim.peak_bytes) + " vs " +
                          std::to_string(m.peak_bytes) + " bytes)")
            << ", at " << describe_at(g, plan.schedule, m.peak_instruction) << '\n';
        out << "activations  peak predicted " << format_bytes(sim.activation_peak_bytes())
            << ", measured " << format_bytes(m.activation_peak_bytes()) << '\n';
        if (sim.offloads > 0)
            out << "host         peak predicted " << format_bytes(sim.host_peak_bytes)
                << ", measured " << format_bytes(m.host_peak_bytes)
                << (m.host_peak_bytes == sim.host_peak_bytes ? " (equal to the byte)"
                                                             : " (DIFFERENT)")
                << "; " << sim.offloads << " offloads, " << format_bytes(sim.offloaded_bytes)
                << "\ncopies (ms)  transfer predicted " << ms(sim.transfer_ms) << ", measured "
                << ms(m.transfer_ms) << " (the copy worker's memcpy); stall predicted "
                << ms(sim.stall_ms) << ", measured " << ms(m.stall_ms) << " (--link-gbps sets "
                << "the link the prediction assumes)\n";
        if (const auto& d = e.device_memory)  // the CUDA driver's view of the same run
            out << "device       " << d->device << ": driver peak +"
                << format_bytes(d->driver_peak_delta()) << ", pool reserved "
                << format_bytes(d->reserved_peak) << ", cuBLAS workspace "
                << format_bytes(d->overhead) << '\n';
        out << "time (ms)    forward " << ms(m.forward_ms) << ", recompute " << ms(m.recompute_ms)
            << ", backward " << ms(m.backward_ms) << ", total " << ms(m.total_ms);
        if (e.times && e.times->total.samples > 1)
            out << " (median of " << e.times->total.samples << " after a warm-up, range "
                << ms(e.times->total.min) << "-" << ms(e.times->total.max) << ")";
        out << "; predicted " << ms(sim.forward_ms) << " / " << ms(sim.recompute_ms) << " / "
            << ms(sim.backward_ms) << '\n';
        out << "loss         " << fixed(m.loss, 6) << '\n';
        out << "gradients    "
            << (e.grads_bitwise_equal_to_none ? "bitwise equal to none's \u2713"
                                              : "differ from none's \u2717")
            << " (max |diff| " << e.max_abs_grad_diff_vs_none << ")\n";
    } else {
        if (g.float_dtype() != DType::F32)
            out << "dtype        " << dtype_name(g.float_dtype())
                << " activations (bytes below; executing runs the f32 copy)\n";
        out << "peak         predicted " << format_bytes(sim.peak_bytes) << " (" << sim.peak_bytes
            << " bytes), at " << describe_at(g, plan.schedule, sim.peak_instruction) << '\n';
        out << "activations  predicted peak " << format_bytes(sim.activation_peak_bytes()) << '\n';
        if (sim.offloads > 0)
            out << "host         predicted peak " << format_bytes(sim.host_peak_bytes) << "; "
                << sim.offloads << " offloads, " << format_bytes(sim.offloaded_bytes) << "; copies "
                << ms(sim.transfer_ms) << " ms, of which the step waits " << ms(sim.stall_ms)
                << " ms\n";
        if (g.plan_only()) {
            const double base = sim.forward_ms;  // every node once
            out << "time (units) predicted forward " << ms(sim.forward_ms) << ", recompute "
                << ms(sim.recompute_ms) << ", total " << ms(sim.total_ms()) << " (TDI "
                << fixed(base > 0 ? 100.0 * sim.recompute_ms / base : 0.0, 2) << " %)\n";
        } else {
            out << "time (ms)    predicted forward " << ms(sim.forward_ms) << ", recompute "
                << ms(sim.recompute_ms) << ", backward " << ms(sim.backward_ms)
                << (sim.stall_ms > 0 ? ", stall " + ms(sim.stall_ms) : std::string()) << ", total "
                << ms(sim.total_ms()) << '\n';
        }
    }
    return out.str();
}

std::string compare_table(const ReportContext& ctx, const std::vector<CompareRow>& rows,
                          const Evaluation* baseline) {
    const Graph& g = ctx.graph;
    if (g.plan_only()) return predicted_table(ctx, rows, baseline);
    std::ostringstream out;
    out << ctx.network << ": " << g.num_nodes() << " nodes" << narrowed_note(g) << ", parameters "
        << format_bytes(g.param_bytes()) << "; " << ctx.threads << " thread"
        << (ctx.threads == 1 ? "" : "s") << ", cost model " << ctx.cost_model;
    if (!ctx.gemm.empty()) out << ", GEMM " << gemm_text(ctx);
    out << ", times are medians of " << ctx.repeat << " timed run" << (ctx.repeat == 1 ? "" : "s")
        << " after a warm-up, strategies interleaved round by round; total with its min-max "
           "range";
    if (ctx.cap) out << ", cap " << format_bytes(ctx.cap);
    out << "\n\n";

    Table t(
        {"strategy", "status", "computes", "recomputes", "pred. peak", "meas. peak", "act. peak",
         "fwd ms", "recomp ms", "bwd ms", "total ms", "overhead", "grads=none"},
        {true, true, false, false, false, false, false, false, false, false, false, false, true});
    const MeasuredTimes* base = baseline && baseline->times ? &*baseline->times : nullptr;
    for (const CompareRow& r : rows) {
        if (!r.eval) {
            t.add({r.strategy, r.status, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
            continue;
        }
        const Evaluation& e = *r.eval;
        const Simulation& sim = e.prediction_of_run();  // f32 figures when run as the f32 copy
        std::vector<std::string> cells = {r.strategy, r.status, std::to_string(sim.computes),
                                          std::to_string(sim.recomputes),
                                          format_bytes(sim.peak_bytes)};
        if (e.measured) {
            const Execution& m = *e.measured;
            cells.push_back(format_bytes(m.peak_bytes) +
                            (m.peak_bytes == sim.peak_bytes ? "" : " !"));
            cells.push_back(format_bytes(m.activation_peak_bytes()));
            cells.push_back(ms(m.forward_ms));
            cells.push_back(ms(m.recompute_ms));
            cells.push_back(ms(m.backward_ms));
            if (e.times && e.times->total.samples > 1)
                cells.push_back(ms(m.total_ms) + " (" + ms(e.times->total.min) + "-" +
                                ms(e.times->total.max) + ")");
            else
                cells.push_back(ms(m.total_ms));
            // Within the noise, the sign of a difference of medians says nothing: say so.
            cells.push_back(&e == baseline ? "baseline"
                            : base && e.times && base->total.median > 0
                                ? format_overhead(overhead_against(e.times->total, base->total))
                                : "-");
            cells.push_back(e.grads_bitwise_equal_to_none ? "\u2713" : "\u2717");
        } else {
            for (int i = 0; i < 8; ++i) cells.push_back("-");
        }
        t.add(std::move(cells));
    }
    out << t.render();

    bool any_mismatch = false;
    for (const CompareRow& r : rows)
        if (r.eval && r.eval->measured &&
            r.eval->measured->peak_bytes != r.eval->prediction_of_run().peak_bytes)
            any_mismatch = true;
    if (any_mismatch)
        out << "\n! measured peak differs from the predicted one (a bug: please report)\n";
    append_messages(out, rows);
    return out.str();
}

}  // namespace rl::cli
