#include "engine/networks/slice_narrowing.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "engine/errors.h"
#include "engine/ops/op.h"

namespace rl {
namespace {

// A node as add_node takes it, so that a rewritten list rebuilds a graph.
struct Spec {
    std::string name;
    OpKind op = OpKind::Linear;
    Attrs attrs;
    std::vector<std::string> inputs;
    std::vector<std::string> tags;
    std::vector<ParamSource> params;
};

std::vector<Spec> specs_of(const Graph& g) {
    std::vector<Spec> out;
    out.reserve(static_cast<size_t>(g.num_nodes()));
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
        const Node& n = g.node(id);
        Spec s{n.name, n.op, n.attrs, {}, n.tags, {}};
        for (ValueId v : n.inputs) s.inputs.push_back(g.value(v).name);
        for (ParamId pid : n.params) {
            const Param& p = g.param(pid);
            const bool tied = !p.readers.empty() && p.readers.front() != id;
            s.params.push_back(ParamSource{p.name, tied ? nullptr : p.values, tied,
                                           tied ? std::nullopt : p.stored});
        }
        out.push_back(std::move(s));
    }
    return out;
}

Graph build(const Graph& like, const std::vector<Spec>& specs) {
    Graph g(like.name(), like.seed());
    for (ValueId v : like.inputs()) {
        const Value& in = like.value(v);
        g.add_input(in.name, in.dtype, in.shape, in.label_classes);
    }
    for (const Spec& s : specs) g.add_node(s.name, s.op, s.inputs, s.attrs, s.tags, s.params);
    g.finalize();
    return g;
}

double step_flops(const Graph& g) {
    double f = 0;
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
        const OpCost c = op_def(g.node(id).op).cost(g, g.node(id));
        f += c.fwd_flops + (g.needs_backward(id) ? c.bwd_flops : 0.0);
    }
    return f;
}

struct SliceAttrs {
    int64_t axis, start, end;
};

SliceAttrs slice_attrs(const Graph& g, const Node& n) {
    const int64_t rank = g.value(n.inputs[0]).shape.rank();
    int64_t a = n.attrs.get_int("axis");
    if (a < 0) a += rank;
    return {a, n.attrs.get_int("start"), n.attrs.get_int("end")};
}

Attrs slice_attrs_of(const SliceAttrs& s) {
    return Attrs{{"axis", s.axis}, {"start", s.start}, {"end", s.end}};
}

// How P runs when only [s, e) of its output's axis a is read: the slices to put on its inputs and
// its new attributes. Empty when P cannot be narrowed so.
struct Cut {
    int input;
    SliceAttrs slice;
};
struct Move {
    std::vector<Cut> cuts;
    Attrs attrs;
};

int64_t product(const Dims& d, size_t from, size_t to) {
    int64_t p = 1;
    for (size_t i = from; i < to; ++i) p *= d[i];
    return p;
}

// An operand of `rank` dims broadcast to the output's: its axis under output axis a, or -1 when
// it has none there or holds 1 element there (it is read whole).
int64_t aligned_axis(const Shape& operand, int64_t out_rank, int64_t a) {
    const int64_t b = a - (out_rank - operand.rank());
    return b < 0 || operand[static_cast<int>(b)] == 1 ? -1 : b;
}

