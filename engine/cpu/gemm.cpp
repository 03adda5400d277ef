// The GEMM entry point (engine/gemm.h): Eigen, or OpenBLAS / BLIS loaded with dlopen, chosen
// once per process by request, environment, cached calibration or a calibration run.
#include "engine/gemm.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <omp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "engine/atomic_file.h"
#include "engine/backend.h"
#include "engine/cpu/gemm_internal.h"
#include "engine/cpu/kernels.h"
#include "engine/errors.h"

#ifndef REMATLAB_MULTIARCH_LIBDIR
#define REMATLAB_MULTIARCH_LIBDIR "/usr/lib/x86_64-linux-gnu"
#endif

namespace rl {
using namespace gemm_detail;  // what gemm_shapes.cpp shares (gemm_internal.h)
namespace {

// ---- the BLAS libraries, loaded at run time ------------------------------------------------

// CBLAS (OpenBLAS): int is its blasint in Debian's LP64 build.
using CblasSgemm = void (*)(int order, int ta, int tb, int m, int n, int k, float alpha,
                            const float* a, int lda, const float* b, int ldb, float beta, float* c,
                            int ldc);
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
// BLIS's typed API: dim_t and inc_t are its gint_t (64-bit in Debian's build, checked at load),
// trans_t an enum whose BLIS_NO_TRANSPOSE is 0; transposes are passed as strides instead.
using BliSgemm = void (*)(int ta, int tb, int64_t m, int64_t n, int64_t k, const float* alpha,
                          const float* a, int64_t rsa, int64_t csa, const float* b, int64_t rsb,
                          int64_t csb, const float* beta, float* c, int64_t rsc, int64_t csc);

// BLIS 0.9's rntm_t (blis.h), for its expert interface: the thread count per call, so a small
// product or one inside our own parallel region runs on one thread without touching the global
// setting other threads read; and its small-product ("sup") kernels switched off: on Haswell
// kernels (BLIS 0.9.0, Debian 12) they read a float or two past the end of an operand
// (flame/blis issues 635 and 821, fixed after 0.9), which valgrind showed in our convolutions'
// products and which crashed a test process (SIGSEGV) where an operand ended a page. Without
// them every product goes through BLIS's packing, which reads only what is there. Used only when
// the library says it is 0.9.x.
struct BliRntm09 {
    bool auto_factor = true;
    int64_t num_threads = -1;
    int64_t thrloop[6] = {-1, -1, -1, -1, -1, -1};
    bool pack_a = false, pack_b = false, l3_sup = true;
    void* sba_pool = nullptr;
    void* pba = nullptr;
};
using BliSgemmEx = void (*)(int ta, int tb, int64_t m, int64_t n, int64_t k, const float* alpha,
                            const float* a, int64_t rsa, int64_t csa, const float* b, int64_t rsb,
                            int64_t csb, const float* beta, float* c, int64_t rsc, int64_t csc,
                            void* cntx, BliRntm09* rntm);

struct Loaded {
    std::vector<GemmLibraryInfo> infos;
    CblasSgemm openblas_sgemm = nullptr;
    void (*openblas_threads)(int) = nullptr;
    BliSgemm blis_sgemm = nullptr;
    BliSgemmEx blis_sgemm_ex = nullptr;  // BLIS 0.9.x only (BliRntm09)
    void (*blis_threads)(int64_t) = nullptr;
};

// Opens Debian's build of a library from its multiarch directory; on failure says what to
// install in info.why_not.
void* open_library(const std::string& relative, const char* package, GemmLibraryInfo& info) {
    const std::string path = std::string(REMATLAB_MULTIARCH_LIBDIR) + "/" + relative;
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        info.path = path;
        return h;
    }
    const char* err = dlerror();
    info.why_not = std::string("not found (") + (err ? err : path.c_str()) +
                   "); install Debian's " + package + " (apt-get install " + package + ")";
    return nullptr;
}

template <class F>
F symbol(void* h, const char* name) {
    return reinterpret_cast<F>(dlsym(h, name));
}

GemmLibraryInfo load_openblas(Loaded& l) {
    GemmLibraryInfo info;
    info.library = GemmLibrary::OpenBLAS;
    // The OpenMP build: it shares our OpenMP thread pool (the pthread build would run its own
    // threads beside it).
    void* h = open_library("openblas-openmp/libopenblas.so.0", "libopenblas0-openmp", info);
    if (!h) return info;
    l.openblas_sgemm = symbol<CblasSgemm>(h, "cblas_sgemm");
    l.openblas_threads = symbol<void (*)(int)>(h, "openblas_set_num_threads");
    auto config = symbol<const char* (*)()>(h, "openblas_get_config");
    auto core = symbol<const char* (*)()>(h, "openblas_get_corename");
    if (!l.openblas_sgemm || !l.openblas_threads) {
        info.why_not = info.path + " lacks cblas_sgemm or openblas_set_num_threads";
        l.openblas_sgemm = nullptr;
        return info;
    }
    info.available = true;
    info.version = config ? config() : "OpenBLAS";
    if (core) info.version += std::string(", ") + core() + " kernels";
    return info;
}

// BLIS 0.9 (Debian 12) knows CPUs up to Zen 3 and Ice Lake and runs its slow generic C kernels
// on anything newer: on a Zen 5 EPYC with AVX-512 it reached 27 GFLOP/s where its skx kernels
// reach 150. Unless the user set BLIS_ARCH_TYPE, pick the kernels from what the CPU supports
// (skx for AVX-512 F/DQ/BW/VL, zen3 or haswell for AVX2 + FMA), before BLIS initialises. Returns
// a note for the version string, or "" when nothing was set.
std::string choose_blis_kernels(const char* (*arch_name)(int)) {
#if defined(__x86_64__)
    if (std::getenv("BLIS_ARCH_TYPE") || !arch_name) return "";
    __builtin_cpu_init();
    const char* want = nullptr;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        want = "skx";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        want = __builtin_cpu_is("amd") ? "zen3" : "haswell";
    if (!want) return "";
    for (int id = 0; id < 64; ++id) {  // the table ends with "generic"
        const char* name = arch_name(id);
        if (!name) break;
        if (std::string(name) == want) {
            ::setenv("BLIS_ARCH_TYPE", std::to_string(id).c_str(), 0);
            return "set from the CPU's flags";
        }
        if (std::string(name) == "generic") break;
    }
#else
    (void)arch_name;
#endif
    return "";
}

GemmLibraryInfo load_blis(Loaded& l) {
    GemmLibraryInfo info;
    info.library = GemmLibrary::BLIS;
#if defined(__SANITIZE_ADDRESS__)
    // LeakSanitizer's exit-time thread tracer crashed (SIGSEGV, "Tracer caught signal 11") in
    // every process that had run a multi-threaded BLIS product; the sanitizer build leaves it out.
    (void)l;
    info.why_not =
        "left out of AddressSanitizer builds (LeakSanitizer's thread tracer crashes "
        "after BLIS's OpenMP threads); a normal build loads it";
    return info;
#endif
    void* h = open_library("blis-openmp/libblis.so.4", "libblis4-openmp", info);
    if (!h) return info;
    auto init = symbol<void (*)()>(h, "bli_init");
    auto int_size = symbol<int64_t (*)()>(h, "bli_info_get_int_type_size");
    auto version = symbol<const char* (*)()>(h, "bli_info_get_version_str");
    auto arch_id = symbol<int (*)()>(h, "bli_arch_query_id");
    auto arch_name = symbol<const char* (*)(int)>(h, "bli_arch_string");
    l.blis_sgemm = symbol<BliSgemm>(h, "bli_sgemm");
    l.blis_threads = symbol<void (*)(int64_t)>(h, "bli_thread_set_num_threads");
    if (!l.blis_sgemm || !l.blis_threads || !int_size || !init) {
        info.why_not = info.path +
                       " lacks bli_sgemm, bli_thread_set_num_threads or "
                       "bli_info_get_int_type_size";
        l.blis_sgemm = nullptr;
        return info;
    }
    if (int_size() != 64) {
        info.why_not = info.path + " is built with " + std::to_string(int_size()) +
                       "-bit integers; RematLab calls BLIS with 64-bit ones";
        l.blis_sgemm = nullptr;
        return info;
    }
    const std::string forced = choose_blis_kernels(arch_name);
    init();  // detects the CPU, or takes BLIS_ARCH_TYPE
    info.available = true;
    info.version = std::string("BLIS ") + (version ? version() : "?");
    if (info.version.rfind("BLIS 0.9.", 0) == 0)
        l.blis_sgemm_ex = symbol<BliSgemmEx>(h, "bli_sgemm_ex");
    if (arch_id && arch_name) info.version += std::string(", ") + arch_name(arch_id()) + " kernels";
    if (l.blis_sgemm_ex) info.version += ", small-product kernels off";  // see BliRntm09
    if (!forced.empty()) info.version += " (" + forced + ")";
    return info;
}

Loaded& loaded() {
    static Loaded l = [] {
        Loaded x;
        GemmLibraryInfo eigen;
        eigen.library = GemmLibrary::Eigen;
        eigen.available = true;
        eigen.version = "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." +
                        std::to_string(EIGEN_MAJOR_VERSION) + "." +
                        std::to_string(EIGEN_MINOR_VERSION);
        x.infos.push_back(eigen);
        x.infos.push_back(load_openblas(x));
        x.infos.push_back(load_blis(x));
        GemmLibraryInfo own;
        own.library = GemmLibrary::RematLab;
        own.available = cpu::packed_product_built();
        if (own.available)
            own.version = cpu::packed_product_version();
        else
            own.why_not = std::string("this is the ") + build_instruction_set() +
                          " build; RematLab's own GEMM kernels are AVX-512 ones (build with "
                          "REMATLAB_NATIVE=ON on a machine that has AVX-512)";
        x.infos.push_back(own);
        // BLIS starts single-threaded and OpenBLAS at the core count: both take ours.
        const int threads = Eigen::nbThreads();
        if (x.openblas_threads) x.openblas_threads(threads);
        if (x.blis_threads) x.blis_threads(threads);
        return x;
    }();
    return l;
}

// ---- the three implementations -------------------------------------------------------------

using Stride = Eigen::OuterStride<>;
using CMap = Eigen::Map<const cpu::RowMat, 0, Stride>;
using MMap = Eigen::Map<cpu::RowMat, 0, Stride>;

// One instantiation per transpose pair: Eigen's `=` of a product is a setZero and the same
// scale-and-add as `+=` (a coefficient-wise sum for tiny products: 0 + x is x, up to the sign of
// a zero), and it takes alpha out of `alpha * a * b` as a factor of that call. The four forms
// (alpha 1 or not, beta 0 or 1) each instantiated the product over again: 30 % of this file's
// compile time (2026-12-04).
template <class A, class B>
void eigen_product(MMap& c, const A& a, const B& b, float alpha, float beta) {
    if (beta == 0) c.setZero();
    c.noalias() += alpha * a * b;
}

// C row by row, each a matrix-vector product over all of op(B).
template <class A, class B>
void eigen_rows_product(MMap& c, const A& a, const B& b, float alpha, float beta) {
    if (beta == 0) c.setZero();
    for (Eigen::Index i = 0; i < c.rows(); ++i) c.row(i).noalias() += alpha * (a.row(i) * b);
}

// Products of at most kFewRows rows against a large operand go row by row: Eigen's blocked
// product took 442 ms for VGG's classifier input gradient at batch 2 (dY [2, 4096] · W [4096,
// 25088]) against OpenBLAS's 48, and its forward 66 ms against 39 row by row (docs/onnx.md).
constexpr int64_t kFewRows = 4;
constexpr int64_t kFewRowsMinOperand = int64_t{1} << 20;  // floats of op(B)

// Products of a transposed A (stored [k, m]) and at most kFewColumns columns of op(B), against a
// large A: Eigen packs all of A for a few columns of use. A 1×1 convolution's input gradient on
// ResNeXt-50's 2×2 planes at batch 2 (Wᵀ·dY, [1024 × 8 × 2048], an 8 MB weight) took 1.5 ms on
// Eigen against 0.74 on OpenBLAS (one thread, 2026-12-04). Here 16 rows of C at a time are 16
// lanes of n accumulators; A is read once, a strip of 16 of its columns per p, and each element
// of C is Σ_p in order, whatever the thread count.
constexpr int64_t kFewColumns = 8;
constexpr int64_t kStripRows = 16;
typedef float Strip __attribute__((vector_size(kStripRows * sizeof(float))));

template <int N, bool TB>
void few_columns_product(int64_t m, int64_t k, float alpha, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    // A is read a block of kRowBlock rows at a time, each row across this part's strips, so the
    // reads are kRowBlock sequential streams; the accumulators of the part's strips wait in
    // `acc` between blocks. (A strip read down all of A's rows at once jumped a row's length per
    // read, which the prefetchers do not follow: 3.7× OpenBLAS's time on a [2048 × 2048] A.)
    constexpr int64_t kRowBlock = 16, kPartStrips = 64;
    const int64_t strips = (m + kStripRows - 1) / kStripRows;
    const int64_t parts = (strips + kPartStrips - 1) / kPartStrips;
    cpu::parallel_for(parts, k * kPartStrips * kStripRows * N, [&](int64_t part) {
        const int64_t s0 = part * kPartStrips, s1 = std::min(strips, s0 + kPartStrips);
        Strip acc[kPartStrips][N] = {};
        for (int64_t p0 = 0; p0 < k; p0 += kRowBlock) {
            const int64_t p1 = std::min(k, p0 + kRowBlock);
            float bp[kRowBlock][N];
            for (int64_t p = p0; p < p1; ++p)
                for (int j = 0; j < N; ++j) bp[p - p0][j] = TB ? b[j * ldb + p] : b[p * ldb + j];
            for (int64_t s = s0; s < s1; ++s) {
                const int64_t i0 = s * kStripRows, rows = std::min(kStripRows, m - i0);
                Strip r[N];
                for (int j = 0; j < N; ++j) r[j] = acc[s - s0][j];
                for (int64_t p = p0; p < p1; ++p) {
                    Strip av;
                    if (rows == kStripRows) {
                        __builtin_memcpy(&av, a + p * lda + i0, sizeof av);
                    } else {
                        av = Strip{};
                        for (int64_t l = 0; l < rows; ++l) av[l] = a[p * lda + i0 + l];
                    }
                    for (int j = 0; j < N; ++j) r[j] += av * bp[p - p0][j];
                }
                for (int j = 0; j < N; ++j) acc[s - s0][j] = r[j];
            }
        }
        for (int64_t s = s0; s < s1; ++s) {
            const int64_t i0 = s * kStripRows, rows = std::min(kStripRows, m - i0);
            for (int64_t l = 0; l < rows; ++l)
                for (int j = 0; j < N; ++j) {
                    float& out = c[(i0 + l) * ldc + j];
                    const float v = acc[s - s0][j][l];
                    out = beta == 0 ? alpha * v : alpha * v + beta * out;
                }
        }
    });
}

template <bool TB>
void few_columns_product(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    auto run = [&](auto cols) {
        few_columns_product<decltype(cols)::value, TB>(m, k, alpha, a, lda, b, ldb, beta, c, ldc);
    };
    using std::integral_constant;
    switch (n) {
        case 1:
            return run(integral_constant<int, 1>{});
        case 2:
            return run(integral_constant<int, 2>{});
        case 3:
            return run(integral_constant<int, 3>{});
        case 4:
            return run(integral_constant<int, 4>{});
        case 5:
            return run(integral_constant<int, 5>{});
        case 6:
            return run(integral_constant<int, 6>{});
        case 7:
            return run(integral_constant<int, 7>{});
        default:
            return run(integral_constant<int, 8>{});
    }
}

void eigen_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    if (ta && n <= kFewColumns && m >= kStripRows && m * k >= kFewRowsMinOperand)
        return tb ? few_columns_product<true>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
                  : few_columns_product<false>(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    MMap cm(c, m, n, Stride(ldc));
    const CMap am(a, ta ? k : m, ta ? m : k, Stride(lda));
    const CMap bm(b, tb ? n : k, tb ? k : n, Stride(ldb));
    if (m <= kFewRows && n * k >= kFewRowsMinOperand) {
        if (!ta && !tb) eigen_rows_product(cm, am, bm, alpha, beta);
        if (!ta && tb) eigen_rows_product(cm, am, bm.transpose(), alpha, beta);
        if (ta && !tb) eigen_rows_product(cm, am.transpose(), bm, alpha, beta);
        if (ta && tb) eigen_rows_product(cm, am.transpose(), bm.transpose(), alpha, beta);
        return;
    }
    if (!ta && !tb) eigen_product(cm, am, bm, alpha, beta);
    if (!ta && tb) eigen_product(cm, am, bm.transpose(), alpha, beta);
    if (ta && !tb) eigen_product(cm, am.transpose(), bm, alpha, beta);
    if (ta && tb) eigen_product(cm, am.transpose(), bm.transpose(), alpha, beta);
}

constexpr int64_t kIntMax = 2147483647;

}  // namespace

