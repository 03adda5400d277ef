#include "ui/session.h"

#include <QFile>
#include <QFileInfo>
#include <nlohmann/json.hpp>

#include "engine/atomic_file.h"
#include "engine/errors.h"
#include "engine/json_text.h"
#include "engine/networks/network_json.h"
#include "engine/ops/op.h"
#include "engine/units.h"
#include "ui/evaluation.h"
#include "ui/qt_text.h"
#include "ui/schedule_trace.h"

namespace rl::ui {

using nlohmann::json;

namespace {

constexpr int kVersion = 1;

std::string s(const QString& text) {
    return text.toStdString();
}
template <typename T>
json opt(const std::optional<T>& v) {
    return v ? json(*v) : json(nullptr);
}
template <typename T>
std::optional<T> opt_of(const json& j, const char* key) {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    return j.at(key).get<T>();
}

json spread_json(const Spread& sp) {
    return {{"median", sp.median}, {"min", sp.min}, {"max", sp.max}, {"samples", sp.samples}};
}

Spread spread_from(const json& j) {
    Spread sp;
    sp.median = j.at("median").get<double>();
    sp.min = j.at("min").get<double>();
    sp.max = j.at("max").get<double>();
    sp.samples = j.at("samples").get<int>();
    if (sp.samples < 1 || !(sp.min <= sp.median && sp.median <= sp.max))
        throw Error("a time spread is not median " + std::to_string(sp.median) + " within [" +
                    std::to_string(sp.min) + ", " + std::to_string(sp.max) + "] over " +
                    std::to_string(sp.samples) + " samples");
    return sp;
}

std::optional<Spread> opt_spread(const json& j, const char* key) {
    if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
    return spread_from(j.at(key));
}

json times_json(const std::optional<MeasuredTimes>& t) {
    if (!t) return nullptr;
    return {{"forward", spread_json(t->forward)},
            {"recompute", spread_json(t->recompute)},
            {"backward", spread_json(t->backward)},
            {"total", spread_json(t->total)},
            {"cpu", spread_json(t->cpu)}};
}

std::optional<MeasuredTimes> times_of(const json& j) {
    if (!j.contains("times") || j.at("times").is_null()) return std::nullopt;
    const json& t = j.at("times");
    return MeasuredTimes{spread_from(t.at("forward")), spread_from(t.at("recompute")),
                         spread_from(t.at("backward")), spread_from(t.at("total")),
                         spread_from(t.at("cpu"))};
}

// A lane of a timeline: [[x, y, instruction], ...].
json lane_json(const std::vector<XY>& points, const std::vector<int32_t>& instruction) {
    json pts = json::array();
    for (size_t i = 0; i < points.size(); ++i)
        pts.push_back({points[i].x, points[i].y, instruction[i]});
    return pts;
}

void lane_of(const json& j, std::vector<XY>& points, std::vector<int32_t>& instruction) {
    points.reserve(j.size());
    instruction.reserve(j.size());
    for (const json& p : j) {
        points.push_back({p.at(0).get<double>(), p.at(1).get<double>()});
        instruction.push_back(p.at(2).get<int32_t>());
    }
}

json timeline_json(const std::shared_ptr<const Timeline>& t) {
    if (!t) return nullptr;
    return lane_json(t->points, t->instruction);
}

// The host lane (offload) beside the device one; null without offload.
json host_lane_json(const std::shared_ptr<const Timeline>& t) {
    if (!t || t->host.empty()) return nullptr;
    return lane_json(t->host, t->host_instruction);
}

// `host`: the host lane saved beside it (null, or absent in sessions saved before offload).
std::shared_ptr<const Timeline> timeline_of(const json& j, const json* host = nullptr) {
    if (j.is_null()) return nullptr;
    auto t = std::make_shared<Timeline>();
    lane_of(j, t->points, t->instruction);
    if (host && !host->is_null()) lane_of(*host, t->host, t->host_instruction);
    return t;
}

const char* kind_name(InstrKind k) {
    switch (k) {
        case InstrKind::Compute:
            return "compute";
        case InstrKind::Free:
            return "free";
        case InstrKind::Backward:
            return "backward";
        case InstrKind::Offload:
            return "offload";
        case InstrKind::Prefetch:
            return "prefetch";
        case InstrKind::Wait:
            return "wait";
    }
    return "?";
}

InstrKind kind_of(const std::string& name) {
    if (name == "compute") return InstrKind::Compute;
    if (name == "free") return InstrKind::Free;
    if (name == "backward") return InstrKind::Backward;
    if (name == "offload") return InstrKind::Offload;
    if (name == "prefetch") return InstrKind::Prefetch;
    if (name == "wait") return InstrKind::Wait;
    throw Error("unknown instruction '" + name + "'");
}

PlanStatus status_of(const std::string& name) {
    for (PlanStatus st :
         {PlanStatus::Optimal, PlanStatus::Feasible, PlanStatus::Heuristic, PlanStatus::Infeasible})
        if (name == plan_status_name(st)) return st;
    throw Error("unknown plan status '" + name + "'");
}

json plan_json(const Plan& p) {
    json code = json::array();
    for (const Instruction& ins : p.schedule.code)
        code.push_back({kind_name(ins.kind), ins.target});
    return {{"schedule", code},
            {"status", plan_status_name(p.status)},
            {"solve_ms", p.solve_ms},
            {"budget", opt(p.budget)},
            {"min_feasible_budget", opt(p.min_feasible_budget)},
            {"checkpoints", p.checkpoints},
            {"method", p.method},
            {"lower_bound_ms", opt(p.lower_bound_ms)},
            {"gap", opt(p.gap)},
            {"message", p.message}};
}

Plan plan_of(const json& j) {
    Plan p;
    for (const json& ins : j.at("schedule"))
        p.schedule.code.push_back(
            {kind_of(ins.at(0).get<std::string>()), ins.at(1).get<int32_t>()});
    p.status = status_of(j.at("status").get<std::string>());
    p.solve_ms = j.at("solve_ms").get<double>();
    p.budget = opt_of<uint64_t>(j, "budget");
    p.min_feasible_budget = opt_of<uint64_t>(j, "min_feasible_budget");
    p.checkpoints = j.at("checkpoints").get<std::vector<NodeId>>();
    p.method = j.at("method").get<std::string>();
    p.lower_bound_ms = opt_of<double>(j, "lower_bound_ms");
    p.gap = opt_of<double>(j, "gap");
    p.message = j.at("message").get<std::string>();
    return p;
}

json result_json(const StrategyResult& r) {
    json j = {{"name", s(r.name)},
              {"spec", s(r.spec)},
              {"status", s(r.status)},
              {"message", s(r.message)},
              {"budget", opt(r.budget)},
              {"min_feasible_budget", opt(r.min_feasible_budget)},
              {"solve_ms", r.solve_ms},
              {"method", s(r.method)},
              {"gap", opt(r.gap)},
              {"lower_bound_ms", opt(r.lower_bound_ms)},
              {"planned", r.planned},
              {"predicted_peak", r.predicted_peak},
              {"predicted_activation_peak", r.predicted_activation_peak},
              {"predicted_peak_instruction", s(r.predicted_peak_instruction)},
              {"instructions", r.instructions},
              {"computes", r.computes},
              {"recomputes", r.recomputes},
              {"predicted_forward_ms", r.predicted_forward_ms},
              {"predicted_recompute_ms", r.predicted_recompute_ms},
              {"predicted_backward_ms", r.predicted_backward_ms},
              {"predicted_total_ms", r.predicted_total_ms},
              {"cost_model", s(r.cost_model)},
              {"executed", r.executed},
              {"measured_peak", r.measured_peak},
              {"measured_activation_peak", r.measured_activation_peak},
              {"measured_peak_instruction", s(r.measured_peak_instruction)},
              {"forward_ms", r.forward_ms},
              {"recompute_ms", r.recompute_ms},
              {"backward_ms", r.backward_ms},
              {"total_ms", r.total_ms},
              {"loss", r.loss},
              {"grads_equal", r.grads_equal},
              {"max_grad_diff", r.max_grad_diff},
              {"predicted_host_peak", r.predicted_host_peak},
              {"measured_host_peak", r.measured_host_peak},
              {"predicted_stall_ms", r.predicted_stall_ms},
              {"stall_ms", r.stall_ms},
              {"predicted_timeline", timeline_json(r.predicted_timeline)},
              {"predicted_host_timeline", host_lane_json(r.predicted_timeline)},
              {"measured_timeline", timeline_json(r.measured_timeline)},
              {"times", times_json(r.times)},
              {"stale_measured_as", s(r.stale_measured_as)}};
    if (r.trace) {
        j["plan"] = plan_json(r.trace->plan);
        std::vector<double> fwd, bwd;
        for (size_t n = 0; n < r.trace->costs.size(); ++n) {
            fwd.push_back(r.trace->costs.forward_ms(NodeId(n)));
            bwd.push_back(r.trace->costs.backward_ms(NodeId(n)));
        }
        j["costs"] = {{"kind", r.trace->costs.kind()}, {"forward_ms", fwd}, {"backward_ms", bwd}};
        if (r.trace->costs.has_recompute_times()) {
            std::vector<double> rec;
            for (size_t n = 0; n < r.trace->costs.size(); ++n)
                rec.push_back(r.trace->costs.recompute_ms(NodeId(n)));
            j["costs"]["recompute_ms"] = rec;
        }
    }
    return j;
}

StrategyResult result_of(const json& j, const std::shared_ptr<const Graph>& graph) {
    StrategyResult r;
    r.name = to_qstring(j.at("name").get<std::string>());
    r.spec = to_qstring(j.at("spec").get<std::string>());
    r.status = to_qstring(j.at("status").get<std::string>());
    r.message = to_qstring(j.at("message").get<std::string>());
    r.budget = opt_of<uint64_t>(j, "budget");
    r.min_feasible_budget = opt_of<uint64_t>(j, "min_feasible_budget");
    r.solve_ms = j.at("solve_ms").get<double>();
    r.method = to_qstring(j.value("method", std::string()));
    r.gap = opt_of<double>(j, "gap");
    r.lower_bound_ms = opt_of<double>(j, "lower_bound_ms");
    r.planned = j.at("planned").get<bool>();
    r.predicted_peak = j.at("predicted_peak").get<uint64_t>();
    r.predicted_activation_peak = j.at("predicted_activation_peak").get<uint64_t>();
    r.predicted_peak_instruction =
        to_qstring(j.at("predicted_peak_instruction").get<std::string>());
    r.instructions = j.at("instructions").get<long>();
    r.computes = j.at("computes").get<long>();
    r.recomputes = j.at("recomputes").get<long>();
    r.predicted_forward_ms = j.at("predicted_forward_ms").get<double>();
    r.predicted_recompute_ms = j.at("predicted_recompute_ms").get<double>();
    r.predicted_backward_ms = j.at("predicted_backward_ms").get<double>();
    r.predicted_total_ms = j.at("predicted_total_ms").get<double>();
    r.cost_model = to_qstring(j.at("cost_model").get<std::string>());
    r.executed = j.at("executed").get<bool>();
    r.measured_peak = j.at("measured_peak").get<uint64_t>();
    r.measured_activation_peak = j.at("measured_activation_peak").get<uint64_t>();
    r.measured_peak_instruction = to_qstring(j.at("measured_peak_instruction").get<std::string>());
    r.forward_ms = j.at("forward_ms").get<double>();
    r.recompute_ms = j.at("recompute_ms").get<double>();
    r.backward_ms = j.at("backward_ms").get<double>();
    r.total_ms = j.at("total_ms").get<double>();
    r.loss = j.at("loss").get<double>();
    r.grads_equal = j.at("grads_equal").get<bool>();
    r.max_grad_diff = j.at("max_grad_diff").get<double>();
    // Offload's figures (absent from sessions saved before it: none offloaded then).
    r.predicted_host_peak = j.value("predicted_host_peak", uint64_t{0});
    r.measured_host_peak = j.value("measured_host_peak", uint64_t{0});
    r.predicted_stall_ms = j.value("predicted_stall_ms", 0.0);
    r.stall_ms = j.value("stall_ms", 0.0);
    const json no_host;
    r.predicted_timeline = timeline_of(
        j.at("predicted_timeline"),
        j.contains("predicted_host_timeline") ? &j.at("predicted_host_timeline") : &no_host);
    r.measured_timeline = timeline_of(j.at("measured_timeline"));
    // Kept since the spreads and stale marks are saved; older sessions have neither.
    if (r.executed) r.times = times_of(j);
    r.stale_measured_as = to_qstring(j.value("stale_measured_as", std::string()));
    if (j.contains("plan")) {
        Plan plan = plan_of(j.at("plan"));
        validate(*graph, plan.schedule);  // a hand-edited file: say where it is wrong
        const json& c = j.at("costs");
        CostModel costs = CostModel::from_times(c.at("kind").get<std::string>(),
                                                c.at("forward_ms").get<std::vector<double>>(),
                                                c.at("backward_ms").get<std::vector<double>>(),
                                                c.value("recompute_ms", std::vector<double>{}));
        if (costs.size() != 0 && costs.size() != size_t(graph->num_nodes()))
            throw Error("the cost model of '" + s(r.spec) + "' has " +
                        std::to_string(costs.size()) + " nodes, the network " +
                        std::to_string(graph->num_nodes()));
        r.instruction_text =
            std::make_shared<std::vector<QString>>(instruction_texts(*graph, plan.schedule));
        r.trace = make_trace(graph, s(r.spec), std::move(plan), std::move(costs));
    }
    return r;
}

std::string dot_id(const std::string& name) {
    std::string out = "\"";
    for (char c : name) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

}  // namespace

void save_session(const QString& path, const Session& session) {
    if (!session.graph) throw Error("cannot save a session without a network");
    json results = json::array();
    for (const StrategyResult& r : session.results) results.push_back(result_json(r));
    json strategies = json::array();
    for (const QString& spec : session.strategies) strategies.push_back(s(spec));
    const json j = {{"format", "rematlab-session"},
                    {"version", kVersion},
                    {"network_spec", s(session.network_spec)},
                    {"network", json::parse(network_to_json(*session.graph))},
                    {"strategies", strategies},
                    {"budget", opt(session.budget)},
                    {"threads", session.threads},
                    {"cap", s(session.cap)},
                    {"baseline_total_ms", opt(session.baseline_ms)},
                    {"baseline_total",
                     session.baseline_spread ? spread_json(*session.baseline_spread) : json()},
                    {"results", results}};
    write_file_atomically(s(path), {j.dump(1), "\n"});
}

Session load_session(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        throw Error("cannot open session '" + s(path) + "': " + s(f.errorString()));
    const QByteArray bytes = f.readAll();
    json j;
    try {
        j = json::parse(bytes.constData(), bytes.constData() + bytes.size());
    } catch (const json::exception& e) {
        // Every failure of the parser (out_of_range for a number beyond a double included),
        // with the line and column.
        throw Error("session " + json_parse_failure(bytes.toStdString(), s(path), e));
    }
    try {
        if (j.value("format", std::string()) != "rematlab-session")
            throw Error("not a RematLab session (no \"format\": \"rematlab-session\")");
        const int version = j.value("version", 0);
        if (version > kVersion)
            throw Error("session format version " + std::to_string(version) +
                        " is newer than this RematLab reads (" + std::to_string(kVersion) +
                        "); update RematLab");
        Session out;
        out.network_spec = to_qstring(j.at("network_spec").get<std::string>());
        out.graph = std::make_shared<const Graph>(
            network_from_json(j.at("network").dump(), s(path) + " (network)"));
        for (const json& spec : j.at("strategies"))
            out.strategies << to_qstring(spec.get<std::string>());
        out.budget = opt_of<uint64_t>(j, "budget");
        out.threads = j.value("threads", 1);
        out.cap = to_qstring(j.value("cap", std::string()));
        out.baseline_ms = opt_of<double>(j, "baseline_total_ms");
        out.baseline_spread = opt_spread(j, "baseline_total");
        for (const json& r : j.at("results")) out.results.push_back(result_of(r, out.graph));
        return out;
    } catch (const json::exception& e) {
        throw Error("session '" + s(path) + "' is malformed: " + json_error_detail(e.what()) +
                    "; it was not written by this version of RematLab, or was edited");
    } catch (const Error& e) {
        const std::string what = e.what();
        if (what.rfind("session '", 0) == 0) throw;
        throw Error("session '" + s(path) + "': " + what);
    }
}

std::string network_dot(const Graph& g) {
    std::string out = "digraph " + dot_id(g.name()) +
                      " {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
    for (ValueId v : g.inputs()) {
        const Value& val = g.value(v);
        out += "  " + dot_id(val.name) + " [shape=ellipse, label=" +
               dot_id(val.name + "\\n" + format_type(val.dtype, val.shape)) + "];\n";
    }
    for (const Node& n : g.nodes()) {
        const Value& val = g.value(n.output);
        out += "  " + dot_id(n.name) + " [shape=box, style=rounded, label=" +
               dot_id(n.name + "\\n" + std::string(op_name(n.op)) + " " +
                      format_type(val.dtype, val.shape)) +
               "];\n";
    }
    for (const Node& n : g.nodes())
        for (ValueId u : n.inputs)
            out += "  " + dot_id(g.value(u).name) + " -> " + dot_id(n.name) + ";\n";
    return out + "}\n";
}

std::string schedule_json(const ScheduleTrace& trace) {
    const Graph& g = *trace.graph;
    json code = json::array();
    std::vector<uint8_t> computed(size_t(g.num_nodes()), 0);
    long i = 0;
    for (const Instruction& ins : trace.plan.schedule.code) {
        json row = {{"index", i++}, {"op", kind_name(ins.kind)}};
        if (targets_value(ins.kind)) {
            row["target"] = g.value(ins.target).name;
        } else {
            row["target"] = g.node(ins.target).name;
        }
        if (ins.kind == InstrKind::Compute) {
            row["recompute"] = computed[size_t(ins.target)] != 0;
            computed[size_t(ins.target)] = 1;
        }
        code.push_back(row);
    }
    json checkpoints = json::array();
    for (NodeId c : trace.plan.checkpoints) checkpoints.push_back(g.node(c).name);
    const json j = {{"format", "rematlab-schedule"},
                    {"version", 1},
                    {"network", g.name()},
                    {"strategy", trace.spec},
                    {"status", plan_status_name(trace.plan.status)},
                    {"method", trace.plan.method},
                    {"checkpoints", checkpoints},
                    {"predicted_peak_bytes", trace.sim.peak_bytes},
                    {"predicted_recompute_ms", trace.sim.recompute_ms},
                    {"instructions", code}};
    return j.dump(1) + "\n";
}

void export_network(const Graph& g, const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("dot") || suffix == QLatin1String("gv"))
        write_file_atomically(s(path), {network_dot(g)});
    else if (suffix == QLatin1String("json"))
        save_network_file(g, s(path));
    else
        throw Error("cannot export the network to '" + s(path) + "': use .dot or .json");
}

void export_schedule(const ScheduleTrace& trace, const QString& path) {
    if (QFileInfo(path).suffix().toLower() != QLatin1String("json"))
        throw Error("cannot export the schedule to '" + s(path) + "': use .json");
    write_file_atomically(s(path), {schedule_json(trace)});
}

}  // namespace rl::ui
