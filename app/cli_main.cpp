// rematlab-cli: the headless front-end. This file only parses the command line (the one place
// CLI11 is included: it is slow to compile) and maps errors to exit codes; the commands live in
// cli/commands.cpp.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/solve.h"
#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/gemm.h"
#include "engine/units.h"

namespace {

const char* const kProgram = "rematlab-cli";

void print_error(const std::string& message) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", kProgram, message.c_str());
}

// Accepts "512MiB"-style sizes; the message is parse_bytes' own.
const CLI::Validator kSize(
    [](std::string& text) {
        try {
            (void)rl::parse_bytes(text);
            return std::string();
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
    },
    "SIZE", "size");

uint64_t size_or_zero(const std::string& text) {
    return text.empty() ? 0 : rl::parse_bytes(text);
}

// --link-gbps and --link-latency-us: the host link offloads cross (engine/cost_model.h).
struct LinkArgs {
    double gbps = 0, latency_us = -1;
    void add_to(CLI::App* cmd) {
        const rl::TransferRates d;
        cmd->add_option("--link-gbps", gbps,
                        "bandwidth of the device-host link offloads and prefetches cross, in GB/s "
                        "each way (default " +
                            std::to_string(static_cast<int>(d.to_host_gbps)) +
                            ", PCIe 4.0 x16 as achieved)")
            ->check(CLI::PositiveNumber);
        cmd->add_option("--link-latency-us", latency_us,
                        "fixed cost of each copy on that link, in microseconds (default " +
                            std::to_string(static_cast<int>(d.latency_us)) + ")")
            ->check(CLI::NonNegativeNumber);
    }
    std::optional<rl::TransferRates> rates() const {
        if (gbps <= 0 && latency_us < 0) return std::nullopt;
        rl::TransferRates r;
        if (gbps > 0) r.to_host_gbps = r.to_device_gbps = gbps;
        if (latency_us >= 0) r.latency_us = latency_us;
        return r;
    }
};

}  // namespace