namespace gemm_detail {
void library_sgemm(GemmLibrary lib, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc) {
    if (m == 0 || n == 0) return;
    if (k == 0) {  // C = beta·C with beta 0 or 1; the libraries agree, but say it once here
        if (beta == 0)
            for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
        return;
    }
    const Loaded& l = loaded();
    if (lib == GemmLibrary::OpenBLAS && std::max({m, n, k, lda, ldb, ldc}) <= kIntMax) {
        l.openblas_sgemm(kCblasRowMajor, ta ? kCblasTrans : kCblasNoTrans,
                         tb ? kCblasTrans : kCblasNoTrans, static_cast<int>(m), static_cast<int>(n),
                         static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
                         static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
        return;
    }
    if (lib == GemmLibrary::RematLab) {
        cpu::packed_product(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    if (lib == GemmLibrary::BLIS) {
        // op(A)[i][p]: row stride, column stride of the stored A as op(A) sees it.
        const int64_t rsa = ta ? 1 : lda, csa = ta ? lda : 1, rsb = tb ? 1 : ldb,
                      csb = tb ? ldb : 1;
        if (l.blis_sgemm_ex) {
            // BLIS threads every product it is given (OpenBLAS and Eigen keep small ones on
            // one thread); a product under kSmallMacs, or one run inside our own parallel
            // region, runs on one.
            constexpr int64_t kSmallMacs = int64_t{1} << 21;
            BliRntm09 rntm;
            rntm.num_threads = omp_in_parallel() || m * n * k < kSmallMacs ? 1 : cpu_threads();
            rntm.l3_sup = false;
            l.blis_sgemm_ex(0, 0, m, n, k, &alpha, a, rsa, csa, b, rsb, csb, &beta, c, ldc, 1,
                            nullptr, &rntm);
        } else {
            l.blis_sgemm(0, 0, m, n, k, &alpha, a, rsa, csa, b, rsb, csb, &beta, c, ldc, 1);
        }
        return;
    }
    eigen_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
}  // namespace gemm_detail

namespace {

// ---- calibration ---------------------------------------------------------------------------

struct Shape3 {
    bool ta, tb;
    int64_t m, n, k, repeat;
};

// The shapes our layers run, in two classes (kSmallGemmFlops apart). Large: a linear layer's
// forward (X·Wᵀ) and weight gradient (dYᵀ·X), a 3×3 convolution's forward (W·cols: 64 filters,
// 56×56 plane, 576 = 64·3·3 patch), its input gradient (Wᵀ·dY) and its weight gradient
// (dY·colsᵀ), and the weight gradient of one with 256 filters on a 14×14 plane. Small, repeated as
// batched heads and images run them: attention's scores (Q·Kᵀ) and context (P·V) at 128 tokens and
// 64 per head, their weight-side gradient (Pᵀ·dC), a 7×7 window's context, and a 3×3 convolution on
// a 14×14 plane, forward and weight gradient. The convolutions' weight gradients were added on
// 2026-12-04: on AVX2 kernels BLIS ran those of late stages (a short K: 64 to 196 columns) 26-40 %
// slower than OpenBLAS while leading the other large shapes by 1-2 %, and the calibration without
// them had chosen BLIS by that margin for every convolution's backward (docs/benchmarks.md).
// Thin (is_thin_gemm), added on 2026-12-04: a classifier's forward and input gradient at batch 2
// against a 32 MB weight, a 1×1 convolution's input gradient and a 3×3 convolution's forward on
// a 2×2 plane at batch 2 (8 and 9 MB weights); on 2026-12-05, when the class grew from 4 rows to
// 16, a linear layer's forward and input gradient at 8 and 16 rows (ConvNeXt's last stage), and
// as it grew from 8 columns to 32, a 3×3 convolution's forward on 4×4 planes at batch 2.
constexpr int kCalibrationShapesRevision = 5;  // in the cache key: a new set calibrates again
enum class ShapeClass { Large, Small, Thin };
const std::vector<Shape3>& calibration_shapes(ShapeClass which) {
    static const std::vector<Shape3> large = {
        {false, true, 1024, 1024, 1024, 1}, {true, false, 512, 512, 2048, 1},
        {false, false, 64, 3136, 576, 2},   {true, false, 576, 3136, 64, 2},
        {false, true, 64, 576, 3136, 2},    {false, true, 256, 2304, 196, 1}};
    static const std::vector<Shape3> small = {
        {false, true, 128, 128, 64, 32}, {false, false, 128, 64, 128, 32},
        {true, false, 128, 64, 128, 32}, {false, false, 49, 32, 49, 128},
        {false, false, 64, 196, 576, 8}, {false, true, 64, 576, 196, 8}};
    static const std::vector<Shape3> thin = {
        {false, true, 2, 4096, 2048, 1}, {false, false, 2, 2048, 4096, 1},
        {true, false, 1024, 8, 2048, 1}, {false, false, 512, 8, 4608, 1},
        {false, true, 8, 3072, 768, 1},  {false, false, 16, 768, 3072, 1},
        {false, false, 256, 32, 2304, 1}};
    switch (which) {
        case ShapeClass::Small:
            return small;
        case ShapeClass::Thin:
            return thin;
        default:
            return large;
    }
}

// Each class's choice and rates in GemmChoice, and their names in a cache entry.
struct ClassFields {
    ShapeClass shapes;
    GemmLibrary GemmChoice::*library;
    std::vector<GemmRate> GemmRates::*rates;
    const char* library_key;
    const char* rates_key;
};
constexpr ClassFields kClasses[] = {
    {ShapeClass::Large, &GemmChoice::library, &GemmRates::large, "library", "gflops"},
    {ShapeClass::Small, &GemmChoice::small_library, &GemmRates::small, "small_library",
     "small_gflops"},
    {ShapeClass::Thin, &GemmChoice::thin_library, &GemmRates::thin, "thin_library", "thin_gflops"}};

static_assert(kClasses[0].shapes == ShapeClass::Large && kClasses[1].shapes == ShapeClass::Small &&
                  kClasses[2].shapes == ShapeClass::Thin,
              "kClasses is indexed by ShapeClass");

// The class a product of this shape belongs to: thin first (whatever its FLOPs), then by FLOPs.
ShapeClass shape_class(int64_t m, int64_t n, int64_t k) {
    if (is_thin_gemm(m, n, k)) return ShapeClass::Thin;
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <
                   kSmallGemmFlops
               ? ShapeClass::Small
               : ShapeClass::Large;
}

// One shape's operands, and the time of one run of it on a library.
struct Operands {
    std::vector<float> a, b, c;
    explicit Operands(const Shape3& s)
        : a(static_cast<size_t>(s.m * s.k)),
          b(static_cast<size_t>(s.k * s.n)),
          c(static_cast<size_t>(s.m * s.n)) {
        for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) * 0.01f - 0.08f;
        for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
    }
};

double seconds_of(GemmLibrary lib, const Shape3& s, Operands& o) {
    const int64_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t r = 0; r < s.repeat; ++r)
        library_sgemm(lib, s.ta, s.tb, s.m, s.n, s.k, 1.f, o.a.data(), lda, o.b.data(), ldb, 0.f,
                      o.c.data(), s.n);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

namespace gemm_detail {
std::string today_utc() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
    return buf;
}
}  // namespace gemm_detail

namespace {

std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) {
                std::string s = line.substr(colon + 1);
                s.erase(0, s.find_first_not_of(' '));
                return s;
            }
        }
    return "unknown CPU";
}

}  // namespace

