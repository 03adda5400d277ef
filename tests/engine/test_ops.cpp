// The ops and their CPU kernels, one small node at a time (as ggml's test-backend-ops): forward
// values against a float64 reference, backward against central finite differences, the kernel
// contract (accumulate flags, duplicate inputs, null residuals, garbage workspace), determinism,
// and the shape-inference errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/errors.h"
#include "engine/ops/op.h"

namespace rl {
namespace {

using Ids = std::vector<ValueId>;

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
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

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

Floats workspace_for(uint64_t bytes) {
    // Garbage (NaN) content: kernels must not depend on what the workspace held before.
    return Floats((bytes + 3) / 4, kNaN);
}

// One node under test over graph inputs, with host buffers for everything, run through the CPU
// backend's forward and backward exactly as the executor calls them.
class OpCase {
  public:
    explicit OpCase(uint32_t seed = 7) : rng_(seed), backend_(make_cpu_backend()) {}

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
        node = g.add_node("op", k, ins, std::move(attrs));
        for (ParamId p : g.node(node).params) {
            Floats w(static_cast<size_t>(g.param(p).shape.numel()));
            for (float& x : w) x = uniform();
            params.push_back(std::move(w));
        }
    }

    const Node& n() const { return g.node(node); }
    const OpDef& def() const { return op_def(n().op); }

    Floats forward() {
        std::vector<const void*> ins;
        for (ValueId v : n().inputs) ins.push_back(values.at(v).data());
        Floats out(static_cast<size_t>(g.output_of(node).shape.numel()), kNaN);
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
        std::vector<const void*> ins(n().inputs.size(), nullptr);
        for (size_t i = 0; i < ins.size(); ++i)
            if (res.reads_input(static_cast<int>(i))) ins[i] = values.at(n().inputs[i]).data();
        Floats out;
        if (res.output) out = forward();

        Grads gr;
        std::vector<float*> gi(n().inputs.size(), nullptr);
        bool acc[4] = {false, false, false, false};
        std::set<ValueId> seen;
        for (size_t i = 0; i < gi.size(); ++i) {
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
                            dy.data(), gi.data(), acc, gp.data(),
                            ws.empty() ? nullptr : ws.data()});
        return gr;
    }

    float uniform() { return std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng_); }
    Floats random(size_t n) {
        Floats r(n);
        for (float& x : r) x = uniform();
        return r;
    }

    Graph g{"ops", 1};
    NodeId node = kNoId;
    std::map<ValueId, Buffer> values;
    std::vector<Floats> params;

  private:
    std::vector<float*> param_ptrs() {
        std::vector<float*> ps;
        for (auto& p : params) ps.push_back(p.data());
        return ps;
    }

    std::mt19937 rng_;
    std::unique_ptr<Backend> backend_;
};

