// Engine benchmarks (results and machine in docs/benchmarks.md; regenerate with scripts/bench):
//  - a linear layer's forward+backward through our kernels against the raw GEMMs of the same
//    shapes on every library available (Eigen, OpenBLAS, BLIS), in the same run (target: >= 90 %
//    of the fastest one's raw throughput);
//  - the executor's overhead per instruction with kernels off (target: < 5 us);
//  - the simulator's speed in instructions per second (target: >= 5 million).
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <vector>

#include "engine/backend.h"
#include "engine/executor.h"
#include "engine/gemm.h"
#include "engine/networks/presets.h"
#include "engine/simulator.h"
#include "strategies/strategy.h"

namespace rl {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Shapes: batch, in, out.
void LinearShapes(benchmark::internal::Benchmark* b) {
    b->Args({256, 1024, 1024})->Args({1024, 1024, 1024})->Args({512, 512, 2048});
    b->Unit(benchmark::kMillisecond)->UseRealTime();
}

// One thread, and whether `lib` is installed here (if not, the benchmark says so and is skipped).
bool ready_on_one_thread(benchmark::State& state, GemmLibrary lib) {
    set_cpu_threads(1);
    for (const GemmLibraryInfo& i : gemm_libraries())
        if (i.library == lib && i.available) return true;
    state.SkipWithError("library not available here");
    for (auto _ : state) {
    }
    return false;
}

// The three GEMMs of a linear layer's step (Y = X·Wᵀ, dX = dY·W, dW = dYᵀ·X), raw, on one
// library (engine/gemm.h: Eigen, OpenBLAS, BLIS, our own; a library not available is skipped).
void BM_RawGemm(benchmark::State& state, GemmLibrary lib) {
    const int64_t n = state.range(0), in = state.range(1), out = state.range(2);
    if (!ready_on_one_thread(state, lib)) return;
    RowMat x = RowMat::Random(n, in), w = RowMat::Random(out, in), dy = RowMat::Random(n, out);
    RowMat y(n, out), dx(n, in), dw(out, in);
    for (auto _ : state) {
        sgemm_on(lib, false, true, n, out, in, 1.f, x.data(), in, w.data(), in, 0.f, y.data(), out);
        sgemm_on(lib, false, false, n, in, out, 1.f, dy.data(), out, w.data(), in, 0.f, dx.data(),
                 in);
        sgemm_on(lib, true, false, out, in, n, 1.f, dy.data(), out, x.data(), in, 0.f, dw.data(),
                 in);
        benchmark::DoNotOptimize(y.data());
        benchmark::DoNotOptimize(dx.data());
        benchmark::DoNotOptimize(dw.data());
    }
    state.counters["GFLOPs"] =
        benchmark::Counter(6.0 * n * in * out, benchmark::Counter::kIsIterationInvariantRate,
                           benchmark::Counter::kIs1000);
}
BENCHMARK_CAPTURE(BM_RawGemm, eigen, GemmLibrary::Eigen)->Apply(LinearShapes);
BENCHMARK_CAPTURE(BM_RawGemm, openblas, GemmLibrary::OpenBLAS)->Apply(LinearShapes);
BENCHMARK_CAPTURE(BM_RawGemm, blis, GemmLibrary::BLIS)->Apply(LinearShapes);
BENCHMARK_CAPTURE(BM_RawGemm, rematlab, GemmLibrary::RematLab)->Apply(LinearShapes);

// One product shape that a layer runs, on one library, one thread: which library leads which
// shape (the calibration chooses per class of shapes, engine/cpu/gemm.cpp).
struct GemmShape {
    const char* what;
    bool ta, tb;
    int64_t m, n, k;
};
const GemmShape kGemmShapes[] = {
    {"linear_fwd_XWt_1024", false, true, 1024, 1024, 1024},
    {"linear_dX_dYW_1024", false, false, 1024, 1024, 1024},
    {"linear_dW_dYtX_1024", true, false, 1024, 1024, 1024},
    {"vit_fwd_XWt_400x3072x768", false, true, 400, 3072, 768},
    {"vit2_fwd_XWt_100x2304x768", false, true, 100, 2304, 768},
    {"vit2_fwd_XWt_100x768x3072", false, true, 100, 768, 3072},
    {"vit2_dX_dYW_100x768x3072", false, false, 100, 768, 3072},
    {"vit2_dW_dYtX_3072x768x100", true, false, 3072, 768, 100},
    {"vit2_dW_dYtX_768x3072x100", true, false, 768, 3072, 100},
    {"mlp512_fwd_XWt_512x1024x1024", false, true, 512, 1024, 1024},
    {"tf256_fwd_XWt_1024x768x256", false, true, 1024, 768, 256},
    {"tf256_fwd_XWt_1024x256x1024", false, true, 1024, 256, 1024},
    {"vit_dW_dYtX_3072x768x400", true, false, 3072, 768, 400},
    {"alexnet_fc1_fwd_XWt_2x4096x9216", false, true, 2, 4096, 9216},
    {"alexnet_fc1_dX_dYW_2x9216x4096", false, false, 2, 9216, 4096},
    {"alexnet_fc1_dW_dYtX_4096x9216x2", true, false, 4096, 9216, 2},
    {"conv56_fwd_Wcols", false, false, 64, 3136, 576},
    {"conv56_dcols_WtdY", true, false, 576, 3136, 64},
    {"conv56_dW_dYcolst", false, true, 64, 576, 3136},
    {"conv14_fwd_Wcols", false, false, 256, 196, 2304},
    {"conv14_dcols_WtdY", true, false, 2304, 196, 256},
    {"conv14_dW_dYcolst", false, true, 256, 2304, 196},
    {"conv7_dW_dYcolst", false, true, 512, 4608, 49},
};

void BM_GemmShape(benchmark::State& state, GemmLibrary lib) {
    const GemmShape& s = kGemmShapes[state.range(0)];
    state.SetLabel(s.what);
    if (!ready_on_one_thread(state, lib)) return;
    const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    RowMat a = RowMat::Random(s.m, s.k), b = RowMat::Random(s.k, s.n), c(s.m, s.n);
    for (auto _ : state) {
        sgemm_on(lib, s.ta, s.tb, s.m, s.n, s.k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(),
                 s.n);
        benchmark::DoNotOptimize(c.data());
    }
    state.counters["GFLOPs"] =
        benchmark::Counter(2.0 * s.m * s.n * s.k, benchmark::Counter::kIsIterationInvariantRate,
                           benchmark::Counter::kIs1000);
}
void GemmShapes(benchmark::internal::Benchmark* b) {
    b->DenseRange(0, std::size(kGemmShapes) - 1)->Unit(benchmark::kMillisecond)->UseRealTime();
}
BENCHMARK_CAPTURE(BM_GemmShape, eigen, GemmLibrary::Eigen)->Apply(GemmShapes);
BENCHMARK_CAPTURE(BM_GemmShape, openblas, GemmLibrary::OpenBLAS)->Apply(GemmShapes);
BENCHMARK_CAPTURE(BM_GemmShape, blis, GemmLibrary::BLIS)->Apply(GemmShapes);
BENCHMARK_CAPTURE(BM_GemmShape, rematlab, GemmLibrary::RematLab)->Apply(GemmShapes);

// Our linear kernel (with bias) forward + backward through the CPU backend, on the library the
// machine's calibration chose (or REMATLAB_GEMM): its counter names it.
void BM_LinearForwardBackward(benchmark::State& state) {
    const int64_t n = state.range(0), in = state.range(1), out = state.range(2);
    Graph g("linear");
    g.add_input("x", DType::F32, {n, in});
    const NodeId fc =
        g.add_node("fc", OpKind::Linear, std::vector<std::string>{"x"}, {{"out_features", out}});
    g.add_node("loss", OpKind::SumSquares, std::vector<std::string>{"fc"});
    g.finalize();
    auto backend = make_cpu_backend(1);
    RowMat x = RowMat::Random(n, in), w = RowMat::Random(out, in), dy = RowMat::Random(n, out);
    std::vector<float> b(static_cast<size_t>(out), 0.1f), db(static_cast<size_t>(out));
    RowMat y(n, out), dx(n, in), dw(out, in);
    const Node& node = g.node(fc);
    const void* inputs[] = {x.data()};
    float* params[] = {w.data(), b.data()};
    float* grad_in[] = {dx.data()};
    float* grad_params[] = {dw.data(), db.data()};
    const bool acc[] = {false};
    for (auto _ : state) {
        backend->forward(ForwardCall{g, node, inputs, params, y.data(), nullptr});
        backend->backward(BackwardCall{g, node, inputs, nullptr, params, dy.data(), grad_in, acc,
                                       grad_params, nullptr});
        benchmark::DoNotOptimize(y.data());
        benchmark::DoNotOptimize(dx.data());
    }
    state.counters["GFLOPs"] =
        benchmark::Counter(6.0 * n * in * out, benchmark::Counter::kIsIterationInvariantRate,
                           benchmark::Counter::kIs1000);
    state.SetLabel(gemm_library_name(gemm_choice().library));
}
BENCHMARK(BM_LinearForwardBackward)->Apply(LinearShapes);

// Executor overhead: a deep, tiny network walked with the kernels switched off, so what is
// timed is the liveness rules, the tracking allocator and the per-instruction bookkeeping.
void BM_ExecutorOverheadPerInstruction(benchmark::State& state) {
    const Graph g = load_network("mlp:depth=500,width=4,batch=1");
    const Plan plan = plan_with(g, CostModel{}, parse_spec(state.range(0) ? "sqrt-n" : "none"));
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    ExecuteOptions opt;
    opt.run_kernels = false;
    opt.keep_gradients = false;
    for (auto _ : state) benchmark::DoNotOptimize(execute(g, plan.schedule, *backend, data, opt));
    state.counters["time_per_instruction"] = benchmark::Counter(
        static_cast<double>(plan.schedule.size()),
        benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
    state.SetLabel(std::to_string(plan.schedule.size()) + " instructions");
}
BENCHMARK(BM_ExecutorOverheadPerInstruction)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Executor overhead with real (tiny) kernels: what a user's small network pays per instruction.
void BM_ExecutorTinyKernels(benchmark::State& state) {
    const Graph g = load_network("mlp:depth=500,width=4,batch=1");
    const Plan plan = plan_with(g, CostModel{}, parse_spec("sqrt-n"));
    auto backend = make_cpu_backend(1);
    const RunData data = RunData::seeded(g);
    ExecuteOptions opt;
    opt.keep_gradients = false;
    for (auto _ : state) benchmark::DoNotOptimize(execute(g, plan.schedule, *backend, data, opt));
    state.counters["time_per_instruction"] = benchmark::Counter(
        static_cast<double>(plan.schedule.size()),
        benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ExecutorTinyKernels)->Unit(benchmark::kMillisecond);

// Simulator throughput on a long schedule (sqrt-n on a 4,000-layer MLP), no timeline.
void BM_SimulatorInstructionsPerSecond(benchmark::State& state) {
    const Graph g = load_network("mlp:depth=4000,width=4,batch=1");
    const Plan plan = plan_with(g, CostModel{}, parse_spec("sqrt-n"));
    const CostModel costs = CostModel::analytic(g, DeviceRates{});
    const LivenessTables tables(g);
    SimulateOptions opt;
    opt.record_timeline = state.range(0) != 0;
    for (auto _ : state) benchmark::DoNotOptimize(simulate(g, tables, plan.schedule, costs, opt));
    state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(plan.schedule.size()));
    state.SetLabel(std::to_string(plan.schedule.size()) + " instructions" +
                   (opt.record_timeline ? ", with timeline" : ""));
}
BENCHMARK(BM_SimulatorInstructionsPerSecond)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace rl

BENCHMARK_MAIN();