namespace gemm_detail {
// What makes a calibration valid: the CPU, the instruction set this build's Eigen uses, every
// library's version, the thread count and the set of shapes it timed.
std::string calibration_key(int threads) {
    std::string key = cpu_model() + " | build ";
    for (const char* c = build_instruction_set(); *c; ++c)  // "avx512", as keys always were
        if (*c != '-') key += char(std::tolower(static_cast<unsigned char>(*c)));
    for (const GemmLibraryInfo& i : gemm_libraries())
        key += " | " + (i.available ? i.version
                                    : std::string(gemm_library_name(i.library)) + " unavailable");
    key += " | threads " + std::to_string(threads);
    key += " | shapes " + std::to_string(kCalibrationShapesRevision);
    return key;
}

std::string cache_dir(std::string* why) {
    std::string base;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
        base = x;
    else if (const char* h = std::getenv("HOME"); h && *h)
        base = std::string(h) + "/.cache";
    else {
        *why = "not cached: neither XDG_CACHE_HOME nor HOME is set";
        return "";
    }
    const std::string dir = base + "/rematlab";
    ::mkdir(base.c_str(), 0755);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        *why = "not cached: cannot create " + dir;
        return "";
    }
    return dir;
}

LockedCacheFile::LockedCacheFile(const std::string& name) {
    const std::string dir = cache_dir(&why);
    if (dir.empty()) return;
    path = dir + "/" + name;
    lock_fd_ = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock_fd_ >= 0) ::flock(lock_fd_, LOCK_EX);
    std::ifstream f(path);
    if (f) {
        try {
            doc = nlohmann::json::parse(f);
        } catch (const std::exception&) {
            doc = nlohmann::json::object();  // unreadable: rewritten with what is decided now
        }
    }
    if (!doc.is_object()) doc = nlohmann::json::object();
}

