// Every sentence teach mode shows states only what the schedule and the graph imply. The
// explainer returns its statements as typed claims (analysis/explain.h, ClaimKind); this test
// walks every instruction of every strategy on the shared presets and holds each claim against an
// independent reading of the schedule: what an instruction reads comes from the node's inputs and
// its op's own residual declaration (op_def(...).residuals, not engine/liveness), and every index
// a claim names is checked by scanning the schedule. The rendering is checked apart from the data:
// each claim's value and instruction numbers appear in the sentence.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "analysis/explain.h"
#include "engine/networks/presets.h"
#include "engine/ops/op.h"
#include "engine/simulator.h"
#include "strategies/test_networks.h"

namespace rl {
namespace {

// What instruction `ins` reads, from the graph and the op's declaration alone.
std::vector<ValueId> reads_of(const Graph& g, const Instruction& ins) {
    std::vector<ValueId> out;
    if (ins.kind == InstrKind::Free) return out;
    const Node& node = g.node(ins.target);
    if (ins.kind == InstrKind::Compute) return node.inputs;
    const Residuals r = op_def(node.op).residuals(g, node);
    for (size_t i = 0; i < node.inputs.size(); ++i)
        if (r.reads_input(static_cast<int>(i))) out.push_back(node.inputs[i]);
    if (r.output) out.push_back(node.output);
    return out;
}

bool reads(const Graph& g, const Instruction& ins, ValueId v) {
    const auto r = reads_of(g, ins);
    return std::find(r.begin(), r.end(), v) != r.end();
}

bool computes(const Graph& g, const Instruction& ins, ValueId v) {
    return ins.kind == InstrKind::Compute && g.node(ins.target).output == v;
}

bool frees(const Instruction& ins, ValueId v) {
    return ins.kind == InstrKind::Free && ins.target == v;
}

// "#12" in the text, not as the prefix of "#123".
bool names_index(const std::string& text, long index) {
    const std::string digits = std::to_string(index);
    for (size_t at = text.find('#'); at != std::string::npos; at = text.find('#', at + 1)) {
        if (text.compare(at + 1, digits.size(), digits) != 0) continue;
        const size_t end = at + 1 + digits.size();
        if (end == text.size() || text[end] < '0' || text[end] > '9') return true;
    }
    return false;
}

struct Checker {
    const Graph& g;
    const Plan& plan;
    const std::vector<Instruction>& code = plan.schedule.code;
    long size() const { return static_cast<long>(code.size()); }
    bool valid(long i) const { return i >= 0 && i < size(); }

    // Any instruction strictly between a and b for which pred holds.
    template <typename P>
    bool any_between(long a, long b, P pred) const {
        for (long k = a + 1; k < b; ++k)
            if (pred(code[static_cast<size_t>(k)])) return true;
        return false;
    }
    bool has_compute_before(ValueId v, long i) const {
        return any_between(-1, i, [&](const Instruction& x) { return computes(g, x, v); });
    }

