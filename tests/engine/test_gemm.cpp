// The GEMM entry point (engine/gemm.h): every library available here against a float64
// reference on every transpose, leading dimension, alpha and beta the kernels use; bitwise
// repeatability; the choice's rules. The strategies' invariants under each library are the
// GemmLibrary.* ctest entries (tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/kernels.h"
#include "engine/errors.h"
#include "engine/gemm.h"

namespace rl {
namespace {

std::vector<GemmLibrary> available() {
    std::vector<GemmLibrary> libs;
    for (const GemmLibraryInfo& i : gemm_libraries())
        if (i.available) libs.push_back(i.library);
    return libs;
}

struct GemmCase {
    bool ta, tb;
    int64_t m, n, k, pad;
    float alpha, beta;
};

// C = alpha·op(A)·op(B) + beta·C in float64, from the same float inputs.
std::vector<double> reference(const GemmCase& c, const std::vector<float>& a, int64_t lda,
                              const std::vector<float>& b, int64_t ldb,
                              const std::vector<float>& c0, int64_t ldc) {
    std::vector<double> out(static_cast<size_t>(c.m * ldc));
    for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
            double s = 0;
            for (int64_t p = 0; p < c.k; ++p) {
                const double av = c.ta ? a[p * lda + i] : a[i * lda + p];
                const double bv = c.tb ? b[j * ldb + p] : b[p * ldb + j];
                s += av * bv;
            }
            out[i * ldc + j] = c.alpha * s + (c.beta == 0 ? 0.0 : c.beta * c0[i * ldc + j]);
        }
    return out;
}

// Each of `vs` filled, in order, with values uniform in [-1, 1) from `rng`.
void fill_uniform(std::mt19937& rng, std::initializer_list<std::vector<float>*> vs) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (std::vector<float>* v : vs)
        for (float& x : *v) x = u(rng);
}

TEST(Gemm, EveryAvailableLibraryMatchesAFloat64Reference) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> dim(1, 70), pad(0, 5);
    std::vector<GemmCase> cases;
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (float alpha : {1.f, 0.375f})
                for (float beta : {0.f, 1.f})
                    for (int rep = 0; rep < 3; ++rep)
                        cases.push_back(
                            {ta, tb, dim(rng), dim(rng), dim(rng), pad(rng), alpha, beta});
    cases.push_back({false, true, 257, 129, 513, 0, 1.f, 0.f});  // past one cache block
    cases.push_back({true, false, 64, 3136, 576, 3, 1.f, 1.f});  // a convolution's shape
    // A transposed A of a million floats or more against at most 8 columns (Eigen: its own
    // few-columns kernel), with rows that are not a whole number of 16-row strips.
    cases.push_back({true, false, 1030, 3, 1100, 2, 0.375f, 1.f});
    cases.push_back({true, true, 1041, 8, 1031, 0, 1.f, 0.f});
    cases.push_back({true, false, 2000, 1, 600, 1, 1.f, 0.f});
    ASSERT_FALSE(available().empty());
    for (GemmLibrary lib : available())
        for (const GemmCase& c : cases) {
            const int64_t lda = (c.ta ? c.m : c.k) + c.pad, ldb = (c.tb ? c.k : c.n) + c.pad,
                          ldc = c.n + c.pad;
            std::vector<float> a(static_cast<size_t>((c.ta ? c.k : c.m) * lda)),
                b(static_cast<size_t>((c.tb ? c.n : c.k) * ldb)),
                c0(static_cast<size_t>(c.m * ldc));
            fill_uniform(rng, {&a, &b, &c0});
            std::vector<float> out = c0;
            if (c.beta == 0)  // beta 0 must not read C: garbage there must not reach the result
                for (int64_t i = 0; i < c.m; ++i)
                    for (int64_t j = 0; j < c.n; ++j)
                        out[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
            const std::vector<double> ref = reference(c, a, lda, b, ldb, c0, ldc);
            sgemm_on(lib, c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta,
                     out.data(), ldc);
            double worst = 0;
            for (int64_t i = 0; i < c.m; ++i)
                for (int64_t j = 0; j < c.n; ++j)
                    worst = std::max(worst, std::abs(out[i * ldc + j] - ref[i * ldc + j]));
            // |op(A)·op(B)| ≤ k for entries in [-1, 1]; float32 sums err by ~k·2⁻²⁴ of that.
            EXPECT_LT(worst, 1e-5 * static_cast<double>(c.k) + 1e-6)
                << gemm_library_name(lib) << " ta=" << c.ta << " tb=" << c.tb << " " << c.m << "x"
                << c.n << "x" << c.k << " pad " << c.pad << " alpha " << c.alpha << " beta "
                << c.beta;
            // The padding between rows is not C's: left alone.
            for (int64_t i = 0; i < c.m; ++i)
                for (int64_t j = c.n; j < ldc; ++j)
                    ASSERT_EQ(out[i * ldc + j], c0[i * ldc + j]) << gemm_library_name(lib);
        }
}

// The bitwise invariant rests on this: the same product, run again, gives the same bits, at the
// thread count the suite runs with and at two threads, on every library: a large product and a
// thin one (2 rows against 1.2 M floats), which any library may serve (is_thin_gemm).
TEST(Gemm, EveryLibraryRepeatsItselfBitwise) {
    std::mt19937 rng(11);
    const int saved = cpu_threads();
    for (const auto& [m, n, k] : {std::array<int64_t, 3>{300, 280, 310}, {2, 2000, 600}}) {
        std::vector<float> a(m * k), b(k * n);
        fill_uniform(rng, {&a, &b});
        for (int threads : {1, 2}) {
            set_cpu_threads(threads);
            for (GemmLibrary lib : available()) {
                std::vector<float> first(m * n), again(m * n);
                sgemm_on(lib, false, true, m, n, k, 1.f, a.data(), k, b.data(), k, 0.f,
                         first.data(), n);
                for (int rep = 0; rep < 3; ++rep) {
                    sgemm_on(lib, false, true, m, n, k, 1.f, a.data(), k, b.data(), k, 0.f,
                             again.data(), n);
                    ASSERT_EQ(first, again)
                        << gemm_library_name(lib) << " at " << threads << " threads, m " << m;
                }
            }
        }
    }
    set_cpu_threads(saved);
}