LockedCacheFile::~LockedCacheFile() {
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

const nlohmann::json& LockedCacheFile::entries() const {
    static const nlohmann::json none = nlohmann::json::array();
    const auto it = doc.find("entries");
    return it != doc.end() && it->is_array() ? *it : none;
}

void LockedCacheFile::write(const char* about, nlohmann::json entries, int indent) {
    doc = {{"about", about}, {"entries", std::move(entries)}};
    write_file_atomically(path, {doc.dump(indent), "\n"});
}
}  // namespace gemm_detail

namespace {

GemmLibrary best_of(const std::vector<GemmRate>& rates) {  // Eigen when there are none
    GemmLibrary best = GemmLibrary::Eigen;
    double best_rate = -1;
    for (const GemmRate& r : rates)
        if (r.gflops > best_rate) {
            best_rate = r.gflops;
            best = r.library;
        }
    return best;
}

constexpr GemmLibrary kAllLibraries[] = {GemmLibrary::Eigen, GemmLibrary::OpenBLAS,
                                         GemmLibrary::BLIS, GemmLibrary::RematLab};

std::optional<GemmLibrary> library_by_name(const std::string& name) {
    for (GemmLibrary l : kAllLibraries)
        if (name == gemm_library_name(l)) return l;
    return std::nullopt;
}

const GemmLibraryInfo& info_of(GemmLibrary lib) {
    for (const GemmLibraryInfo& i : gemm_libraries())
        if (i.library == lib) return i;
    return gemm_libraries().front();
}

}  // namespace

