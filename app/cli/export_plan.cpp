// `rematlab-cli export-plan`: a strategy's plan as a PyTorch module (apply(model) wraps the
// regions in torch.utils.checkpoint), a JAX policy (save_only_these_names with the bytes of each
// name) or JSON (kept, recomputed, segments, predicted bytes). The mapping and the texts are
// analysis/plan_export.h's, shared with the desktop app's File → Export plan.
#include <cstdio>
#include <iostream>

#include "analysis/evaluate.h"
#include "analysis/plan_export.h"
#include "cli/commands.h"
#include "engine/atomic_file.h"
#include "engine/errors.h"
#include "engine/networks/presets.h"
#include "engine/units.h"

namespace rl::cli {

int export_plan_command(const ExportPlanOptions& opt) {
    const PlanFormat format = parse_plan_format(opt.format);
    // The plan is for PyTorch or JAX, which run the model's graph as it is: an ONNX model's
    // slices are not moved up here (their narrowed nodes would name activations that framework
    // keeps in full).
    Graph g = load_network(opt.network, /*narrow_onnx_slices=*/false);
    if (g.plan_only())
        throw Error("export-plan: network '" + opt.network +
                    "' is an abstract benchmark graph, with no framework modules or values to "
                    "name in a PyTorch or JAX plan; `plan --json` prints its schedule");
    const Spec spec = parse_spec(opt.strategy);
    (void)ParamValues::resolve(find_strategy(spec.name).schema(), spec);

    EvaluateOptions eo;
    eo.threads = opt.threads;
    eo.execute = false;  // planning allocates nothing
    eo.nominal_rates = opt.nominal_rates;
    Evaluator ev(g, opt.network, eo);
    const Evaluation e = ev.evaluate(spec);
    if (e.plan.status == PlanStatus::Infeasible) {
        std::string msg = e.plan.message.empty() ? "strategy '" + opt.strategy +
                                                       "' cannot meet its budget on this network"
                                                 : e.plan.message;
        if (e.plan.min_feasible_budget)
            msg += " (the smallest feasible budget is " +
                   format_bytes(*e.plan.min_feasible_budget) + "); nothing was written";
        throw Infeasible(msg);
    }

    const PlanExport plan = export_plan(g, opt.network, opt.strategy, e.plan, ev.costs());
    if (format == PlanFormat::Torch && opt.exact && plan.refusal.empty() && !plan.exact)
        throw Error("export-plan --exact: the PyTorch wrapping of '" + opt.strategy +
                    "' only approximates the plan (" + plan.approximation +
                    "); drop --exact to write it anyway, or export --format json");
    // Throws PlanRefused with the reason before anything is written.
    const std::string text = plan_text(g, plan, format);

    if (opt.out.empty()) {
        std::cout << text << std::flush;
    } else {
        write_file_atomically(opt.out, {text});
    }
    // What PyTorch's wrapping makes of the plan, whatever the format: exact, approximated by how
    // many bytes, or refused and why.
    std::string note = plan_export_summary(plan);
    if (format != PlanFormat::Torch) note = "as a PyTorch wrapping: " + note;
    if (!opt.out.empty()) note += "; wrote " + opt.out;
    std::fflush(stdout);
    std::fprintf(stderr, "rematlab-cli: export-plan: %s\n", note.c_str());
    return kExitOk;
}

}  // namespace rl::cli