// Floats that end where an unreadable page begins: reading one past the end crashes.
class EndsAtAGuardPage {
  public:
    explicit EndsAtAGuardPage(size_t floats) {
        const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        const size_t data = (floats * sizeof(float) + page - 1) / page * page;
        bytes_ = data + page;
        void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return;
        base_ = static_cast<char*>(p);
        if (mprotect(base_ + data, page, PROT_NONE) != 0) return;
        floats_ = reinterpret_cast<float*>(base_ + data) - floats;
        for (size_t i = 0; i < floats; ++i) floats_[i] = 0.5f - static_cast<float>(i % 7) / 8;
    }
    ~EndsAtAGuardPage() {
        if (base_) munmap(base_, bytes_);
    }
    EndsAtAGuardPage(const EndsAtAGuardPage&) = delete;
    EndsAtAGuardPage& operator=(const EndsAtAGuardPage&) = delete;
    float* get() const { return floats_; }

  private:
    char* base_ = nullptr;
    size_t bytes_ = 0;
    float* floats_ = nullptr;
};

// Every library reads only the operands it is given (and writes only C): each of A, B and C in
// turn ends at an unreadable page, over small shapes, every transpose, and beta 0 and 1. BLIS
// 0.9.0's small-product kernels read a float past A or B (flame/blis issues 635, 821): in a
// convolution's product one crashed a test process, so they are switched off (engine/cpu/
// gemm.cpp). A read past the end here ends the test binary with SIGSEGV.
TEST(Gemm, EveryLibraryReadsOnlyItsOperands) {
    const std::vector<int64_t> sizes = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33};
    for (GemmLibrary lib : available()) {
        SCOPED_TRACE(gemm_library_name(lib));
        int products = 0;
        for (int64_t m : sizes)
            for (int64_t n : sizes)
                for (int64_t k : sizes)
                    for (int t = 0; t < 4; ++t) {
                        const bool ta = t & 1, tb = t & 2;
                        const size_t na = static_cast<size_t>(m * k),
                                     nb = static_cast<size_t>(k * n),
                                     nc = static_cast<size_t>(m * n);
                        for (int guarded = 0; guarded < 3; ++guarded) {
                            EndsAtAGuardPage ga(guarded == 0 ? na : 1), gb(guarded == 1 ? nb : 1),
                                gc(guarded == 2 ? nc : 1);
                            std::vector<float> a(na, 0.25f), b(nb, -0.5f), c(nc, 1.f);
                            const float* pa = guarded == 0 ? ga.get() : a.data();
                            const float* pb = guarded == 1 ? gb.get() : b.data();
                            float* pc = guarded == 2 ? gc.get() : c.data();
                            ASSERT_TRUE(pa && pb && pc) << "mmap or mprotect failed";
                            sgemm_on(lib, ta, tb, m, n, k, 1.f, pa, ta ? m : k, pb, tb ? k : n,
                                     guarded == 2 ? 1.f : 0.f, pc, n);
                            ++products;
                        }
                    }
        EXPECT_EQ(products, 12 * 12 * 12 * 4 * 3);
    }
}

// Thin products are chosen apart (engine/gemm.h): at most 16 rows or 32 columns against an
// operand of 2^14 floats or more, whatever their FLOPs.
TEST(Gemm, ThinProductsAreTheFewRowsOrColumnsAgainstALargeOperand) {
    EXPECT_TRUE(is_thin_gemm(2, 4096, 9216));  // a classifier at batch 2
    EXPECT_TRUE(is_thin_gemm(4, 1024, 1024));
    EXPECT_TRUE(is_thin_gemm(8, 3072, 768));     // ConvNeXt's last stage at 64 px, batch 2
    EXPECT_TRUE(is_thin_gemm(16, 768, 3072));    // and its input gradient at 16 rows
    EXPECT_FALSE(is_thin_gemm(17, 1024, 1024));  // seventeen rows
    EXPECT_FALSE(is_thin_gemm(16, 100, 100));    // op(B) under 2^14 floats
    EXPECT_TRUE(is_thin_gemm(2, 1000, 512));     // ResNet-18's classifier at batch 2
    EXPECT_TRUE(is_thin_gemm(2, 128, 128));      // op(B) of 2^14 floats
    EXPECT_FALSE(is_thin_gemm(1, 50, 64));       // one attention head's query row: per-call cost
    EXPECT_TRUE(is_thin_gemm(1024, 8, 2048));    // a 1×1 conv's input gradient on 2×2 planes
    EXPECT_TRUE(is_thin_gemm(32, 32, 1152));     // a 3×3 conv to 32 channels on 4×4 planes
    EXPECT_FALSE(is_thin_gemm(1024, 33, 2048));  // thirty-three columns
    EXPECT_FALSE(is_thin_gemm(64, 32, 128));     // A under 2^14 floats
    EXPECT_FALSE(is_thin_gemm(1024, 1024, 2));   // an outer product: short k, not thin
    EXPECT_NE(std::string(thin_gemm_label()).find("16 rows or 32 columns"), std::string::npos);
}

// A case's operands, uniform in [-1, 1), their leading dimensions padded by c.pad, and the
// float64 reference for them.
struct Operands {
    int64_t lda, ldb, ldc;
    std::vector<float> a, b, c0;
    std::vector<double> ref;
};
Operands operands_for(std::mt19937& rng, const GemmCase& c) {
    Operands o;
    o.lda = (c.ta ? c.m : c.k) + c.pad;
    o.ldb = (c.tb ? c.k : c.n) + c.pad;
    o.ldc = c.n + c.pad;
    o.a.resize(static_cast<size_t>((c.ta ? c.k : c.m) * o.lda));
    o.b.resize(static_cast<size_t>((c.tb ? c.n : c.k) * o.ldb));
    o.c0.resize(static_cast<size_t>(c.m * o.ldc));
    fill_uniform(rng, {&o.a, &o.b, &o.c0});
    o.ref = reference(c, o.a, o.lda, o.b, o.ldb, o.c0, o.ldc);
    return o;
}

// C from `product(c)` at one and at two threads, each time from c0 (C's [m, n] NaN where beta is
// 0, so that a kernel reading it shows); the thread count is restored after.
template <class F>
std::vector<std::vector<float>> at_one_and_two_threads(const std::vector<float>& c0, int64_t m,
                                                       int64_t n, int64_t ldc, float beta,
                                                       F&& product) {
    const int saved = cpu_threads();
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2}) {
        set_cpu_threads(threads);
        std::vector<float> out = c0;
        if (beta == 0)
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j)
                    out[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
        product(out.data());
        outs.push_back(out);
    }
    set_cpu_threads(saved);
    return outs;
}