namespace gemm_detail {
std::optional<GemmLibrary> available_library(const std::string& name) {
    const auto lib = library_by_name(name);
    return lib && info_of(*lib).available ? lib : std::nullopt;
}
}  // namespace gemm_detail

namespace {

// Reads this key's entry from the cache, or calibrates and writes it, under a file lock.
GemmChoice calibrated_choice() {
    GemmChoice ch;
    ch.threads = std::max(1, cpu_threads());
    const std::string key = calibration_key(ch.threads);
    LockedCacheFile file("gemm-calibration.json");  // unreadable: calibrated again, rewritten
    std::string why = file.why;
    const std::string& path = file.path;
    // An entry names the three choices and their rates; one from before small or thin products
    // were chosen apart (no "small_library" or "thin_library") is calibrated again.
    auto usable = [](const nlohmann::json& e, const char* field) {
        return available_library(e.value(field, ""));
    };
    auto rates_of = [](const nlohmann::json& e, const char* field) {
        std::vector<GemmRate> rates;
        if (e.contains(field) && e[field].is_object())
            for (const auto& [name, rate] : e[field].items())
                if (auto l = library_by_name(name); l && rate.is_number())
                    rates.push_back({*l, rate.get<double>()});
        return rates;
    };
    bool found = false;
    for (const auto& e : file.entries()) {
        if (!e.is_object() || e.value("key", "") != key) continue;
        bool complete = true;
        for (const ClassFields& f : kClasses) complete = complete && usable(e, f.library_key);
        if (!complete) continue;
        for (const ClassFields& f : kClasses) {
            ch.*f.library = *usable(e, f.library_key);
            ch.rates.*f.rates = rates_of(e, f.rates_key);
        }
        ch.how = "cached calibration of " + e.value("date", std::string("?"));
        found = true;
        break;
    }
    if (!found) {
        ch.rates = calibrate_gemm(ch.threads);
        for (const ClassFields& f : kClasses) ch.*f.library = best_of(ch.rates.*f.rates);
        ch.how = "calibrated now";
        if (!path.empty()) {
            nlohmann::json entry = {{"key", key}, {"date", today_utc()}, {"threads", ch.threads}};
            for (const ClassFields& f : kClasses) {
                entry[f.library_key] = gemm_library_name(ch.*f.library);
                for (const GemmRate& r : ch.rates.*f.rates)
                    entry[f.rates_key][gemm_library_name(r.library)] =
                        std::round(r.gflops * 10) / 10;
            }
            nlohmann::json entries = nlohmann::json::array();
            for (const auto& e : file.entries())
                if (e.is_object() && e.value("key", "") != key) entries.push_back(e);
            entries.push_back(entry);
            try {
                file.write(
                    "RematLab's GEMM calibration per machine (engine/gemm.h); delete this "
                    "file to calibrate again",
                    std::move(entries), 2);
            } catch (const Error& e) {
                why = std::string("not cached: ") + e.what();
            }
        }
    }
    ch.cache_note = path.empty() ? why : (why.empty() ? "cached in " + path : why);
    return ch;
}

struct State {
    std::mutex mu;
    std::optional<GemmChoice> choice;
    std::string requested;  // select_gemm's name, "" when none
    std::atomic<int> library_of[std::size(kClasses)] = {-1, -1, -1};  // by ShapeClass
    std::atomic<bool> used{false};
    std::atomic<bool> per_shape{false};
    void adopt(GemmChoice ch) {
        choice = std::move(ch);
        per_shape = choice->per_shape;
        for (const ClassFields& f : kClasses)
            library_of[static_cast<int>(f.shapes)] = static_cast<int>(*choice.*f.library);
    }
};

State& state() {
    static State s;
    return s;
}

// The library `name` names (not "auto"), or an error saying which names there are.
GemmLibrary library_named(const std::string& name, const std::string& how) {
    const auto lib = library_by_name(name);
    if (!lib) {
        std::string use;  // "eigen, openblas, blis, rematlab or auto"
        for (GemmLibrary l : kAllLibraries) use += std::string(gemm_library_name(l)) + ", ";
        use.replace(use.size() - 2, 2, " or auto");
        throw Error("unknown GEMM library '" + name + "' (from " + how + "); use " + use);
    }
    return *lib;
}

// The choice `requested` ("" or "auto": the calibrated one) makes; throws for a library that is
// unknown or not available here.
GemmChoice choose(const std::string& requested, const std::string& how) {
    if (requested.empty() || requested == "auto") {
        GemmChoice ch = calibrated_choice();
        const char* env = std::getenv("REMATLAB_GEMM_SHAPES");
        const std::string shapes = env ? env : "";
        if (!shapes.empty() && shapes != "on" && shapes != "off")
            throw Error("REMATLAB_GEMM_SHAPES is '" + shapes +
                        "': use on (time each product shape's libraries, the default) or off "
                        "(every product on its class's library)");
        ch.per_shape = shapes != "off";
        if (!ch.per_shape) ch.per_shape_off = "switched off by REMATLAB_GEMM_SHAPES=off";
        return ch;
    }
    const GemmLibrary lib = library_named(requested, how);
    const GemmLibraryInfo& info = info_of(lib);
    if (!info.available)
        throw Error("GEMM library '" + requested + "' (from " + how +
                    ") is not available here: " + info.why_not);
    GemmChoice ch;
    ch.library = ch.small_library = ch.thin_library = lib;
    ch.how = "set by " + how;
    ch.per_shape_off = "every product on " + requested + ", set by " + how;
    ch.threads = 0;
    return ch;
}

}  // namespace

