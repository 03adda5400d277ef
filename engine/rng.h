#pragma once
// A small deterministic generator (SplitMix64, Steele et al. 2014), so that seeded parameters and
// inputs are the same bits on every platform and standard library.
#include <cstdint>
#include <string_view>

namespace rl {

constexpr uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ull;
// SplitMix64's two multiplying rounds, before its last xor-shift: z ^ (z >> 31) of this is the
// output. Its top 33 bits are the output's (the shift moves nothing into them), which is all a
// dropout draw reads.
constexpr uint64_t splitmix_rounds(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    return (z ^ (z >> 27)) * 0x94D049BB133111EBull;
}
// SplitMix64's output for the state z.
constexpr uint64_t splitmix_output(uint64_t z) {
    z = splitmix_rounds(z);
    return z ^ (z >> 31);
}
// The state the stream `key` reaches after index + 1 steps.
constexpr uint64_t splitmix_counter(uint64_t key, uint64_t index) {
    return key + (index + 1) * kSplitMixGamma;
}

class SplitMix64 {
  public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t next() { return splitmix_output(state_ += kSplitMixGamma); }
    // Uniform in [-1, 1), exactly representable in float (24 random bits).
    float symmetric() { return static_cast<float>(next() >> 40) * (2.0f / 16777216.0f) - 1.0f; }
    uint64_t below(uint64_t n) { return next() % n; }

  private:
    uint64_t state_;
};

// FNV-1a: a stable hash of a name, to derive one stream per parameter.
constexpr uint64_t stable_hash(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ull;
    }
    return h;
}

// The index-th number of the stream `key`, computed directly (SplitMix64's output function of
// key + (index + 1)·γ, the state it would reach after index + 1 steps). Counter-based, so any
// element's draw is a function of (key, index) alone: dropout recomputes its mask from it.
constexpr uint64_t counter_hash(uint64_t key, uint64_t index) {
    return splitmix_output(splitmix_counter(key, index));
}

// Dropout's mask: element `index` of the node keyed by dropout_key(graph seed, node name) is
// kept when the top 24 bits of its hash are at least dropout_threshold(p), so with probability
// 1 - threshold / 2^24 (p rounded to a multiple of 2^-24).
constexpr uint64_t dropout_key(uint64_t seed, std::string_view node_name) {
    return counter_hash(seed, 0) ^ stable_hash(node_name);
}
constexpr uint32_t dropout_threshold(double p) {
    return static_cast<uint32_t>(p * 16777216.0 + 0.5);
}
constexpr bool dropout_keeps(uint64_t key, uint64_t index, uint32_t threshold) {
    return (counter_hash(key, index) >> 40) >= threshold;
}
// The same draw from the counter splitmix_counter(key, index) itself, which a loop over
// consecutive indices advances by γ an element rather than multiplying: a 64-bit product is three
// 32-bit ones on AVX2, and the CPU kernels draw millions of these a step
// (engine/cpu/tensor_ops.cpp). It reads splitmix_rounds' top 24 bits, which are counter_hash's; the
// tests hold the kernels' masks to dropout_keeps, the definition, and the CUDA kernels use it.
constexpr bool dropout_keeps_counter(uint64_t counter, uint32_t threshold) {
    return (splitmix_rounds(counter) >> 40) >= threshold;
}

}  // namespace rl
