#include "engine/backend/cuda/linear.h"

#include <algorithm>

#include "engine/backend/cuda/random_fill.h"

namespace lathe::cuda {

bool LinearDispatcher::use_gemv(const LinearWeight& w, DType out_dtype, int64_t m) const {
  if (m > kGemvMaxM || w.k % 8 != 0) return false;
  auto it = table_.find(Key{w.n, w.k, static_cast<int>(out_dtype)});
  if (it == table_.end()) return m <= 2;
  return it->second[static_cast<size_t>(m)];
}

Status LinearDispatcher::run(const LinearWeight& w, DType out_dtype, const void* x, void* y,
                             int64_t m, cudaStream_t stream) const {
  if (m <= 0) return Status();
  if (use_gemv(w, out_dtype, m)) return gemv(dtype_, out_dtype, x, w.w, y, m, w.n, w.k, stream);
  return gemm_->matmul(dtype_, out_dtype, x, w.w, y, m, w.n, w.k, stream);
}

namespace {

// Mean time of `reps` launches after `warmup`, in microseconds.
template <typename Fn>
Result<double> time_us(Fn&& fn, cudaStream_t stream, int warmup, int reps) {
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

}  // namespace

Status LinearDispatcher::autotune(const std::vector<std::pair<LinearWeight, DType>>& shapes,
                                  void* x_scratch, void* y_scratch, cudaStream_t stream) {
  int64_t max_k = 0;
  for (const auto& [w, out] : shapes) max_k = std::max(max_k, w.k);
  LATHE_RETURN_IF_ERROR(constant_fill(dtype_, x_scratch, kGemvMaxM * max_k, 0.01f, stream));
  for (const auto& [w, out] : shapes) {
    const Key key{w.n, w.k, static_cast<int>(out)};
    if (table_.count(key) != 0) continue;
    std::array<bool, kGemvMaxM + 1> row{};
    for (int64_t m = 1; m <= kGemvMaxM; ++m) {
      LinearTiming t;
      t.name = w.name;
      t.n = w.n, t.k = w.k, t.m = m;
      if (w.k % 8 == 0) {
        LATHE_ASSIGN_OR_RETURN(
            t.gemv_us,
            time_us(
                [&] { return gemv(dtype_, out, x_scratch, w.w, y_scratch, m, w.n, w.k, stream); },
                stream, 3, 10));
      } else {
        t.gemv_us = 1e30;
      }
      LATHE_ASSIGN_OR_RETURN(t.cublas_us, time_us(
                                              [&] {
                                                return gemm_->matmul(dtype_, out, x_scratch, w.w,
                                                                     y_scratch, m, w.n, w.k,
                                                                     stream);
                                              },
                                              stream, 3, 10));
      t.use_gemv = t.gemv_us < t.cublas_us;
      row[static_cast<size_t>(m)] = t.use_gemv;
      timings_.push_back(t);
    }
    table_[key] = row;
  }
  return Status();
}

}  // namespace lathe::cuda