// C [m, n] (leading dimension ldc) within `tolerance` of the float64 reference, and its padding
// columns as they were in c0.
void expect_product(const std::vector<float>& out, const std::vector<double>& ref,
                    const std::vector<float>& c0, int64_t m, int64_t n, int64_t ldc,
                    double tolerance, const std::string& what) {
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j)
            ASSERT_NEAR(out[i * ldc + j], ref[i * ldc + j], tolerance)
                << what << " at " << i << "," << j;
        for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(out[i * ldc + j], c0[i * ldc + j]) << what;
    }
}

// The convolution's own kernel for products with 8 or 16 columns (engine/cpu/few_columns.cpp):
// A and Aᵀ, both widths, beta 0 (C's garbage never read) and 1, rows that are not a whole number
// of tiles, depths with 0 to 3 terms past a multiple of 4 (AVX-512 takes A four floats at a time),
// padded leading dimensions, against the float64 reference; C's padding left alone; the same bits
// at one and two threads. And where it is taken.
TEST(Gemm, FewColumnsProductMatchesAFloat64Reference) {
    std::mt19937 rng(17);
    for (bool ta : {false, true})
        for (int64_t n : {8, 16})
            for (float beta : {0.f, 1.f})
                for (const auto& [m, k, pad] :
                     {std::array<int64_t, 3>{37, 33, 0}, {100, 300, 3}, {45, 34, 1}, {64, 35, 2}}) {
                    const GemmCase c{ta, false, m, n, k, pad, 1.f, beta};
                    ASSERT_TRUE(cpu::few_columns_apply(ta, m, n, k));
                    const int64_t lda = (ta ? m : k) + pad, ldb = n + pad, ldc = n + pad;
                    std::vector<float> a(static_cast<size_t>((ta ? k : m) * lda)),
                        b(static_cast<size_t>(k * ldb)), c0(static_cast<size_t>(m * ldc));
                    fill_uniform(rng, {&a, &b, &c0});
                    const std::vector<double> ref = reference(c, a, lda, b, ldb, c0, ldc);
                    const auto outs = at_one_and_two_threads(c0, m, n, ldc, beta, [&](float* out) {
                        cpu::few_columns_product(ta, m, n, k, a.data(), lda, b.data(), ldb, beta,
                                                 out, ldc);
                    });
                    const std::string what = "ta=" + std::to_string(ta) +
                                             " n=" + std::to_string(n) +
                                             " beta=" + std::to_string(beta) + " " +
                                             std::to_string(m) + "x" + std::to_string(k);
                    EXPECT_EQ(outs[0], outs[1]) << what;
                    expect_product(outs[0], ref, c0, m, n, ldc,
                                   1e-5 * static_cast<double>(k) + 1e-6, what);
                }
    EXPECT_TRUE(cpu::few_columns_apply(false, 512, 8, 4608));    // ResNet-18's last 3×3s
    EXPECT_FALSE(cpu::few_columns_apply(true, 4608, 8, 512));    // and their Wᵀ: 2.4M floats
    EXPECT_TRUE(cpu::few_columns_apply(true, 672, 8, 672));      // a 1×1's Wᵀ: 0.45M floats
    EXPECT_FALSE(cpu::few_columns_apply(false, 512, 12, 4608));  // not whole vectors
    EXPECT_FALSE(cpu::few_columns_apply(false, 512, 32, 4608));  // more than 16 columns
    EXPECT_FALSE(cpu::few_columns_apply(false, 31, 8, 4608));    // too few rows
    EXPECT_FALSE(cpu::few_columns_apply(false, 512, 8, 31));     // too short a sum
}

// A kernel with sgemm's arguments on one case: op(A)·op(B) against the float64 reference, C's
// padding left alone, the same bits at one and two threads. Returns the case's operands and C.
using Kernel = void (*)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                        const float*, int64_t, float, float*, int64_t);
std::pair<Operands, std::vector<float>> checked_case(std::mt19937& rng, const GemmCase& c,
                                                     Kernel kernel) {
    Operands o = operands_for(rng, c);
    const auto outs = at_one_and_two_threads(o.c0, c.m, c.n, o.ldc, c.beta, [&](float* out) {
        kernel(c.ta, c.tb, c.m, c.n, c.k, c.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, c.beta,
               out, o.ldc);
    });
    const std::string what = "ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb) +
                             " alpha=" + std::to_string(c.alpha) +
                             " beta=" + std::to_string(c.beta) + " " + std::to_string(c.m) + "x" +
                             std::to_string(c.n) + "x" + std::to_string(c.k);
    EXPECT_EQ(outs[0], outs[1]) << what;
    expect_product(outs[0], o.ref, o.c0, c.m, c.n, o.ldc, 1e-5 * static_cast<double>(c.k) + 1e-6,
                   what);
    return {std::move(o), outs[0]};
}

// RematLab's own GEMM (engine/cpu/packed_product.cpp, AVX-512 builds): every transpose, alpha 1
// and 1/4, beta 0 (C's garbage never read), 1 and 0.5, against the float64 reference, on shapes
// that cross its blocks: depths split into two, three and four blocks (385, 700, 800), columns past
// one packed block of op(B) (1100), rows past one packed block of op(A) (600) and off its 12 × 32
// tiles, padded leading dimensions; C's padding left alone. Its threads take whole panels of
// columns (wide C) or whole tiles of rows (narrow C): the same bits at one and two threads either
// way. And a block of C computed on its own, from operands that start at that block's rows and
// columns, has the bits the whole product gave it: a tile's sums do not depend on where the tile
// lies, which is what lets threads split C anywhere on a tile's edge.
TEST(Gemm, OwnPackedProductMatchesAFloat64ReferenceAndSplitsWithoutChangingABit) {
    if (!cpu::packed_product_built()) GTEST_SKIP() << "built without AVX-512";
    std::mt19937 rng(29);
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (const auto& [alpha, beta] :
                 {std::array<float, 2>{1.f, 0.f}, {0.25f, 1.f}, {1.f, 0.5f}})
                for (const auto& [m, n, k, pad] : {std::array<int64_t, 4>{25, 70, 800, 1},
                                                   {40, 1100, 700, 0},
                                                   {600, 40, 130, 3},
                                                   {1, 1, 1, 0},
                                                   {13, 33, 385, 2}}) {
                    const auto [o, whole] = checked_case(
                        rng, GemmCase{ta, tb, m, n, k, pad, alpha, beta}, cpu::packed_product);
                    if (m < 8 || n < 8) continue;
                    // Rows [5, m) and columns [7, n) alone: the whole product's bits there.
                    const int64_t i0 = 5, j0 = 7;
                    std::vector<float> part = o.c0;
                    const float* a0 = o.a.data() + (ta ? i0 : i0 * o.lda);
                    const float* b0 = o.b.data() + (tb ? j0 * o.ldb : j0);
                    cpu::packed_product(ta, tb, m - i0, n - j0, k, alpha, a0, o.lda, b0, o.ldb,
                                        beta, part.data() + i0 * o.ldc + j0, o.ldc);
                    for (int64_t i = i0; i < m; ++i)
                        for (int64_t j = j0; j < n; ++j)
                            ASSERT_EQ(part[i * o.ldc + j], whole[i * o.ldc + j])
                                << "ta=" << ta << " tb=" << tb << " " << m << "x" << n << "x" << k
                                << " at " << i << "," << j;
                }
}

