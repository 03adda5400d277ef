#pragma once
// What rematlab-cli prints: one JSON object per evaluation (report_json.cpp) and the human
// summaries and comparison table (report_text.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/evaluate.h"
#include "analysis/per_layer.h"

namespace rl::cli {

// What every line of a report shares.
struct ReportContext {
    const Graph& graph;
    std::string network;     // the spec as given
    std::string cost_model;  // CostModel::kind()
    int threads = 1;
    int repeat = 1;
    uint64_t cap = 0;
    std::string gemm;        // the GEMM library that ran the kernels (engine/gemm.h); "" plan-only
    std::string gemm_small;  // the one that ran products under kSmallGemmFlops
    std::string gemm_thin;   // the one that ran thin products (is_thin_gemm)
    // Per-shape choice (engine/gemm.h): whether it was on, the shapes of kShapeChoiceMinFlops or
    // more this process ran, and the libraries those moved off their class's library run on.
    bool gemm_per_shape = false;
    int gemm_shapes = 0;
    std::vector<std::pair<std::string, int>> gemm_moved;
};

// One strategy's outcome in `compare`: an evaluation, or why there is none.
struct CompareRow {
    std::string strategy;  // the spec as given
    std::optional<Evaluation> eval;
    std::string status;   // plan status name, or "infeasible", "cap exceeded", "error"
    std::string message;  // for a failure
    int exit_code = 0;
    std::optional<uint64_t> min_feasible_budget;  // for an infeasible budget
};

// Whether the schedule passes rl::validate.
bool schedule_valid(const Graph& g, const Schedule& s);

// One line of JSON (no trailing newline). With `baseline` (none's evaluation, measured), the
// line also gives the overhead against it and whether that overhead is within the noise; with
// `per_layer`, a "per_layer" field (plan --per-layer).
std::string evaluation_json(const ReportContext& ctx, const Evaluation& e,
                            const Evaluation* baseline = nullptr,
                            const PerLayerReport* per_layer = nullptr);
std::string failure_json(const ReportContext& ctx, const CompareRow& row);

// Human summaries: `run` (executed) and `plan` (predicted only).
std::string evaluation_text(const ReportContext& ctx, const Evaluation& e);

// " (18 of them narrowed to the part a slice reads: tag 'narrowed')" for a graph whose import
// moved slices up (engine/networks/slice_narrowing.h); "" otherwise.
std::string narrowed_note(const Graph& g);
// `plan --per-layer`: the activations each block keeps for the backward, and what one block adds.
std::string per_layer_text(const Graph& g, const PerLayerReport& r);
// The side-by-side table of `compare`; `baseline` (none's evaluation) gives the overhead column.
std::string compare_table(const ReportContext& ctx, const std::vector<CompareRow>& rows,
                          const Evaluation* baseline);

}  // namespace rl::cli
