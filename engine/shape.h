#pragma once
// Tensor shapes, element types and byte sizes. Every byte size in RematLab is computed here, with
// overflow checks, so that an absurd network is refused before anything is allocated.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rl {

// Element types of values. Every byte count derives from dtype_size(), never from a literal 4, so
// a narrower activation type (f16, bf16) is one more enumerator and one more case here.
// I32 holds integer indices: class labels, token ids, positions (read from int64 or int32 .npy
// files and checked against their range before a run).
// BF16 and F16 are floating activation types (planned at their size; the CPU executes an f32
// copy); U8 holds a dropout mask (one byte per element, as Megatron keeps it). Parameters are
// always F32.
enum class DType : uint8_t { F32, I32, BF16, F16, U8 };

constexpr uint64_t dtype_size(DType t) {
    switch (t) {
        case DType::BF16:
        case DType::F16:
            return 2;
        case DType::U8:
            return 1;
        case DType::F32:
        case DType::I32:
            break;
    }
    return 4;
}
constexpr bool is_floating(DType t) {
    return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}
std::string_view dtype_name(DType t);  // "f32", "i32", "bf16", "f16", "u8"
bool dtype_from_name(std::string_view name, DType& out);

using Dims = std::vector<int64_t>;

struct Shape {
    Dims dims;

    Shape() = default;
    Shape(std::initializer_list<int64_t> d) : dims(d) {}
    explicit Shape(Dims d) : dims(std::move(d)) {}

    int rank() const { return static_cast<int>(dims.size()); }
    int64_t operator[](int i) const { return dims[static_cast<size_t>(i < 0 ? rank() + i : i)]; }
    // Product of the dimensions (1 for a scalar). Assumes the shape passed checked_numel.
    int64_t numel() const;
    bool operator==(const Shape&) const = default;
};

// "[256,1024]"
std::string format_dims(const Shape& s);
// "f32[256,1024]" — the notation of jax.ad_checkpoint.print_saved_residuals.
std::string format_type(DType t, const Shape& s);

// Number of elements; throws rl::Error naming `what` if a dimension is not positive or the
// product overflows 2^62.
int64_t checked_numel(const Shape& s, std::string_view what);
// Bytes of a tensor; throws rl::Error naming `what` and the size on overflow.
uint64_t checked_bytes(DType t, const Shape& s, std::string_view what);

}  // namespace rl