// Attention's small products (engine/cpu/few_columns.cpp's small_product): every transpose of A
// and B, alpha 1 and 1/8, beta 0 (C's garbage never read) and 1, rows and columns that are not a
// whole number of tiles or of column blocks, padded leading dimensions, against the float64
// reference; C's padding left alone; the same bits at one and two threads. And where it is taken.
TEST(Gemm, SmallProductMatchesAFloat64Reference) {
    std::mt19937 rng(23);
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (float alpha : {1.f, 0.125f})
                for (float beta : {0.f, 1.f})
                    for (const auto& [m, n, k, pad] : {std::array<int64_t, 4>{128, 128, 32, 0},
                                                       {50, 50, 64, 1},
                                                       {128, 32, 128, 0},
                                                       {61, 64, 50, 3},
                                                       {19, 17, 16, 0},
                                                       {37, 96, 21, 2}})
                        checked_case(rng, GemmCase{ta, tb, m, n, k, pad, alpha, beta},
                                     cpu::small_product);
    EXPECT_TRUE(cpu::small_product_apply(true, 128, 128, 32));  // Q·Kᵀ at 128 tokens, 32 a head
    EXPECT_FALSE(cpu::small_product_apply(true, 1024, 1024, 64));  // GPT-2's at 1024 tokens
    EXPECT_FALSE(cpu::small_product_apply(true, 15, 64, 64));      // too few rows
    EXPECT_FALSE(cpu::small_product_apply(true, 64, 15, 64));      // too few columns
    EXPECT_FALSE(cpu::small_product_apply(true, 64, 64, 15));      // too short a sum
#if defined(__AVX512F__)
    EXPECT_TRUE(cpu::small_product_apply(true, 50, 50, 64));    // ViT-B/32's Q·Kᵀ at batch 2
    EXPECT_FALSE(cpu::small_product_apply(false, 50, 64, 50));  // and its P·V: OpenBLAS's
#else
    EXPECT_FALSE(cpu::small_product_apply(true, 50, 50, 64));  // padded to 64 columns
    EXPECT_TRUE(cpu::small_product_apply(false, 50, 64, 50));
    EXPECT_TRUE(cpu::small_product_apply(false, 128, 32, 128));     // P·V at 128 tokens
#endif
}

// Two products side by side (engine/cpu/kernels.h): both run, each on its own thread; an
// exception in either comes out after both; and where it is taken.
TEST(SideBySide, RunsBothOnTwoThreadsAndRethrows) {
    const int saved = cpu_threads();
    set_cpu_threads(2);
    int threads_seen[2] = {0, 0};
    cpu::side_by_side([&] { threads_seen[0] = omp_get_num_threads(); },
                      [&] { threads_seen[1] = omp_get_num_threads(); });
    EXPECT_EQ(threads_seen[0], 2);
    EXPECT_EQ(threads_seen[1], 2);
    bool second_ran = false;
    EXPECT_THROW(cpu::side_by_side([] { throw Error("first failed"); }, [&] { second_ran = true; }),
                 Error);
    EXPECT_TRUE(second_ran);
    EXPECT_TRUE(cpu::side_by_side_pays(cpu::kSideBySideMinMacs));
    EXPECT_FALSE(cpu::side_by_side_pays(cpu::kSideBySideMinMacs - 1));  // too small to split
    bool inside = true;
#pragma omp parallel num_threads(2)
    {
#pragma omp master
        inside = cpu::side_by_side_pays(cpu::kSideBySideMinMacs);
    }
    EXPECT_FALSE(inside);  // already in a parallel region
    set_cpu_threads(1);
    EXPECT_FALSE(cpu::side_by_side_pays(cpu::kSideBySideMinMacs));
    set_cpu_threads(4);
    EXPECT_FALSE(cpu::side_by_side_pays(cpu::kSideBySideMinMacs));
    set_cpu_threads(saved);
}

// A linear layer's dX and dW at two threads, side by side, each on one thread: within float64's
// reach, and the same bits as at one thread, for beta 0 and 1 (accumulating dX).
TEST(SideBySide, LinearGradientsAtTwoThreadsAreTheOneThreadBits) {
    std::mt19937 rng(29);
    const int saved = cpu_threads();
    const int64_t rows = 96, in = 80, out = 72;  // 553k multiply-adds a product
    ASSERT_GE(rows * in * out, cpu::kSideBySideMinMacs);
    std::vector<float> x(static_cast<size_t>(rows * in)), w(static_cast<size_t>(out * in)),
        dy(static_cast<size_t>(rows * out)), dx0(static_cast<size_t>(rows * in));
    fill_uniform(rng, {&x, &w, &dy, &dx0});
    for (bool accumulate : {false, true}) {
        std::vector<std::vector<float>> dxs, dws;
        for (int threads : {1, 2}) {
            set_cpu_threads(threads);
            std::vector<float> dx = dx0, dw(static_cast<size_t>(out * in), -1.f);
            cpu::linear_products_backward(x.data(), w.data(), dy.data(), rows, in, out, dx.data(),
                                          accumulate, dw.data());
            dxs.push_back(dx);
            dws.push_back(dw);
        }
        set_cpu_threads(saved);
        EXPECT_EQ(dxs[0], dxs[1]) << "accumulate=" << accumulate;
        EXPECT_EQ(dws[0], dws[1]) << "accumulate=" << accumulate;
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < in; ++j) {
                double s = accumulate ? dx0[i * in + j] : 0.0;
                for (int64_t o = 0; o < out; ++o) s += double{dy[i * out + o]} * w[o * in + j];
                ASSERT_NEAR(dxs[1][i * in + j], s, 1e-4) << i << "," << j;
            }
        for (int64_t o = 0; o < out; ++o)
            for (int64_t j = 0; j < in; ++j) {
                double s = 0;
                for (int64_t i = 0; i < rows; ++i) s += double{dy[i * out + o]} * x[i * in + j];
                ASSERT_NEAR(dws[1][o * in + j], s, 1e-4) << o << "," << j;
            }
    }
}

