#pragma once
// The one float GEMM entry point of the CPU backend, and the choice of library behind it.
//
// Four libraries can serve it: Eigen (built in, always there), OpenBLAS (Debian's OpenMP build,
// libopenblas0-openmp), BLIS (libblis4-openmp) and "rematlab", our own packed products
// (engine/cpu/packed_product.cpp), in builds with AVX-512 only. The two BLAS libraries are loaded
// at run time with dlopen, so one binary runs on a machine that has either, both or neither, and
// neither is a build dependency. Which one serves a process is decided once, before its first GEMM,
// in this order:
//   1. select_gemm(name) (rematlab-cli --gemm, the app's --gemm);
//   2. the REMATLAB_GEMM environment variable (eigen, openblas, blis, rematlab or auto);
//   3. the cached calibration for this machine (CPU, instruction set of the build, library
//      versions, thread count) in $XDG_CACHE_HOME/rematlab/gemm-calibration.json;
//   4. a calibration run now (about a second): each available library times the shapes our
//      layers run, best of several, and the fastest by geometric mean wins; the result is cached.
// Steps 3 and 4 choose twice: once for products of kSmallGemmFlops or more, once for smaller
// ones (attention's per-head products, a 7×7 window's, late convolutions on small planes), timed
// on shapes of their own: the libraries rank differently there (on an AVX2 machine BLIS led
// OpenBLAS by 15-23 % on attention's products where OpenBLAS led on the layers' large ones).
// They choose a third time for thin products (is_thin_gemm: at most 16 rows or 32 columns against
// an operand of 16K floats or more: a classifier at batch 2, a 1×1 convolution on a 2×2 plane,
// ConvNeXt's last stage at 64 px), which use each element of that operand 32 times at most (at a
// few rows they are bound by memory, not FMAs): on AVX2 kernels OpenBLAS ran AlexNet's first
// classifier layer ([2 × 9216] · [4096 × 9216]ᵀ) in 17 ms where BLIS took 7 and Eigen 9, while
// leading the large products (2026-12-04). A library named by steps 1 or 2 serves every size,
// except that REMATLAB_GEMM_SMALL (eigen, openblas, blis or rematlab) names the one for small
// products whatever chose the other. Processes calibrating at once take a file lock, so every
// process of a machine agrees. The choice never changes within a process, and a product's shape
// alone says which library serves it: each library is deterministic at a fixed thread count (static
// partitioning, its own packing), so a product of given operands gives the same bits every time
// it runs, and gradients stay bitwise equal across strategies whichever libraries serve them.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rl {

enum class GemmLibrary { Eigen, OpenBLAS, BLIS, RematLab };

const char* gemm_library_name(GemmLibrary lib);  // "eigen", "openblas", "blis", "rematlab"
// Every name select_gemm and REMATLAB_GEMM take, "auto" first: the one list the CLI's --gemm
// and the errors name.
const std::vector<std::string>& gemm_choice_names();

struct GemmLibraryInfo {
    GemmLibrary library = GemmLibrary::Eigen;
    bool available = false;
    std::string version;  // "Eigen 3.4.0", "OpenBLAS 0.3.21 … Haswell", "BLIS 0.9.0"
    std::string path;     // the shared object loaded; empty for Eigen
    std::string why_not;  // when not available: what is missing and how to install it
};

// The vector instruction set this build's own kernels (Eigen's GEMM, the elementwise loops) were
// compiled for: "AVX-512", "AVX2" (the portable x86-64-v3 build) or "SSE". Part of the
// calibration's key and of --version, so that a report says which build produced it.
const char* build_instruction_set();

// Every library, available or not (loading the BLAS ones on first call).
const std::vector<GemmLibraryInfo>& gemm_libraries();

// 2·m·n·k below which a product counts as small (a 128 × 128 × 488 product, or a 64-filter 3×3
// convolution on a 14×14 plane; a transformer's linear layers at a few hundred tokens and more
// are above it).
constexpr double kSmallGemmFlops = 16e6;
const char* small_gemm_label();  // "16 MFLOP": the bound as every text names it