// Checks every input and parameter gradient against central differences of L = Σ r·y (in
// double), with fixed random r.
void check_gradients(OpCase& c, double eps = 1e-2, double atol = 1e-3, double rtol = 1e-2) {
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
void check_forward(OpCase& c, const std::vector<double>& want, double tol = 1e-4) {
    const Floats y = c.forward();
    ASSERT_EQ(y.size(), want.size());
    for (size_t k = 0; k < y.size(); ++k)
        EXPECT_NEAR(y[k], want[k], tol * (1 + std::abs(want[k]))) << "output element " << k;
}

const Floats& data(OpCase& c, ValueId v) {
    return c.values.at(v).f;
}

// ---------------------------------------------------------------------------------------------
// Registry

TEST(OpRegistry, NamesRoundTrip) {
    for (int k = 0; k < kNumOpKinds; ++k) {
        const auto kind = static_cast<OpKind>(k);
        EXPECT_EQ(op_from_name(op_name(kind)), kind) << op_name(kind);
        EXPECT_NE(op_def(kind).infer, nullptr);
        EXPECT_NE(op_def(kind).residuals, nullptr);
        EXPECT_NE(op_def(kind).cost, nullptr);
    }
    EXPECT_EQ(op_name(OpKind::CrossEntropy), "cross_entropy");
    EXPECT_EQ(op_from_name("linear"), OpKind::Linear);
    EXPECT_FALSE(op_from_name("conv3d"));
    EXPECT_EQ(op_names_joined(),
              "linear, matmul, add, relu, gelu, tanh, sigmoid, layernorm, softmax, reshape, "
              "transpose, sum_squares, cross_entropy, sin, cos, conv2d, maxpool2d, avgpool2d, "
              "batchnorm, upsample_nearest2d, concat, flatten, dropout");
}

TEST(OpRegistry, FlagsAndResiduals) {
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{4, 8});
    const ValueId l = g.add_input("l", DType::I32, Shape{4}, 8);
    const ValueId a = g.add_input("a", DType::F32, Shape{2, 4, 8});
    auto residuals = [&](OpKind k, std::vector<ValueId> ins, Attrs attrs = {}) {
        const NodeId n = g.add_node("n" + std::to_string(g.num_nodes()), k, ins, attrs);
        return op_def(k).residuals(g, g.node(n));
    };
    auto is = [](Residuals r, uint32_t inputs, bool output) {
        return r.inputs == inputs && r.output == output;
    };
    EXPECT_TRUE(is(residuals(OpKind::Linear, {x}, {{"out_features", int64_t{3}}}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::MatMul, {a, a}, {{"transpose_b", int64_t{1}}}), 0b11, false));
    EXPECT_TRUE(is(residuals(OpKind::Add, {x, x}), 0, false));
    EXPECT_TRUE(is(residuals(OpKind::Relu, {x}), 0, true));
    EXPECT_TRUE(is(residuals(OpKind::Gelu, {x}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::Tanh, {x}), 0, true));
    EXPECT_TRUE(is(residuals(OpKind::Sigmoid, {x}), 0, true));
    EXPECT_TRUE(is(residuals(OpKind::LayerNorm, {x}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::Softmax, {x}), 0, true));
    EXPECT_TRUE(
        is(residuals(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{-1}}}), 0, false));
    EXPECT_TRUE(
        is(residuals(OpKind::Transpose, {x}, {{"perm", std::vector<int64_t>{1, 0}}}), 0, false));
    EXPECT_TRUE(is(residuals(OpKind::SumSquares, {x}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::CrossEntropy, {x, l}), 0b11, false));
    EXPECT_TRUE(is(residuals(OpKind::Sin, {x}), 0b1, false));
    EXPECT_TRUE(is(residuals(OpKind::Cos, {x}), 0b1, false));

    for (int k = 0; k < kNumOpKinds; ++k) {
        const auto kind = static_cast<OpKind>(k);
        EXPECT_EQ(op_def(kind).is_loss, kind == OpKind::SumSquares || kind == OpKind::CrossEntropy);
        EXPECT_EQ(op_def(kind).is_dot,
                  kind == OpKind::Linear || kind == OpKind::MatMul || kind == OpKind::Conv2d);
    }
}

TEST(OpRegistry, ParamsWorkspaceAndCost) {
    Graph g;
    const ValueId x = g.add_input("x", DType::F32, Shape{2, 5, 8});
    const NodeId fc = g.add_node("fc", OpKind::Linear, Ids{x}, {{"out_features", int64_t{3}}});
    EXPECT_EQ(g.output_of(fc).shape, (Shape{2, 5, 3}));
    ASSERT_EQ(g.node(fc).params.size(), 2u);
    EXPECT_EQ(g.param(g.node(fc).params[0]).name, "fc.weight");
    EXPECT_EQ(g.param(g.node(fc).params[0]).shape, (Shape{3, 8}));
    EXPECT_EQ(g.param(g.node(fc).params[0]).fan_in, 8);
    EXPECT_EQ(g.param(g.node(fc).params[1]).shape, (Shape{3}));
    const OpCost c = op_def(OpKind::Linear).cost(g, g.node(fc));
    EXPECT_DOUBLE_EQ(c.fwd_flops, 2.0 * 10 * 8 * 3 + 10 * 3);
    EXPECT_GT(c.bwd_flops, c.fwd_flops);
    EXPECT_GT(c.fwd_bytes, 0);

    const NodeId nb = g.add_node("nb", OpKind::Linear, Ids{x},
                                 {{"out_features", int64_t{3}}, {"bias", int64_t{0}}});
    EXPECT_EQ(g.node(nb).params.size(), 1u);

    const NodeId ln = g.add_node("ln", OpKind::LayerNorm, Ids{x});
    ASSERT_EQ(g.node(ln).params.size(), 2u);
    EXPECT_EQ(g.param(g.node(ln).params[0]).init, ParamInit::Ones);
    EXPECT_EQ(g.param(g.node(ln).params[1]).init, ParamInit::Zeros);
    EXPECT_EQ(op_def(OpKind::LayerNorm).bwd_workspace(g, g.node(ln)), 2u * 4u * 10u);
    EXPECT_EQ(op_def(OpKind::LayerNorm).fwd_workspace, nullptr);

    const ValueId logits = g.add_input("logits", DType::F32, Shape{6, 4});
    const ValueId labels = g.add_input("labels", DType::I32, Shape{6}, 4);
    const NodeId ce = g.add_node("ce", OpKind::CrossEntropy, Ids{logits, labels});
    EXPECT_EQ(g.output_of(ce).shape.rank(), 0);
    EXPECT_EQ(g.output_of(ce).bytes, 4u);
    EXPECT_EQ(op_def(OpKind::CrossEntropy).fwd_workspace(g, g.node(ce)), 6u * 4u);

    for (OpKind k : {OpKind::Linear, OpKind::MatMul, OpKind::Add, OpKind::Relu, OpKind::Softmax,
                     OpKind::Reshape, OpKind::Transpose, OpKind::SumSquares}) {
        EXPECT_EQ(op_def(k).fwd_workspace, nullptr) << op_name(k);
        EXPECT_EQ(op_def(k).bwd_workspace, nullptr) << op_name(k);
    }
}