// C for the written-once kernels: c0's values at a 64-byte boundary (plus `misalign` floats) of
// `buffer`, sized here.
float* c_in(std::vector<float>& buffer, const std::vector<float>& c0, int64_t misalign) {
    buffer.assign(c0.size() + 32, 0.0f);
    const auto at = reinterpret_cast<uintptr_t>(buffer.data());
    float* c = buffer.data() + (64 - at % 64) % 64 / 4 + misalign;
    std::copy(c0.begin(), c0.end(), c);
    return c;
}

// The kernel for products of a short depth (a convolution's weight gradient dY·colsᵀ over the 8
// positions of two 2×2 planes, a linear layer's dYᵀ·X on two rows; engine/cpu/short_depth.cpp):
// both forms of transposes, depths 1 to 16 (packed to 8 or 16 with zeros), beta 0 (C's old
// values never read) and 1, rows and columns that are not whole tiles (88 columns: a single
// vector after the tiles on either width), padded leading dimensions, C 64-byte aligned with its
// rows whole vectors (the large one, over kShortDepthStreamFloats, is then stored around the
// caches) and one float off (stored as usual), against the float64 reference; C's padding left
// alone; the same bits at one, two and three threads. And where it is taken.
TEST(Gemm, ShortDepthProductMatchesAFloat64Reference) {
    std::mt19937 rng(23);
    const int saved = cpu_threads();
    for (const auto& [m, n, pad] :
         {std::array<int64_t, 3>{37, 70, 3}, {130, 8200, 8}, {16, 64, 0}, {21, 88, 1}})
        for (const auto& [ta, tb] : {std::pair{false, true}, std::pair{true, false}})
            for (int64_t kd : {1, 3, 8, 9, 16})
                for (float beta : {0.f, 1.f})
                    for (int64_t misalign : {0, 1}) {
                        ASSERT_TRUE(cpu::short_depth_apply(m, n, kd));
                        const Operands o =
                            operands_for(rng, GemmCase{ta, tb, m, n, kd, pad, 1.f, beta});
                        const auto& [lda, ldb, ldc, a, b, c0, ref] = o;
                        std::vector<std::vector<float>> outs;
                        for (int threads : {1, 2, 3}) {
                            set_cpu_threads(threads);
                            std::vector<float> buffer;
                            float* c = c_in(buffer, c0, misalign);
                            ASSERT_EQ(reinterpret_cast<uintptr_t>(c) % 64 == 0, misalign == 0);
                            if (beta == 0)
                                for (int64_t i = 0; i < m; ++i)
                                    for (int64_t j = 0; j < n; ++j)
                                        c[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
                            cpu::short_depth_product(ta, tb, m, n, kd, a.data(), lda, b.data(), ldb,
                                                     beta, c, ldc);
                            outs.emplace_back(c, c + m * ldc);
                        }
                        set_cpu_threads(saved);
                        const std::string what =
                            std::string(ta ? "TN " : "NT ") + std::to_string(m) + "x" +
                            std::to_string(n) + " depth " + std::to_string(kd) + " beta " +
                            std::to_string(beta) + (misalign ? " misaligned" : " aligned");
                        EXPECT_EQ(outs[0], outs[1]) << what;
                        EXPECT_EQ(outs[0], outs[2]) << what;
                        expect_product(outs[0], ref, c0, m, n, ldc,
                                       1e-5 * static_cast<double>(kd) + 1e-6, what);
                    }
    EXPECT_TRUE(cpu::short_depth_apply(2048, 2048, 8));   // ResNeXt-101's 1×1s on 2×2 planes
    EXPECT_TRUE(cpu::short_depth_apply(512, 4608, 4));    // ResNet-18's last 3×3s, one image
    EXPECT_FALSE(cpu::short_depth_apply(512, 4608, 17));  // too deep
    EXPECT_FALSE(cpu::short_depth_apply(15, 4608, 8));    // too few rows
    EXPECT_TRUE(cpu::short_depth_apply(1152, 48, 2));     // EfficientNet's SE expansion, batch 2
    EXPECT_FALSE(cpu::short_depth_apply(512, 15, 8));     // too few columns
}

// The panel kernel for deeper products written once (ViT-B/32's weight gradients dYᵀ·X over 100
// rows; engine/cpu/short_depth.cpp): all four forms of transposes; depths just past the short
// kernel's (the kernel runs any depth; it is taken from kPanelMinDepth), 65, 100 and
// kPanelDepthMax; rows that are not whole tiles (13, 37, 130 against tiles of 6 or 12) and
// columns that are not whole blocks, with a partial vector (45, 70; 2100 also takes two
// groups of packed blocks at depth 128 on either width); padded leading dimensions; C 64-byte
// aligned with its rows whole vectors (stored around the caches) and one float off; against the
// float64 reference, C's padding left alone, its old values (NaN) never read; the same bits at
// one, two and three threads. And where it is taken.
TEST(Gemm, PanelDepthProductMatchesAFloat64Reference) {
    std::mt19937 rng(29);
    const int saved = cpu_threads();
    for (const auto& [m, n, pad] : {std::array<int64_t, 3>{37, 70, 3}, {13, 45, 0}, {130, 2100, 8}})
        for (const auto& [ta, tb] : {std::pair{false, true}, std::pair{true, false},
                                     std::pair{false, false}, std::pair{true, true}})
            for (int64_t kd : {cpu::kShortDepthMax + 1, cpu::kPanelMinDepth + 1, int64_t{100},
                               cpu::kPanelDepthMax}) {
                const GemmCase g{ta, tb, m, n, kd, pad, 1.f, 0.f};
                const int64_t lda = (ta ? m : kd) + pad, ldb = (tb ? kd : n) + pad, ldc = n + pad;
                std::vector<float> a(static_cast<size_t>((ta ? kd : m) * lda)),
                    b(static_cast<size_t>((tb ? n : kd) * ldb)), c0(static_cast<size_t>(m * ldc));
                fill_uniform(rng, {&a, &b, &c0});
                const std::vector<double> ref = reference(g, a, lda, b, ldb, c0, ldc);
                for (int64_t misalign : {0, 1}) {
                    std::vector<std::vector<float>> outs;
                    for (int threads : {1, 2, 3}) {
                        set_cpu_threads(threads);
                        std::vector<float> buffer;
                        float* c = c_in(buffer, c0, misalign);
                        for (int64_t i = 0; i < m; ++i)
                            for (int64_t j = 0; j < n; ++j)
                                c[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
                        cpu::panel_depth_product(ta, tb, m, n, kd, a.data(), lda, b.data(), ldb, c,
                                                 ldc);
                        outs.emplace_back(c, c + m * ldc);
                    }
                    set_cpu_threads(saved);
                    const std::string what = std::string(ta ? "T" : "N") + (tb ? "T " : "N ") +
                                             std::to_string(m) + "x" + std::to_string(n) +
                                             " depth " + std::to_string(kd) +
                                             (misalign ? " misaligned" : " aligned");
                    EXPECT_EQ(outs[0], outs[1]) << what;
                    EXPECT_EQ(outs[0], outs[2]) << what;
                    expect_product(outs[0], ref, c0, m, n, ldc,
                                   1e-5 * static_cast<double>(kd) + 1e-6, what);
                }
            }
    EXPECT_TRUE(cpu::panel_depth_apply(false, 3072, 768, 100, 0.f));  // ViT-B/32's MLP, batch 2
    EXPECT_TRUE(cpu::panel_depth_apply(false, 768, 768, 100, 0.f));   // its attention's output
    EXPECT_FALSE(cpu::panel_depth_apply(true, 1024, 4608, 98, 0.f));  // a convolution's dY·colsᵀ
    EXPECT_FALSE(cpu::panel_depth_apply(false, 3072, 768, 100, 1.f));  // C read: the libraries
    EXPECT_FALSE(cpu::panel_depth_apply(false, 3072, 768, 16, 0.f));   // the short kernel's
    EXPECT_FALSE(cpu::panel_depth_apply(false, 1536, 384, 32, 0.f));   // ConvNeXt-T's: the library
    EXPECT_TRUE(cpu::panel_depth_apply(false, 1536, 384, cpu::kPanelMinDepth, 0.f));
    EXPECT_FALSE(cpu::panel_depth_apply(false, 3072, 768, cpu::kPanelDepthMax + 1, 0.f));
    EXPECT_FALSE(cpu::panel_depth_apply(false, 500, 500, 100, 0.f));  // C under 1 MB
}

// The forward product of a linear layer over a few rows as dot products (X·Wᵀ; engine/cpu/
// row_dots.cpp): rows that are whole tiles of 4 and not (100, 37, 18: tails of 0, 1 and 2 rows),
// columns that are whole blocks of 3 and not (258, 256, 769: the last block of 3, 1 and 2 rows,
// and the prefetch of a short last block), depths of one vector, ViT's 768 and the rule's
// bounds; beta 0 (C's old values, NaN, never read) and 1; padded leading dimensions; against the
// float64 reference, C's padding left alone; the same bits at one and two threads. A depth
// that is not a whole number of vectors is refused. And where it is taken.
TEST(Gemm, RowDotsProductMatchesAFloat64Reference) {
    std::mt19937 rng(31);
    for (const auto& [m, n, pad] :
         {std::array<int64_t, 3>{100, 258, 0}, {37, 256, 5}, {18, 769, 8}, {5, 7, 1}})
        for (int64_t k : {int64_t{8}, cpu::kRowDotsMinDepth, int64_t{768}, cpu::kRowDotsMaxDepth})
            for (float beta : {0.f, 1.f}) {
                const GemmCase g{false, true, m, n, k, pad, 1.f, beta};
                const int64_t lda = k + pad, ldb = k + pad, ldc = n + pad;
                std::vector<float> a(static_cast<size_t>(m * lda)), b(static_cast<size_t>(n * ldb)),
                    c0(static_cast<size_t>(m * ldc));
                fill_uniform(rng, {&a, &b, &c0});
                const std::vector<double> ref = reference(g, a, lda, b, ldb, c0, ldc);
                const auto outs = at_one_and_two_threads(c0, m, n, ldc, beta, [&](float* c) {
                    cpu::row_dots_product(m, n, k, a.data(), lda, b.data(), ldb, beta, c, ldc);
                });
                const std::string what = std::to_string(m) + "x" + std::to_string(n) + " depth " +
                                         std::to_string(k) + " beta " + std::to_string(beta);
                EXPECT_EQ(outs[0], outs[1]) << what;
                expect_product(outs[0], ref, c0, m, n, ldc, 1e-5 * static_cast<double>(k) + 1e-6,
                               what);
            }
    std::vector<float> a(100 * 12), b(300 * 12), c(100 * 300);
    EXPECT_THROW(
        cpu::row_dots_product(100, 300, 12, a.data(), 12, b.data(), 12, 0.f, c.data(), 300), Error);
#if !defined(__AVX2__) || !defined(__FMA__) || defined(__AVX512F__)
    // Taken in AVX2 builds only: with AVX-512 our 16-lane packed products serve these.
    EXPECT_FALSE(cpu::row_dots_apply(false, true, 100, 3072, 768));
#else
    EXPECT_TRUE(cpu::row_dots_apply(false, true, 100, 3072, 768));  // ViT-B/32's MLP, batch 2
    EXPECT_TRUE(cpu::row_dots_apply(false, true, 100, 2304, 768));  // its attention's projection
    EXPECT_TRUE(cpu::row_dots_apply(false, true, kThinRows + 1, 256, cpu::kRowDotsMinDepth));
    EXPECT_FALSE(cpu::row_dots_apply(false, true, 100, 768, 3072));  // deeper: the libraries
    EXPECT_FALSE(cpu::row_dots_apply(false, true, cpu::kRowDotsMaxRows + 1, 3072, 768));
    EXPECT_FALSE(cpu::row_dots_apply(false, true, kThinRows, 3072, 768));  // the thin class's
    EXPECT_FALSE(cpu::row_dots_apply(false, true, 100, 3072, 772));        // not whole vectors
    EXPECT_FALSE(cpu::row_dots_apply(false, true, 100, 255, 768));         // too few columns
    EXPECT_FALSE(cpu::row_dots_apply(false, false, 100, 3072, 768));  // dX = dY·W: B not [n, k]
    EXPECT_FALSE(cpu::row_dots_apply(true, true, 100, 3072, 768));
#endif
}

// Eigen's few-columns kernel (a transposed A against at most 8 columns) sums each element of C
// over k in order, one thread per part of C's rows: the same bits at any thread count.
TEST(Gemm, FewColumnsOfATransposedAAreTheSameBitsAtAnyThreadCount) {
    std::mt19937 rng(13);
    const int64_t m = 2100, n = 5, k = 700;
    std::vector<float> a(m * k), b(k * n);
    fill_uniform(rng, {&a, &b});
    const int saved = cpu_threads();
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2, 3}) {
        set_cpu_threads(threads);
        outs.emplace_back(m * n);
        sgemm_on(GemmLibrary::Eigen, true, false, m, n, k, 1.f, a.data(), m, b.data(), n, 0.f,
                 outs.back().data(), n);
    }
    set_cpu_threads(saved);
    EXPECT_EQ(outs[0], outs[1]);
    EXPECT_EQ(outs[0], outs[2]);
}

