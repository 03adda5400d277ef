// `rematlab-cli solve --graph FILE --budget 0.9|BYTES --method M --time-limit S [--json]`.
#include "cli/solve.h"

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/units.h"
#include "solvers/general/solve.h"

namespace rl::cli {

namespace {

struct SolveCliOptions {
    std::string graph;
    std::string budget = "0.9";
    std::string method = "auto";
    double time_limit_s = 60;
    int max_computations = 0;
    int node_limit = 0;
    int max_windows = 0;
    uint32_t seed = 1;
    bool json = false;
    bool verbose = false;
};

// "0.9" (a fraction of the peak without recomputation: a number with a decimal point, or <= 1)
// or a size in bytes ("28GiB", "117472").
uint64_t resolve_budget(const std::string& text, const general::AbstractGraph& g) {
    char* end = nullptr;
    const double x = std::strtod(text.c_str(), &end);
    const bool number = end && *end == '\0' && !text.empty();
    if (number && (text.find('.') != std::string::npos || x <= 1)) {
        if (!(x > 0) || x > 1)
            throw Error("--budget " + text +
                        ": a fraction of the peak without recomputation must be in (0, 1]");
        return general::budget_from_fraction(g, x);
    }
    return parse_bytes(text);
}

std::atomic<bool> g_solve_interrupted{false};
// The report of the best schedule so far, ready for an interrupt: a signal handler may only
// write() and _exit(), so the text is rendered before the long search starts.
std::atomic<const std::string*> g_ready_report{nullptr};
// The real stdout: the MILP points fd 1 at /dev/null while CBC runs (it prints regardless of its
// log level).
int g_stdout_fd = STDOUT_FILENO;

void on_solve_interrupt(int) {
    g_solve_interrupted.store(true);
    if (const std::string* r = g_ready_report.load()) {
        ssize_t ignored = write(g_stdout_fd, r->data(), r->size());
        static const char kNote[] = "rematlab-cli: interrupted; printed the best schedule so far\n";
        ignored = write(STDERR_FILENO, kNote, sizeof kNote - 1);
        (void)ignored;
    }
    _exit(kExitInterrupted);
}

std::string render(const SolveCliOptions& opt, const general::AbstractGraph& g,
                   const general::GeneralProblem& p, uint64_t peak0, const general::SolveResult& r,
                   bool interrupted) {
    const double base = g.total_duration();
    nlohmann::json j;
    j["graph"] = g.name;
    j["file"] = opt.graph;
    j["nodes"] = g.size();
    j["edges"] = g.num_edges();
    j["method"] = opt.method;
    j["max_computations"] = opt.max_computations;
    j["time_limit_s"] = opt.time_limit_s;
    j["node_limit"] = opt.node_limit;
    j["max_windows"] = opt.max_windows;
    j["seed"] = opt.seed;
    j["peak_no_remat"] = peak0;
    j["budget"] = p.budget;
    j["sum_durations"] = base;
    j["feasible"] = r.found;
    j["interrupted"] = interrupted;
    j["solve_s"] = r.solve_s;
    j["milp_attempted"] = r.milp_attempted;
    j["milp_columns"] = r.milp_columns;
    j["milp_rows"] = r.milp_rows;
    j["lns_windows"] = r.lns_windows;
    if (r.found) {
        j["source"] = r.source;
        j["total_duration"] = r.sim.total_duration;
        j["tdi"] = general::tdi(g, r.sim.total_duration);
        j["lower_bound"] = r.lower_bound;
        j["lower_bound_tdi"] = general::tdi(g, r.lower_bound);
        j["gap"] = r.gap();
        j["proven_optimal"] = r.proven_optimal;
        j["time_to_best_s"] = r.time_to_best_s;
        j["computations"] = r.sim.computations;
        j["peak"] = r.sim.peak_bytes;
    }
    if (!r.message.empty()) j["message"] = r.message;
    if (opt.json) return j.dump() + "\n";
    std::string out;
    char line[512];
    auto add = [&](const char* fmt, auto... args) {
        std::snprintf(line, sizeof line, fmt, args...);
        out += line;
    };
    add("graph          %s (%d nodes, %lld edges)\n", g.name.c_str(), g.size(),
        static_cast<long long>(g.num_edges()));
    add("method         %s%s\n", opt.method.c_str(),
        r.found ? (" (best from " + r.source + ")").c_str() : "");
    add("peak_no_remat  %llu B (%s)\n", static_cast<unsigned long long>(peak0),
        format_bytes(peak0).c_str());
    add("budget         %llu B (%s)\n", static_cast<unsigned long long>(p.budget),
        format_bytes(p.budget).c_str());
    if (r.found) {
        add("total_duration %.17g (sum of durations %.17g)\n", r.sim.total_duration, base);
        add("tdi            %.4f %%\n", 100 * general::tdi(g, r.sim.total_duration));
        add("lower_bound    %.17g (tdi %.4f %%)%s\n", r.lower_bound,
            100 * general::tdi(g, r.lower_bound), r.proven_optimal ? ", proven optimal" : "");
        add("gap            %.4f %%\n", 100 * r.gap());
        add("time_to_best_s %.3f\n", r.time_to_best_s);
        add("solve_s        %.3f%s\n", r.solve_s, interrupted ? " (interrupted)" : "");
        add("computations   %ld (%d nodes)\n", r.sim.computations, g.size());
        add("peak           %llu B (re-simulated, <= budget)\n",
            static_cast<unsigned long long>(r.sim.peak_bytes));
    }
    return out;
}

int solve_command(const SolveCliOptions& opt) {
    const general::AbstractGraph g = general::load_abstract_graph(opt.graph);
    general::GeneralProblem p;
    p.graph = &g;
    p.budget = resolve_budget(opt.budget, g);
    p.max_computations = opt.max_computations;
    const uint64_t peak0 = general::peak_no_remat(g);
    general::SolveOptions so;
    so.method = opt.method;
    so.time_limit_s = opt.time_limit_s;
    so.node_limit = opt.node_limit;
    so.max_windows = opt.max_windows;
    so.seed = opt.seed;
    so.log_level = opt.verbose ? 1 : 0;
    so.cancel = &g_solve_interrupted;
    // Reports rendered for an interrupt stay alive until exit.
    static std::vector<std::unique_ptr<std::string>> ready;
    so.on_improved = [&](const general::SolveResult& best) {
        general::SolveResult partial = best;
        partial.solve_s = best.time_to_best_s;
        ready.push_back(std::make_unique<std::string>(render(opt, g, p, peak0, partial, true)));
        g_ready_report.store(ready.back().get());
    };
    // Ctrl-C prints the best schedule so far and exits 130; during the MILP, CBC's own SIGINT
    // handler (when it installs one) stops its search instead and the result is printed below.
    std::fflush(stdout);
    g_stdout_fd = dup(STDOUT_FILENO);
    if (g_stdout_fd < 0) g_stdout_fd = STDOUT_FILENO;
    std::signal(SIGINT, on_solve_interrupt);
    const general::SolveResult r = general::solve_general(p, so);
    std::signal(SIGINT, SIG_DFL);
    g_ready_report.store(nullptr);
    const bool interrupted = r.interrupted || g_solve_interrupted.load();
    const std::string out = render(opt, g, p, peak0, r, interrupted);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    if (!r.found) throw Infeasible(opt.graph + ": " + r.message);
    return interrupted ? kExitInterrupted : kExitOk;
}

}  // namespace

SubcommandHandle add_solve_command(CLI::App& app) {
    auto opt = std::make_shared<SolveCliOptions>();
    auto* sub = app.add_subcommand(
        "solve",
        "the general rematerialization problem (Checkmate / Moccasin) on an abstract graph file: "
        "frontier-advancing stages, any node recomputable, minimal total duration under a budget");
    sub->add_option("--graph,-g", opt->graph,
                    "node-link JSON graph: Moccasin's random layered DAGs or Checkmate's Keras "
                    "graphs")
        ->required();
    sub->add_option("--budget,-b", opt->budget,
                    "a fraction of the peak without recomputation (0.9) or bytes (28GiB, 117472)")
        ->capture_default_str();
    std::string methods;
    for (const auto& m : general::solve_methods()) methods += (methods.empty() ? "" : ", ") + m;
    sub->add_option(
           "--method,-m", opt->method,
           "one of " + methods +
               " (auto: the baselines, then the MILP warm-started from the best with half the "
               "time, then the large-neighbourhood search over MILP windows with the rest; lns: "
               "the baselines, then the search)")
        ->check(CLI::IsMember(general::solve_methods()))
        ->capture_default_str();
    sub->add_option("--time-limit", opt->time_limit_s, "seconds for the whole solve")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    sub->add_option("--max-computations", opt->max_computations,
                    "at most this many computations of any node (Moccasin uses 2); 0: no limit")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--node-limit", opt->node_limit,
                    "stop each CBC solve (the whole MILP and each window of the search) at this "
                    "many branch-and-bound nodes, and grow the search's windows on proof, not on "
                    "speed: with --max-windows, the same run ends in the same place on any "
                    "machine, loaded or not, unless --time-limit comes first; 0: by time only")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--max-windows", opt->max_windows,
                    "end the search after this many windows; 0: no limit")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--seed", opt->seed, "where the search places its windows")
        ->capture_default_str();
    sub->add_flag("--json", opt->json, "print one JSON object");
    sub->add_flag("--verbose", opt->verbose,
                  "show CBC's log (of the whole MILP) and one line per window of the search");
    return {sub, [opt] { return solve_command(*opt); }};
}

}  // namespace rl::cli
