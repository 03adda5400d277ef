// conv2d benchmarks (results and machine in docs/benchmarks.md): a convolution's forward +
// backward through our CPU kernel against its lower bound in the same run, the raw Eigen GEMMs
// of the same im2col formulation (per image: Y = W·col, dW += dY·colᵀ, dcol = Wᵀ·dY) without
// the im2col/col2im copies, at ResNet-like shapes, one thread. GFLOPs counts 6·N·O·P·K (the
// three GEMMs), so both report the same work.
#include <benchmark/benchmark.h>

#include <algorithm>

#include <Eigen/Core>
#include <vector>

#include "engine/backend.h"
#include "engine/ops/window.h"

namespace rl {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMat>;
using ConstMap = Eigen::Map<const RowMat>;

// Args: batch, channels, size, out_channels, kernel, stride, groups.
void ConvShapes(benchmark::internal::Benchmark* b) {
    b->ArgNames({"n", "c", "hw", "o", "k", "s", "g"});
    b->Args({4, 64, 56, 64, 3, 1, 1});      // ResNet stage 1, 3x3
    b->Args({4, 128, 28, 128, 3, 1, 1});    // stage 2
    b->Args({4, 256, 14, 256, 3, 1, 1});    // stage 3
    b->Args({4, 128, 56, 128, 3, 2, 1});    // strided, downsampling
    b->Args({4, 256, 14, 1024, 1, 1, 1});   // bottleneck 1x1 expansion (no im2col)
    b->Args({4, 256, 28, 256, 3, 1, 256});  // MobileNet depthwise
    b->Unit(benchmark::kMillisecond)->UseRealTime();
}

struct ConvBench {
    Graph g{"conv"};
    NodeId node = kNoId;
    Conv2dGeometry geo;
    explicit ConvBench(const benchmark::State& s) {
        const int64_t n = s.range(0), c = s.range(1), hw = s.range(2), o = s.range(3),
                      k = s.range(4), stride = s.range(5), groups = s.range(6);
        g.add_input("x", DType::F32, {n, c, hw, hw});
        node = g.add_node("conv", OpKind::Conv2d, std::vector<std::string>{"x"},
                          {{"out_channels", o},
                           {"kernel", k},
                           {"stride", stride},
                           {"padding", k / 2},
                           {"groups", groups}});
        g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"conv"});
        g.finalize();
        geo = conv2d_geometry(g, g.node(node));
    }
    double flops() const {
        return 6.0 * static_cast<double>(geo.n * geo.out_c * geo.oh * geo.ow * geo.patch());
    }
};

void BM_Conv2dForwardBackward(benchmark::State& state) {
    ConvBench b(state);
    const Conv2dGeometry& d = b.geo;
    auto backend = make_cpu_backend(1);
    RowMat x = RowMat::Random(d.n * d.c, d.h * d.w);
    RowMat w = RowMat::Random(d.out_c, d.patch()), bias = RowMat::Random(1, d.out_c);
    RowMat y(d.n * d.out_c, d.oh * d.ow), dy = RowMat::Random(d.n * d.out_c, d.oh * d.ow);
    RowMat dx(d.n * d.c, d.h * d.w), dw(d.out_c, d.patch()), db(1, d.out_c);
    RowMat ws(1,
              std::max<int64_t>({1, d.gemm_workspace_floats(), d.depthwise_workspace_floats(true),
                                 d.depthwise_workspace_floats(false)}));
    const Node& node = b.g.node(b.node);
    const void* inputs[] = {x.data()};
    float* params[] = {w.data(), bias.data()};
    float* grad_in[] = {dx.data()};
    float* grad_params[] = {dw.data(), db.data()};
    const bool acc[] = {false};
    for (auto _ : state) {
        backend->forward(ForwardCall{b.g, node, inputs, params, y.data(), ws.data()});
        backend->backward(BackwardCall{b.g, node, inputs, nullptr, params, dy.data(), grad_in, acc,
                                       grad_params, ws.data()});
        benchmark::DoNotOptimize(y.data());
        benchmark::DoNotOptimize(dx.data());
        benchmark::DoNotOptimize(dw.data());
    }
    state.counters["GFLOPs"] = benchmark::Counter(
        b.flops(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Conv2dForwardBackward)->Apply(ConvShapes);

// The lower bound: the same GEMMs per image and group, on a ready column matrix.
void BM_Im2colGemmBound(benchmark::State& state) {
    ConvBench b(state);
    const Conv2dGeometry& d = b.geo;
    set_cpu_threads(1);
    const int64_t og = d.out_per_group(), k = d.patch(), p = d.oh * d.ow;
    RowMat col = RowMat::Random(k, p), dcol(k, p);
    RowMat w = RowMat::Random(d.out_c, k), dw(d.out_c, k);
    RowMat y(d.n * d.out_c, p), dy = RowMat::Random(d.n * d.out_c, p);
    for (auto _ : state) {
        for (int64_t n = 0; n < d.n; ++n)
            for (int64_t gi = 0; gi < d.groups; ++gi) {
                ConstMap wg(w.data() + gi * og * k, og, k);
                const int64_t row = n * d.out_c + gi * og;
                Map(y.data() + row * p, og, p).noalias() = wg * col;
                ConstMap dyg(dy.data() + row * p, og, p);
                Map dwg(dw.data() + gi * og * k, og, k);
                if (n == 0)
                    dwg.noalias() = dyg * col.transpose();
                else
                    dwg.noalias() += dyg * col.transpose();
                dcol.noalias() = wg.transpose() * dyg;
            }
        benchmark::DoNotOptimize(y.data());
        benchmark::DoNotOptimize(dw.data());
        benchmark::DoNotOptimize(dcol.data());
    }
    state.counters["GFLOPs"] = benchmark::Counter(
        b.flops(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Im2colGemmBound)->Apply(ConvShapes);

}  // namespace
}  // namespace rl

BENCHMARK_MAIN();