TEST(Gemm, UnknownNamesAreRefusedWithTheChoices) {
    try {
        select_gemm("mkl");
        FAIL() << "mkl accepted";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("unknown GEMM library 'mkl'"), std::string::npos) << msg;
        EXPECT_NE(msg.find("eigen, openblas, blis, rematlab or auto"), std::string::npos) << msg;
    }
    for (const GemmLibraryInfo& i : gemm_libraries()) {
        if (i.available) continue;
        try {
            select_gemm(gemm_library_name(i.library));
            FAIL() << gemm_library_name(i.library) << " accepted though not available";
        } catch (const Error& e) {
            const std::string msg = e.what();  // what to do: install it, or why it is left out
            EXPECT_TRUE(msg.find("apt-get install") != std::string::npos ||
                        msg.find("AddressSanitizer") != std::string::npos ||
                        msg.find("REMATLAB_NATIVE=ON") != std::string::npos)
                << msg;
        }
    }
}

// Once a GEMM has run, another library would change results within the process: refused.
TEST(Gemm, TheChoiceIsFixedOnceAGemmHasRun) {
    const std::vector<GemmLibrary> libs = available();
    if (libs.size() < 2) GTEST_SKIP() << "only one GEMM library here";
    auto expect_refused = [](GemmLibrary lib) {
        try {
            select_gemm(gemm_library_name(lib));
            ADD_FAILURE() << "switched to " << gemm_library_name(lib) << " after a GEMM ran";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("once per process"), std::string::npos)
                << e.what();
        }
    };
    try {
        select_gemm(gemm_library_name(libs[1]));  // nothing has run yet: allowed
    } catch (const Error&) {
        // An earlier test in this process ran a GEMM on another choice (ctest runs each test
        // alone; the whole binary at once does not): the choice is fixed, and stays so.
        const GemmLibrary fixed = gemm_choice().library;
        expect_refused(fixed == libs[0] ? libs[1] : libs[0]);
        EXPECT_EQ(gemm_choice().library, fixed);
        return;
    }
    EXPECT_EQ(gemm_choice().library, libs[1]);
    // A library named serves every class, thin products included.
    EXPECT_EQ(gemm_choice().small_library, libs[1]);
    EXPECT_EQ(gemm_choice().thin_library, libs[1]);
    EXPECT_EQ(gemm_library_for(2, 4096, 2048), libs[1]);
    float a = 2, b = 3, c = 0;
    sgemm(false, false, 1, 1, 1, 1.f, &a, 1, &b, 1, 0.f, &c, 1);
    EXPECT_EQ(c, 6.f);
    select_gemm(gemm_library_name(libs[1]));  // the same one again: fine
    expect_refused(libs[0]);
    EXPECT_EQ(gemm_choice().library, libs[1]);
}

