#pragma once
// NumPy .npy files (format 1.0, little-endian float32 / int32, C order; int64 read as indices).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/shape.h"

namespace rl {

// Writes atomically (temporary file, then rename). Throws rl::Error naming the path on failure.
void write_npy(const std::string& path, const float* data, const Shape& shape);
void write_npy(const std::string& path, const int32_t* data, const Shape& shape);
// Throws rl::Error naming the path and the problem (not a .npy, wrong dtype, Fortran order, ...).
std::vector<float> read_npy_f32(const std::string& path, Shape& shape_out);
// Integer indices (token ids, positions) from an int64 or int32 .npy file, widened to int64;
// any other dtype is refused with a message naming the path and the dtype found.
std::vector<int64_t> read_npy_indices(const std::string& path, Shape& shape_out);

}  // namespace rl
