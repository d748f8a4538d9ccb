# Decides whether the CUDA backend is built. LATHE_CUDA=AUTO turns it on when nvcc is found.
set(LATHE_WITH_CUDA OFF)
if(NOT LATHE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES ${LATHE_CUDA_ARCHITECTURES})
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    # CMake 3.25.1 does not know nvcc's C++20 flag (fixed in 3.25.2); set it after enable_language.
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(LATHE_WITH_CUDA ON)
    # NVIDIA's apt packages (developer.download.nvidia.com/compute/cuda/repos/debian12) of the
    # runtime libraries the plugin links: libcudart.so.N, libcublas.so.N + libcublasLt.so.N and
    # libcusolver (GPTQ's factorizations; it needs libcusparse and libnvJitLink).
    # The lathe-cuda package depends on them; the plugin loader names them when one is missing.
    set(_cuda_mm "${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
    set(LATHE_CUDA_RUNTIME_DEBS "cuda-cudart-${_cuda_mm}" "libcublas-${_cuda_mm}"
        "libcusolver-${_cuda_mm}" "libcusparse-${_cuda_mm}" "libnvjitlink-${_cuda_mm}")
  elseif(LATHE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "LATHE_CUDA=ON but no CUDA compiler was found. Install the CUDA toolkit "
                        "(nvcc in /usr/local/cuda/bin) or configure with -DLATHE_CUDA=OFF.")
  endif()
endif()
message(STATUS "Lathe CUDA backend: ${LATHE_WITH_CUDA} (architectures: ${LATHE_CUDA_ARCHITECTURES})")