const char* build_instruction_set() {
#if defined(__AVX512F__)
    return "AVX-512";
#elif defined(__AVX2__)
    return "AVX2";
#else
    return "SSE";
#endif
}

const char* small_gemm_label() {
    static const std::string label = std::to_string(std::lround(kSmallGemmFlops / 1e6)) + " MFLOP";
    return label.c_str();
}

const char* gemm_library_name(GemmLibrary lib) {
    switch (lib) {
        case GemmLibrary::Eigen:
            return "eigen";
        case GemmLibrary::OpenBLAS:
            return "openblas";
        case GemmLibrary::BLIS:
            return "blis";
        case GemmLibrary::RematLab:
            return "rematlab";
    }
    return "?";
}

const std::vector<std::string>& gemm_choice_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v{"auto"};
        for (GemmLibrary l : kAllLibraries) v.push_back(gemm_library_name(l));
        return v;
    }();
    return names;
}

const std::vector<GemmLibraryInfo>& gemm_libraries() {
    return loaded().infos;
}

GemmRates calibrate_gemm(int threads) {
    const int saved = cpu_threads();
    if (threads > 0 && threads != saved) set_cpu_threads(threads);
    std::vector<GemmLibrary> libs;
    for (const GemmLibraryInfo& info : gemm_libraries())
        if (info.available) libs.push_back(info.library);
    std::vector<Shape3> shapes;
    std::vector<size_t> class_end;  // each class's shapes end here, in kClasses' order
    for (const ClassFields& f : kClasses) {
        for (const Shape3& s : calibration_shapes(f.shapes)) shapes.push_back(s);
        class_end.push_back(shapes.size());
    }
    std::vector<Operands> operands;
    for (const Shape3& s : shapes) operands.emplace_back(s);
    // Rounds alternate the libraries, so a busy moment of the machine lands on all of them; the
    // first round is a warm-up (packing buffers, page faults, thread start), then the best of
    // the rest per library and shape.
    // On a busy machine a round can take seconds (a multi-threaded GEMM waits for every thread),
    // so the rounds stop after kBudget once two (warm-up and one timed) are done.
    constexpr int kRounds = 5;
    constexpr double kBudget = 3.0;
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::vector<double>> best(libs.size(), std::vector<double>(shapes.size(), 1e30));
    for (int round = 0; round < kRounds; ++round) {
        if (round >= 2 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
                kBudget)
            break;
        for (size_t li = 0; li < libs.size(); ++li)
            for (size_t si = 0; si < shapes.size(); ++si) {
                const double sec = seconds_of(libs[li], shapes[si], operands[si]);
                if (round > 0) best[li][si] = std::min(best[li][si], sec);
            }
    }
    // Geometric mean of GFLOP/s over shapes [from, to).
    auto mean_rate = [&](size_t li, size_t from, size_t to) {
        double log_sum = 0;
        for (size_t si = from; si < to; ++si) {
            const Shape3& s = shapes[si];
            log_sum += std::log(2.0 * static_cast<double>(s.m * s.n * s.k * s.repeat) /
                                best[li][si] * 1e-9);
        }
        return std::exp(log_sum / static_cast<double>(to - from));
    };
    GemmRates rates;
    for (size_t li = 0; li < libs.size(); ++li)
        for (size_t ci = 0; ci < std::size(kClasses); ++ci)
            (rates.*kClasses[ci].rates)
                .push_back({libs[li], mean_rate(li, ci ? class_end[ci - 1] : 0, class_end[ci])});
    if (threads > 0 && threads != saved) set_cpu_threads(saved);
    return rates;
}

