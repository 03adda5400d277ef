// Elementwise benchmarks (results and machine in docs/benchmarks.md): forward + backward through
// the CPU kernels of add (same shapes: the residual sum, in place or not), broadcasting mul
// (squeeze-excitation [N,C,H,W]·[N,C,1,1]; layer scale x [N,H,W,C] · γ [C], a parameter) and
// reduce_mean over the spatial axes, beside a raw Eigen loop over the same bytes as the bound.
// One thread; GB/s counts the bytes each step must move at least (read the operands and dY,
// write the output and the gradients).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <memory>
#include <vector>

#include "engine/backend.h"

namespace rl {
namespace {

using Arr = Eigen::ArrayXf;

// Args: batch, channels, size.
void Shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"n", "c", "hw"});
    b->Args({8, 64, 56});
    b->Args({8, 256, 14});
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

struct Case {
    Graph g{"elementwise"};
    NodeId node = kNoId;
    std::vector<Arr> in, params, grads, pgrads;
    Arr y, dy;
    double bytes = 0;

    void run(benchmark::State& state) {
        auto backend = make_cpu_backend(1);
        const Node& n = g.node(node);
        std::vector<const void*> ins;
        std::vector<float*> ps, gi, gp;
        for (Arr& a : in) ins.push_back(a.data());
        for (Arr& a : params) ps.push_back(a.data());
        for (Arr& a : grads) gi.push_back(a.data());
        for (Arr& a : pgrads) gp.push_back(a.data());
        const std::unique_ptr<bool[]> acc(new bool[in.size()]());  // overwrite the gradients
        for (auto _ : state) {
            backend->forward(ForwardCall{g, n, ins.data(), ps.data(), y.data(), nullptr});
            backend->backward(BackwardCall{g, n, ins.data(), y.data(), ps.data(), dy.data(),
                                           gi.data(), acc.get(), gp.data(), nullptr});
            benchmark::DoNotOptimize(y.data());
            benchmark::DoNotOptimize(gi.data());
        }
        state.counters["GB/s"] = benchmark::Counter(
            bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
    }
};

Arr random(int64_t n) {
    return Arr::Random(n);
}

void BM_AddSameShape(benchmark::State& state) {
    const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
    Case k;
    k.g.add_input("a", DType::F32, {n, c, hw, hw});
    k.g.add_input("b", DType::F32, {n, c, hw, hw});
    k.node = k.g.add_node("s", OpKind::Add, std::vector<std::string>{"a", "b"});
    const int64_t e = n * c * hw * hw;
    k.in = {random(e), random(e)};
    k.grads = {Arr(e), Arr(e)};
    k.y = Arr(e);
    k.dy = random(e);
    k.bytes = 4.0 * 6 * static_cast<double>(e);  // read a, b, dY; write y, dA, dB
    k.run(state);
}

// The bound for add: the same reads and writes as plain Eigen array loops.
void BM_AddSameShapeEigenBound(benchmark::State& state) {
    const int64_t e = state.range(0) * state.range(1) * state.range(2) * state.range(2);
    Arr a = random(e), b = random(e), y(e), dy = random(e), da(e), db(e);
    for (auto _ : state) {
        y = a + b;
        da = dy;
        db = dy;
        benchmark::DoNotOptimize(y.data());
        benchmark::DoNotOptimize(db.data());
    }
    state.counters["GB/s"] = benchmark::Counter(4.0 * 6 * static_cast<double>(e),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

void BM_MulSqueezeExcitation(benchmark::State& state) {
    const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
    Case k;
    k.g.add_input("x", DType::F32, {n, c, hw, hw});
    k.g.add_input("s", DType::F32, {n, c, 1, 1});
    k.node = k.g.add_node("se", OpKind::Mul, std::vector<std::string>{"x", "s"});
    const int64_t e = n * c * hw * hw;
    k.in = {random(e), random(n * c)};
    k.grads = {Arr(e), Arr(n * c)};
    k.y = Arr(e);
    k.dy = random(e);
    k.bytes = 4.0 * 4 * static_cast<double>(e);  // read x, dY (twice counted once); write y, dX
    k.run(state);
}

void BM_MulLayerScaleChannelsLast(benchmark::State& state) {
    const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
    Case k;
    k.g.add_input("x", DType::F32, {n, hw, hw, c});
    k.node = k.g.add_node("ls", OpKind::Mul, std::vector<std::string>{"x"},
                          {{"param_shape", std::vector<int64_t>{c}}});
    const int64_t e = n * c * hw * hw;
    k.in = {random(e)};
    k.params = {random(c)};
    k.grads = {Arr(e)};
    k.pgrads = {Arr(c)};
    k.y = Arr(e);
    k.dy = random(e);
    k.bytes = 4.0 * 4 * static_cast<double>(e);
    k.run(state);
}

void BM_ReduceMeanSpatial(benchmark::State& state) {
    const int64_t n = state.range(0), c = state.range(1), hw = state.range(2);
    Case k;
    k.g.add_input("x", DType::F32, {n, c, hw, hw});
    k.node = k.g.add_node("m", OpKind::ReduceMean, std::vector<std::string>{"x"},
                          {{"axes", std::vector<int64_t>{2, 3}}});
    const int64_t e = n * c * hw * hw;
    k.in = {random(e)};
    k.grads = {Arr(e)};
    k.y = Arr(n * c);
    k.dy = random(n * c);
    k.bytes = 4.0 * 2 * static_cast<double>(e);  // read x; write dX
    k.run(state);
}

BENCHMARK(BM_AddSameShape)->Apply(Shapes);
BENCHMARK(BM_AddSameShapeEigenBound)->Apply(Shapes);
BENCHMARK(BM_MulSqueezeExcitation)->Apply(Shapes);
BENCHMARK(BM_MulLayerScaleChannelsLast)->Apply(Shapes);
BENCHMARK(BM_ReduceMeanSpatial)->Apply(Shapes);

}  // namespace
}  // namespace rl

BENCHMARK_MAIN();
