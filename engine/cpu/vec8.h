#pragma once
// Eight floats as one GCC vector: the direct convolution kernels (conv.cpp, conv_grouped.cpp)
// and the column matrix's moves (im2col.cpp) write on it, and the compiler maps it onto one AVX
// register (two SSE registers in a build without AVX); sixteen likewise (V16). Loads and stores
// go through memcpy: any alignment.
#include <cstring>

namespace rl::cpu {

constexpr int kVec8Lanes = 8;
using V8 = float __attribute__((vector_size(kVec8Lanes * sizeof(float))));

// Eight ints: the lane indices of a shuffle of V8s (__builtin_shuffle).
using V8i = int __attribute__((vector_size(kVec8Lanes * sizeof(int))));

inline V8 load8(const float* p) {
    V8 v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store8(float* p, V8 v) {
    std::memcpy(p, &v, sizeof v);
}

// The 16 floats at p as pairs: their even and odd elements (a stride-2 row's two column phases,
// the two columns of 2 × 2 windows), and back.
inline void split_pairs(const float* p, V8& even, V8& odd) {
    const V8 lo = load8(p), hi = load8(p + kVec8Lanes);
    even = __builtin_shuffle(lo, hi, V8i{0, 2, 4, 6, 8, 10, 12, 14});
    odd = __builtin_shuffle(lo, hi, V8i{1, 3, 5, 7, 9, 11, 13, 15});
}
inline void join_pairs(float* p, V8 even, V8 odd) {
    store8(p, __builtin_shuffle(even, odd, V8i{0, 8, 1, 9, 2, 10, 3, 11}));
    store8(p + kVec8Lanes, __builtin_shuffle(even, odd, V8i{4, 12, 5, 13, 6, 14, 7, 15}));
}

// Four floats and four doubles: a float vector widened to double lane by lane
// (__builtin_convertvector), for sums kept in double in a fixed order (binary.cpp's repeat sums,
// batch norm's statistics).
using F4 = float __attribute__((vector_size(4 * sizeof(float))));
using D4 = double __attribute__((vector_size(4 * sizeof(double))));

// Sixteen floats: one AVX-512 register, the direct kernels' wide tiles where the build has
// AVX-512 (conv_grouped.cpp). Defined only in such builds: in others, passing one by value would
// change the calling convention (GCC's -Wpsabi).
constexpr int kVec16Lanes = 16;
#if defined(__AVX512F__)
using V16 = float __attribute__((vector_size(kVec16Lanes * sizeof(float))));
#endif

// The vector of W floats and its loads and stores, for kernels written once for both widths.
template <int W>
struct Vec;
template <>
struct Vec<kVec8Lanes> {
    using T = V8;
    static T load(const float* p) { return load8(p); }
    static void store(float* p, T v) { store8(p, v); }
};
#if defined(__AVX512F__)
template <>
struct Vec<kVec16Lanes> {
    using T = V16;
    static T load(const float* p) {
        T v;
        std::memcpy(&v, p, sizeof v);
        return v;
    }
    static void store(float* p, T v) { std::memcpy(p, &v, sizeof v); }
};
#endif

}  // namespace rl::cpu
