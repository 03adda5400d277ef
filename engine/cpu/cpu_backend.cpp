// The CPU backend: 64-byte aligned host memory and a kernel table indexed by OpKind.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/cpu/kernels.h"
#include "engine/cpu/pairwise.h"
#include "engine/errors.h"
#include "engine/gemm.h"
#include "engine/huge_pages.h"
#include "engine/kernel_table.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace rl {

namespace cpu {

void column_sums(const float* src, int64_t rows, int64_t cols, float* dst) {
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (cols + kBlock - 1) / kBlock;
    parallel_for(blocks, rows * kBlock, [&](int64_t b) {
        const int64_t j0 = b * kBlock, w = std::min(kBlock, cols - j0);
        pairwise_over_rows<1>(rows, w, {dst + j0}, [&](int64_t r, const std::array<float*, 1>& d) {
            ArrMap(d[0], w) += ConstArrMap(src + r * cols + j0, w);
        });
    });
}

namespace {

constexpr KernelTable<ForwardKernel, BackwardKernel> kTable = [] {
    KernelTable<ForwardKernel, BackwardKernel> t{};
    t[op_index(OpKind::Linear)] = {linear_forward, linear_backward};
    t[op_index(OpKind::MatMul)] = {matmul_forward, matmul_backward};
    t[op_index(OpKind::Add)] = {add_forward, add_backward};
    t[op_index(OpKind::Relu)] = {relu_forward, relu_backward};
    t[op_index(OpKind::Gelu)] = {gelu_forward, gelu_backward};
    t[op_index(OpKind::Tanh)] = {tanh_forward, tanh_backward};
    t[op_index(OpKind::Sigmoid)] = {sigmoid_forward, sigmoid_backward};
    t[op_index(OpKind::LayerNorm)] = {layernorm_forward, layernorm_backward};
    t[op_index(OpKind::Softmax)] = {softmax_forward, softmax_backward};
    t[op_index(OpKind::Reshape)] = {reshape_forward, reshape_backward};
    t[op_index(OpKind::Transpose)] = {transpose_forward, transpose_backward};
    t[op_index(OpKind::SumSquares)] = {sum_squares_forward, sum_squares_backward};
    t[op_index(OpKind::CrossEntropy)] = {cross_entropy_forward, cross_entropy_backward};
    t[op_index(OpKind::Sin)] = {sin_forward, sin_backward};
    t[op_index(OpKind::Cos)] = {cos_forward, cos_backward};
    t[op_index(OpKind::Conv2d)] = {conv2d_forward, conv2d_backward};
    t[op_index(OpKind::MaxPool2d)] = {maxpool2d_forward, maxpool2d_backward};
    t[op_index(OpKind::AvgPool2d)] = {avgpool2d_forward, avgpool2d_backward};
    t[op_index(OpKind::BatchNorm)] = {batchnorm_forward, batchnorm_backward};
    t[op_index(OpKind::UpsampleNearest2d)] = {upsample_nearest2d_forward,
                                              upsample_nearest2d_backward};
    t[op_index(OpKind::Concat)] = {concat_forward, concat_backward};
    t[op_index(OpKind::Flatten)] = {flatten_forward, flatten_backward};
    t[op_index(OpKind::Dropout)] = {dropout_forward, dropout_backward};
    // broadcasting binary ops, activations, reduce_mean
    t[op_index(OpKind::Sub)] = {sub_forward, sub_backward};
    t[op_index(OpKind::Mul)] = {mul_forward, mul_backward};
    t[op_index(OpKind::Div)] = {div_forward, div_backward};
    t[op_index(OpKind::Clip)] = {clip_forward, clip_backward};
    t[op_index(OpKind::HardSigmoid)] = {hard_sigmoid_forward, hard_sigmoid_backward};
    t[op_index(OpKind::HardSwish)] = {hard_swish_forward, hard_swish_backward};
    t[op_index(OpKind::GeluTanh)] = {gelu_tanh_forward, gelu_tanh_backward};
    t[op_index(OpKind::ReduceMean)] = {reduce_mean_forward, reduce_mean_backward};
    // indexing
    t[op_index(OpKind::Embedding)] = {embedding_forward, embedding_backward};
    t[op_index(OpKind::Slice)] = {slice_forward, slice_backward};
    t[op_index(OpKind::CausalMask)] = {causal_mask_forward, causal_mask_backward};
    t[op_index(OpKind::Pad)] = {pad_forward, pad_backward};
    // large-model training: dropout masks, tensor-parallel collectives
    t[op_index(OpKind::DropoutMask)] = {dropout_mask_forward, dropout_mask_backward};
    t[op_index(OpKind::Collective)] = {collective_forward, collective_backward};
    // plan-only networks: no kernels (both throw)
    t[op_index(OpKind::Opaque)] = {opaque_forward, opaque_backward};
    // Swin V2 (ONNX import)
    t[op_index(OpKind::Exp)] = {exp_forward, exp_backward};
    t[op_index(OpKind::L2Normalize)] = {l2_normalize_forward, l2_normalize_backward};
    t[op_index(OpKind::Gather)] = {gather_forward, gather_backward};
    t[op_index(OpKind::Parameter)] = {parameter_forward, parameter_backward};
    t[op_index(OpKind::Constant)] = {constant_forward, constant_backward};
    return t;
}();

static_assert(table_complete(kTable), "every OpKind needs a CPU forward and backward kernel");

// OpenBLAS's and BLIS's OpenMP builds (engine/gemm.h) take their team size from the calling
// thread's OpenMP setting, so a kernel run from a worker thread (the GUI's) first gets ours; a
// no-op when it already has it.
inline void match_blas_threads() {
    const int n = Eigen::nbThreads();
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

// Released host buffers are kept for reuse, by exact size. A step frees and allocates the same
// sizes every run; handed back to glibc, buffers of 128 KiB and more went back to the kernel
// (fresh mmaps, heap trimming), so every step paid its page faults again: on
// mlp:depth=16,width=256,batch=256, ~1 800 faults and ~5.8 ms of system time in a 21 ms step
// (docs/benchmarks.md). The tracking allocator still counts every request and release, so the
// accounting and the cap are unchanged; this only decides where the bytes come from. Kernels
// never read an output buffer before writing it, so a reused buffer's old contents change no
// bit. A released buffer is kept while the buffers held (live and kept) stay within twice the
// most bytes ever live at once, or kLimit if that is more; the rest go back at once. A step
// needs more distinct buffers than its peak (its forward's activations and its backward's
// gradients are never live together, and a parameter and its gradient have the same size), so
// a bound at the peak itself let the parameters, loaded first, take the gradients' kept
// buffers and every step faulted its gradients in again. A fixed 1 GiB was too little for the
// large models: vgg16 at 224 px holds 1.27 GB at its peak, and its 400 MB classifier weight
// gradient was faulted in on every step (docs/benchmarks.md). Off under AddressSanitizer,
// which should see every free.
//
// Buffers of a huge page (2 MiB) and more are mapped on their own and ask for transparent huge
// pages (engine/huge_pages.h: a first touch then faults once per 2 MiB, not per 4 KiB, and a
// product that walks a large weight misses the TLB less).
class HostBuffers {
  public:
    static constexpr uint64_t kAlign = 64;
    static constexpr uint64_t kLimit = uint64_t{1} << 30;

    HostBuffers() = default;
    HostBuffers(const HostBuffers&) = delete;
    HostBuffers& operator=(const HostBuffers&) = delete;
    ~HostBuffers() {
        for (auto& [size, list] : free_)
            for (void* p : list) unmap(p, size);
    }

    void* take(uint64_t bytes) {
        // aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a
        // distinct pointer.
        const uint64_t size = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
        if (size < bytes) throw Error("cannot allocate " + std::to_string(bytes) + " bytes");
        {
            std::lock_guard lock(mutex_);
            auto it = free_.find(size);
            if (it != free_.end() && !it->second.empty()) {
                void* p = it->second.back();
                it->second.pop_back();
                cached_ -= size;
                sizes_[p] = size;
                note_live(size);
                return p;
            }
        }
        void* p = mapped(size) ? map_huge(size) : std::aligned_alloc(kAlign, size);
        if (!p)
            throw Error("the host is out of memory: allocating " + std::to_string(bytes) +
                        " bytes failed; try a smaller network or batch, or a memory cap");
        std::lock_guard lock(mutex_);
        sizes_[p] = size;
        note_live(size);
        return p;
    }

    void give(void* p) {
        if (!p) return;
        std::lock_guard lock(mutex_);
        auto it = sizes_.find(p);
        assert(it != sizes_.end());
        const uint64_t size = it->second;
        sizes_.erase(it);
        live_ -= size;
        if (!kCache || live_ + cached_ + size > std::max(kLimit, 2 * most_live_)) {
            unmap(p, size);
            return;
        }
        free_[size].push_back(p);
        cached_ += size;
    }

  private:
#if defined(__SANITIZE_ADDRESS__)  // GCC's -fsanitize=address
    static constexpr bool kCache = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)  // clang's
    static constexpr bool kCache = false;
#else
    static constexpr bool kCache = true;
#endif
#else
    static constexpr bool kCache = true;
#endif
    // Under AddressSanitizer every buffer comes from the heap, where it checks each access.
    static bool mapped(uint64_t size) {
        return kCache && size >= kHugePage;
    }
    static void unmap(void* p, uint64_t size) {
        if (mapped(size))
            unmap_huge(p, size);
        else
            std::free(p);
    }
    void note_live(uint64_t size) {
        live_ += size;
        most_live_ = std::max(most_live_, live_);
    }

    std::mutex mutex_;
    std::unordered_map<void*, uint64_t> sizes_;              // live buffers
    std::unordered_map<uint64_t, std::vector<void*>> free_;  // kept, by size
    uint64_t cached_ = 0;
    uint64_t live_ = 0, most_live_ = 0;  // bytes handed out and not yet given back
};

class CpuBackend final : public Backend {
  public:
    std::string name() const override { return "cpu"; }