int main(int argc, char** argv) {
    using namespace rl::cli;
    CLI::App app{
        "RematLab: gradient checkpointing strategies planned, simulated and run for real.\n"
        "Exit codes: 0 ok, 1 error, 2 usage, 3 infeasible budget, 4 memory cap exceeded.",
        kProgram};
    // The version names the GEMM library this machine runs (choosing it, so a first --version may
    // take the calibration's second).
    app.set_version_flag("--version", [] {
        std::string v = std::string(kProgram) + " " + REMATLAB_VERSION + ", kernels built for " +
                        rl::build_instruction_set();
        try {
            rl::set_cpu_threads(1);  // every command's default
            v += "\nGEMM " + rl::gemm_choice().summary();
            v += "\nGEMM " + rl::gemm_shape_stats().summary();
        } catch (const rl::Error& e) {
            v += std::string("\nGEMM: ") + e.what();
        }
        return v;
    });
    app.require_subcommand(1);
    app.fallthrough(false);

    const std::string network_help =
        "preset with parameters (mlp:depth=32,width=1024), a network .json file or an ONNX "
        "model (.onnx, with its weights)";
    const std::string strategy_help =
        "strategy spec: name or name:key=value,... (see `strategies`)";

    RunOptions run_opt;
    std::string run_cap;
    auto* run = app.add_subcommand("run", "plan, simulate and execute one strategy on a network");
    run->add_option("--network,-n", run_opt.network, network_help)->required();
    run->add_option("--strategy,-s", run_opt.strategy, strategy_help)->required();
    run->add_option("--threads,-t", run_opt.threads, "CPU threads for the kernels")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    run->add_option(
           "--repeat,-r", run_opt.repeat,
           "after an untimed warm-up step, time the step N times; report the median and the "
           "min-max spread of each time")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    run->add_option("--cap", run_cap, "memory cap (e.g. 512MiB): fail the run above it")
        ->check(kSize);
    run->add_option("--device", run_opt.device,
                    "where the step executes: cpu, or cuda (the GPU; fails naming the cause when "
                    "none is usable)")
        ->capture_default_str();
    run->add_flag("--json", run_opt.json, "print one JSON object instead of the summary");
    LinkArgs run_link, plan_link, cmp_link;
    run_link.add_to(run);
    run->add_option("--dump-grads", run_opt.dump_grads,
                    "write each parameter's gradient to DIR/<parameter>.npy");
    run->add_option("--dump-weights", run_opt.dump_weights,
                    "write each parameter and graph input (the run's data) to DIR/<name>.npy");
    run->add_option("--dump-activations", run_opt.dump_activations,
                    "write the forward output of each node of --dump-activations-ops (default "
                    "relu) to DIR/<node>.npy and list them, in graph (ONNX node) order, in "
                    "DIR/index.json; the values come from a separate untimed step of the same "
                    "schedule after the measured ones (the measured figures are unchanged), "
                    "checked to give the measured step's gradients bitwise");
    run->add_option("--dump-activations-ops", run_opt.dump_activations_ops,
                    "the ops whose outputs --dump-activations writes: op names separated by ',' "
                    "(relu, conv2d, ...), or all")
        ->capture_default_str();
    run->add_option("--input,-i", run_opt.input,
                    "data for the network's input from a .npy file: float32, or int64/int32 "
                    "indices for an integer input (NAME=FILE.npy picks the input by name; "
                    "repeat for several inputs); default: seeded random data");

    PlanOptions plan_opt;
    auto* plan = app.add_subcommand(
        "plan", "plan and simulate only: print the schedule and the predicted figures");
    plan->add_option("--network,-n", plan_opt.network, network_help)->required();
    plan->add_option("--strategy,-s", plan_opt.strategy, strategy_help)->required();
    plan->add_option("--threads,-t", plan_opt.threads,
                     "CPU threads the cost model's rates are measured with")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    plan->add_flag("--nominal-rates", plan_opt.nominal_rates,
                   "predict with fixed nominal rates rather than this CPU's measured ones: the "
                   "same plan and figures on every machine");
    plan->add_flag("--json", plan_opt.json, "print one JSON object instead of the schedule");
    plan_link.add_to(plan);
    plan->add_flag("--per-layer", plan_opt.per_layer,
                   "also the activation bytes each block keeps for the backward (JSON: "
                   "per_layer, per_layer_bytes)");

    CompareOptions cmp_opt;
    std::string cmp_cap;
    auto* compare = app.add_subcommand(
        "compare", "run every strategy (or the listed ones) on a network, side by side");
    compare->add_option("--network,-n", cmp_opt.network, network_help)->capture_default_str();
    compare->add_option("--strategies,-s", cmp_opt.strategies,
                        "strategy specs separated by ';' or ',' (a ',' followed by key=value "
                        "continues the previous spec); default: all");
    compare->add_option("--device", cmp_opt.device, "where the steps execute: cpu or cuda")
        ->capture_default_str();
    compare->add_option("--threads,-t", cmp_opt.threads, "CPU threads for the kernels")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    compare
        ->add_option("--repeat,-r", cmp_opt.repeat,
                     "after a warm-up round, N timed rounds, each running every strategy once in "
                     "turn; report the median and the min-max spread of each time")
        ->check(CLI::Range(1, 1000000))
        ->capture_default_str();
    compare->add_option("--cap", cmp_cap, "memory cap (e.g. 512MiB) for every run")->check(kSize);
    compare->add_flag("--json", cmp_opt.json, "print one JSON object per strategy, one per line");
    cmp_link.add_to(compare);
    compare->add_option("--input,-i", cmp_opt.input,
                        "data for the network's input from a float32 .npy file (NAME=FILE.npy)");

    SweepOptions sweep_opt;
    std::vector<std::string> sweep_budgets;
    auto* sweep = app.add_subcommand(
        "sweep", "trace each strategy's memory/compute curve: budgets, or its own parameter range");
    sweep->add_option("--network,-n", sweep_opt.network, network_help)->required();
    sweep->add_option("--strategies,-s", sweep_opt.strategies,
                      "strategy specs separated by ';' or ','; default: all");
    sweep
        ->add_option("--budgets", sweep_opt.budgets,
                     "points of a budget sweep, from the smallest feasible budget to none's peak")
        ->check(CLI::Range(1, 10000))
        ->capture_default_str();
    sweep->add_option("--budget-list", sweep_budgets, "explicit budgets (e.g. 1MiB,2MiB)")
        ->delimiter(',')
        ->check(kSize);
    sweep->add_flag("--execute", sweep_opt.execute, "also run every point and measure it");
    sweep->add_option("--threads,-t", sweep_opt.threads, "CPU threads for the kernels")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    sweep->add_option("--out,-o", sweep_opt.out,
                      "write the points to FILE.csv, FILE.json or FILE.jsonl (one per line)");
    std::string sweep_shard;
    sweep->add_option("--shard", sweep_shard,
                      "I/N: only the I-th of N contiguous parts of the points (1-based), for array "
                      "jobs; with FILE.jsonl, parts 1..N concatenated are the whole sweep");
    sweep->add_flag("--nominal-rates", sweep_opt.nominal_rates,
                    "predict times with fixed nominal rates rather than this CPU's (implied by "
                    "--shard, so every part is priced alike)");

    ResidualsOptions res_opt;
    auto* residuals =
        app.add_subcommand("residuals",
                           "list the values the forward keeps for the backward (like JAX's "
                           "print_saved_residuals), with dtype, shape, origin and total bytes");
    residuals->add_option("--network,-n", res_opt.network, network_help)->required();
    residuals->add_option("--strategy,-s", res_opt.strategy, strategy_help)->required();
    residuals->add_flag("--include-loss", res_opt.include_loss,
                        "also list what only the loss's backward reads (output, labels)");

    ExplainOptions exp_explain;
    auto* explain = app.add_subcommand(
        "explain",
        "say what each instruction of a strategy's schedule does and why (teach mode's sentences)");
    explain->add_option("--network,-n", exp_explain.network, network_help)->required();
    explain->add_option("--strategy,-s", exp_explain.strategy, strategy_help)->required();
    explain->add_option("--at", exp_explain.at, "only instruction N (from 0; default: all)")
        ->check(CLI::NonNegativeNumber);

    auto* list_strategies =
        app.add_subcommand("strategies", "list the strategies and their parameters");
    auto* list_networks =
        app.add_subcommand("networks", "list the preset networks and their parameters");

    NetworkOptions net_opt;
    auto* network =
        app.add_subcommand("network", "write a network (preset or file) in RematLab's JSON format");
    network->add_option("--network,-n", net_opt.network, network_help)->required();
    network->add_option("--out,-o", net_opt.out, "output .json file (default: standard output)");
    network->add_flag("--keep-slices", net_opt.keep_slices,
                      "an ONNX model's graph as the file has it: by default a node whose only "
                      "reader is a slice computes just the part the slice reads (a classifier "
                      "reading the class token: its last block runs for that token), and such "
                      "nodes carry the tag 'narrowed'");

    ExportOptions exp_opt;
    auto* exp = app.add_subcommand(
        "export",
        "draw a chart of the strategies on a network to a file, headless (needs the "
        "desktop app's binary, rematlab, next to this one)");
    exp->add_option("--network,-n", exp_opt.network, network_help)->capture_default_str();
    exp->add_option("--strategies,-s", exp_opt.strategies, "strategy specs separated by ';' or ','")
        ->capture_default_str();
    exp->add_option("--chart,-c", exp_opt.chart,
                    "pareto, memory, schedule (the first strategy's matrix) or graph (its "
                    "layered drawing)")
        ->check(CLI::IsMember({"pareto", "memory", "schedule", "graph"}))
        ->capture_default_str();
    exp->add_option("--out,-o", exp_opt.out, "output file: .png .svg .pdf .csv (or .json)")
        ->required();
    exp->add_option("--size", exp_opt.size,
                    "image size in pixels, WIDTHxHEIGHT (default 1600x900)");
    exp->add_option("--threads,-t", exp_opt.threads, "CPU threads for the kernels")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();

    ExportPlanOptions xp_opt;
    auto* export_plan = app.add_subcommand(
        "export-plan",
        "write a strategy's plan for PyTorch (a module whose apply(model) checkpoints the "
        "regions the plan recomputes), JAX (a save_only_these_names policy) or as JSON");
    export_plan->add_option("--network,-n", xp_opt.network, network_help)->required();
    export_plan->add_option("--strategy,-s", xp_opt.strategy, strategy_help)->required();
    export_plan
        ->add_option("--format,-f", xp_opt.format,
                     "torch (Python module with apply(model)), jax (policy and checkpoint names) "
                     "or json (kept, recomputed, segments, predicted bytes)")
        ->check(CLI::IsMember({"torch", "jax", "json"}))
        ->capture_default_str();
    export_plan->add_option("--out,-o", xp_opt.out,
                            "output file, written whole or not at all (default: standard output)");
    export_plan->add_flag("--exact", xp_opt.exact,
                          "torch: refuse a plan that PyTorch's checkpoint regions only "
                          "approximate, rather than writing the approximation");
    export_plan
        ->add_option("--threads,-t", xp_opt.threads,
                     "CPU threads the cost model's rates are measured with")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    export_plan->add_flag("--nominal-rates", xp_opt.nominal_rates,
                          "plan with fixed nominal rates rather than this CPU's measured ones: "
                          "the same plan on every machine (a budgeted plan's choices depend on "
                          "the ops' relative costs)");

    GemmOptions gemm_opt;
    auto* gemm = app.add_subcommand(
        "gemm",
        "the GEMM libraries this machine has (Eigen, OpenBLAS, BLIS, our own on AVX-512), the one "
        "the kernels use "
        "and why; --calibrate times each now");
    gemm->add_flag("--calibrate", gemm_opt.calibrate,
                   "time every available library now on the calibration shapes");
    gemm->add_flag("--peak", gemm_opt.peak,
                   "measure the multiply-add units' rate on this build's vectors, the ceiling of "
                   "every product (--calibrate does too)");
    gemm->add_option("--threads,-t", gemm_opt.threads, "CPU threads, as every command takes")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    gemm->add_flag("--json", gemm_opt.json, "one JSON object instead of text");

    const SubcommandHandle solve = add_solve_command(app);

    // Every command takes --gemm: the library behind the kernels' GEMMs for this process.
    std::string gemm_library;
    for (CLI::App* sub : app.get_subcommands({}))
        sub->add_option(
               "--gemm", gemm_library,
               "GEMM library: auto (the calibrated fastest, the default), eigen, "
               "openblas, blis or rematlab, for every product size; also REMATLAB_GEMM (and "
               "REMATLAB_GEMM_SMALL for products under 16 MFLOP)")
            ->check(CLI::IsMember(rl::gemm_choice_names()));

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
        print_error(std::string(e.what()) + "\nRun '" + kProgram + " --help' for usage.");
        return kExitUsage;
    }

    try {
        if (!gemm_library.empty()) rl::select_gemm(gemm_library);
        run_opt.cap = size_or_zero(run_cap);
        cmp_opt.cap = size_or_zero(cmp_cap);
        run_opt.link = run_link.rates();
        plan_opt.link = plan_link.rates();
        cmp_opt.link = cmp_link.rates();
        if (run->parsed()) return run_command(run_opt);
        if (plan->parsed()) return plan_command(plan_opt);
        for (const auto& b : sweep_budgets) sweep_opt.budget_list.push_back(rl::parse_bytes(b));
        if (sweep->parsed()) {
            if (!sweep_shard.empty()) parse_shard(sweep_shard, sweep_opt.shard, sweep_opt.shards);
            return sweep_command(sweep_opt);
        }
        if (residuals->parsed()) return residuals_command(res_opt);
        if (explain->parsed()) return explain_command(exp_explain);
        if (compare->parsed()) return compare_command(cmp_opt);
        if (list_strategies->parsed()) return strategies_command();
        if (list_networks->parsed()) return networks_command();
        if (network->parsed()) return network_command(net_opt);
        if (exp->parsed()) return export_command(exp_opt);
        if (export_plan->parsed()) return export_plan_command(xp_opt);
        if (gemm->parsed()) return gemm_command(gemm_opt);
        if (solve.app->parsed()) return solve.run();
        print_error("no command given; run '" + std::string(kProgram) + " --help'");
        return kExitUsage;
    } catch (const rl::Cancelled&) {
        rl::cli::report_cancelled("stopped before any result");
        return rl::cli::kExitInterrupted;
    } catch (const std::bad_alloc&) {
        print_error("out of memory; try a smaller network or a strategy with a lower peak");
        return kExitUserError;
    } catch (const rl::Error& e) {
        print_error(e.what());
        return exit_code_for(e);
    } catch (const std::exception& e) {
        print_error(std::string("unexpected failure: ") + e.what());
        return kExitUserError;
    }
}
