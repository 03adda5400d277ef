// Max-pool benchmarks (results and machine in docs/benchmarks.md): the CPU kernels' forward and
// backward, apart, on the zoo's 3 × 3 pools at 224 px (AlexNet's three, ResNet's stem,
// GoogLeNet's stride-1 branch pool, and that one at 64 px), beside a copy of the same bytes as
// the bound. One thread;
// GB/s counts the bytes each pass must move at least: forward, read x and write y; backward,
// read x and dY and write dX (the choices are recomputed from x, as the kernels do).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace rl {
namespace {

using Arr = Eigen::ArrayXf;
using Ints = std::vector<int64_t>;

// Args: batch, channels, size, kernel, stride, padding.
void Shapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"n", "c", "hw", "k", "s", "pad"});
    b->Args({2, 64, 55, 3, 2, 0});   // AlexNet features.2: the row path
    b->Args({2, 192, 27, 3, 2, 0});  // AlexNet features.5: 16-plane blocks
    b->Args({2, 256, 13, 3, 2, 0});  // AlexNet features.12
    b->Args({2, 64, 112, 3, 2, 1});  // ResNet's stem: rows forward, blocks backward
    b->Args({2, 192, 28, 3, 1, 1});  // GoogLeNet's inception3a branch pool
    b->Args({2, 192, 8, 3, 1, 1});   // the same at 64 px, as the zoo exports it
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

struct Case {
    Graph g{"pool"};
    NodeId node = kNoId;
    Arr x, y, dy, dx;
    int64_t in = 0, out = 0;

    explicit Case(const benchmark::State& state) {
        const int64_t n = state.range(0), c = state.range(1), hw = state.range(2),
                      k = state.range(3), s = state.range(4), pad = state.range(5);
        g.add_input("x", DType::F32, {n, c, hw, hw});
        Attrs a{{"kernel", Ints{k, k}}, {"stride", Ints{s, s}}};
        a.set("padding", Ints{pad, pad, pad, pad});
        node = g.add_node("p", OpKind::MaxPool2d, std::vector<std::string>{"x"}, a);
        const int64_t o = (hw + 2 * pad - k) / s + 1;
        in = n * c * hw * hw;
        out = n * c * o * o;
        x = Arr::Random(in);
        y = Arr(out);
        dy = Arr::Random(out);
        dx = Arr(in);
    }
};

void BM_MaxPoolForward(benchmark::State& state) {
    Case k(state);
    auto backend = make_cpu_backend(1);
    const void* ins[] = {k.x.data()};
    for (auto _ : state) {
        backend->forward(ForwardCall{k.g, k.g.node(k.node), ins, nullptr, k.y.data(), nullptr});
        benchmark::DoNotOptimize(k.y.data());
    }
    state.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(k.in + k.out),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

void BM_MaxPoolBackward(benchmark::State& state) {
    Case k(state);
    auto backend = make_cpu_backend(1);
    const void* ins[] = {k.x.data()};
    float* gi[] = {k.dx.data()};
    bool acc[] = {false};
    backend->forward(ForwardCall{k.g, k.g.node(k.node), ins, nullptr, k.y.data(), nullptr});
    for (auto _ : state) {
        backend->backward(BackwardCall{k.g, k.g.node(k.node), ins, k.y.data(), nullptr, k.dy.data(),
                                       gi, acc, nullptr, nullptr});
        benchmark::DoNotOptimize(k.dx.data());
    }
    state.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(2 * k.in + k.out),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

// The bound: the backward's bytes as plain Eigen array loops (read x and dY, write dX).
void BM_MaxPoolBackwardCopyBound(benchmark::State& state) {
    Case k(state);
    for (auto _ : state) {
        k.dx = k.x;
        k.y = k.dy;  // dY's read (y as the sink)
        benchmark::DoNotOptimize(k.dx.data());
        benchmark::DoNotOptimize(k.y.data());
    }
    state.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(2 * k.in + k.out),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

BENCHMARK(BM_MaxPoolForward)->Apply(Shapes);
BENCHMARK(BM_MaxPoolBackward)->Apply(Shapes);
BENCHMARK(BM_MaxPoolBackwardCopyBound)->Apply(Shapes);

}  // namespace
}  // namespace rl

BENCHMARK_MAIN();
