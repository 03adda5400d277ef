#pragma once
// One op node under test (as ggml's test-backend-ops), shared by test_ops.cpp and
// test_conv_ops.cpp: graph inputs with host buffers, run through the CPU backend's forward and
// backward exactly as the executor calls them; forward values against a float64 reference;
// every gradient against central finite differences; the accumulate contract; run-to-run
// determinism; and the shape errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/ops/op.h"

namespace rl::testing {

// Buffers are 64-byte aligned, as the backends' allocations are: Eigen's vectorised loops peel
// to an aligned boundary, so a kernel's rounding is reproducible for a given alignment.
template <class T>
struct Aligned64 {
    using value_type = T;
    Aligned64() = default;
    template <class U>
    Aligned64(const Aligned64<U>&) {}
    T* allocate(size_t n) {
        return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
    }
    void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
    bool operator==(const Aligned64&) const = default;
};
using Floats = std::vector<float, Aligned64<float>>;
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Buffer {
    DType dtype = DType::F32;
    Floats f;
    std::vector<int32_t> i;
    const void* data() const {
        return dtype == DType::F32 ? static_cast<const void*>(f.data()) : i.data();
    }
};

struct Grads {
    std::map<ValueId, Floats> inputs;  // per f32 graph input
    std::vector<Floats> params;
};

inline Floats workspace_for(uint64_t bytes) {
    // Garbage (NaN) content: kernels must not depend on what the workspace held before.
    return Floats((bytes + 3) / 4, kNaN);
}

// One node under test over graph inputs, with host buffers for everything. Inputs and
// parameters are drawn from `seed`; the node is named `node_name` (dropout's mask depends on it).
class OpHarness {
  public:
    OpHarness(uint32_t seed, std::string graph_name, std::string node_name = "op")
        : g(std::move(graph_name), 1),
          name_(std::move(node_name)),
          rng_(seed),
          backend_(make_cpu_backend()) {}

    // An f32 input, uniform in [-1, 1]; `min_abs` keeps values away from 0 (relu's kink).
    ValueId input(const std::string& name, Shape shape, float min_abs = 0.0f) {
        const ValueId v = g.add_input(name, DType::F32, shape);
        Buffer b;
        b.f.resize(static_cast<size_t>(shape.numel()));
        for (float& x : b.f) {
            x = uniform();
            if (std::abs(x) < min_abs) x += x < 0 ? -min_abs : min_abs;
        }
        values[v] = std::move(b);
        return v;
    }

    // An f32 input whose values are a shuffled ladder with steps of `gap`: no two are close, so a
    // finite-difference step cannot change which element of a window is the maximum.
    ValueId distinct_input(const std::string& name, Shape shape, float gap = 0.05f) {
        const ValueId v = input(name, shape);
        Floats& b = values[v].f;
        std::vector<size_t> order(b.size());
        std::iota(order.begin(), order.end(), size_t{0});
        std::shuffle(order.begin(), order.end(), rng_);
        for (size_t k = 0; k < b.size(); ++k)
            b[order[k]] = (static_cast<float>(k) - static_cast<float>(b.size()) / 2) * gap;
        return v;
    }

    ValueId labels(const std::string& name, Shape shape, int classes) {
        const ValueId v = g.add_input(name, DType::I32, shape, classes);
        Buffer b;
        b.dtype = DType::I32;
        std::uniform_int_distribution<int32_t> pick(0, classes - 1);
        for (int64_t k = 0; k < shape.numel(); ++k) b.i.push_back(pick(rng_));
        values[v] = std::move(b);
        return v;
    }

    void op(OpKind k, std::vector<ValueId> ins, Attrs attrs = {}) {
        node = g.add_node(name_, k, ins, std::move(attrs));
        for (ParamId p : g.node(node).params) {
            Floats w(static_cast<size_t>(g.param(p).shape.numel()));
            for (float& x : w) x = uniform();
            params.push_back(std::move(w));
        }
    }

    const Node& n() const { return g.node(node); }
    const OpDef& def() const { return op_def(n().op); }
    Shape out_shape() const { return g.output_of(node).shape; }

    Floats forward() {
        std::vector<const void*> ins;
        for (ValueId v : n().inputs) ins.push_back(values.at(v).data());
        Floats out(static_cast<size_t>(out_shape().numel()), kNaN);
        Floats ws = workspace_for(def().fwd_workspace ? def().fwd_workspace(g, n()) : 0);
        const std::vector<float*> ps = param_ptrs();
        backend_->forward(
            {g, n(), ins.data(), ps.data(), out.data(), ws.empty() ? nullptr : ws.data()});
        return out;
    }

    // Backward with output gradient dy. Input gradient buffers start as `initial` (when given,
    // with the accumulate flag set) or as NaN (overwrite expected). A value in two input slots
    // gets one buffer; its second slot accumulates, as the executor does it.
    Grads backward(const Floats& dy, const Grads* initial = nullptr) {
        const Residuals res = def().residuals(g, n());
        const size_t k = n().inputs.size();
        std::vector<const void*> ins(k, nullptr);
        for (size_t i = 0; i < k; ++i)
            if (res.reads_input(static_cast<int>(i))) ins[i] = values.at(n().inputs[i]).data();
        Floats out;
        if (res.output) out = forward();

        Grads gr;
        std::vector<float*> gi(k, nullptr);
        std::unique_ptr<bool[]> acc(new bool[k]());
        std::set<ValueId> seen;
        for (size_t i = 0; i < k; ++i) {
            const ValueId v = n().inputs[i];
            if (g.value(v).dtype != DType::F32) continue;
            if (!gr.inputs.count(v))
                gr.inputs[v] =
                    initial ? initial->inputs.at(v) : Floats(values.at(v).f.size(), kNaN);
            gi[i] = gr.inputs[v].data();
            acc[i] = seen.count(v) ? true : initial != nullptr;
            seen.insert(v);
        }
        std::vector<float*> gp;
        for (const auto& p : params) gr.params.emplace_back(p.size(), kNaN);
        for (auto& p : gr.params) gp.push_back(p.data());
        Floats ws = workspace_for(def().bwd_workspace ? def().bwd_workspace(g, n()) : 0);
        const std::vector<float*> ps = param_ptrs();
        backend_->backward({g, n(), ins.data(), res.output ? out.data() : nullptr, ps.data(),
                            dy.data(), gi.data(), acc.get(), gp.data(),
                            ws.empty() ? nullptr : ws.data()});
        return gr;
    }

