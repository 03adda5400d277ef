# OpenBLAS behind Eigen's float GEMM (EIGEN_USE_BLAS): an opt-in, off by default, because it did
# not pay on these Zen 5 machines. A hot-cache loop of the linear layer's three 256x256x256 GEMMs
# ran OpenBLAS 0.3.21 (Haswell kernels) at ~102 GFLOP/s against Eigen's ~74, but inside real
# steps (fresh operands between the GEMMs) it was 1-3 % slower than Eigen at one thread: CPU ms
# per step, alternating builds, 4 runs each: mlp:depth=16,width=256,batch=256 18.2-18.6 vs
# 17.8-18.3, resmlp:depth=8,width=256,batch=256 70-72 vs 69-70 (sqrt-n 82-83 vs 80-81),
# transformer d_model=256 even (docs/benchmarks.md, "Side by side with PyTorch"). Configure with
# -DREMATLAB_OPENBLAS=ON and Debian's libopenblas-openmp-dev to try it on another machine.
#
# The OpenMP build, not the pthread one: it runs on the same libgomp thread pool as our own
# parallel loops, so the two never oversubscribe the cores (a 2-thread step runs 2 threads), and
# it runs single-threaded when called inside one of our parallel regions (omp_in_parallel), as
# Eigen does. The thread count follows set_cpu_threads() (engine/cpu/cpu_backend.cpp). OpenBLAS
# splits a GEMM statically over blocks of the output and packs its operands into its own aligned
# buffers, so at a fixed thread count the same product gives the same bits every time: with it
# on, the whole suite passed (gradients of every strategy bitwise equal to `none`, at 1 and 2
# threads), and so did runs at 1, 2 and 4 threads of mlp, resmlp and transformer, each
# strategy's gradients compared with `none`'s file by file.
#
# Sets REMATLAB_HAVE_OPENBLAS and, when found, the interface target rematlab_openblas.
option(REMATLAB_OPENBLAS
  "Let Eigen call OpenBLAS for GEMM (Debian's libopenblas-openmp-dev; slower here, see cmake/OpenBLAS.cmake)"
  OFF)
set(REMATLAB_HAVE_OPENBLAS OFF)
if(REMATLAB_OPENBLAS)
  set(_rl_openblas_dirs)
  if(CMAKE_LIBRARY_ARCHITECTURE)
    list(APPEND _rl_openblas_dirs /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp)
  endif()
  list(APPEND _rl_openblas_dirs /usr/lib/openblas-openmp)
  find_library(REMATLAB_OPENBLAS_LIBRARY NAMES openblas PATHS ${_rl_openblas_dirs}
    NO_DEFAULT_PATH)
  if(REMATLAB_OPENBLAS_LIBRARY)
    set(REMATLAB_HAVE_OPENBLAS ON)
    add_library(rematlab_openblas INTERFACE)
    # By directory, with our own run path: handed the full path, CMake would warn that the
    # variant's libblas.so.3 / liblapack.so.3 (which CBC links) may hide the system's. They may,
    # and harmlessly: they are the same OpenBLAS, so the process loads one OpenBLAS and one
    # OpenMP runtime.
    get_filename_component(_rl_openblas_dir "${REMATLAB_OPENBLAS_LIBRARY}" DIRECTORY)
    target_link_libraries(rematlab_openblas INTERFACE "-L${_rl_openblas_dir}" openblas)
    target_link_options(rematlab_openblas INTERFACE "LINKER:-rpath,${_rl_openblas_dir}")
    # Every translation unit that includes Eigen must see the same EIGEN_USE_BLAS (one
    # definition of each product kernel), so the engine passes it on PUBLIC.
    target_compile_definitions(rematlab_openblas INTERFACE EIGEN_USE_BLAS REMATLAB_HAVE_OPENBLAS=1)
    message(STATUS "OpenBLAS (OpenMP build) behind Eigen's GEMM: ${REMATLAB_OPENBLAS_LIBRARY}")
  else()
    message(FATAL_ERROR "REMATLAB_OPENBLAS is on but OpenBLAS's OpenMP build was not found: "
      "install libopenblas-openmp-dev, or configure with -DREMATLAB_OPENBLAS=OFF (Eigen's own GEMM)")
  endif()
endif()
