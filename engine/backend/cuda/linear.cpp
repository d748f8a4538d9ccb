#include "engine/backend/cuda/linear.h"

#include <algorithm>

#include "engine/backend/cuda/launch_timer.h"
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
            time_launches_us(
                [&] { return gemv(dtype_, out, x_scratch, w.w, y_scratch, m, w.n, w.k, stream); },
                stream, 3, 10));
      } else {
        t.gemv_us = 1e30;
      }
      LATHE_ASSIGN_OR_RETURN(t.cublas_us, time_launches_us(
                                              [&] {
                                                return gemm_->matmul(dtype_, out, x_scratch, w.w,
                                                                     y_scratch, m, w.n, w.k,
                                                                     stream);
                                              },
                                              stream, 3, 10));
      t.use_gemv = gemv_wins(m, t.gemv_us, t.cublas_us);
      row[static_cast<size_t>(m)] = t.use_gemv;
      timings_.push_back(t);
    }
    table_[key] = row;
  }
  return Status();
}

}  // namespace lathe::cuda