// ---------------------------------------------------------------------------------------------
// Forward values and gradients, op by op

TEST(OpGradient, Linear) {
    OpCase c;
    const ValueId x = c.input("x", Shape{2, 3, 5});
    c.op(OpKind::Linear, {x}, {{"out_features", int64_t{4}}});
    std::vector<double> want;
    for (int r = 0; r < 6; ++r)
        for (int o = 0; o < 4; ++o) {
            double s = c.params[1][static_cast<size_t>(o)];
            for (int i = 0; i < 5; ++i)
                s += double(data(c, x)[static_cast<size_t>(r * 5 + i)]) *
                     c.params[0][static_cast<size_t>(o * 5 + i)];
            want.push_back(s);
        }
    check_forward(c, want);
    check_gradients(c);
}

TEST(OpGradient, LinearWithoutBias) {
    OpCase c;
    const ValueId x = c.input("x", Shape{4, 6});
    c.op(OpKind::Linear, {x}, {{"out_features", int64_t{3}}, {"bias", int64_t{0}}});
    ASSERT_EQ(c.params.size(), 1u);
    check_gradients(c);
}

std::vector<double> matmul_reference(const Floats& a, const Floats& b, int batch, int m, int k,
                                     int n, bool tb, double alpha) {
    std::vector<double> y;
    for (int q = 0; q < batch; ++q)
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                double s = 0;
                for (int t = 0; t < k; ++t) {
                    const size_t bi = tb ? static_cast<size_t>((q * n + j) * k + t)
                                         : static_cast<size_t>((q * k + t) * n + j);
                    s += double(a[static_cast<size_t>((q * m + i) * k + t)]) * b[bi];
                }
                y.push_back(alpha * s);
            }
    return y;
}

TEST(OpGradient, MatMul) {
    OpCase c;
    const ValueId a = c.input("a", Shape{2, 3, 4});
    const ValueId b = c.input("b", Shape{2, 4, 5});
    c.op(OpKind::MatMul, {a, b});
    EXPECT_EQ(c.g.output_of(c.node).shape, (Shape{2, 3, 5}));
    check_forward(c, matmul_reference(data(c, a), data(c, b), 2, 3, 4, 5, false, 1.0));
    check_gradients(c);
}

TEST(OpGradient, MatMulTransposeBAndAlpha) {
    OpCase c;
    const ValueId a = c.input("a", Shape{2, 3, 4});
    const ValueId b = c.input("b", Shape{2, 5, 4});
    c.op(OpKind::MatMul, {a, b}, {{"transpose_b", int64_t{1}}, {"alpha", 0.5}});
    EXPECT_EQ(c.g.output_of(c.node).shape, (Shape{2, 3, 5}));
    check_forward(c, matmul_reference(data(c, a), data(c, b), 2, 3, 4, 5, true, 0.5));
    check_gradients(c);
}

TEST(OpGradient, MatMulSameInputTwice) {
    // x·xᵀ, as in self-attention scores: one buffer in both gradient slots.
    OpCase c;
    const ValueId x = c.input("x", Shape{2, 3, 4});
    c.op(OpKind::MatMul, {x, x}, {{"transpose_b", int64_t{1}}, {"alpha", 0.25}});
    check_forward(c, matmul_reference(data(c, x), data(c, x), 2, 3, 4, 3, true, 0.25));
    check_gradients(c);
}

