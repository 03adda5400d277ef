#pragma once
// What engine/cpu/gemm.cpp shares with engine/cpu/gemm_shapes.cpp, and nothing else includes.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/gemm.h"

namespace rl::gemm_detail {

// The product on `lib`, with no choice made and no availability check.
void library_sgemm(GemmLibrary lib, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                   int64_t ldc);

// The calibration's cache key at `threads` (CPU, build, library versions, threads, shape set).
std::string calibration_key(int threads);

// The cache directory (created if missing), or "" with *why saying why there is none.
std::string cache_dir(std::string* why);

// "2026-12-05 18:30 UTC".
std::string today_utc();

// A JSON file in the cache directory ({"about": …, "entries": [{"key": …}, …]}: the calibration's
// and the per-shape choices'), read under its lock file, which stays held until the object goes,
// so that one process at a time reads, decides and writes. `doc` is {} where the file is missing
// or unreadable (it is then rewritten whole); `path` is "" where there is no cache directory,
// and `why` says why.
class LockedCacheFile {
  public:
    explicit LockedCacheFile(const std::string& name);
    ~LockedCacheFile();
    LockedCacheFile(const LockedCacheFile&) = delete;
    LockedCacheFile& operator=(const LockedCacheFile&) = delete;
    std::string path, why;
    nlohmann::json doc = nlohmann::json::object();
    // The document's entries, in order (none when it has no such array).
    const nlohmann::json& entries() const;
    // Replaces the file with {"about": about, "entries": entries}, atomically; throws rl::Error.
    void write(const char* about, nlohmann::json entries, int indent);

  private:
    int lock_fd_ = -1;
};

// The library of that name ("eigen", "openblas", "blis") when it is available here.
std::optional<GemmLibrary> available_library(const std::string& name);

// The library for a product of 2·m·n·k ≥ kShapeChoiceMinFlops while per-shape choice is on:
// the shape's, choosing it now (by the cache file or by timing) if this process has not.
GemmLibrary shape_library(GemmLibrary class_library, bool ta, bool tb, int64_t m, int64_t n,
                          int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                          float beta, int64_t ldc);

}  // namespace rl::gemm_detail
