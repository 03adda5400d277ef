#include "engine/shape.h"

#include "engine/errors.h"

namespace rl {

std::string_view dtype_name(DType t) {
    return t == DType::F32 ? "f32" : "i32";
}

bool dtype_from_name(std::string_view name, DType& out) {
    if (name == "f32" || name == "float32") {
        out = DType::F32;
        return true;
    }
    if (name == "i32" || name == "int32") {
        out = DType::I32;
        return true;
    }
    return false;
}

int64_t Shape::numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

std::string format_dims(const Shape& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.dims.size(); ++i) {
        if (i) out += ",";
        out += std::to_string(s.dims[i]);
    }
    return out + "]";
}

std::string format_type(DType t, const Shape& s) {
    return std::string(dtype_name(t)) + format_dims(s);
}

int64_t checked_numel(const Shape& s, std::string_view what) {
    constexpr int64_t kLimit = int64_t{1} << 62;
    int64_t n = 1;
    for (int64_t d : s.dims) {
        if (d <= 0)
            throw Error(std::string(what) + ": shape " + format_dims(s) +
                        " has a dimension that is not positive");
        if (n > kLimit / d)
            throw Error(std::string(what) + ": shape " + format_dims(s) +
                        " has too many elements (overflows 2^62); use smaller sizes");
        n *= d;
    }
    return n;
}

uint64_t checked_bytes(DType t, const Shape& s, std::string_view what) {
    // 2^62 elements pass checked_numel, but 2^62 four-byte elements are 2^64 bytes, which wraps
    // to 0: the byte count has the same 2^62 limit.
    constexpr uint64_t kLimit = uint64_t{1} << 62;
    const auto n = static_cast<uint64_t>(checked_numel(s, what));
    if (n > kLimit / dtype_size(t))
        throw Error(std::string(what) + ": shape " + format_dims(s) +
                    " takes too many bytes (overflows 2^62); use smaller sizes");
    return n * dtype_size(t);
}

}  // namespace rl