TEST(OpGradient, Add) {
    OpCase c;
    const ValueId a = c.input("a", Shape{3, 4});
    const ValueId b = c.input("b", Shape{3, 4});
    c.op(OpKind::Add, {a, b});
    std::vector<double> want;
    for (size_t k = 0; k < 12; ++k) want.push_back(double(data(c, a)[k]) + data(c, b)[k]);
    check_forward(c, want);
    check_gradients(c);
}

TEST(OpGradient, AddSameInputTwice) {
    OpCase c;
    const ValueId x = c.input("x", Shape{3, 4});
    c.op(OpKind::Add, {x, x});
    const Grads gr = c.backward(Floats(12, 1.5f));
    for (float v : gr.inputs.at(x)) EXPECT_EQ(v, 3.0f);
    check_gradients(c);
}

void check_pointwise(OpKind k, const std::function<double(double)>& f, float min_abs = 0.0f) {
    SCOPED_TRACE(std::string(op_name(k)));
    OpCase c;
    const ValueId x = c.input("x", Shape{3, 7}, min_abs);
    for (float& v : c.values.at(x).f) v *= 3.0f;  // cover the saturating tails too
    c.op(k, {x});
    std::vector<double> want;
    for (float v : data(c, x)) want.push_back(f(v));
    check_forward(c, want);
    check_gradients(c, 1e-3);
}

TEST(OpGradient, Relu) {
    check_pointwise(
        OpKind::Relu, [](double x) { return x > 0 ? x : 0.0; }, 0.05f);
}
TEST(OpGradient, Gelu) {
    check_pointwise(OpKind::Gelu,
                    [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
}
TEST(OpGradient, Tanh) {
    check_pointwise(OpKind::Tanh, [](double x) { return std::tanh(x); });
}
TEST(OpGradient, Sigmoid) {
    check_pointwise(OpKind::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); });
}
TEST(OpGradient, Sin) {
    check_pointwise(OpKind::Sin, [](double x) { return std::sin(x); });
}
TEST(OpGradient, Cos) {
    check_pointwise(OpKind::Cos, [](double x) { return std::cos(x); });
}

TEST(OpGradient, LayerNorm) {
    OpCase c;
    const ValueId x = c.input("x", Shape{2, 3, 6});
    c.op(OpKind::LayerNorm, {x}, {{"eps", 1e-3}});
    std::vector<double> want;
    for (int r = 0; r < 6; ++r) {
        double mean = 0, var = 0;
        for (int j = 0; j < 6; ++j) mean += data(c, x)[static_cast<size_t>(r * 6 + j)] / 6.0;
        for (int j = 0; j < 6; ++j)
            var += std::pow(data(c, x)[static_cast<size_t>(r * 6 + j)] - mean, 2) / 6.0;
        for (int j = 0; j < 6; ++j)
            want.push_back((data(c, x)[static_cast<size_t>(r * 6 + j)] - mean) /
                               std::sqrt(var + 1e-3) * c.params[0][static_cast<size_t>(j)] +
                           c.params[1][static_cast<size_t>(j)]);
    }
    check_forward(c, want);
    check_gradients(c);
}

TEST(OpGradient, Softmax) {
    OpCase c;
    const ValueId x = c.input("x", Shape{4, 5});
    for (float& v : c.values.at(x).f) v *= 4.0f;
    c.op(OpKind::Softmax, {x});
    std::vector<double> want;
    for (int r = 0; r < 4; ++r) {
        double s = 0;
        for (int j = 0; j < 5; ++j)
            s += std::exp(double(data(c, x)[static_cast<size_t>(r * 5 + j)]));
        for (int j = 0; j < 5; ++j)
            want.push_back(std::exp(double(data(c, x)[static_cast<size_t>(r * 5 + j)])) / s);
    }
    check_forward(c, want);
    check_gradients(c);
}

TEST(OpGradient, Reshape) {
    OpCase c;
    const ValueId x = c.input("x", Shape{2, 3, 4});
    c.op(OpKind::Reshape, {x}, {{"shape", std::vector<int64_t>{4, -1}}});
    EXPECT_EQ(c.g.output_of(c.node).shape, (Shape{4, 6}));
    check_forward(c, std::vector<double>(data(c, x).begin(), data(c, x).end()));
    check_gradients(c);
}

