// Per-shape choice of the GEMM library (engine/gemm.h, kShapeChoiceMinFlops): each product shape
// of kShapeChoiceMinFlops or more is timed on every available library the first time it is seen
// and runs on the fastest from then on, as FFTW's planner keeps its "wisdom" per transform size
// (Frigo and Johnson, "The design and implementation of FFTW3", Proc. IEEE 93(2), 2005) and
// cuDNN's benchmark mode its algorithm per convolution shape. The class calibration
// (engine/cpu/gemm.cpp) stays the default and the fallback; this corrects it where one shape
// differs from its class.
//
// The file gemm-shapes.json beside the calibration holds, per calibration key (CPU, build,
// library versions, threads), each shape's library and the times that chose it. A process that
// meets a shape it has not chosen takes the file's lock, reads the file, and times the shape only
// when no entry is there, then writes it back before releasing the lock: the first process to
// time a shape decides it for every later one, so two processes never run one shape on two
// libraries while the file stays.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/cpu/gemm_internal.h"
#include "engine/errors.h"

namespace rl {
namespace {

struct ProductShape {
    bool ta = false, tb = false;
    int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    int threads = 1;  // the threads the product runs on: 1 inside a parallel region
    bool operator==(const ProductShape& o) const {
        return ta == o.ta && tb == o.tb && m == o.m && n == o.n && k == o.k && lda == o.lda &&
               ldb == o.ldb && ldc == o.ldc && threads == o.threads;
    }
    // The name in the cache file (the threads are in the entry's key): "TN 1024x32x1024 ld
    // 1024,32,32", op(A) transposed, op(B) not.
    std::string name() const {
        std::ostringstream o;
        o << (ta ? 'T' : 'N') << (tb ? 'T' : 'N') << ' ' << m << 'x' << n << 'x' << k << " ld "
          << lda << ',' << ldb << ',' << ldc;
        return o.str();
    }
};

struct ShapeHash {
    size_t operator()(const ProductShape& s) const {
        size_t h = 1469598103934665603ull;  // FNV-1a over the fields
        for (int64_t x :
             {int64_t{s.ta}, int64_t{s.tb}, s.m, s.n, s.k, s.lda, s.ldb, s.ldc, int64_t{s.threads}})
            h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
        return h;
    }
};

struct Chosen {
    GemmLibrary library = GemmLibrary::Eigen;
    GemmLibrary class_library = GemmLibrary::Eigen;
    bool timed_here = false;
};

struct Choices {
    std::shared_mutex mu;
    std::unordered_map<ProductShape, Chosen, ShapeHash> of;
};

Choices& choices() {
    static Choices c;
    return c;
}

// Times `s` on every available library into a scratch output; the fastest, its class's library
// unless another beats it by more than kShapeChoiceMargin. Fills `ms` with each library's best.
GemmLibrary time_shape(const ProductShape& s, GemmLibrary class_library, const float* a,
                       const float* b, float beta, nlohmann::json& ms) {
    std::vector<float> c(static_cast<size_t>(s.m * s.n), 0.f);
    auto once = [&](GemmLibrary lib) {
        const auto t0 = std::chrono::steady_clock::now();
        gemm_detail::library_sgemm(lib, s.ta, s.tb, s.m, s.n, s.k, 1.f, a, s.lda, b, s.ldb, beta,
                                   c.data(), s.n);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    // A product this long runs near every library's peak: its class's, untimed further. Judged
    // on a second run: a library's first call in a process also pays its set-up (BLIS's first
    // thin product on AVX2 kernels took over 20 ms).
    once(class_library);
    const double first = once(class_library);
    if (first > kShapeChoiceMaxRunSeconds) return class_library;
    // Best of 3 runs each; a short product gets more, up to kShapeChoiceMinRunsSeconds a library
    // (at most 20 runs), so that one slow run of a few µs does not decide it.
    const int rounds = static_cast<int>(
        std::clamp(std::ceil(kShapeChoiceMinRunsSeconds / std::max(first, 1e-9)), 3.0, 20.0));
    std::map<GemmLibrary, double> best;
    for (int round = 0; round < rounds; ++round)  // the libraries alternate: a slow spell hits all
        for (const GemmLibraryInfo& i : gemm_libraries()) {
            if (!i.available) continue;
            if (round == 0 && i.library != class_library) once(i.library);  // its first run
            const double t = once(i.library);
            auto [it, fresh] = best.emplace(i.library, t);
            if (!fresh) it->second = std::min(it->second, t);
        }
    GemmLibrary fastest = class_library;
    for (const auto& [lib, t] : best) {
        ms[gemm_library_name(lib)] = std::round(t * 1e6) / 1e3;
        if (t < best[fastest]) fastest = lib;
    }
    return best[class_library] <= best[fastest] * (1 + kShapeChoiceMargin) ? class_library
                                                                           : fastest;
}

constexpr const char* kShapesFile = "gemm-shapes.json";

// Reads the file's shapes for `key` into `into` (each with its library, when available here);
// *moved counts those on another library than their class's.
void read_entry(const gemm_detail::LockedCacheFile& file, const std::string& key,
                std::unordered_map<std::string, GemmLibrary>& into, int* moved = nullptr) {
    for (const auto& e : file.entries()) {
        if (!e.is_object() || e.value("key", "") != key || !e.contains("shapes") ||
            !e["shapes"].is_object())
            continue;
        for (const auto& [name, v] : e["shapes"].items())
            if (v.is_object())
                if (auto lib = gemm_detail::available_library(v.value("library", ""))) {
                    into.emplace(name, *lib);
                    if (moved && v.value("library", "") != v.value("class_library", "")) ++*moved;
                }
    }
}

// The shape's library by the cache file, or timed now and written to it, under its lock.
Chosen choose(const ProductShape& s, GemmLibrary class_library, const float* a, const float* b,
              float beta) {
    gemm_detail::LockedCacheFile file(kShapesFile);  // unreadable: rewritten with this choice
    const std::string key = gemm_detail::calibration_key(s.threads);
    std::unordered_map<std::string, GemmLibrary> cached;
    read_entry(file, key, cached);
    Chosen ch;
    ch.class_library = class_library;
    const std::string name = s.name();
    if (auto it = cached.find(name); it != cached.end()) {
        ch.library = it->second;
    } else {
        nlohmann::json ms = nlohmann::json::object();
        ch.library = time_shape(s, class_library, a, b, beta, ms);
        ch.timed_here = true;
        if (!file.path.empty()) {
            const nlohmann::json record = {{"library", gemm_library_name(ch.library)},
                                           {"class_library", gemm_library_name(class_library)},
                                           {"ms", ms},
                                           {"date", gemm_detail::today_utc()}};
            nlohmann::json entries = nlohmann::json::array();
            bool placed = false;
            for (auto e : file.entries()) {
                if (!e.is_object()) continue;
                if (e.value("key", "") == key) {
                    if (!e.contains("shapes") || !e["shapes"].is_object())
                        e["shapes"] = nlohmann::json::object();
                    e["shapes"][name] = record;
                    placed = true;
                }
                entries.push_back(e);
            }
            if (!placed)
                entries.push_back(
                    {{"key", key}, {"threads", s.threads}, {"shapes", {{name, record}}}});
            try {
                file.write(
                    "RematLab's GEMM library per product shape (engine/gemm.h, "
                    "kShapeChoiceMinFlops): the first process to time a shape decides it; "
                    "delete this file to time them again",
                    std::move(entries), 1);
            } catch (const Error&) {
                // Not cached: this process keeps its choice, a later one times the shape again.
            }
        }
    }
    return ch;
}

ProductShape shape_of(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                      int64_t ldc) {
    return {ta, tb, m, n, k, lda, ldb, ldc, omp_in_parallel() ? 1 : std::max(1, cpu_threads())};
}

}  // namespace

namespace gemm_detail {
GemmLibrary shape_library(GemmLibrary class_library, bool ta, bool tb, int64_t m, int64_t n,
                          int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float beta, int64_t ldc) {
    if (m * n > kShapeChoiceMaxScratchFloats) return class_library;
    const ProductShape s = shape_of(ta, tb, m, n, k, lda, ldb, ldc);
    Choices& c = choices();
    {
        std::shared_lock<std::shared_mutex> read(c.mu);
        if (auto it = c.of.find(s); it != c.of.end()) return it->second.library;
    }
    std::unique_lock<std::shared_mutex> write(c.mu);
    if (auto it = c.of.find(s); it != c.of.end()) return it->second.library;
    const Chosen ch = choose(s, class_library, a, b, beta);
    c.of.emplace(s, ch);
    return ch.library;
}
}  // namespace gemm_detail

GemmLibrary gemm_library_for(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                             int64_t lda, int64_t ldb, int64_t ldc) {
    const GemmLibrary class_library = gemm_library_for(m, n, k);
    Choices& c = choices();
    std::shared_lock<std::shared_mutex> read(c.mu);
    const auto it = c.of.find(shape_of(trans_a, trans_b, m, n, k, lda, ldb, ldc));
    return it == c.of.end() ? class_library : it->second.library;
}

void forget_gemm_shape_choices() {
    Choices& c = choices();
    std::unique_lock<std::shared_mutex> write(c.mu);
    c.of.clear();
}

GemmShapeStats gemm_shape_stats() {
    const GemmChoice& choice = gemm_choice();
    GemmShapeStats st;
    st.on = choice.per_shape;
    st.why_off = choice.per_shape_off;
    {
        const gemm_detail::LockedCacheFile file(kShapesFile);
        st.path = file.path;
        st.no_path = file.why;
        std::unordered_map<std::string, GemmLibrary> cached;
        read_entry(file, gemm_detail::calibration_key(std::max(1, cpu_threads())), cached,
                   &st.cached_moved);
        st.cached = static_cast<int>(cached.size());
    }
    Choices& c = choices();
    std::shared_lock<std::shared_mutex> read(c.mu);
    std::map<GemmLibrary, int> moved;
    for (const auto& [shape, ch] : c.of) {
        ++st.shapes;
        if (ch.timed_here) ++st.timed_here;
        if (ch.library != ch.class_library) ++moved[ch.library];
    }
    for (const auto& [lib, count] : moved) {
        st.moved += count;
        st.moved_to.emplace_back(lib, count);
    }
    return st;
}

std::string GemmShapeStats::summary() const {
    if (!on) return "per-shape choice off (" + why_off + ")";
    std::ostringstream o;
    o << "per-shape choice on (products of " << kShapeChoiceMinFlops / 1e6
      << " MFLOP or more run on the library fastest for their shape, timed at first use): ";
    if (path.empty())
        o << "no cache file (" << no_path << ")";
    else
        o << cached << " shapes in " << path << " for this machine and thread count, "
          << cached_moved << " of them on another library than their class's";
    if (shapes > 0) {
        o << "; this process has run " << shapes << (shapes == 1 ? " shape" : " shapes")
          << " of that size, " << moved << " moved";
        for (size_t i = 0; i < moved_to.size(); ++i)
            o << (i ? ", " : " (") << gemm_library_name(moved_to[i].first) << ' '
              << moved_to[i].second << (i + 1 == moved_to.size() ? ")" : "");
        o << " and " << timed_here << " timed by it";
    }
    return o.str();
}

}  // namespace rl