    void* allocate(uint64_t bytes) override { return buffers_.take(bytes); }
    void release(void* p) override { buffers_.give(p); }

    void forward(const ForwardCall& call) override {
        match_blas_threads();
        kTable[op_index(call.node.op)].forward(call);
    }
    void backward(const BackwardCall& call) override {
        match_blas_threads();
        kTable[op_index(call.node.op)].backward(call);
    }

    void copy_to_host(void* dst, const void* src, uint64_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }
    void copy_from_host(void* dst, const void* src, uint64_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }
    void add_into(float* dst, const float* src, int64_t n) override {
        for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
    }
    // CLFLUSH on every cache line (SSE2: every x86-64 has it), then a fence so that the next op
    // starts after the lines have left. Elsewhere nothing.
    void evict_from_caches(const void* p, uint64_t bytes) override {
#if defined(__x86_64__) || defined(__i386__)
        const auto* c = static_cast<const char*>(p);
        constexpr uint64_t kCacheLine = 64;
        for (uint64_t i = 0; i < bytes; i += kCacheLine) _mm_clflush(c + i);
        if (bytes) _mm_clflush(c + bytes - 1);  // the last line, where p is not line-aligned
        _mm_mfence();
#else
        (void)p;
        (void)bytes;
#endif
    }

  private:
    HostBuffers buffers_;
};

}  // namespace
}  // namespace cpu