TEST(OpGradient, Transpose) {
    const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
        {Shape{3, 4}, {1, 0}},
        {Shape{2, 3, 4}, {0, 2, 1}},
        {Shape{2, 3, 4}, {2, 0, 1}},
        {Shape{2, 3, 4, 5}, {3, 1, 0, 2}},
        {Shape{2, 3, 4, 5}, {0, 1, 2, 3}},
    };
    for (const auto& [shape, perm] : cases) {
        SCOPED_TRACE(format_dims(shape) + " perm " + format_dims(Shape(Dims(perm))));
        OpCase c;
        const ValueId x = c.input("x", shape);
        c.op(OpKind::Transpose, {x}, {{"perm", perm}});
        const Shape& out = c.g.output_of(c.node).shape;
        for (int i = 0; i < shape.rank(); ++i)
            EXPECT_EQ(out[i], shape[static_cast<int>(perm[static_cast<size_t>(i)])]);
        // Reference: walk the output in order, reading the input at the permuted index.
        std::vector<double> want;
        std::vector<int64_t> idx(static_cast<size_t>(out.rank()), 0), in_idx(idx.size());
        for (int64_t k = 0; k < out.numel(); ++k) {
            int64_t rem = k;
            for (int a = out.rank() - 1; a >= 0; --a) {
                idx[static_cast<size_t>(a)] = rem % out[a];
                rem /= out[a];
            }
            for (size_t a = 0; a < idx.size(); ++a) in_idx[static_cast<size_t>(perm[a])] = idx[a];
            int64_t off = 0;
            for (int a = 0; a < shape.rank(); ++a)
                off = off * shape[a] + in_idx[static_cast<size_t>(a)];
            want.push_back(data(c, x)[static_cast<size_t>(off)]);
        }
        check_forward(c, want, 0.0);
        check_gradients(c);
    }
}

TEST(OpGradient, SumSquares) {
    OpCase c;
    const ValueId x = c.input("x", Shape{3, 5});
    c.op(OpKind::SumSquares, {x});
    EXPECT_EQ(c.g.output_of(c.node).shape.rank(), 0);
    double want = 0;
    for (float v : data(c, x)) want += 0.5 * double(v) * v;
    check_forward(c, {want});
    // dL/dy = y scaled by the incoming scalar.
    const Grads gr = c.backward({2.0f});
    for (size_t k = 0; k < 15; ++k) EXPECT_FLOAT_EQ(gr.inputs.at(x)[k], 2.0f * data(c, x)[k]);
    check_gradients(c);
}

TEST(OpGradient, CrossEntropy) {
    OpCase c;
    const ValueId logits = c.input("logits", Shape{5, 4});
    for (float& v : c.values.at(logits).f) v *= 3.0f;
    const ValueId labels = c.labels("labels", Shape{5}, 4);
    c.op(OpKind::CrossEntropy, {logits, labels});
    double want = 0;
    for (int r = 0; r < 5; ++r) {
        double s = 0;
        for (int j = 0; j < 4; ++j)
            s += std::exp(double(data(c, logits)[static_cast<size_t>(r * 4 + j)]));
        const int32_t label = c.values.at(labels).i[static_cast<size_t>(r)];
        want += (std::log(s) - data(c, logits)[static_cast<size_t>(r * 4 + label)]) / 5.0;
    }
    check_forward(c, {want});
    check_gradients(c);
}

TEST(OpForward, CrossEntropyRejectsLabelOutOfRange) {
    OpCase c;
    const ValueId logits = c.input("logits", Shape{3, 4});
    const ValueId labels = c.labels("labels", Shape{3}, 4);
    c.op(OpKind::CrossEntropy, {logits, labels});
    c.values.at(labels).i[2] = 7;
    try {
        c.forward();
        FAIL() << "expected rl::Error";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("row 2"), std::string::npos) << msg;
        EXPECT_NE(msg.find("label 7"), std::string::npos) << msg;
    }
    c.values.at(labels).i[2] = -1;
    EXPECT_THROW(c.forward(), Error);
}

TEST(OpForward, SoftmaxIsStableForLargeLogits) {
    OpCase c;
    const ValueId x = c.input("x", Shape{1, 3});
    c.values.at(x).f = {1000.0f, 1000.0f, -1000.0f};
    c.op(OpKind::Softmax, {x});
    const Floats y = c.forward();
    EXPECT_FLOAT_EQ(y[0], 0.5f);
    EXPECT_FLOAT_EQ(y[1], 0.5f);
    EXPECT_EQ(y[2], 0.0f);
}