// Per-shape choice (engine/gemm.h, kShapeChoiceMinFlops): a shape of that size is timed on every
// library at first use, written to the cache file with the times that chose it, obeyed from the
// file by a process that meets it later, and the same bits every time it runs.
TEST(Gemm, PerShapeChoiceIsTimedOnceWrittenDownAndObeyed) {
    const std::vector<GemmLibrary> libs = available();
    if (libs.size() < 2) GTEST_SKIP() << "only one GEMM library here";
    const GemmChoice& choice = gemm_choice();  // the suite's calibration, in the usual cache
    if (!choice.per_shape) GTEST_SKIP() << "per-shape choice off: " << choice.per_shape_off;
    // One thread: ctest runs two tests at once on CI's two cores, where a library's two-thread
    // product could wait out the other test's threads past kShapeChoiceMaxRunSeconds (seen once
    // here with a build beside it) and be left untimed.
    const int threads = cpu_threads();
    set_cpu_threads(1);
    namespace fs = std::filesystem;
    const fs::path dir =
        fs::temp_directory_path() / ("rematlab-gemm-shapes-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    ASSERT_EQ(setenv("XDG_CACHE_HOME", dir.c_str(), 1), 0);  // the shapes' file goes here
    forget_gemm_shape_choices();

    // Wᵀ·dY of a 1×1 convolution: 2·256·32·512 = 8.4 MFLOP, over the bound.
    const bool ta = true, tb = false;
    const int64_t m = 256, n = 32, k = 512, lda = m, ldb = n, ldc = n;
    ASSERT_GE(2.0 * m * n * k, kShapeChoiceMinFlops);
    std::mt19937 rng(7);
    std::vector<float> a(static_cast<size_t>(k * m)), b(static_cast<size_t>(k * n));
    fill_uniform(rng, {&a, &b});
    auto product = [&](std::optional<GemmLibrary> lib) {
        std::vector<float> c(static_cast<size_t>(m * n), 0.f);
        if (lib)
            sgemm_on(*lib, ta, tb, m, n, k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), ldc);
        else
            sgemm(ta, tb, m, n, k, 1.f, a.data(), lda, b.data(), ldb, 0.f, c.data(), ldc);
        return c;
    };
    const GemmLibrary class_library = gemm_library_for(m, n, k);
    EXPECT_EQ(gemm_library_for(ta, tb, m, n, k, lda, ldb, ldc), class_library)
        << "nothing is chosen for a shape before it runs";
    const std::vector<float> first = product(std::nullopt);
    const GemmLibrary chosen = gemm_library_for(ta, tb, m, n, k, lda, ldb, ldc);
    EXPECT_EQ(product(std::nullopt), first) << "a shape's results change within the process";
    EXPECT_EQ(product(chosen), first) << "the product did not run on the library reported";
    GemmShapeStats st = gemm_shape_stats();
    EXPECT_EQ(st.shapes, 1);
    EXPECT_EQ(st.timed_here, 1);

    // The file: this shape, every library's time, and the choice they make.
    const fs::path file = dir / "rematlab" / "gemm-shapes.json";
    ASSERT_TRUE(fs::exists(file)) << st.summary();
    EXPECT_EQ(st.path, file.string());
    EXPECT_EQ(st.cached, 1);
    nlohmann::json doc = nlohmann::json::parse(std::ifstream(file));
    ASSERT_EQ(doc["entries"].size(), 1u) << doc.dump(1);
    nlohmann::json& entry = doc["entries"][0]["shapes"]["TN 256x32x512 ld 256,32,32"];
    ASSERT_TRUE(entry.is_object()) << doc.dump(1);
    EXPECT_EQ(entry["library"], gemm_library_name(chosen));
    EXPECT_EQ(entry["class_library"], gemm_library_name(class_library));
    double fastest = 1e30;
    for (GemmLibrary lib : libs) {
        ASSERT_TRUE(entry["ms"].contains(gemm_library_name(lib))) << entry.dump();
        fastest = std::min(fastest, entry["ms"][gemm_library_name(lib)].get<double>());
    }
    const double class_ms = entry["ms"][gemm_library_name(class_library)].get<double>();
    const double chosen_ms = entry["ms"][gemm_library_name(chosen)].get<double>();
    if (chosen == class_library)
        EXPECT_LE(class_ms, fastest * (1 + kShapeChoiceMargin) + 1e-3) << entry.dump();
    else
        EXPECT_EQ(chosen_ms, fastest) << entry.dump();

    // Another process meeting the shape reads the file's choice, even one it would not make:
    // the file names another library, and the product runs there.
    const GemmLibrary other = chosen == libs[0] ? libs[1] : libs[0];
    entry["library"] = gemm_library_name(other);
    std::ofstream(file) << doc.dump(1);
    forget_gemm_shape_choices();
    EXPECT_EQ(gemm_library_for(ta, tb, m, n, k, lda, ldb, ldc), class_library);
    const std::vector<float> again = product(std::nullopt);
    EXPECT_EQ(gemm_library_for(ta, tb, m, n, k, lda, ldb, ldc), other);
    EXPECT_EQ(again, product(other));
    st = gemm_shape_stats();
    EXPECT_EQ(st.shapes, 1);
    EXPECT_EQ(st.timed_here, 0) << "the shape was in the file: nothing to time";

    // A small product over the bound is chosen apart too: a squeeze-excitation layer's
    // [2 × 672] · [168 × 672]ᵀ, 0.45 MFLOP, whose class's library took 3× the time of another on
    // an Intel Xeon (docs/benchmarks.md, 2026-12-06).
    std::vector<float> se_x(2 * 672, 0.25f), se_w(168 * 672, 0.5f), se_y(2 * 168);
    ASSERT_GE(2.0 * 2 * 168 * 672, kShapeChoiceMinFlops);
    sgemm(false, true, 2, 168, 672, 1.f, se_x.data(), 672, se_w.data(), 672, 0.f, se_y.data(), 168);
    EXPECT_EQ(gemm_shape_stats().shapes, 2);
    EXPECT_EQ(se_y[0], 0.125f * 672) << "a product timed at its first use gave a wrong result";
    EXPECT_EQ(se_y[2 * 168 - 1], 0.125f * 672);

    // A product under the bound is not chosen apart; nor is one whose leading dimension differs
    // from a chosen shape's (a shape is its transposes, sizes and leading dimensions).
    std::vector<float> small(16 * 16, 0.5f), out(16 * 16);
    ASSERT_LT(2.0 * 16 * 16 * 16, kShapeChoiceMinFlops);
    sgemm(false, false, 16, 16, 16, 1.f, small.data(), 16, small.data(), 16, 0.f, out.data(), 16);
    EXPECT_EQ(gemm_shape_stats().shapes, 2);
    EXPECT_EQ(gemm_library_for(ta, tb, m, n, k, lda + 1, ldb, ldc), class_library);

    // An unreadable file is rewritten with what is chosen now; nothing fails.
    std::ofstream(file) << "{ not json";
    forget_gemm_shape_choices();
    const std::vector<float> rewritten = product(std::nullopt);  // chooses, then reports
    EXPECT_EQ(rewritten, product(gemm_library_for(ta, tb, m, n, k, lda, ldb, ldc)));
    EXPECT_NO_THROW(nlohmann::json::parse(std::ifstream(file)));
    EXPECT_EQ(gemm_shape_stats().cached, 1);
    forget_gemm_shape_choices();
    fs::remove_all(dir);
    set_cpu_threads(threads);
}