std::string GemmChoice::summary() const {
    std::ostringstream o;
    auto list = [&](const std::vector<GemmRate>& rates) {
        for (size_t i = 0; i < rates.size(); ++i)
            o << (i ? "," : "") << " " << gemm_library_name(rates[i].library) << " "
              << std::lround(rates[i].gflops) << " GFLOP/s";
    };
    o << gemm_library_name(library) << " (" << info_of(library).version << ")";
    if (small_library != library)
        o << ", products under " << small_gemm_label() << " " << gemm_library_name(small_library)
          << " (" << info_of(small_library).version << ")";
    if (thin_library != library)
        o << ", thin products (" << thin_gemm_label() << ") " << gemm_library_name(thin_library)
          << " (" << info_of(thin_library).version << ")";
    o << ", " << how;
    if (!rates.large.empty()) {
        o << " at " << threads << (threads == 1 ? " thread:" : " threads:");
        list(rates.large);
        if (!rates.small.empty()) {
            o << "; under " << small_gemm_label() << ":";
            list(rates.small);
        }
        if (!rates.thin.empty()) {
            o << "; thin:";
            list(rates.thin);
        }
    }
    return o.str();
}

// REMATLAB_GEMM_SMALL names the library of products under kSmallGemmFlops, whatever chose the
// other ("auto" or empty: leave it).
void apply_small_override(GemmChoice& ch) {
    const char* env = std::getenv("REMATLAB_GEMM_SMALL");
    if (!env || !*env || std::string(env) == "auto") return;
    const GemmLibrary lib = library_named(env, "REMATLAB_GEMM_SMALL");
    const GemmLibraryInfo& info = info_of(lib);
    if (!info.available)
        throw Error(std::string("GEMM library '") + env +
                    "' (from REMATLAB_GEMM_SMALL) is not available here: " + info.why_not);
    ch.small_library = lib;
    ch.how += std::string("; products under ") + small_gemm_label() + " set by REMATLAB_GEMM_SMALL";
    if (ch.per_shape) {
        ch.per_shape = false;
        ch.per_shape_off = "REMATLAB_GEMM_SMALL sets the small products' library";
    }
}