// ---------------------------------------------------------------------------------------------
// The kernel contract

// accumulate=true adds the gradient to what the buffer held; false overwrites (the buffers
// start as NaN in backward(), so any read of an overwritten buffer would show).
TEST(OpContract, AccumulateAddsToExistingGradient) {
    struct Make {
        const char* name;
        std::function<void(OpCase&)> build;
    };
    const std::vector<Make> makes = {
        {"linear",
         [](OpCase& c) {
             c.op(OpKind::Linear, {c.input("x", Shape{4, 6})}, {{"out_features", int64_t{5}}});
         }},
        {"matmul",
         [](OpCase& c) {
             c.op(OpKind::MatMul, {c.input("a", Shape{2, 3, 4}), c.input("b", Shape{2, 5, 4})},
                  {{"transpose_b", int64_t{1}}});
         }},
        {"add",
         [](OpCase& c) {
             c.op(OpKind::Add, {c.input("a", Shape{3, 4}), c.input("b", Shape{3, 4})});
         }},
        {"relu",
         [](OpCase& c) {
             c.op(OpKind::Relu, {c.input("x", Shape{3, 4})});
         }},
        {"gelu",
         [](OpCase& c) {
             c.op(OpKind::Gelu, {c.input("x", Shape{3, 4})});
         }},
        {"tanh",
         [](OpCase& c) {
             c.op(OpKind::Tanh, {c.input("x", Shape{3, 4})});
         }},
        {"sigmoid",
         [](OpCase& c) {
             c.op(OpKind::Sigmoid, {c.input("x", Shape{3, 4})});
         }},
        {"sin",
         [](OpCase& c) {
             c.op(OpKind::Sin, {c.input("x", Shape{3, 4})});
         }},
        {"cos",
         [](OpCase& c) {
             c.op(OpKind::Cos, {c.input("x", Shape{3, 4})});
         }},
        {"layernorm",
         [](OpCase& c) {
             c.op(OpKind::LayerNorm, {c.input("x", Shape{3, 8})});
         }},
        {"softmax",
         [](OpCase& c) {
             c.op(OpKind::Softmax, {c.input("x", Shape{3, 4})});
         }},
        {"reshape",
         [](OpCase& c) {
             c.op(OpKind::Reshape, {c.input("x", Shape{3, 4})},
                  {{"shape", std::vector<int64_t>{12}}});
         }},
        {"transpose",
         [](OpCase& c) {
             c.op(OpKind::Transpose, {c.input("x", Shape{3, 4})},
                  {{"perm", std::vector<int64_t>{1, 0}}});
         }},
        {"sum_squares",
         [](OpCase& c) {
             c.op(OpKind::SumSquares, {c.input("x", Shape{3, 4})});
         }},
        {"cross_entropy",
         [](OpCase& c) {
             const ValueId x = c.input("x", Shape{3, 4});
             c.op(OpKind::CrossEntropy, {x, c.labels("l", Shape{3}, 4)});
         }},
    };
    for (const Make& m : makes) {
        SCOPED_TRACE(m.name);
        OpCase c;
        m.build(c);
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
        // Parameter gradients are always overwritten, whatever the input flags say.
        for (size_t p = 0; p < fresh.params.size(); ++p)
            EXPECT_EQ(fresh.params[p], summed.params[p]);
    }
}

TEST(OpContract, NullGradientSlotsAreSkipped) {
    // Gradients of the weights only (the input is data): grad_inputs[0] stays null.
    OpCase c;
    const ValueId x = c.input("x", Shape{4, 6});
    c.op(OpKind::Linear, {x}, {{"out_features", int64_t{3}}});
    Floats dy = c.random(12), dw(18, kNaN), db(3, kNaN);
    const void* ins[] = {data(c, x).data()};
    float* ps[] = {c.params[0].data(), c.params[1].data()};
    float* gi[] = {nullptr};
    float* gp[] = {dw.data(), db.data()};
    const bool acc[] = {false};
    auto backend = make_cpu_backend();
    backend->backward({c.g, c.n(), ins, nullptr, ps, dy.data(), gi, acc, gp, nullptr});
    const Grads full = c.backward(dy);
    EXPECT_EQ(dw, full.params[0]);
    EXPECT_EQ(db, full.params[1]);
}

