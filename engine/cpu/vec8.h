#pragma once
// Eight floats as one GCC vector: the direct convolution kernels (conv.cpp, conv_grouped.cpp)
// write their multiply-adds on it, and the compiler maps it onto one AVX register (two SSE
// registers in a build without AVX). Loads and stores go through memcpy: any alignment.
#include <cstring>

namespace rl::cpu {

constexpr int kVec8Lanes = 8;
using V8 = float __attribute__((vector_size(kVec8Lanes * sizeof(float))));

inline V8 load8(const float* p) {
    V8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store8(float* p, V8 v) {
    std::memcpy(p, &v, sizeof v);
}

}  // namespace rl::cpu