void select_gemm(const std::string& name) {
    if (name != "auto") library_named(name, "--gemm");  // an unknown name says so first
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.choice && s.used) {
        const bool same = name == "auto" ? s.requested.empty() || s.requested == "auto"
                                         : name == gemm_library_name(s.choice->library) &&
                                               s.choice->small_library == s.choice->library &&
                                               s.choice->thin_library == s.choice->library;
        if (same) return;
        throw Error("the GEMM library is chosen once per process and " +
                    std::string(gemm_library_name(s.choice->library)) +
                    " has already run; pass --gemm before anything runs");
    }
    GemmChoice ch = choose(name, "--gemm");
    apply_small_override(ch);
    s.adopt(std::move(ch));
    s.requested = name;
}

const GemmChoice& gemm_choice() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.choice) {
        const char* env = std::getenv("REMATLAB_GEMM");
        GemmChoice ch = choose(env ? env : "", "REMATLAB_GEMM");
        apply_small_override(ch);
        s.adopt(std::move(ch));
    }
    return *s.choice;
}

void set_gemm_threads(int threads) {
    const Loaded& l = loaded();
    if (l.openblas_threads) l.openblas_threads(threads);
    if (l.blis_threads) l.blis_threads(threads);
}

bool is_thin_gemm(int64_t m, int64_t n, int64_t k) {
    return (m <= kThinRows && n * k >= kThinOperandFloats) ||
           (n <= kThinColumns && m * k >= kThinOperandFloats);
}

const char* thin_gemm_label() {
    static const std::string label = "at most " + std::to_string(kThinRows) + " rows or " +
                                     std::to_string(kThinColumns) + " columns";
    return label.c_str();
}

GemmLibrary gemm_library_for(int64_t m, int64_t n, int64_t k) {
    return gemm_choice().*kClasses[static_cast<int>(shape_class(m, n, k))].library;
}

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
    State& s = state();
    std::atomic<int>& which = s.library_of[static_cast<int>(shape_class(m, n, k))];
    int lib = which.load(std::memory_order_acquire);
    if (lib < 0) {
        gemm_choice();
        lib = which.load(std::memory_order_acquire);
    }
    if (!s.used.load(std::memory_order_relaxed)) s.used.store(true, std::memory_order_relaxed);
    if (s.per_shape.load(std::memory_order_relaxed) &&
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >=
            kShapeChoiceMinFlops)
        lib = static_cast<int>(gemm_detail::shape_library(
            static_cast<GemmLibrary>(lib), trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, ldc));
    library_sgemm(static_cast<GemmLibrary>(lib), trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb,
                  beta, c, ldc);
}

void sgemm_on(GemmLibrary lib, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
              float* c, int64_t ldc) {
    if (!info_of(lib).available)
        throw Error(std::string("GEMM library '") + gemm_library_name(lib) +
                    "' is not available here: " + info_of(lib).why_not);
    library_sgemm(lib, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace rl