// A fixed thread count gives bitwise the same results run after run, at sizes where the
// kernels' parallel paths are taken.
TEST(OpContract, RepeatedRunsAreBitwiseIdentical) {
    set_cpu_threads(2);
    const std::vector<std::function<void(OpCase&)>> builds = {
        [](OpCase& c) {
            c.op(OpKind::Linear, {c.input("x", Shape{96, 200})}, {{"out_features", int64_t{300}}});
        },
        [](OpCase& c) {
            c.op(OpKind::MatMul, {c.input("a", Shape{8, 64, 48}), c.input("b", Shape{8, 64, 48})},
                 {{"transpose_b", int64_t{1}}});
        },
        [](OpCase& c) {
            c.op(OpKind::LayerNorm, {c.input("x", Shape{128, 600})});
        },
        [](OpCase& c) {
            c.op(OpKind::Softmax, {c.input("x", Shape{128, 600})});
        },
        [](OpCase& c) { c.op(OpKind::Gelu, {c.input("x", Shape{100000})}); },
        [](OpCase& c) {
            c.op(OpKind::Transpose, {c.input("x", Shape{16, 32, 8, 24})},
                 {{"perm", std::vector<int64_t>{2, 0, 3, 1}}});
        },
        [](OpCase& c) {
            c.op(OpKind::SumSquares, {c.input("x", Shape{300, 500})});
        },
        [](OpCase& c) {
            const ValueId x = c.input("x", Shape{256, 1000});
            c.op(OpKind::CrossEntropy, {x, c.labels("l", Shape{256}, 1000)});
        },
    };
    for (const auto& build : builds) {
        OpCase c;
        build(c);
        SCOPED_TRACE(std::string(op_name(c.n().op)));
        const Floats y1 = c.forward(), y2 = c.forward();
        ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0);
        const Floats dy = c.random(y1.size());
        const Grads g1 = c.backward(dy), g2 = c.backward(dy);
        for (const auto& [v, g] : g1.inputs)
            EXPECT_EQ(std::memcmp(g.data(), g2.inputs.at(v).data(), g.size() * 4), 0);
        for (size_t p = 0; p < g1.params.size(); ++p)
            EXPECT_EQ(
                std::memcmp(g1.params[p].data(), g2.params[p].data(), g1.params[p].size() * 4), 0);
    }
}

TEST(CpuBackend, AllocatesAlignedMemory) {
    auto backend = make_cpu_backend();
    EXPECT_EQ(backend->name(), "cpu");
    for (uint64_t bytes : {0ull, 1ull, 63ull, 64ull, 1000ull}) {
        void* p = backend->allocate(bytes);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
        std::vector<uint8_t> src(bytes, 7), back(bytes, 0);
        backend->copy_from_host(p, src.data(), bytes);
        backend->copy_to_host(back.data(), p, bytes);
        EXPECT_EQ(src, back);
        backend->release(p);
    }
}

TEST(CpuBackend, ThreadCount) {
    set_cpu_threads(1);
    EXPECT_EQ(cpu_threads(), 1);
    auto backend = make_cpu_backend(2);
    EXPECT_EQ(cpu_threads(), 2);
    make_cpu_backend(0);  // 0 leaves the setting alone
    EXPECT_EQ(cpu_threads(), 2);
}

// ---------------------------------------------------------------------------------------------
// Shape inference errors name the node, the input and the problem.

void expect_error(const std::function<void(Graph&)>& build, const std::vector<std::string>& parts) {
    Graph g;
    try {
        build(g);
        ADD_FAILURE() << "expected rl::Error mentioning '" << parts.front() << "'";
    } catch (const Error& e) {
        const std::string msg = e.what();
        for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg;
    }
}

