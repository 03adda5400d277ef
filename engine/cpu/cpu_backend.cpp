// The CPU backend: 64-byte aligned host memory and a kernel table indexed by OpKind.
#include <omp.h>

#include <array>
#include <cassert>
#include <cstdlib>
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/errors.h"

namespace rl {

namespace cpu {

void column_sums(const float* src, int64_t rows, int64_t cols, float* dst) {
    constexpr int64_t kBlock = 256;
    const int64_t blocks = (cols + kBlock - 1) / kBlock;
    parallel_for(blocks, rows * kBlock, [&](int64_t b) {
        const int64_t j0 = b * kBlock, w = std::min(kBlock, cols - j0);
        ArrMap out(dst + j0, w);
        out.setZero();
        for (int64_t r = 0; r < rows; ++r) out += ConstArrMap(src + r * cols + j0, w);
    });
}

namespace {

// `set` rather than a null test of the pointers in table_complete(): under GCC's
// -fsanitize=null (the asan preset) comparing a function pointer with null is not a constant
// expression.
struct Kernels {
    ForwardKernel forward = nullptr;
    BackwardKernel backward = nullptr;
    bool set = false;
    constexpr Kernels() = default;
    constexpr Kernels(ForwardKernel f, BackwardKernel b) : forward(f), backward(b), set(true) {}
};

constexpr size_t index(OpKind k) {
    return static_cast<size_t>(k);
}

constexpr std::array<Kernels, kNumOpKinds> kTable = [] {
    std::array<Kernels, kNumOpKinds> t{};
    t[index(OpKind::Linear)] = {linear_forward, linear_backward};
    t[index(OpKind::MatMul)] = {matmul_forward, matmul_backward};
    t[index(OpKind::Add)] = {add_forward, add_backward};
    t[index(OpKind::Relu)] = {relu_forward, relu_backward};
    t[index(OpKind::Gelu)] = {gelu_forward, gelu_backward};
    t[index(OpKind::Tanh)] = {tanh_forward, tanh_backward};
    t[index(OpKind::Sigmoid)] = {sigmoid_forward, sigmoid_backward};
    t[index(OpKind::LayerNorm)] = {layernorm_forward, layernorm_backward};
    t[index(OpKind::Softmax)] = {softmax_forward, softmax_backward};
    t[index(OpKind::Reshape)] = {reshape_forward, reshape_backward};
    t[index(OpKind::Transpose)] = {transpose_forward, transpose_backward};
    t[index(OpKind::SumSquares)] = {sum_squares_forward, sum_squares_backward};
    t[index(OpKind::CrossEntropy)] = {cross_entropy_forward, cross_entropy_backward};
    t[index(OpKind::Sin)] = {sin_forward, sin_backward};
    t[index(OpKind::Cos)] = {cos_forward, cos_backward};
    t[index(OpKind::Conv2d)] = {conv2d_forward, conv2d_backward};
    t[index(OpKind::MaxPool2d)] = {maxpool2d_forward, maxpool2d_backward};
    t[index(OpKind::AvgPool2d)] = {avgpool2d_forward, avgpool2d_backward};
    t[index(OpKind::BatchNorm)] = {batchnorm_forward, batchnorm_backward};
    t[index(OpKind::UpsampleNearest2d)] = {upsample_nearest2d_forward, upsample_nearest2d_backward};
    t[index(OpKind::Concat)] = {concat_forward, concat_backward};
    t[index(OpKind::Flatten)] = {flatten_forward, flatten_backward};
    t[index(OpKind::Dropout)] = {dropout_forward, dropout_backward};
    return t;
}();

constexpr bool table_complete() {
    for (const Kernels& k : kTable)
        if (!k.set) return false;
    return true;
}
static_assert(table_complete(), "every OpKind needs a CPU forward and backward kernel");

class CpuBackend final : public Backend {
  public:
    std::string name() const override { return "cpu"; }

    void* allocate(uint64_t bytes) override {
        constexpr uint64_t kAlign = 64;
        // aligned_alloc wants a multiple of the alignment; a zero-byte request still gets a
        // distinct pointer.
        const uint64_t size = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
        if (size < bytes) throw Error("cannot allocate " + std::to_string(bytes) + " bytes");
        void* p = std::aligned_alloc(kAlign, size);
        if (!p)
            throw Error("the host is out of memory: allocating " + std::to_string(bytes) +
                        " bytes failed; try a smaller network or batch, or a memory cap");
        return p;
    }

    void release(void* p) override { std::free(p); }

    void forward(const ForwardCall& call) override { kTable[index(call.node.op)].forward(call); }
    void backward(const BackwardCall& call) override { kTable[index(call.node.op)].backward(call); }

    void copy_to_host(void* dst, const void* src, uint64_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }
    void copy_from_host(void* dst, const void* src, uint64_t bytes) override {
        if (bytes) std::memcpy(dst, src, bytes);
    }
};

}  // namespace
}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend(int threads) {
    Eigen::initParallel();
    if (threads > 0) set_cpu_threads(threads);
    return std::make_unique<cpu::CpuBackend>();
}

// Eigen keeps its thread count in a process-wide setting and our own loops pass num_threads
// explicitly, so the count also holds for kernels run from a worker thread (omp_set_num_threads
// alone only sets the calling thread's default).
void set_cpu_threads(int threads) {
    if (threads <= 0) {
        Eigen::setNbThreads(0);  // back to the OpenMP default
        return;
    }
    Eigen::setNbThreads(threads);
    omp_set_num_threads(threads);
}

int cpu_threads() {
    return Eigen::nbThreads();
}

}  // namespace rl
