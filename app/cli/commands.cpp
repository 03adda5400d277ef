#include "cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "analysis/evaluate.h"
#include "analysis/explain.h"
#include "analysis/sweep.h"
#include "cli/progress.h"
#include "cli/report.h"
#include "engine/atomic_file.h"
#include "engine/gemm.h"
#include "engine/networks/network_json.h"
#include "engine/networks/presets.h"
#include "engine/networks/slice_narrowing.h"
#include "engine/npy.h"
#include "engine/ops/op.h"
#include "engine/units.h"
#include "strategies/policy.h"

namespace rl::cli {

void report_cancelled(const std::string& detail) {
    std::fflush(stdout);
    std::fprintf(stderr, "rematlab-cli: cancelled (Ctrl-C)%s%s\n", detail.empty() ? "" : ": ",
                 detail.c_str());
}

int exit_code_for(const std::exception& e) {
    if (dynamic_cast<const Cancelled*>(&e)) return kExitInterrupted;
    if (dynamic_cast<const CapExceeded*>(&e)) return kExitCapExceeded;
    if (dynamic_cast<const Infeasible*>(&e)) return kExitInfeasible;
    return kExitUserError;
}

std::vector<std::string> split_strategy_list(const std::string& text) {
    auto trim = [](std::string s) {
        const auto first = s.find_first_not_of(" \t");
        if (first == std::string::npos) return std::string();
        return s.substr(first, s.find_last_not_of(" \t") - first + 1);
    };
    // A piece continues the previous spec when it is a bare `key=value` (an '=' before any ':').
    auto continues = [](const std::string& piece) {
        const auto eq = piece.find('=');
        return eq != std::string::npos && piece.find(':') > eq;
    };
    std::vector<std::string> specs;
    size_t group_start = 0;
    while (group_start <= text.size()) {
        size_t group_end = text.find(';', group_start);
        if (group_end == std::string::npos) group_end = text.size();
        const std::string group = text.substr(group_start, group_end - group_start);
        bool fresh_group = true;
        size_t pos = 0;
        while (pos <= group.size()) {
            size_t comma = group.find(',', pos);
            if (comma == std::string::npos) comma = group.size();
            const std::string piece = trim(group.substr(pos, comma - pos));
            if (!piece.empty()) {
                if (!fresh_group && !specs.empty() && continues(piece))
                    specs.back() += "," + piece;
                else
                    specs.push_back(piece);
                fresh_group = false;
            }
            pos = comma + 1;
        }
        group_start = group_end + 1;
    }
    return specs;
}

namespace {

// Ctrl-C cancels the run between instructions (a clean exit, no partial file); a second one
// kills the process as usual.
std::atomic<bool> g_interrupted{false};

void on_interrupt(int) {
    g_interrupted.store(true);
    std::signal(SIGINT, SIG_DFL);
}

const std::atomic<bool>* cancel_on_interrupt() {
    std::signal(SIGINT, on_interrupt);
    return &g_interrupted;
}

bool interrupted() {
    return g_interrupted.load();
}

// The strategy specs of a --strategies list as the user wrote them; every registered strategy
// when the option is absent.
std::vector<std::string> strategy_texts(const std::string& list) {
    std::vector<std::string> texts;
    if (list.empty()) {
        for (const Strategy* s : strategies()) texts.emplace_back(s->name());
        return texts;
    }
    texts = split_strategy_list(list);
    if (texts.empty()) throw Error("--strategies: the list is empty; give at least one strategy");
    return texts;
}

std::string infeasible_message(const std::string& strategy, const Plan& plan) {
    std::string msg = plan.message.empty()
                          ? "strategy '" + strategy + "' cannot meet its budget on this network"
                          : plan.message;
    if (plan.min_feasible_budget) {
        const std::string smallest = format_bytes(*plan.min_feasible_budget);
        if (msg.find(smallest) == std::string::npos &&
            msg.find(std::to_string(*plan.min_feasible_budget)) == std::string::npos)
            msg += " (the smallest feasible budget is " + smallest + ")";
    }
    return msg;
}

// Creates a --dump-grads / --dump-weights directory up front, so a bad path fails before the run.
void prepare_directory(const std::string& dir, const std::string& option = "--dump-grads") {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw Error(option + ": cannot create directory '" + dir + "': " + ec.message());
    if (!fs::is_directory(dir, ec))
        throw Error(option + ": '" + dir + "' exists and is not a directory");
}

std::string file_name_for(const std::string& param_name) {
    std::string s = param_name;
    for (char& c : s)
        if (c == '/' || c == '\\' || c == '\0') c = '_';
    if (s.empty() || s == "." || s == "..") s = "_" + s;
    return s + ".npy";
}

void dump_gradients(const Graph& g, const Execution& m, const std::string& dir) {
    if (m.param_grads.size() != static_cast<size_t>(g.num_params()))
        throw Error("--dump-grads: the run kept no parameter gradients");
    for (ParamId p = 0; p < g.num_params(); ++p) {
        const Param& param = g.param(p);
        const auto& grad = m.param_grads[static_cast<size_t>(p)];
        if (grad.size() != static_cast<size_t>(param.shape.numel()))
            throw Error("--dump-grads: gradient of '" + param.name + "' has " +
                        std::to_string(grad.size()) + " values, expected " +
                        std::to_string(param.shape.numel()));
        // In the layout of the file the parameter came from (an ONNX initializer's own).
        const std::string path = (std::filesystem::path(dir) / file_name_for(param.name)).string();
        write_npy(path, to_stored_layout(param, grad.data()).data(), stored_shape(param));
    }
}

// Which nodes --dump-activations writes (per NodeId): those of the listed ops, or all of them.
std::vector<unsigned char> nodes_to_dump(const Graph& g, const std::string& list) {
    std::vector<unsigned char> keep(static_cast<size_t>(g.num_nodes()), 0);
    std::vector<bool> wanted(kNumOpKinds, false);
    bool all = false, any = false;
    for (const std::string& piece : split_strategy_list(list)) {
        if (piece == "all") {
            all = any = true;
            continue;
        }
        const auto op = op_from_name(piece);
        if (!op)
            throw Error("--dump-activations-ops: unknown op '" + piece + "'; give op names (" +
                        op_names_joined() + ") separated by ',', or all");
        wanted[static_cast<size_t>(*op)] = any = true;
    }
    if (!any) throw Error("--dump-activations-ops: the list is empty; give op names or all");
    for (NodeId n = 0; n < g.num_nodes(); ++n)
        keep[static_cast<size_t>(n)] = all || wanted[static_cast<size_t>(g.node(n).op)];
    return keep;
}

// Writes the kept forward outputs of `pass` as DIR/<node name>.npy (each written whole) and
// DIR/index.json, which lists them in node order (the topological order: an ONNX model's node
// order) with the op, the input and output value names, the shape and the file.
void dump_activations(const Graph& g, const Execution& pass, const std::vector<unsigned char>& keep,
                      const std::string& network, const std::string& strategy,
                      const std::string& dir) {
    namespace fs = std::filesystem;
    nlohmann::json nodes = nlohmann::json::array();
    std::set<std::string> files;
    for (NodeId n = 0; n < g.num_nodes(); ++n) {
        const auto ni = static_cast<size_t>(n);
        if (!keep[ni]) continue;
        const Node& node = g.node(n);
        const Value& out = g.value(node.output);
        const auto& bytes = pass.outputs.at(ni);
        // What executed: float32 (a bf16/f16 network runs as its f32 copy) or int32.
        const bool ints = out.dtype == DType::I32;
        const uint64_t expected = static_cast<uint64_t>(out.shape.numel()) * 4;
        if (bytes.size() != expected)
            throw Error("--dump-activations: the output of node '" + node.name + "' has " +
                        std::to_string(bytes.size()) + " bytes, expected " +
                        std::to_string(expected));
        std::string file = file_name_for(node.name);
        if (!files.insert(file).second) {  // two names that differ only in a '/'
            file = file.substr(0, file.size() - 4) + "_node" + std::to_string(n) + ".npy";
            files.insert(file);
        }
        const std::string path = (fs::path(dir) / file).string();
        if (ints)
            write_npy(path, reinterpret_cast<const int32_t*>(bytes.data()), out.shape);
        else
            write_npy(path, reinterpret_cast<const float*>(bytes.data()), out.shape);
        nlohmann::json inputs = nlohmann::json::array();
        for (ValueId v : node.inputs) inputs.push_back(g.value(v).name);
        nlohmann::json shape = nlohmann::json::array();
        for (int a = 0; a < out.shape.rank(); ++a) shape.push_back(out.shape[a]);
        nodes.push_back({{"index", static_cast<int64_t>(nodes.size())},
                         {"node", node.name},
                         {"op", std::string(op_name(node.op))},
                         {"inputs", inputs},
                         {"output", out.name},
                         {"shape", shape},
                         {"dtype", ints ? "i32" : "f32"},
                         {"file", file},
                         // Computed for the part a slice reads only (slice_narrowing.h): the
                         // shape is not the ONNX tensor's.
                         {"narrowed", node.has_tag(kNarrowedTag)}});
    }
    const nlohmann::json index = {
        {"network", network},
        {"strategy", strategy},
        {"values",
         "forward outputs of a separate untimed step of the measured schedule, after "
         "the measured steps; its gradients equal the measured step's bitwise"},
        {"nodes", nodes}};
    write_file_atomically((fs::path(dir) / "index.json").string(), {index.dump(1), "\n"});
}

// Writes the run's data, exactly what the executor reads: each parameter as
// DIR/<parameter name>.npy (float32, its shape) and each graph input as DIR/<input name>.npy
// (float32 data, int32 labels), so another framework can rebuild the same step.
void dump_weights(const Graph& g, const RunData& data, const std::string& dir) {
    namespace fs = std::filesystem;
    if (data.params.size() != static_cast<size_t>(g.num_params()) ||
        data.inputs.size() != g.inputs().size())
        throw Error("--dump-weights: the run has no parameter or input data");
    for (ParamId p = 0; p < g.num_params(); ++p) {
        const Param& param = g.param(p);
        write_npy((fs::path(dir) / file_name_for(param.name)).string(),
                  to_stored_layout(param, data.params[static_cast<size_t>(p)]->data()).data(),
                  stored_shape(param));
    }
    for (size_t i = 0; i < g.inputs().size(); ++i) {
        const Value& v = g.value(g.inputs()[i]);
        const std::string path = (fs::path(dir) / file_name_for(v.name)).string();
        const auto& bytes = data.inputs[i];
        if (v.dtype == DType::I32)
            write_npy(path, reinterpret_cast<const int32_t*>(bytes.data()), v.shape);
        else
            write_npy(path, reinterpret_cast<const float*>(bytes.data()), v.shape);
    }
}

// A float input's file: float32, or integers (an ONNX model's int64 attention mask, which the
// importer reads as floats) converted exactly.
std::vector<float> read_f32_or_integers(const std::string& path, Shape& shape) {
    try {
        return read_npy_f32(path, shape);
    } catch (const Error& not_f32) {
        std::vector<int64_t> ints;
        try {
            ints = read_npy_indices(path, shape);
        } catch (const Error&) {
            throw not_f32;
        }
        std::vector<float> values(ints.size());
        constexpr int64_t exact = int64_t{1} << 24;  // float32 holds every integer up to 2^24
        for (size_t k = 0; k < ints.size(); ++k) {
            if (ints[k] > exact || ints[k] < -exact)
                throw Error(path + ": element " + std::to_string(k) + " is " +
                            std::to_string(ints[k]) +
                            ", which float32 cannot hold exactly; this input is float32 (integers "
                            "are accepted up to 2^24)");
            values[k] = static_cast<float>(ints[k]);
        }
        return values;
    }
}

// --input FILE.npy (the network's only input, or its only f32 one) or NAME=FILE.npy, repeatable.
std::vector<GivenInput> given_inputs(const Graph& g, const std::vector<std::string>& options) {
    std::vector<GivenInput> out;
    for (const std::string& option : options) {
        if (option.empty()) continue;
        std::string name, path = option;
        if (const size_t eq = option.find('='); eq != std::string::npos && !g.find_value(option)) {
            name = option.substr(0, eq);
            path = option.substr(eq + 1);
        }
        if (name.empty()) {
            std::vector<std::string> f32;
            for (ValueId v : g.inputs())
                if (g.value(v).dtype == DType::F32) f32.push_back(g.value(v).name);
            if (g.inputs().size() == 1) {
                name = g.value(g.inputs().front()).name;
            } else if (f32.size() == 1) {
                name = f32.front();
            } else {
                std::string list;
                for (ValueId v : g.inputs())
                    list +=
                        (list.empty() ? "" : ", ") + format_type(g.value(v).dtype, g.value(v).shape)
                                                         .insert(0, g.value(v).name + " ");
                throw Error("--input: the network has " + std::to_string(g.inputs().size()) +
                            " inputs (" + list + "); say which with --input NAME=FILE.npy");
            }
        }
        GivenInput in;
        in.name = name;
        const auto v = g.find_value(name);
        in.is_indices = v && g.value(*v).is_input() && g.value(*v).dtype == DType::I32;
        try {
            if (in.is_indices)
                in.indices = read_npy_indices(path, in.shape);
            else
                in.values = read_f32_or_integers(path, in.shape);
        } catch (const Error& e) {
            throw Error("--input " + name + ": " + e.what());
        }
        out.push_back(std::move(in));
    }
    return out;
}

ReportContext context_for(const Graph& g, const std::string& network, const CostModel& costs,
                          int threads, int repeat, uint64_t cap) {
    ReportContext ctx{g, network, costs.kind(), threads, repeat, cap, {}, {}, {}, false, 0, {}};
    if (!g.plan_only()) {
        ctx.gemm = gemm_library_name(gemm_choice().library);
        ctx.gemm_small = gemm_library_name(gemm_choice().small_library);
        ctx.gemm_thin = gemm_library_name(gemm_choice().thin_library);
        const GemmShapeStats st = gemm_shape_stats();
        ctx.gemm_per_shape = st.on;
        ctx.gemm_shapes = st.shapes;
        for (const auto& [lib, count] : st.moved_to)
            ctx.gemm_moved.emplace_back(gemm_library_name(lib), count);
    }
    return ctx;
}

void print_line(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
}

std::unique_ptr<ProgressBar> progress_bar(bool json) {
    if (json || !ProgressBar::wanted()) return nullptr;
    return std::make_unique<ProgressBar>();
}

}  // namespace

namespace {

// What `run` and `compare` execute with: their shared options (RunOptions, CompareOptions),
// Ctrl-C cancelling, the progress bar (or none) observing.
template <class Options>
EvaluateOptions executing(const Graph& g, const Options& opt, ExecutionObserver* observer) {
    EvaluateOptions eo;
    eo.threads = opt.threads;
    eo.repeat = opt.repeat;
    eo.cap = opt.cap;
    eo.execute = true;
    eo.observer = observer;
    eo.cancel = cancel_on_interrupt();
    eo.inputs = given_inputs(g, opt.input);
    eo.device = opt.device;
    eo.link = opt.link;
    return eo;
}

}  // namespace

int run_command(const RunOptions& opt) {
    Graph g = load_network(opt.network);
    const Spec spec = checked_strategy_spec(opt.strategy);
    if (!opt.dump_grads.empty()) prepare_directory(opt.dump_grads);
    if (!opt.dump_weights.empty()) prepare_directory(opt.dump_weights, "--dump-weights");
    std::vector<unsigned char> keep;
    if (!opt.dump_activations.empty()) {
        keep = nodes_to_dump(g, opt.dump_activations_ops);
        prepare_directory(opt.dump_activations, "--dump-activations");
    }

    auto bar = progress_bar(opt.json);
    EvaluateOptions eo = executing(g, opt, bar.get());
    eo.keep_measured_gradients = !opt.dump_grads.empty() || !opt.dump_activations.empty();
    Evaluator ev(g, opt.network, eo);
    if (!opt.dump_weights.empty()) dump_weights(g, ev.data(), opt.dump_weights);
    const ReportContext ctx =
        context_for(g, opt.network, ev.costs(), opt.threads, opt.repeat, opt.cap);
    if (bar) bar->begin(opt.strategy, opt.repeat + 1);  // the warm-up step, then the timed ones
    Evaluation e = ev.evaluate(spec);
    if (bar) bar->clear();

    if (e.plan.status == PlanStatus::Infeasible) {
        CompareRow row{opt.strategy,    std::nullopt,
                       "infeasible",    infeasible_message(opt.strategy, e.plan),
                       kExitInfeasible, e.plan.min_feasible_budget};
        if (opt.json) print_line(failure_json(ctx, row));
        throw Infeasible(row.message);
    }
    if (!opt.dump_grads.empty()) {
        if (!e.measured) throw Error("--dump-grads: the strategy was not executed");
        dump_gradients(g, *e.measured, opt.dump_grads);
    }
    if (!opt.dump_activations.empty()) {
        if (!e.measured) throw Error("--dump-activations: the strategy was not executed");
        // After the measured steps, so that the copies cost them neither time nor bytes.
        const Execution pass = ev.forward_outputs(e, keep);
        bool same = pass.param_grads.size() == e.measured->param_grads.size() &&
                    std::memcmp(&pass.loss, &e.measured->loss, sizeof(double)) == 0;
        for (size_t p = 0; same && p < pass.param_grads.size(); ++p) {
            const auto &a = pass.param_grads[p], &b = e.measured->param_grads[p];
            same = a.size() == b.size() &&
                   (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        }
        if (!same)
            throw Error(
                "--dump-activations: the step that copied the activations gave other gradients "
                "than the measured one, so its values would not be this run's; no activations "
                "written");
        dump_activations(g, pass, keep, opt.network, opt.strategy, opt.dump_activations);
    }
    if (opt.json)
        print_line(evaluation_json(ctx, e));
    else
        std::cout << evaluation_text(ctx, e) << std::flush;
    return kExitOk;
}

int plan_command(const PlanOptions& opt) {
    Graph g = load_network(opt.network);
    const Spec spec = checked_strategy_spec(opt.strategy);
    EvaluateOptions eo;
    eo.threads = opt.threads;
    eo.execute = false;  // plan and simulate: nothing is allocated, so any size may be planned
    eo.nominal_rates = opt.nominal_rates;
    eo.link = opt.link;
    // Ctrl-C stops planning at its next poll (a DP's memory level, a portfolio's candidate; a
    // MILP solve when CBC returns) and exits 130; CBC would otherwise swallow the signal.
    eo.cancel = cancel_on_interrupt();
    Evaluator ev(g, opt.network, eo);
    const ReportContext ctx = context_for(g, opt.network, ev.costs(), opt.threads, 1, 0);

    const Evaluation e = ev.evaluate(spec);
    if (e.plan.status == PlanStatus::Infeasible) {
        CompareRow row{opt.strategy,    std::nullopt,
                       "infeasible",    infeasible_message(opt.strategy, e.plan),
                       kExitInfeasible, e.plan.min_feasible_budget};
        if (opt.json) print_line(failure_json(ctx, row));
        throw Infeasible(row.message);
    }
    std::optional<PerLayerReport> layers;
    if (opt.per_layer) layers = per_layer_activations(g, e.plan.schedule);
    if (opt.json) {
        print_line(evaluation_json(ctx, e, nullptr, layers ? &*layers : nullptr));
    } else {
        std::cout << to_text(g, e.plan.schedule) << '\n' << evaluation_text(ctx, e);
        if (layers) std::cout << per_layer_text(g, *layers);
        std::cout << std::flush;
    }
    return kExitOk;
}

int compare_command(const CompareOptions& opt) {
    Graph g = load_network(opt.network);
    const std::vector<std::string> texts = strategy_texts(opt.strategies);
    std::vector<Spec> specs;
    for (const auto& t : texts) specs.push_back(checked_strategy_spec(t));

    // The JSON lines come at the end, after the rounds, so a bar on a terminal's stderr cannot
    // interleave with them: compare draws it with --json too.
    auto bar = progress_bar(false);
    // A plan-only network (an abstract benchmark graph) has no kernels: its strategies are
    // planned and simulated, and the table shows predicted figures only.
    const bool plan_only = g.plan_only();
    EvaluateOptions eo = executing(g, opt, bar.get());
    if (plan_only) eo.execute = false;
    Evaluator ev(g, opt.network, eo);
    const ReportContext ctx =
        context_for(g, opt.network, ev.costs(), opt.threads, plan_only ? 1 : opt.repeat, opt.cap);

    // The overhead column is relative to `none`; measure it with the others (last, so that the
    // listed ones keep their indices) even when it is not listed.
    const bool none_listed = std::any_of(specs.begin(), specs.end(), [](const Spec& s) {
        return s.name == "none" && s.args.empty();
    });
    std::vector<Spec> measured = specs;
    if (!none_listed) measured.push_back(Spec{"none", {}});

    // A warm-up round and opt.repeat timed rounds, each running every strategy once in turn.
    const StepListener on_step = [&](int round, size_t i) {
        if (!bar) return;
        const std::string name = i < texts.size() ? texts[i] : std::string("none (baseline)");
        const std::string which =
            round == kPlanningRound ? std::string("planning")
            : round == 0            ? std::string("warm-up")
                         : "round " + std::to_string(round) + "/" + std::to_string(opt.repeat);
        const std::string label = name + " (" + std::to_string(i + 1) + "/" +
                                  std::to_string(measured.size()) + "), " + which;
        bar->clear();
        if (round == kPlanningRound) {
            bar->status(label);  // a long MILP or DP shows what it is doing
            return;
        }
        bar->begin(label, 1);
    };
    Comparison cmp = ev.compare(measured, on_step);
    if (bar) bar->clear();
    const bool cancelled = cmp.cancelled;
    std::optional<Evaluation> hidden_baseline;
    if (!none_listed && !cmp.strategies.back().error &&
        (cmp.strategies.back().eval.measured ||
         (plan_only && cmp.strategies.back().eval.plan.status != PlanStatus::Infeasible)))
        hidden_baseline = std::move(cmp.strategies.back().eval);

    // Ctrl-C stops between instructions; the rounds that every strategy completed are reported
    // (none when it came during the warm-up). Cancelled is no Error: no row becomes an error row.
    std::vector<CompareRow> rows;
    int exit_code = kExitOk;
    for (size_t i = 0; i < specs.size() && !(cancelled && cmp.rounds_done == 0); ++i) {
        CompareRow row;
        row.strategy = texts[i];
        ComparedStrategy& c = cmp.strategies[i];
        try {
            if (c.error) std::rethrow_exception(c.error);
            if (c.eval.plan.status == PlanStatus::Infeasible) {
                row.status = "infeasible";
                row.message = infeasible_message(texts[i], c.eval.plan);
                row.exit_code = kExitInfeasible;
                row.min_feasible_budget = c.eval.plan.min_feasible_budget;
            } else {
                row.status = plan_status_name(c.eval.plan.status);
                row.eval = std::move(c.eval);
            }
        } catch (const NotApplicable& err) {
            // Not a failure: the strategy has nothing to plan on this kind of network.
            row.status = "not applicable";
            row.message = err.what();
            row.exit_code = kExitOk;
        } catch (const CapExceeded& err) {
            row.status = "cap exceeded";
            row.message = err.what();
            row.exit_code = kExitCapExceeded;
        } catch (const Infeasible& err) {
            row.status = "infeasible";
            row.message = err.what();
            row.exit_code = kExitInfeasible;
        } catch (const Error& err) {
            row.status = "error";
            row.message = err.what();
            row.exit_code = kExitUserError;
        }
        if (exit_code == kExitOk) exit_code = row.exit_code;
        rows.push_back(std::move(row));
    }

    const Evaluation* baseline = hidden_baseline ? &*hidden_baseline : nullptr;
    for (size_t i = 0; i < rows.size(); ++i)
        if (specs[i].name == "none" && specs[i].args.empty() && rows[i].eval)
            baseline = &*rows[i].eval;
    if (opt.json) {
        for (const CompareRow& row : rows)
            print_line(row.eval ? evaluation_json(ctx, *row.eval, baseline)
                                : failure_json(ctx, row));
    } else if (!rows.empty()) {
        std::cout << compare_table(ctx, rows, baseline) << std::flush;
    }
    if (cancelled && cmp.order.empty()) {
        report_cancelled("stopped while planning, before any step; no rows");
        return kExitInterrupted;
    }
    if (cancelled) {
        report_cancelled(std::to_string(cmp.rounds_done) + " of " + std::to_string(opt.repeat) +
                         " timed rounds completed" +
                         (rows.empty() ? "" : std::string(", the rows above cover them")));
        return kExitInterrupted;
    }
    return exit_code;
}

int strategies_command() {
    for (const Strategy* s : strategies()) {
        std::cout << s->name() << " - " << s->about() << '\n';
        const ParamSchema schema = s->schema();
        if (schema.empty())
            std::cout << "  (no parameters)\n";
        else
            std::cout << describe_schema(schema);
        std::cout << '\n';
    }
    std::cout << "A strategy SPEC is 'name' or 'name:key=value,key=value'; sizes accept units "
                 "(512MiB, 1.5GiB, 64KB).\n";
    return kExitOk;
}

int gemm_command(const GemmOptions& opt) {
    if (opt.threads > 0) set_cpu_threads(opt.threads);
    const int threads = cpu_threads();
    const GemmChoice& choice = gemm_choice();
    GemmRates rates;
    if (opt.calibrate) rates = calibrate_gemm(threads);
    std::optional<FmaPeak> peak;
    if (opt.calibrate || opt.peak) peak = measure_fma_peak(threads);
    // A rate as a share of the peak, where both were measured.
    auto of_peak = [&](std::optional<double> r) -> std::optional<double> {
        if (!r || !peak || peak->gflops <= 0) return std::nullopt;
        return *r / peak->gflops;
    };
    auto rate_in = [](const std::vector<GemmRate>& in, GemmLibrary lib) -> std::optional<double> {
        for (const GemmRate& r : in)
            if (r.library == lib) return r.gflops;
        return std::nullopt;
    };
    auto rate_of = [&](GemmLibrary lib) { return rate_in(rates.large, lib); };
    auto small_rate_of = [&](GemmLibrary lib) { return rate_in(rates.small, lib); };
    auto thin_rate_of = [&](GemmLibrary lib) { return rate_in(rates.thin, lib); };
    if (opt.json) {
        nlohmann::json j;
        j["chosen"] = gemm_library_name(choice.library);
        j["small_products"] = {{"chosen", gemm_library_name(choice.small_library)},
                               {"below_flops", kSmallGemmFlops}};
        j["thin_products"] = {{"chosen", gemm_library_name(choice.thin_library)},
                              {"max_rows", kThinRows},
                              {"max_columns", kThinColumns},
                              {"min_operand_floats", kThinOperandFloats}};
        j["how"] = choice.how;
        j["threads"] = threads;
        j["build"] = build_instruction_set();
        if (!choice.cache_note.empty()) j["cache"] = choice.cache_note;
        const GemmShapeStats shapes = gemm_shape_stats();
        j["per_shape"] = {{"on", shapes.on},
                          {"min_flops", kShapeChoiceMinFlops},
                          {"cached_shapes", shapes.cached},
                          {"cached_moved", shapes.cached_moved}};
        if (!shapes.on) j["per_shape"]["why_off"] = shapes.why_off;
        if (!shapes.path.empty()) j["per_shape"]["file"] = shapes.path;
        for (const GemmLibraryInfo& i : gemm_libraries()) {
            nlohmann::json l = {{"name", gemm_library_name(i.library)}, {"available", i.available}};
            if (i.available) l["version"] = i.version;
            if (!i.path.empty()) l["path"] = i.path;
            if (!i.available) l["why_not"] = i.why_not;
            if (auto r = rate_of(i.library)) l["gflops"] = *r;
            if (auto f = of_peak(rate_of(i.library))) l["of_fma_peak"] = *f;
            if (auto r = small_rate_of(i.library)) l["small_gflops"] = *r;
            if (auto r = thin_rate_of(i.library)) l["thin_gflops"] = *r;
            j["libraries"].push_back(l);
        }
        if (peak)
            j["fma_peak"] = {{"gflops", peak->gflops},
                             {"lanes", peak->lanes},
                             {"chains", peak->chains},
                             {"threads", peak->threads}};
        std::cout << j.dump() << '\n';
        return kExitOk;
    }
    std::cout << "GEMM library: " << choice.summary() << '\n'
              << "  (this build's own kernels, Eigen's included: " << build_instruction_set()
              << ")\n";
    if (!choice.cache_note.empty()) std::cout << "  (" << choice.cache_note << ")\n";
    std::cout << "  " << gemm_shape_stats().summary() << '\n';
    // * marks the library of large products, + that of products under kSmallGemmFlops, ~ that
    // of thin ones.
    for (const GemmLibraryInfo& i : gemm_libraries()) {
        std::cout << "  " << (i.library == choice.library ? '*' : ' ')
                  << (i.library == choice.small_library ? '+' : ' ')
                  << (i.library == choice.thin_library ? '~' : ' ') << std::left << std::setw(9)
                  << gemm_library_name(i.library);
        if (!i.available) {
            std::cout << "not available: " << i.why_not << '\n';
            continue;
        }
        std::cout << i.version;
        if (!i.path.empty()) std::cout << " (" << i.path << ")";
        if (auto r = rate_of(i.library)) {
            std::cout << ": " << std::fixed << std::setprecision(1) << *r << " GFLOP/s";
            if (auto f = of_peak(r))
                std::cout << " (" << std::lround(100 * *f) << " % of the peak)";
        }
        if (auto r = small_rate_of(i.library))
            std::cout << ", " << *r << " GFLOP/s under " << small_gemm_label();
        if (auto r = thin_rate_of(i.library)) std::cout << ", " << *r << " GFLOP/s thin";
        std::cout << '\n';
    }
    std::cout << "  (* serves products of " << small_gemm_label() << " and more, + smaller ones, ~ "
              << "thin ones: at most " << kThinRows << " rows or " << kThinColumns
              << " columns against an operand of " << (kThinOperandFloats >> 10)
              << "K floats or more, of any size)\n";
    if (peak)
        std::cout << "FMA peak: " << std::fixed << std::setprecision(1) << peak->gflops
                  << " GFLOP/s at " << threads << " thread" << (threads == 1 ? "" : "s")
                  << " (this build's " << peak->lanes << "-float vectors: " << peak->chains
                  << " independent multiply-add chains on registers, no memory, best of 5 rounds; "
                     "no product passes it)\n";
    if (opt.calibrate)
        std::cout << "measured now at " << threads << " thread" << (threads == 1 ? "" : "s")
                  << ": geometric mean over each class's calibration shapes "
                     "(engine/cpu/gemm.cpp), best of 4 rounds alternating the libraries, after a "
                     "warm-up round; the choice above stays until its cache entry is deleted\n";
    return kExitOk;
}

int networks_command() {
    for (const PresetInfo& p : presets()) {
        std::cout << p.name << " - " << p.about << '\n';
        if (p.schema.empty())
            std::cout << "  (no parameters)\n";
        else
            std::cout << describe_schema(p.schema);
        std::cout << '\n';
    }
    std::cout << "A network SPEC is a preset with parameters ('mlp:depth=32,width=1024') or the "
                 "path of a\nnetwork file (anything with a '/' or ending in .json; see "
                 "docs/network-format.md).\n";
    return kExitOk;
}

int network_command(const NetworkOptions& opt) {
    // An ONNX model is read as the file has it and narrowed here, to say what that saved (a
    // network file or a preset is never narrowed).
    SliceNarrowing r{load_network(opt.network, /*narrow_onnx_slices=*/false), {}, 0, 0};
    if (is_onnx_spec(opt.network) && !opt.keep_slices) r = narrow_slices(r.graph);
    const Graph& g = r.graph;
    if (opt.out.empty()) {
        std::cout << network_to_json(g) << std::flush;
        return kExitOk;
    }
    save_network_file(g, opt.out);
    std::cout << "wrote " << opt.out << ": network '" << g.name() << "', " << g.num_nodes()
              << " nodes" << narrowed_note(g) << ", parameters " << format_bytes(g.param_bytes())
              << '\n';
    if (!r.narrowed.empty()) {
        const bool giga = r.flops_before >= 1e9;
        const double unit = giga ? 1e9 : 1e6;
        std::cout << "narrowed     " << r.narrowed.size()
                  << " nodes compute only what a slice reads: " << std::fixed
                  << std::setprecision(2) << r.flops_before / unit << " → " << r.flops_after / unit
                  << (giga ? " GFLOP" : " MFLOP") << " per step (forward and backward, −"
                  << std::setprecision(1) << 100.0 * (1.0 - r.flops_after / r.flops_before)
                  << " %); --keep-slices writes the file's graph\n";
    }
    return kExitOk;
}

namespace {

std::string csv_escape(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string fixed(double v, int digits = 3) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

// evaluation_json's object without its "solve_ms" member (a wall time, different every run).
std::string without_solve_ms(std::string object) {
    const std::string key = "\"solve_ms\":";
    const auto at = object.find(key);
    if (at == std::string::npos) return object;
    const auto comma = object.find(',', at);
    object.erase(at, comma == std::string::npos ? std::string::npos : comma + 1 - at);
    return object;
}

std::string ends_with_lower(const std::string& path) {
    const auto dot = path.rfind('.');
    std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
    for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return ext;
}

}  // namespace

void parse_shard(const std::string& text, int& index, int& count) {
    const auto slash = text.find('/');
    auto number = [&](const std::string& s) {
        if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
            return -1;
        return std::stoi(s);
    };
    const int i = slash == std::string::npos ? -1 : number(text.substr(0, slash));
    const int n = slash == std::string::npos ? -1 : number(text.substr(slash + 1));
    if (i < 1 || n < 1 || i > n)
        throw Error("--shard '" + text +
                    "': give I/N with 1 <= I <= N (e.g. --shard 3/8, or $((SLURM_ARRAY_TASK_ID+1))/"
                    "$SLURM_ARRAY_TASK_COUNT)");
    index = i;
    count = n;
}

std::pair<size_t, size_t> shard_range(size_t total, int index, int count) {
    const auto n = static_cast<size_t>(count), i = static_cast<size_t>(index - 1);
    return {total * i / n, total * (i + 1) / n};
}

int sweep_command(const SweepOptions& opt) {
    const std::string ext = opt.out.empty() ? "" : ends_with_lower(opt.out);
    if (!opt.out.empty() && ext != "csv" && ext != "json" && ext != "jsonl")
        throw Error("--out '" + opt.out + "': the file must end in .csv, .json or .jsonl");
    Graph g = load_network(opt.network);
    const std::vector<std::string> texts = strategy_texts(opt.strategies);
    std::vector<Spec> specs;
    for (const auto& t : texts) specs.push_back(checked_strategy_spec(t));

    EvaluateOptions eo;
    eo.threads = opt.threads;
    eo.execute = opt.execute;
    eo.nominal_rates = opt.nominal_rates || opt.shards > 1;
    // Only an execution checks for cancellation (between instructions); planning alone keeps
    // Ctrl-C's default, which ends the process at once (the output file is written atomically).
    if (opt.execute) eo.cancel = cancel_on_interrupt();
    Evaluator ev(g, opt.network, eo);
    const ReportContext ctx = context_for(g, opt.network, ev.costs(), opt.threads, 1, 0);
    rl::SweepOptions so;
    so.budgets = opt.budgets;
    so.budget_list = opt.budget_list;

    // Every point of the whole sweep, in order; this part evaluates its contiguous share.
    std::vector<Spec> all;
    std::vector<std::optional<uint64_t>> all_budgets;
    for (const Spec& spec : specs) {
        std::vector<std::optional<uint64_t>> budgets;
        for (const Spec& s : sweep_specs(g, ev.costs(), spec, so, &budgets)) all.push_back(s);
        all_budgets.insert(all_budgets.end(), budgets.begin(), budgets.end());
    }
    const auto [begin, end] = shard_range(all.size(), opt.shard, opt.shards);
    std::vector<SweepPoint> points;
    for (size_t k = begin; k < end; ++k) {
        if (interrupted()) throw Cancelled();
        if (ProgressBar::wanted())
            std::fprintf(stderr, "sweeping %s...\n", format_spec(all[k]).c_str());
        SweepPoint p;
        p.budget = all_budgets[k];
        p.eval = ev.evaluate(all[k]);
        p.eval.predicted.timeline.clear();  // a sweep keeps the figures, not the timelines
        if (p.eval.measured) p.eval.measured->timeline.clear();
        points.push_back(std::move(p));
    }
    std::string jsonl;  // one object per line, without the planner's wall time (solve_ms), so
                        // that parts concatenate into exactly the whole sweep

    std::string csv =
        "strategy,budget,status,predicted_peak_bytes,predicted_activation_peak_bytes,"
        "predicted_recompute_ms,predicted_total_ms,measured_peak_bytes,activation_peak_bytes,"
        "recompute_ms,total_ms,grads_bitwise_equal_to_none\n";
    std::string json = "[\n";
    std::string table;
    char line[512];
    std::snprintf(line, sizeof line, "%-36s %12s %-10s %12s %12s %12s %12s %12s %5s\n", "strategy",
                  "budget", "status", "pred. peak", "pred. recomp", "pred. total", "meas. peak",
                  "meas. recomp", "grads");
    table += line;
    table += std::string(std::strlen(line) - 1, '-') + "\n";
    for (size_t i = 0; i < points.size(); ++i) {
        const Evaluation& e = points[i].eval;
        const bool ok = e.plan.status != PlanStatus::Infeasible;
        const std::string budget = points[i].budget ? std::to_string(*points[i].budget) : "";
        const std::string status = plan_status_name(e.plan.status);
        csv += csv_escape(e.strategy) + "," + budget + "," + status + ",";
        if (ok) {
            csv += std::to_string(e.predicted.peak_bytes) + "," +
                   std::to_string(e.predicted.activation_peak_bytes()) + "," +
                   fixed(e.predicted.recompute_ms, 6) + "," + fixed(e.predicted.total_ms(), 6);
        } else {
            csv += ",,,";
        }
        csv += ",";
        if (e.measured)
            csv += std::to_string(e.measured->peak_bytes) + "," +
                   std::to_string(e.measured->activation_peak_bytes()) + "," +
                   fixed(e.measured->recompute_ms, 6) + "," + fixed(e.measured->total_ms, 6) + "," +
                   (e.grads_bitwise_equal_to_none ? "true" : "false");
        else
            csv += ",,,,";
        csv += "\n";
        const std::string object =
            ok ? evaluation_json(ctx, e)
               : failure_json(ctx,
                              CompareRow{e.strategy, std::nullopt, "infeasible", e.plan.message,
                                         kExitInfeasible, e.plan.min_feasible_budget});
        json += "  " + object;
        jsonl += without_solve_ms(object) + "\n";
        json += i + 1 < points.size() ? ",\n" : "\n";
        std::snprintf(line, sizeof line, "%-36s %12s %-10s %12s %12s %12s %12s %12s %5s\n",
                      e.strategy.c_str(),
                      points[i].budget ? format_bytes(*points[i].budget).c_str() : "",
                      status.c_str(), ok ? format_bytes(e.predicted.peak_bytes).c_str() : "",
                      ok ? fixed(e.predicted.recompute_ms).c_str() : "",
                      ok ? fixed(e.predicted.total_ms()).c_str() : "",
                      e.measured ? format_bytes(e.measured->peak_bytes).c_str() : "",
                      e.measured ? fixed(e.measured->recompute_ms).c_str() : "",
                      e.measured ? (e.grads_bitwise_equal_to_none ? "yes" : "NO") : "");
        table += line;
    }
    json += "]\n";
    if (opt.out.empty()) {
        std::cout << opt.network << ": " << points.size() << " points (times in ms, "
                  << (opt.execute ? "predicted and measured"
                                  : "predicted; add --execute to run them")
                  << ")\n\n"
                  << table << std::flush;
    } else {
        write_file_atomically(opt.out, {ext == "csv" ? csv : ext == "jsonl" ? jsonl : json});
        std::cout << "wrote " << points.size() << " points to " << opt.out << "\n";
    }
    return kExitOk;
}

int export_command(const ExportOptions& opt) {
    namespace fs = std::filesystem;
    if (opt.chart != "pareto" && opt.chart != "memory" && opt.chart != "schedule" &&
        opt.chart != "graph")
        throw Error("--chart: unknown chart '" + opt.chart +
                    "'; use pareto, memory, schedule or graph");
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    const fs::path gui = (ec ? fs::path(".") : self.parent_path()) / "rematlab";
    if (!fs::exists(gui, ec))
        throw Error("export draws its charts with the desktop app, but '" + gui.string() +
                    "' is missing; build it (scripts/build, or cmake -DREMATLAB_BUILD_GUI=ON after "
                    "scripts/install-deps) and keep it next to rematlab-cli");
    std::vector<std::string> args = {gui.string(), "--export",     "--network",
                                     opt.network,  "--strategies", opt.strategies,
                                     "--chart",    opt.chart,      "--out",
                                     opt.out,      "--threads",    std::to_string(opt.threads)};
    if (!opt.size.empty()) args.insert(args.end(), {"--size", opt.size});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    setenv("QT_QPA_PLATFORM", "offscreen", 0);  // headless unless the caller chose a platform
    std::fflush(stdout);
    execv(gui.c_str(), argv.data());
    throw Error("cannot start '" + gui.string() + "': " + std::strerror(errno));
}

int residuals_command(const ResidualsOptions& opt) {
    const Graph g = load_network(opt.network);
    const Spec spec = checked_strategy_spec(opt.strategy);
    const Plan plan = plan_with(g, CostModel::analytic(g, DeviceRates{}), spec);
    if (plan.status == PlanStatus::Infeasible)
        throw Infeasible(infeasible_message(opt.strategy, plan));
    ResidualOptions ro;
    ro.names = checkpoint_names(spec);
    ro.include_loss = opt.include_loss;
    std::cout << format_saved_residuals(saved_residuals(g, plan.schedule, ro)) << std::flush;
    return kExitOk;
}

int explain_command(const ExplainOptions& opt) {
    const Graph g = load_network(opt.network);
    const Spec spec = checked_strategy_spec(opt.strategy);
    const CostModel costs = CostModel::analytic(g, DeviceRates::measure_cpu());
    const Plan plan = plan_with(g, costs, spec);
    if (plan.status == PlanStatus::Infeasible)
        throw Infeasible(infeasible_message(opt.strategy, plan));
    const Simulation sim = simulate(g, plan.schedule, costs);
    const ScheduleExplainer ex(g, plan, sim, costs);
    const long n = ex.size();
    if (opt.at >= n)
        throw Error("--at " + std::to_string(opt.at) + ": the schedule has " + std::to_string(n) +
                    " instructions (0 to " + std::to_string(n - 1) + ")");
    const long first = opt.at >= 0 ? opt.at : 0, last = opt.at >= 0 ? opt.at : n - 1;
    const int width = static_cast<int>(std::to_string(n - 1).size());
    for (long i = first; i <= last; ++i) {
        const Explanation e = ex.explain(i);
        std::string index = std::to_string(i);
        index.insert(0, static_cast<size_t>(width) - index.size(), ' ');
        std::cout << "#" << index << "  " << e.what << "\n"
                  << std::string(static_cast<size_t>(width) + 3, ' ') << e.why << "\n";
    }
    std::cout << std::flush;
    return kExitOk;
}

}  // namespace rl::cli