// Thin: at most kThinRows rows (m) against op(B) of kThinOperandFloats or more, or at most
// kThinColumns columns (n) against A of that size, whatever their FLOPs. On AVX2 kernels (one
// thread) BLIS ran [2 × 128]·[128 × 128]ᵀ to [2 × 768]·[1000 × 768]ᵀ (a classifier at batch 2,
// ViT's narrowed last block) 2.4-5× faster than OpenBLAS, which the small class had chosen for
// them, but a head's [1 × 64]·[64 × 50] 2-4× slower (its per-call cost) (2026-12-04). It leads
// the same way up to 16 rows: [8 to 16 × 768]·[3072 × 768]ᵀ and their input gradients
// (ConvNeXt's last stage at 64 px, batch 2: 8 rows) at 104-118 GFLOP/s where OpenBLAS, which the
// large class had chosen, ran 55-98; from 24 rows the two are within 15 %, level at 48. And up to
// 32 columns, the products of convolutions on 4×4 and 2×2 planes at batch 2 (W·cols and Wᵀ·dY):
// 16 columns 113-128 against OpenBLAS's 88-103 for A of 37K to 2.6M floats, 32 columns 109-134
// against 92-117 but for one shape of ten (2026-12-05). The class's library is calibrated per
// machine like the others (native AVX-512 builds choose Eigen for it).
constexpr int64_t kThinRows = 16, kThinColumns = 32, kThinOperandFloats = int64_t{1} << 14;
bool is_thin_gemm(int64_t m, int64_t n, int64_t k);
const char* thin_gemm_label();  // "at most 16 rows or 32 columns": as every text names the class

struct GemmRate {
    GemmLibrary library = GemmLibrary::Eigen;
    double gflops = 0;  // geometric mean over the calibration shapes
};

struct GemmRates {
    std::vector<GemmRate> large, small, thin;  // per available library, on each class's shapes
};

struct GemmChoice {
    GemmLibrary library = GemmLibrary::Eigen;        // products of kSmallGemmFlops or more
    GemmLibrary small_library = GemmLibrary::Eigen;  // products under it
    GemmLibrary thin_library = GemmLibrary::Eigen;   // thin products, of any size (is_thin_gemm)
    std::string how;  // "--gemm", "REMATLAB_GEMM", "calibrated now", "cached calibration (date)"
    bool per_shape = false;       // products of kShapeChoiceMinFlops or more chosen per shape
    std::string per_shape_off;    // when not: why (a forced library, REMATLAB_GEMM_SHAPES=off)
    int threads = 1;              // the thread count of the calibration (0 when not calibrated)
    GemmRates rates;              // the calibration's figures, when one decided
    std::string cache_note;       // where the calibration is cached, or why it is not
    std::string summary() const;  // one line for --version and reports
};

// Asks for a library by name ("eigen", "openblas", "blis", "rematlab", or "auto" for the steps
// above).
// Throws rl::Error for an unknown name, for a library not available here (saying how to install
// it), or when another library already served a GEMM in this process.
void select_gemm(const std::string& name);

// The library serving this process, choosing it now if nothing has yet.
const GemmChoice& gemm_choice();

// Times every available library now at `threads` threads (0: the current setting) on the
// calibration shapes of all three classes; does not change the choice or the cache.
GemmRates calibrate_gemm(int threads = 0);

// The library that serves an m × n × k product in this process (choosing now if nothing has),
// by its class alone.
GemmLibrary gemm_library_for(int64_t m, int64_t n, int64_t k);

