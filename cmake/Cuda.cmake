# The optional CUDA backend (engine/cuda/): built when CMake finds a CUDA compiler, skipped with
# one line otherwise. Sets REMATLAB_HAVE_CUDA. Pitfalls found with CMake 3.25 and CUDA 13: set
# the architectures before enable_language (CMake's default 75 is not what we want, `native`
# fails without a GPU, 70 and older are gone in CUDA 13); link the shared runtime only (the
# default Static plus CUDA::cudart links both runtimes).
option(REMATLAB_CUDA "Build the CUDA backend when a CUDA compiler is found" ON)
set(REMATLAB_HAVE_CUDA OFF)
if(REMATLAB_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # sm_90 machine code (H100/H200) plus compute_90 PTX, which newer GPUs JIT-compile.
      set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    if(NOT CMAKE_CUDA_HOST_COMPILER)
      set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
    endif()
    if(CCACHE_PROGRAM AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
      set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(REMATLAB_HAVE_CUDA ON)
    message(STATUS "CUDA backend: on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
      "${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "CUDA backend: not built (no CUDA compiler found; set "
      "CMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc to build it)")
  endif()
else()
  message(STATUS "CUDA backend: not built (REMATLAB_CUDA=OFF)")
endif()