std::optional<Move> move_through(const Graph& g, const Node& p, const SliceAttrs& sl) {
    const Shape& out = g.value(p.output).shape;
    const int64_t r = out.rank(), a = sl.axis, s = sl.start, e = sl.end;
    const auto in_shape = [&](size_t i) -> const Shape& { return g.value(p.inputs[i]).shape; };
    Move m{{}, p.attrs};
    const auto cut_all_same_shape = [&]() -> std::optional<Move> {
        for (size_t i = 0; i < p.inputs.size(); ++i) {
            if (in_shape(i) != out) return std::nullopt;
            m.cuts.push_back({static_cast<int>(i), sl});
        }
        return m;
    };
    switch (p.op) {
        case OpKind::Relu:
        case OpKind::Gelu:
        case OpKind::GeluTanh:
        case OpKind::Tanh:
        case OpKind::Sigmoid:
        case OpKind::Sin:
        case OpKind::Cos:
        case OpKind::Exp:
        case OpKind::Clip:
        case OpKind::HardSigmoid:
        case OpKind::HardSwish:
            return cut_all_same_shape();
        case OpKind::Linear:  // rows of x [..., in]
            if (a == r - 1) return std::nullopt;
            m.cuts.push_back({0, sl});
            return m;
        case OpKind::LayerNorm:
        case OpKind::Softmax:
        case OpKind::L2Normalize:  // each row of the last axis on its own
            if (a == r - 1) return std::nullopt;
            return cut_all_same_shape();
        case OpKind::Add:
        case OpKind::Sub:
        case OpKind::Mul:
        case OpKind::Div: {
            for (const char* key : {"param_shape", "constant_shape"})
                if (p.attrs.has(key) && aligned_axis(Shape(p.attrs.get_ints(key)), r, a) >= 0)
                    return std::nullopt;  // a parameter or constant with rows of its own
            for (size_t i = 0; i < p.inputs.size(); ++i) {
                const int64_t b = aligned_axis(in_shape(i), r, a);
                if (b >= 0) m.cuts.push_back({static_cast<int>(i), {b, s, e}});
            }
            return m;
        }
        case OpKind::Transpose: {
            const std::vector<int64_t> perm = p.attrs.get_ints("perm");
            m.cuts.push_back({0, {perm[static_cast<size_t>(a)], s, e}});
            return m;
        }
        case OpKind::Reshape: {
            // Rows [s, e) of axis a are a contiguous run of each block of prod(out[:a]) rows'
            // elements; an input axis b with the same leading product holds that run as whole
            // rows of its own when the run's ends fall on its row boundaries.
            const Dims& in = in_shape(0).dims;
            const int64_t lead = product(out.dims, 0, static_cast<size_t>(a));
            const int64_t inner = product(out.dims, static_cast<size_t>(a) + 1, out.dims.size());
            for (size_t b = 0; b < in.size(); ++b) {
                if (product(in, 0, b) != lead) continue;
                const int64_t row = product(in, b + 1, in.size());
                if ((s * inner) % row != 0 || (e * inner) % row != 0) continue;
                Dims shape = out.dims;
                shape[static_cast<size_t>(a)] = e - s;
                m.attrs.set("shape", shape);
                m.cuts.push_back({0, {static_cast<int64_t>(b), s * inner / row, e * inner / row}});
                return m;
            }
            return std::nullopt;
        }
        case OpKind::MatMul:
            if (a == 0) {  // a range of the batch: of both operands
                m.cuts.push_back({0, sl});
                m.cuts.push_back({1, sl});
                return m;
            }
            if (a == 1) {  // rows: of the first operand
                m.cuts.push_back({0, sl});
                return m;
            }
            return std::nullopt;
        case OpKind::Concat: {
            int64_t c = p.attrs.get_int("axis", 1);
            if (c < 0) c += r;
            if (c == a) return std::nullopt;
            for (size_t i = 0; i < p.inputs.size(); ++i)
                m.cuts.push_back({static_cast<int>(i), sl});
            return m;
        }
        case OpKind::Slice: {  // a slice of a slice on the same axis is one slice; two on
                               // different axes cost the same in either order: they stay
            const SliceAttrs inner = slice_attrs(g, p);
            if (inner.axis != a) return std::nullopt;
            m.attrs = slice_attrs_of({a, inner.start + s, inner.start + e});
            return m;
        }
        default:
            return std::nullopt;
    }
}

std::string unique_name(const Graph& g, const std::vector<Spec>& specs, const std::string& base) {
    std::unordered_set<std::string> used;
    for (const Spec& s : specs) used.insert(s.name);
    for (int k = 0;; ++k) {
        std::string name = k == 0 ? base : base + "_" + std::to_string(k);
        if (!used.count(name) && !g.find_value(name)) return name;
    }
}

void add_tag(std::vector<std::string>& tags, const std::string& t) {
    if (std::find(tags.begin(), tags.end(), t) == tags.end()) tags.push_back(t);
}

// Reads of `from` read `to` instead, in every spec after index `after`.
void redirect(std::vector<Spec>& specs, size_t after, const std::string& from,
              const std::string& to) {
    for (size_t i = after + 1; i < specs.size(); ++i)
        for (std::string& in : specs[i].inputs)
            if (in == from) in = to;
}