// A library named (--gemm, REMATLAB_GEMM) serves every product: nothing is chosen per shape.
TEST(Gemm, PerShapeChoiceIsOffWhenALibraryIsNamed) {
    const std::vector<GemmLibrary> libs = available();
    try {
        select_gemm(gemm_library_name(libs[0]));
    } catch (const Error&) {
        GTEST_SKIP() << "an earlier test in this process fixed the choice";
    }
    const GemmShapeStats st = gemm_shape_stats();
    EXPECT_FALSE(st.on);
    // Named here (--gemm), or, with the suite run under REMATLAB_GEMM naming this library, by
    // the variable where an earlier test in the process ran a product first (select_gemm keeps
    // the same library's choice).
    const char* env = std::getenv("REMATLAB_GEMM");
    const bool env_names_it = env && std::string(env) == gemm_library_name(libs[0]);
    EXPECT_TRUE(st.why_off.find("set by --gemm") != std::string::npos ||
                (env_names_it && st.why_off.find("set by REMATLAB_GEMM") != std::string::npos))
        << st.why_off;
    EXPECT_NE(st.summary().find("off"), std::string::npos) << st.summary();
    const int64_t m = 128, n = 128, k = 256;  // 8.4 MFLOP
    std::vector<float> a(m * k, 0.25f), b(k * n, 0.5f), c(m * n);
    sgemm(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
    EXPECT_EQ(gemm_shape_stats().shapes, 0);
    EXPECT_EQ(gemm_library_for(false, false, m, n, k, k, n, n), libs[0]);
}

}  // namespace
}  // namespace rl