// Per shape (engine/cpu/gemm_shapes.cpp). Which library is fastest depends on more than a class
// says: on the AVX-512 host of 2026-12-05, Eigen (the calibrated choice for every class) packs a
// transposed operand whose rows are 4 KB apart at half its usual rate, and ResNeXt-101's 1×1
// convolutions' input gradients (Wᵀ·dY, [1024 × 1024]ᵀ · [1024 × 32]) ran 1.2-1.4× faster on BLIS
// (docs/benchmarks.md). So when the library is chosen by calibration (not forced by --gemm,
// REMATLAB_GEMM or REMATLAB_GEMM_SMALL, nor switched off by REMATLAB_GEMM_SHAPES=off), a product
// of kShapeChoiceMinFlops or more is timed on every available library the first time its shape
// (transposes, sizes, leading dimensions, threads) is seen, on its own operands into a scratch
// output, and that shape runs on the fastest from then on: its class's library unless another is
// more than kShapeChoiceMargin faster, and its class's without timing when one run takes longer
// than kShapeChoiceMaxRunSeconds (long products run near every library's peak). The choice is
// fixed before the shape's first result, so results never change within a process, and kept
// under a file lock in the calibration's cache directory (gemm-shapes.json, per calibration key)
// where the first process to time a shape decides it for every later one on this machine (without
// a writable cache directory each process times its shapes for itself).
//
// Down to 0.1 MFLOP (4 MFLOP before 2026-12-06): on an Intel Xeon with AVX-512 (Sapphire Rapids
// class), 100 of the 171 convolution node-directions of the zoo that ran below 0.9 of their
// fastest library's raw products ran at 0.9 or more of their own class's library: small products
// (a squeeze-excitation layer's [2 × 672] · [168 × 672]ᵀ, 1×1 convolutions on 2×2 and 4×4 planes)
// whose fastest library was not their class's, by up to 3× (docs/benchmarks.md). Down to 0.01
// MFLOP since the evening of 2026-12-06: EfficientNet-B0's squeeze-excitation reductions
// ([2 × 672] · [28 × 672]ᵀ, 75 kFLOP, 16 of them a step) took 7.2 µs on their class's library
// (Eigen, thin) and 1.2 µs on OpenBLAS. Shorter products are timed over more runs
// (kShapeChoiceMinRunsSeconds a library).
constexpr double kShapeChoiceMinFlops = 1e4;
constexpr double kShapeChoiceMinRunsSeconds = 3e-4;
constexpr double kShapeChoiceMargin = 0.03;
constexpr double kShapeChoiceMaxRunSeconds = 0.02;
constexpr int64_t kShapeChoiceMaxScratchFloats = int64_t{1} << 23;

struct GemmShapeStats {
    bool on = false;
    std::string why_off;   // when off: what switched it off
    std::string path;      // the cache file, or "" when there is none
    std::string no_path;   // then: why
    int cached = 0;        // shapes the file holds for this machine at this thread count
    int cached_moved = 0;  // of them, on another library than their class's
    int shapes = 0;        // shapes this process has run at kShapeChoiceMinFlops or more
    int moved = 0;         // of them, on another library than their class's
    int timed_here = 0;    // of them, timed by this process (the rest read from the file)
    std::vector<std::pair<GemmLibrary, int>> moved_to;  // where this process's moved ones run
    std::string summary() const;                        // one line for --version and reports
};
GemmShapeStats gemm_shape_stats();

// The library that serves this product in this process: its shape's when one was chosen (as
// above), else its class's. Does not time anything.
GemmLibrary gemm_library_for(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                             int64_t lda, int64_t ldb, int64_t ldc);

// For tests: drops this process's per-shape choices, so the next products read the cache file
// (or time) again, as a new process would.
void forget_gemm_shape_choices();

// C[m, n] = alpha · op(A) · op(B) + beta · C, every matrix row-major with the given leading
// dimension; op(X) is X or Xᵀ. A is [m, k] (or [k, m] when trans_a), B is [k, n] (or [n, k]).
// beta is 0 or 1: with beta 0, C is only written. Runs on the library chosen for its size
// (gemm_library_for) with the CPU thread count, single-threaded inside an OpenMP parallel region.
void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The same product on `lib`, whatever the process's choice: for tests and benchmarks that set
// the libraries side by side. Throws rl::Error when `lib` is not available.
void sgemm_on(GemmLibrary lib, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              float alpha, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
              float* c, int64_t ldc);

// Passes the CPU thread count on to the BLAS libraries loaded (set_cpu_threads calls it).
void set_gemm_threads(int threads);

// The multiply-add units' rate on this build's widest vectors (engine/cpu/fma_peak.cpp):
// independent chains on registers, no memory, on `threads` threads at once, the best of 5
// rounds. No product can pass it; a library's rate over it is how far that library goes.
struct FmaPeak {
    double gflops = 0;  // all threads together
    int lanes = 0;      // floats a vector: 16 (AVX-512), 8 (AVX2), 4 (SSE)
    int chains = 0;     // multiply-add chains in flight on each thread
    int threads = 1;
};
FmaPeak measure_fma_peak(int threads = 1);

}  // namespace rl
