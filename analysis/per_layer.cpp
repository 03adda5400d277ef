#include "analysis/per_layer.h"

#include <algorithm>
#include <map>

#include "engine/errors.h"
#include "engine/liveness.h"

namespace rl {

namespace {

// Live activation buffers by value, through the one memory model (engine/liveness.h).
class LiveActivations : public MemoryVisitor {
  public:
    std::map<ValueId, uint64_t> live;
    void allocate(BufferRef b, uint64_t bytes) override {
        if (b.category == Category::Activations) live[b.id] = bytes;
    }
    void release(BufferRef b, uint64_t) override {
        if (b.category == Category::Activations) live.erase(b.id);
    }
    void run_kernel(const Instruction&, bool) override {}
    void hand_over(BufferRef from, BufferRef to, uint64_t bytes) override {
        if (from.category != Category::Activations) return;
        live.erase(from.id);
        live[to.id] = bytes;
    }
};

// The numeric order of "blockN" tags ("block10" after "block9").
int64_t block_number(const std::string& tag) {
    return std::stoll(tag.substr(5));
}

std::string block_of(const Node& n) {
    for (const std::string& t : n.tags)
        if (t.size() > 5 && t.rfind("block", 0) == 0 &&
            std::all_of(t.begin() + 5, t.end(), [](char c) { return c >= '0' && c <= '9'; }))
            return t;
    return {};
}

}  // namespace

PerLayerReport per_layer_activations(const Graph& g, const Schedule& s) {
    const LivenessTables tables(g);
    Liveness liveness(g, tables, s);
    LiveActivations v;
    liveness.begin(v);
    PerLayerReport r;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s.code[i].kind == InstrKind::Backward) {
            r.first_backward = static_cast<long>(i);
            break;
        }
        liveness.step(static_cast<long>(i), v);
    }
    if (r.first_backward < 0)
        throw Error("the schedule of '" + g.name() +
                    "' runs no Backward, so it keeps nothing for one; per-layer bytes need a "
                    "training step");
    std::map<int64_t, LayerActivations> by_block;
    for (const auto& [value, bytes] : v.live) {
        const Value& val = g.value(value);
        const std::string b = val.is_input() ? std::string() : block_of(g.node(val.producer));
        if (b.empty()) {
            r.outside_blocks_bytes += bytes;
            continue;
        }
        LayerActivations& l = by_block[block_number(b)];
        l.block = b;
        l.bytes += bytes;
        l.kept.push_back({value, bytes});
    }
    for (auto& [n, l] : by_block) r.layers.push_back(std::move(l));
    return r;
}

}  // namespace rl