namespace {
// Heap allocations outside the tracking allocator (Eigen's GEMM takes its packing buffers from
// the heap, once per product) still cost page faults with glibc's defaults: freeing a block at
// the top of the heap can trim it, and the next allocation faults its pages in again. ~3 800
// faults per sqrt-n step on mlp:depth=16,width=256,batch=256, a third of the step
// (docs/benchmarks.md). Keep freed memory in the process instead (trim only above 1 GiB of free
// heap) and take blocks up to 32 MiB (glibc's maximum) from the heap rather than fresh mmaps.
// Process-wide, set once; other allocators ignore mallopt.
void keep_freed_memory() {
#ifdef __GLIBC__
    static std::once_flag once;
    std::call_once(once, [] {
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
        mallopt(M_MMAP_THRESHOLD, 32 << 20);
    });
#endif
}
}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
    keep_freed_memory();
    Eigen::initParallel();
    if (threads > 0) set_cpu_threads(threads);
    gemm_choice();  // chosen before the first kernel: a bad REMATLAB_GEMM is an error here
    return std::make_unique<cpu::CpuBackend>();
}

// Eigen keeps its thread count in a process-wide setting and our own loops pass num_threads
// explicitly, so the count also holds for kernels run from a worker thread (omp_set_num_threads
// alone only sets the calling thread's default).
void set_cpu_threads(int threads) {
    if (threads <= 0) {
        Eigen::setNbThreads(0);  // back to the OpenMP default
    } else {
        Eigen::setNbThreads(threads);
        omp_set_num_threads(threads);
    }
    // Process-wide in OpenBLAS and BLIS; at 1 they stay single-threaded whatever OpenMP says.
    set_gemm_threads(Eigen::nbThreads());
}

int cpu_threads() {
    return Eigen::nbThreads();
}

namespace cpu {

bool side_by_side_pays(int64_t macs_each) {
    return macs_each >= kSideBySideMinMacs && cpu_threads() == 2 && !omp_in_parallel();
}

void side_by_side(const std::function<void()>& first, const std::function<void()>& second) {
    std::exception_ptr failed[2];
    auto run = [&](int which) {
        try {
            (which == 0 ? first : second)();
        } catch (...) {
            failed[which] = std::current_exception();
        }
    };
#pragma omp parallel num_threads(2)
    {
        if (omp_get_num_threads() < 2) {  // the runtime gave one thread: both on it, in order
            run(0);
            run(1);
        } else if (omp_get_thread_num() < 2) {
            run(omp_get_thread_num());
        }
    }
    for (const std::exception_ptr& e : failed)
        if (e) std::rethrow_exception(e);
}

}  // namespace cpu

}  // namespace rl