// One simplification of the slices, applied to `specs`; false when there is none. In order of
// preference: a slice that reads its input whole goes; a slice equal to an earlier one (same
// input, axis and range) goes, its readers reading the earlier; a slice moves up through its
// input's producer when that node has no other reader.
bool step(const Graph& g, std::vector<Spec>& specs, const std::unordered_set<std::string>& stuck,
          std::string& moved) {
    std::unordered_map<std::string, size_t> seen;  // "input|axis|start|end" -> node
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
        const Node& n = g.node(id);
        if (n.op != OpKind::Slice) continue;
        const SliceAttrs sl = slice_attrs(g, n);
        const Value& x = g.value(n.inputs[0]);
        const auto i = static_cast<size_t>(id);
        if (sl.start == 0 && sl.end == x.shape[static_cast<int>(sl.axis)]) {
            redirect(specs, i, n.name, x.name);
            specs.erase(specs.begin() + static_cast<std::ptrdiff_t>(i));
            return true;
        }
        const std::string key = x.name + "|" + std::to_string(sl.axis) + "|" +
                                std::to_string(sl.start) + "|" + std::to_string(sl.end);
        if (auto it = seen.find(key); it != seen.end()) {
            add_tag(specs[it->second].tags, kNarrowedTag);  // it serves the other's readers too
            redirect(specs, i, n.name, specs[it->second].name);
            specs.erase(specs.begin() + static_cast<std::ptrdiff_t>(i));
            return true;
        }
        seen.emplace(key, i);
    }
    for (NodeId id = g.num_nodes() - 1; id >= 0; --id) {
        const Node& n = g.node(id);
        if (n.op != OpKind::Slice || stuck.count(n.name)) continue;
        const Value& x = g.value(n.inputs[0]);
        if (x.is_input() || x.consumers.size() != 1) continue;
        const Node& p = g.node(x.producer);
        const std::optional<Move> m = move_through(g, p, slice_attrs(g, n));
        if (!m) continue;
        const auto pi = static_cast<size_t>(x.producer), si = static_cast<size_t>(id);
        Spec& ps = specs[pi];
        std::vector<Spec> cuts;
        for (const Cut& c : m->cuts) {
            Spec cs;
            cs.name =
                unique_name(g, specs,
                            p.name + "/narrow" +
                                (m->cuts.size() > 1 ? std::to_string(c.input) : std::string()));
            cs.op = OpKind::Slice;
            cs.attrs = slice_attrs_of(c.slice);
            cs.inputs = {ps.inputs[static_cast<size_t>(c.input)]};
            for (const std::string& t : p.tags)
                if (t != "dot") cs.tags.push_back(t);
            add_tag(cs.tags, kNarrowedTag);
            ps.inputs[static_cast<size_t>(c.input)] = cs.name;
            cuts.push_back(std::move(cs));
        }
        ps.attrs = m->attrs;
        add_tag(ps.tags, kNarrowedTag);
        redirect(specs, si, n.name, p.name);
        specs.erase(specs.begin() + static_cast<std::ptrdiff_t>(si));
        specs.insert(specs.begin() + static_cast<std::ptrdiff_t>(pi), cuts.begin(), cuts.end());
        moved = n.name;
        return true;
    }
    return false;
}

// A node the pass narrowed, as the reports count them (the slices it put above them are not).
bool is_narrowed(const Node& n) {
    return n.op != OpKind::Slice && n.has_tag(kNarrowedTag);
}

}  // namespace

int narrowed_node_count(const Graph& g) {
    return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(), is_narrowed));
}

SliceNarrowing narrow_slices(const Graph& g0) {
    SliceNarrowing r{g0, {}, 0, 0};
    if (g0.plan_only()) return r;
    r.flops_before = r.flops_after = step_flops(g0);
    Graph g = g0;
    std::unordered_set<std::string> stuck;  // slices whose move gave an invalid graph
    // Each step rebuilds the graph (O(nodes)); ViT-B/32 takes 30 steps. The steps are capped so
    // that a file built to make thousands of slices climb long chains loads in seconds, its
    // graph narrowed part of the way (every step leaves a valid graph).
    const int64_t nodes = std::max(g0.num_nodes(), 1);
    const int64_t rounds =
        std::min<int64_t>(8 * nodes + 8, std::max<int64_t>(64, 20'000'000 / nodes));
    for (int64_t round = 0; round < rounds; ++round) {
        std::vector<Spec> specs = specs_of(g);
        std::string moved;
        if (!step(g, specs, stuck, moved)) break;
        try {
            g = build(g, specs);
        } catch (const Error&) {
            if (moved.empty()) break;  // a removal that does not rebuild: stop here
            stuck.insert(moved);
        }
    }
    for (const Node& n : g.nodes())
        if (is_narrowed(n)) r.narrowed.push_back(n.name);
    r.flops_after = step_flops(g);
    r.graph = std::move(g);
    return r;
}

}  // namespace rl
