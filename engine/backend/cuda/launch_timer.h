// Timing of launches on a stream with CUDA events (load-time tuning: linear.cpp, the fused decode
// path's choice).
#pragma once

#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/status.h"

namespace lathe::cuda {

// Mean time of `reps` back-to-back calls of fn() (each launching work on `stream` and returning a
// Status) after `warmup` untimed ones, in microseconds.
template <typename Fn>
Result<double> time_launches_us(Fn&& fn, cudaStream_t stream, int warmup, int reps) {
  cudaEvent_t start = nullptr, stop = nullptr;
  LATHE_CUDA_TRY(cudaEventCreate(&start));
  const cudaError_t err = cudaEventCreate(&stop);
  if (err != cudaSuccess) {
    cudaEventDestroy(start);
    return cuda_error(err, "cudaEventCreate");
  }
  auto run = [&]() -> Result<double> {
    for (int i = 0; i < warmup; ++i) LATHE_RETURN_IF_ERROR(fn());
    LATHE_CUDA_TRY(cudaEventRecord(start, stream));
    for (int i = 0; i < reps; ++i) LATHE_RETURN_IF_ERROR(fn());
    LATHE_CUDA_TRY(cudaEventRecord(stop, stream));
    LATHE_CUDA_TRY(cudaEventSynchronize(stop));
    float ms = 0.f;
    LATHE_CUDA_TRY(cudaEventElapsedTime(&ms, start, stop));
    return static_cast<double>(ms) * 1000.0 / reps;
  };
  Result<double> r = run();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return r;
}

}  // namespace lathe::cuda