TEST(OpShapeErrors, MessagesNameTheProblem) {
    expect_error(
        [](Graph& g) {
            g.add_node("fc", OpKind::Linear, Ids{g.add_input("x", DType::F32, Shape{32, 64})},
                       {{"out_features", int64_t{10}}, {"in_features", int64_t{128}}});
        },
        {"node 'fc' (linear)", "input 0 has shape [32,64] but linear expects last axis 128"});
    expect_error(
        [](Graph& g) {
            g.add_node("fc", OpKind::Linear, Ids{g.add_input("x", DType::F32, Shape{4, 8})});
        },
        {"out_features"});
    expect_error(
        [](Graph& g) {
            g.add_node("mm", OpKind::MatMul,
                       Ids{g.add_input("a", DType::F32, Shape{2, 3, 4}),
                           g.add_input("b", DType::F32, Shape{2, 5, 6})});
        },
        {"input 1 has shape [2,5,6]", "expects [2,4,N]"});
    expect_error(
        [](Graph& g) {
            g.add_node("mm", OpKind::MatMul,
                       Ids{g.add_input("a", DType::F32, Shape{2, 3, 4}),
                           g.add_input("b", DType::F32, Shape{2, 5, 6})},
                       {{"transpose_b", int64_t{1}}});
        },
        {"transpose_b=1", "expects [2,N,4]"});
    expect_error(
        [](Graph& g) {
            g.add_node("mm", OpKind::MatMul,
                       Ids{g.add_input("a", DType::F32, Shape{3, 4}),
                           g.add_input("b", DType::F32, Shape{4, 5})});
        },
        {"input 0 has shape [3,4]", "rank 3"});
    expect_error(
        [](Graph& g) {
            g.add_node("s", OpKind::Add,
                       Ids{g.add_input("a", DType::F32, Shape{2, 3}),
                           g.add_input("b", DType::F32, Shape{3, 2})});
        },
        {"input 1 has shape [3,2]", "[2,3]"});
    expect_error(
        [](Graph& g) {
            g.add_node("r", OpKind::Reshape, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"shape", std::vector<int64_t>{4, 2}}});
        },
        {"6 elements", "[4,2]"});
    expect_error(
        [](Graph& g) {
            g.add_node("r", OpKind::Reshape, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"shape", std::vector<int64_t>{-1, -1}}});
        },
        {"more than one -1"});
    expect_error(
        [](Graph& g) {
            g.add_node("r", OpKind::Reshape, Ids{g.add_input("x", DType::F32, Shape{2, 3})},
                       {{"shape", std::vector<int64_t>{4, -1}}});
        },
        {"cannot be reshaped to [4,-1]"});
    expect_error(
        [](Graph& g) {
            g.add_node("t", OpKind::Transpose, Ids{g.add_input("x", DType::F32, Shape{2, 3, 4})},
                       {{"perm", std::vector<int64_t>{0, 0, 1}}});
        },
        {"not a permutation"});
    expect_error(
        [](Graph& g) {
            g.add_node("t", OpKind::Transpose, Ids{g.add_input("x", DType::F32, Shape{2, 3, 4})},
                       {{"perm", std::vector<int64_t>{1, 0}}});
        },
        {"has 2 entries", "rank 3"});
    expect_error(
        [](Graph& g) {
            g.add_node("t", OpKind::Transpose,
                       Ids{g.add_input("x", DType::F32, Shape{1, 2, 3, 4, 5})},
                       {{"perm", std::vector<int64_t>{0, 1, 2, 3, 4}}});
        },
        {"rank up to 4"});
    expect_error(
        [](Graph& g) {
            g.add_node("ce", OpKind::CrossEntropy,
                       Ids{g.add_input("x", DType::F32, Shape{4, 10}),
                           g.add_input("y", DType::F32, Shape{4})});
        },
        {"input 1 ('y') is f32 but cross_entropy expects i32"});
    expect_error(
        [](Graph& g) {
            g.add_node("ce", OpKind::CrossEntropy,
                       Ids{g.add_input("x", DType::F32, Shape{4, 10}),
                           g.add_input("y", DType::I32, Shape{5}, 10)});
        },
        {"input 1 (labels) has shape [5]", "expects [4]"});
    expect_error(
        [](Graph& g) {
            g.add_node("ce", OpKind::CrossEntropy,
                       Ids{g.add_input("x", DType::F32, Shape{4, 10}),
                           g.add_input("y", DType::I32, Shape{4}, 12)});
        },
        {"[0, 12)", "only 10 classes"});
    expect_error(
        [](Graph& g) {
            g.add_node("act", OpKind::Relu, Ids{g.add_input("y", DType::I32, Shape{4}, 3)});
        },
        {"input 0 ('y') is i32 but relu expects f32"});
    expect_error(
        [](Graph& g) {
            g.add_node("ln", OpKind::LayerNorm, Ids{g.add_input("x", DType::F32, Shape{4, 3})},
                       {{"eps", 0.0}});
        },
        {"'eps'"});
}

}  // namespace
}  // namespace rl