    float uniform() { return std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng_); }
    Floats random(size_t n) {
        Floats r(n);
        for (float& x : r) x = uniform();
        return r;
    }
    // The values of an f32 input.
    const Floats& data(ValueId v) const { return values.at(v).f; }

    Graph g;
    NodeId node = kNoId;
    std::map<ValueId, Buffer> values;
    std::vector<Floats> params;

  private:
    std::vector<float*> param_ptrs() {
        std::vector<float*> ps;
        for (auto& p : params) ps.push_back(p.data());
        return ps;
    }

    std::string name_;
    std::mt19937 rng_;
    std::unique_ptr<Backend> backend_;
};

// Checks every f32 input and parameter gradient against central differences of L = Σ r·y (in
// double), with fixed random r.
inline void check_gradients(OpHarness& c, double eps, double atol, double rtol) {
    const Floats r = c.random(c.forward().size());
    auto loss = [&] {
        const Floats y = c.forward();
        double s = 0;
        for (size_t k = 0; k < y.size(); ++k) s += static_cast<double>(r[k]) * y[k];
        return s;
    };
    const Grads an = c.backward(r);
    auto check = [&](Floats& x, const Floats& grad, const std::string& what) {
        ASSERT_EQ(x.size(), grad.size()) << what;
        for (size_t k = 0; k < x.size(); ++k) {
            const float saved = x[k];
            x[k] = static_cast<float>(saved + eps);
            const double plus = loss();
            x[k] = static_cast<float>(saved - eps);
            const double minus = loss();
            x[k] = saved;
            const double fd = (plus - minus) / (2 * eps);
            EXPECT_NEAR(grad[k], fd, atol + rtol * std::abs(fd)) << what << " element " << k;
        }
    };
    for (auto& [v, buf] : c.values)
        if (buf.dtype == DType::F32) check(buf.f, an.inputs.at(v), "input " + c.g.value(v).name);
    for (size_t p = 0; p < c.params.size(); ++p)
        check(c.params[p], an.params[p], c.g.param(c.n().params[p]).name);
}

// Forward output against a float64 reference.
inline void check_forward(OpHarness& c, const std::vector<double>& want, double tol = 1e-4) {
    const Floats y = c.forward();
    ASSERT_EQ(y.size(), want.size());
    for (size_t k = 0; k < y.size(); ++k)
        EXPECT_NEAR(y[k], want[k], tol * (1 + std::abs(want[k]))) << "output element " << k;
}

// accumulate=true adds the gradient to what the buffer held; false overwrites (the buffers
// start as NaN in backward(), so any read of an overwritten buffer would show). Parameter
// gradients are always overwritten, whatever the input flags say.
inline void check_accumulate(OpHarness& c) {
    const Floats dy = c.random(c.forward().size());
    const Grads fresh = c.backward(dy);
    Grads initial;
    for (const auto& [v, g] : fresh.inputs) initial.inputs[v] = c.random(g.size());
    const Grads summed = c.backward(dy, &initial);
    for (const auto& [v, g] : fresh.inputs) {
        const Floats& got = summed.inputs.at(v);
        const Floats& before = initial.inputs.at(v);
        for (size_t k = 0; k < g.size(); ++k) {
            ASSERT_FALSE(std::isnan(g[k])) << "overwrite left element " << k << " unwritten";
            EXPECT_NEAR(got[k], before[k] + g[k], 1e-5f * (1 + std::abs(g[k]))) << k;
        }
    }
    for (size_t p = 0; p < fresh.params.size(); ++p) {
        for (float v : fresh.params[p]) ASSERT_FALSE(std::isnan(v));
        EXPECT_EQ(fresh.params[p], summed.params[p]);
    }
}

// Two forwards, and two backwards with the same dy, are bitwise the same.
inline void check_repeatable(OpHarness& c) {
    const Floats y1 = c.forward(), y2 = c.forward();
    ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0);
    const Floats dy = c.random(y1.size());
    const Grads g1 = c.backward(dy), g2 = c.backward(dy);
    for (const auto& [v, g] : g1.inputs)
        EXPECT_EQ(std::memcmp(g.data(), g2.inputs.at(v).data(), g.size() * 4), 0);
    for (size_t p = 0; p < g1.params.size(); ++p)
        EXPECT_EQ(std::memcmp(g1.params[p].data(), g2.params[p].data(), g1.params[p].size() * 4),
                  0);
}

// Building a graph with `build` throws an rl::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void(Graph&)>& build,
                         const std::vector<std::string>& parts) {
    Graph g;
    try {
        build(g);
        ADD_FAILURE() << "expected rl::Error mentioning '" << parts.front() << "'";
    } catch (const Error& e) {
        const std::string msg = e.what();
        for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
    }
}

}  // namespace rl::testing
