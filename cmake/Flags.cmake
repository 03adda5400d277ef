# Warnings: zero under -Wall -Wextra is the project's rule.
add_library(rematlab_warnings INTERFACE)
target_compile_options(rematlab_warnings INTERFACE -Wall -Wextra -Wpedantic)
# GCC 12's AVX-512 intrinsics headers trip a false -Wmaybe-uninitialized when Eigen inlines them
# (GCC bug 105593, fixed in GCC 13): silence that one warning for GCC < 13 only.
# In the sanitizer build (-O1 with AddressSanitizer) the same self-initialised placeholder
# (`__m512 __Y = __Y;`, _mm512_undefined_ps) shows as a definite -Wuninitialized, 19 times on an
# AVX-512 machine: silence that too, there only. The Release build, built by the same CI run from
# the same sources, keeps -Wuninitialized.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(rematlab_warnings INTERFACE -Wno-maybe-uninitialized)
  if(CMAKE_CXX_FLAGS MATCHES "sanitize=address")
    target_compile_options(rematlab_warnings INTERFACE -Wno-uninitialized)
  endif()
endif()
if(REMATLAB_WERROR)
  target_compile_options(rematlab_warnings INTERFACE -Werror)
endif()

# Kernel speed: the compiler's default (SSE2) costs ~3x in Eigen GEMM (float GEMM 1024^3 on one
# Zen 5 core, 2026-12: 41 GFLOP/s at -O2, 97 with AVX2+FMA, 127-132 with -march=native). Native
# for a source build, x86-64-v3 (AVX2+FMA) when portable.
add_library(rematlab_tuning INTERFACE)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  if(REMATLAB_NATIVE)
    # -mtune=generic: GCC 12 takes these Zen 5 machines for znver3, and its znver3 tuning made
    # Eigen's float GEMM ~18 % slower than generic tuning with the same instructions (77 vs
    # 92-96 GFLOP/s, 512x1024x1024, one thread; docs/benchmarks.md, "Side by side with PyTorch").
    target_compile_options(rematlab_tuning INTERFACE -march=native -mtune=generic)
  else()
    target_compile_options(rematlab_tuning INTERFACE -march=x86-64-v3)
  endif()
endif()
# Optimisation: REMATLAB_OPTIMIZE (-O3) for the libraries and programs, and -Og for test code:
# a target with the REMATLAB_TEST_CODE property (the GoogleTest suites, tests/CMakeLists.txt).
# Test files compile in 60 % of their -O3 time at -O1 or -Og (2026-12-03, this project's
# largest), and the kernels they test are in the libraries, so the tests still check the code
# that ships. -Og, not -O1: at -O1 GCC 12 inlines std::string's `operator+` far enough to warn
# -Warray-bounds about its memcpy (a false positive known from GCC 12 to 14) in four test files;
# -Og compiles them as fast, without it. The asan preset sets -O1 for everything: under the
# sanitizers -O3 took 4-5x longer to compile (engine/cpu/conv.cpp: 65 s against 14 s).
set(REMATLAB_OPTIMIZE -O3 CACHE STRING
  "Optimisation of the libraries and programs in Release and RelWithDebInfo builds")
set(_rl_level "$<IF:$<BOOL:$<TARGET_PROPERTY:REMATLAB_TEST_CODE>>,-Og,${REMATLAB_OPTIMIZE}>")
target_compile_options(rematlab_tuning INTERFACE "$<$<CONFIG:Release,RelWithDebInfo>:${_rl_level}>")