    // The claim's data against the schedule; returns what is wrong ("" when it holds).
    std::string check(const Explanation& e, const Claim& c) const {
        const ValueId v = c.value;
        if (v < 0 || v >= g.num_values()) return "no such value";
        const NodeId p = g.value(v).producer;
        auto read_v = [&](const Instruction& x) { return reads(g, x, v); };
        auto make_v = [&](const Instruction& x) { return computes(g, x, v); };
        auto free_v = [&](const Instruction& x) { return frees(x, v); };
        switch (c.kind) {
            case ClaimKind::Reads:
                if (c.at != e.index) return "a Reads claim about another instruction";
                if (!reads(g, code[size_t(c.at)], v)) return "the instruction does not read it";
                return "";
            case ClaimKind::ReadsFrom:
            case ClaimKind::ReadBy:
                if (!valid(c.at) || !valid(c.source) || c.source >= c.at) return "bad indices";
                if (!make_v(code[size_t(c.source)])) return "source does not compute the value";
                if (!reads(g, code[size_t(c.at)], v)) return "the reader does not read it";
                if (any_between(c.source, c.at, free_v)) return "freed in between";
                if (any_between(c.source, c.at, make_v)) return "computed again in between";
                if (c.kind == ClaimKind::ReadsFrom &&
                    c.recomputed != has_compute_before(v, c.source))
                    return "recomputed flag wrong";
                return "";
            case ClaimKind::FreedAt: {
                if (!valid(c.at) || !free_v(code[size_t(c.at)])) return "not a Free of the value";
                long made = -1;
                for (long k = c.at - 1; k >= 0 && made < 0; --k)
                    if (make_v(code[size_t(k)])) made = k;
                if (p != kNoId && made < 0) return "freed before it is made";
                if (c.source < 0) {
                    if (any_between(made, c.at, read_v)) return "something read it";
                    return "";
                }
                if (c.source <= made || c.source >= c.at) return "last read out of range";
                if (!read_v(code[size_t(c.source)])) return "last reader does not read it";
                if (any_between(c.source, c.at, read_v)) return "a later read before the Free";
                return "";
            }
            case ClaimKind::NotReadUntil: {
                if (!valid(c.at) || !free_v(code[size_t(c.at)])) return "not a Free of the value";
                const long end = c.source < 0 ? size() : c.source;
                if (c.source >= 0 && (!valid(c.source) || !make_v(code[size_t(c.source)])))
                    return "source does not compute the value";
                if (c.source >= 0 && c.source <= c.at) return "recompute before the Free";
                if (any_between(c.at, end, read_v)) return "read after the Free";
                if (any_between(c.at, end, make_v)) return "not the next Compute";
                return "";
            }
            case ClaimKind::NoBackwardReads: {
                if (!valid(c.at) || !make_v(code[size_t(c.at)])) return "not its Compute";
                const long end = c.source < 0 ? size() : c.source;
                if (any_between(c.at, end, [&](const Instruction& x) {
                        return x.kind == InstrKind::Backward && read_v(x);
                    }))
                    return "a Backward reads it";
                if (any_between(c.at, end, make_v)) return "not the next Compute";
                return "";
            }
            case ClaimKind::Checkpoint:
                if (std::find(plan.checkpoints.begin(), plan.checkpoints.end(), p) ==
                    plan.checkpoints.end())
                    return "not a checkpoint of the plan";
                return "";
        }
        return "unknown claim";
    }

    // What each kind of instruction must claim at least.
    std::string check_shape(const Explanation& e) const {
        const Instruction& ins = code[size_t(e.index)];
        auto count = [&](ClaimKind k) {
            return std::count_if(e.claims.begin(), e.claims.end(),
                                 [&](const Claim& c) { return c.kind == k; });
        };
        if (ins.kind == InstrKind::Backward) {
            // Exactly the residuals the op declares, each with where its copy came from.
            std::set<ValueId> want, got;
            for (ValueId v : reads_of(g, ins)) want.insert(v);
            for (const Claim& c : e.claims)
                if (c.kind == ClaimKind::Reads) got.insert(c.value);
            if (want != got) return "Reads claims are not the op's residuals";
            long inputs = 0;
            for (ValueId v : want) inputs += g.value(v).is_input();
            if (count(ClaimKind::ReadsFrom) != static_cast<long>(want.size()) - inputs)
                return "a residual without its source";
        } else if (ins.kind == InstrKind::Free) {
            if (count(ClaimKind::FreedAt) != 1 || count(ClaimKind::NotReadUntil) != 1)
                return "a Free must say its last read and that nothing reads it after";
        } else if (e.recompute) {
            const ValueId out = g.node(ins.target).output;
            std::vector<Claim> chain;
            for (const Claim& c : e.claims)
                if (c.kind == ClaimKind::ReadBy) chain.push_back(c);
            if (chain.empty()) {
                if (any_between(e.index, size(),
                                [&](const Instruction& x) { return reads(g, x, out); }))
                    return "a recompute whose output is read gives no reason";
                return "";
            }
            if (chain[0].value != out || chain[0].source != e.index) return "chain start";
            for (size_t k = 1; k < chain.size(); ++k) {
                const Instruction& prev = code[size_t(chain[k - 1].at)];
                if (prev.kind != InstrKind::Compute || chain[k].source != chain[k - 1].at ||
                    chain[k].value != g.node(prev.target).output)
                    return "the chain is broken at link " + std::to_string(k);
            }
            if (chain.size() > 1 && code[size_t(chain.back().at)].kind != InstrKind::Backward)
                return "the chain does not end at a Backward";
            if (has_compute_before(out, e.index) && count(ClaimKind::NotReadUntil) != 1)
                return "a recompute must say the value was freed and not read since";
        }
        return "";
    }

