#pragma once
// The subcommands of rematlab-cli, free of any argument-parsing library: cli_main.cpp parses the
// command line with CLI11 and calls these. Each returns the process exit code or throws: rl::Error
// (a user error, exit 1), rl::CapExceeded (exit 4), cli::Infeasible (exit 3) or rl::Cancelled
// (Ctrl-C during a run, exit 130).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/measure.h"
#include "engine/cost_model.h"
#include "engine/errors.h"

namespace rl::cli {

enum ExitCode : int {
    kExitOk = 0,
    kExitUserError = 1,     // bad file, bad spec, out of memory, I/O
    kExitUsage = 2,         // the command line itself is malformed
    kExitInfeasible = 3,    // a budgeted strategy cannot meet its budget
    kExitCapExceeded = 4,   // the run needed more than --cap
    kExitInterrupted = 130  // Ctrl-C: the run was cancelled between instructions
};

// A budgeted strategy could not meet its budget (Plan status Infeasible).
class Infeasible : public Error {
  public:
    using Error::Error;
};

// Maps an exception to its exit code (see ExitCode).
int exit_code_for(const std::exception& e);

// Says once on stderr that Ctrl-C cancelled the run, with `detail` (what was completed).
void report_cancelled(const std::string& detail);

struct RunOptions {
    std::string network;
    std::string strategy;
    int threads = 1;
    // The host link for offload (--link-gbps, --link-latency-us); unset: the default.
    std::optional<TransferRates> link;
    int repeat = kDefaultRepeats;  // timed steps after a warm-up (analysis/measure.h)
    uint64_t cap = 0;              // bytes, 0 = none
    bool json = false;
    std::string dump_grads;    // directory, "" = none
    std::string dump_weights;  // directory, "" = none: every parameter and graph input as .npy
    // Directory, "" = none: forward outputs of the nodes of `dump_activations_ops` as .npy, and
    // DIR/index.json listing them in graph order.
    std::string dump_activations;
    std::string dump_activations_ops = "relu";  // op names separated by ',', or "all"
    // Each FILE.npy or NAME=FILE.npy: data for a graph input (float32, or int64/int32 indices for
    // an i32 input); inputs not named are seeded.
    std::vector<std::string> input;
    std::string device = "cpu";  // cpu or cuda
};

struct PlanOptions {
    std::string network;
    std::string strategy;
    int threads = 1;             // the cost model's rates are measured at this thread count
    bool nominal_rates = false;  // fixed nominal rates instead: the same plan on every machine
    // The host link for offload (--link-gbps, --link-latency-us); unset: the default.
    std::optional<TransferRates> link;
    bool json = false;
    bool per_layer = false;  // also the activation bytes each block keeps (analysis/per_layer.h)
};

struct CompareOptions {
    // Activations dominate parameters here, so the table shows what checkpointing saves.
    std::string network = "mlp:depth=32,width=256,batch=1024";
    std::string strategies;  // "" = every registered strategy
    int threads = 1;
    // The host link for offload (--link-gbps, --link-latency-us); unset: the default.
    std::optional<TransferRates> link;
    int repeat = kDefaultRepeats;  // timed rounds after a warm-up round, strategies interleaved
    uint64_t cap = 0;
    bool json = false;
    std::vector<std::string> input;  // as RunOptions::input
    std::string device = "cpu";      // cpu or cuda
};

struct NetworkOptions {
    std::string network;
    std::string out;           // "" = print the JSON to stdout
    bool keep_slices = false;  // an ONNX model without slice narrowing
};

struct SweepOptions {
    std::string network;
    std::string strategies;  // "" = every registered strategy
    int budgets = 12;
    std::vector<uint64_t> budget_list;  // bytes; overrides `budgets`
    bool execute = false;
    int threads = 1;
    std::string out;             // .csv, .json or .jsonl; "" = a table on stdout
    int shard = 1, shards = 1;   // evaluate only part `shard` (1-based) of `shards`
    bool nominal_rates = false;  // DeviceRates{} rather than this CPU's (implied by shards > 1)
};

// "I/N" with 1 <= I <= N: throws rl::Error saying what is wrong otherwise.
void parse_shard(const std::string& text, int& index, int& count);
// The contiguous range [begin, end) of `total` points that part `index` of `count` evaluates:
// parts 1..count cover 0..total in order, sizes differing by at most one.
std::pair<size_t, size_t> shard_range(size_t total, int index, int count);

// `export`: the chart is drawn by the desktop app's chart code, which needs Qt Widgets; so this
// execs the sibling `rematlab` binary in its headless mode (QT_QPA_PLATFORM=offscreen).
struct ExportOptions {
    std::string network = CompareOptions{}.network;
    std::string strategies = "none,sqrt-n,periodic";
    std::string chart = "pareto";  // pareto | memory | schedule (the matrix) | graph
    std::string out;               // .png .svg .pdf .csv .json
    std::string size;              // WxH, "" = 1600x900
    int threads = 1;
};

struct ResidualsOptions {
    std::string network;
    std::string strategy;
    bool include_loss = false;
};

// `explain`: teach mode's sentences (analysis/explain.h) for every instruction, or one.
struct ExplainOptions {
    std::string network;
    std::string strategy;
    long at = -1;  // one instruction; -1 = all
};

// `export-plan`: the plan of one strategy as a PyTorch module, a JAX policy or JSON
// (analysis/plan_export.h).
struct ExportPlanOptions {
    std::string network;
    std::string strategy;
    std::string format = "torch";  // torch | jax | json
    std::string out;               // "" = standard output
    bool exact = false;            // refuse a plan the PyTorch wrapping only approximates
    int threads = 1;               // the cost model's rates are measured at this thread count
    bool nominal_rates = false;    // fixed nominal rates instead: the same plan on every machine
};

int run_command(const RunOptions& opt);
int export_plan_command(const ExportPlanOptions& opt);
int explain_command(const ExplainOptions& opt);
int residuals_command(const ResidualsOptions& opt);
int sweep_command(const SweepOptions& opt);
int plan_command(const PlanOptions& opt);
int compare_command(const CompareOptions& opt);
int strategies_command();
int networks_command();

// `gemm`: the GEMM libraries this machine has, the one chosen and why; --calibrate times each.
struct GemmOptions {
    int threads = 1;
    bool calibrate = false;
    bool peak = false;  // measure the multiply-add units' rate (measure_fma_peak); --calibrate does
    bool json = false;
};
int gemm_command(const GemmOptions& opt);
int network_command(const NetworkOptions& opt);
// Returns only when the GUI binary cannot be started (it replaces this process otherwise).
int export_command(const ExportOptions& opt);

// Splits a --strategies list. ';' always separates; ',' separates only where the next piece is
// not a `key=value` continuing the previous spec, so "none,sqrt-n:budget=1MiB,segments=3,
// periodic:k=2" is three specs. Empty pieces are ignored.
std::vector<std::string> split_strategy_list(const std::string& text);

}  // namespace rl::cli