    // The rendering: every claim's value is named, and every instruction number it holds (other
    // than the instruction's own) appears as "#N".
    std::string check_text(const Explanation& e, const Claim& c) const {
        if (e.why.find(g.value(c.value).name) == std::string::npos)
            return "the sentence does not name " + g.value(c.value).name;
        for (long i : {c.at, c.source})
            if (i >= 0 && i != e.index && !names_index(e.why, i))
                return "the sentence does not name instruction " + std::to_string(i);
        return "";
    }
};

TEST(ExplainClaims, EveryClaimOfEveryStrategyOnEveryPresetHoldsInTheGraph) {
    long explained = 0, claims = 0, recompute_links = 0;
    for (const std::string& net : testing::small_networks()) {
        const Graph g = load_network(net);
        const CostModel costs = CostModel::analytic(g, DeviceRates{});
        for (const std::string& spec : testing::strategy_specs()) {
            SCOPED_TRACE(net + " / " + spec);
            const Plan plan = plan_with(g, costs, parse_spec(spec));
            ASSERT_NE(plan.status, PlanStatus::Infeasible) << plan.message;
            const Simulation sim = simulate(g, plan.schedule, costs);
            const ScheduleExplainer ex(g, plan, sim, costs);
            const Checker check{g, plan};
            int failures = 0;
            for (long i = 0; i < ex.size() && failures < 5; ++i) {
                const Explanation e = ex.explain(i);
                ++explained;
                const std::string where = std::to_string(i) + " " + e.what + ": " + e.why;
                const std::string shape = check.check_shape(e);
                EXPECT_EQ(shape, "") << where;
                failures += !shape.empty();
                for (const Claim& c : e.claims) {
                    ++claims;
                    recompute_links += c.kind == ClaimKind::ReadBy && e.recompute;
                    const std::string data = check.check(e, c);
                    const std::string text = check.check_text(e, c);
                    EXPECT_EQ(data, "") << claim_kind_name(c.kind) << " " << where;
                    EXPECT_EQ(text, "") << claim_kind_name(c.kind) << " " << where;
                    failures += !data.empty() || !text.empty();
                }
            }
        }
    }
    // The walk saw real work: many sentences, and recomputes with their reasons.
    EXPECT_GT(explained, 10000);
    EXPECT_GT(recompute_links, 500);
    EXPECT_GT(claims, explained);
}

// The issue's example: under sqrt-n on a 12-deep MLP, block9.fc's backward (a linear layer)
// reads its own input block8.act, not block8.fc's output; block7.act is recomputed because
// recomputing block8.fc reads it.
TEST(ExplainClaims, ALinearBackwardReadsItsInputAndTheChainNamesTheRealReaders) {
    const Graph g = load_network("mlp:depth=12,width=8,batch=4");
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const Plan plan = plan_with(g, costs, parse_spec("sqrt-n"));
    const Simulation sim = simulate(g, plan.schedule, costs);
    const ScheduleExplainer ex(g, plan, sim, costs);
    const ValueId act8 = g.node(*g.find_node("block8.act")).output;
    const ValueId fc8 = g.node(*g.find_node("block8.fc")).output;
    long backward = -1, recompute7 = -1;
    for (long i = 0; i < ex.size(); ++i) {
        const Instruction& ins = plan.schedule.code[size_t(i)];
        if (ins.kind == InstrKind::Backward && g.node(ins.target).name == "block9.fc") backward = i;
        if (ins.kind == InstrKind::Compute && g.node(ins.target).name == "block7.act" &&
            ex.explain(i).recompute && backward < 0)
            recompute7 = i;
    }
    ASSERT_GE(backward, 0);
    ASSERT_GE(recompute7, 0) << "sqrt-n no longer recomputes block7.act for block9.fc";

    const Explanation b = ex.explain(backward);
    std::vector<ValueId> read;
    for (const Claim& c : b.claims)
        if (c.kind == ClaimKind::Reads) read.push_back(c.value);
    EXPECT_EQ(read, std::vector<ValueId>{act8});
    EXPECT_NE(b.why.find("reads its input block8.act (recomputed at #"), std::string::npos)
        << b.why;
    EXPECT_EQ(b.why.find("block8.fc"), std::string::npos) << b.why;

    const Explanation r = ex.explain(recompute7);
    ASSERT_GE(r.claims.size(), 3u) << r.why;
    std::vector<ValueId> chain;
    for (const Claim& c : r.claims)
        if (c.kind == ClaimKind::ReadBy) chain.push_back(c.value);
    EXPECT_EQ(chain, (std::vector<ValueId>{g.node(*g.find_node("block7.act")).output, fc8, act8}));
    EXPECT_NE(r.why.find("block7.act is recomputed because recomputing block8.fc (#"),
              std::string::npos)
        << r.why;
    EXPECT_NE(r.why.find("block8.act is needed by the backward of block9.fc (#" +
                         std::to_string(backward) + ")"),
              std::string::npos)
        << r.why;
    EXPECT_EQ(r.why.find("recomputed from"), std::string::npos) << r.why;
}

}  // namespace
}  // namespace rl
