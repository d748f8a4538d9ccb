#include "engine/quant/hessian.h"

#include <algorithm>
#include <cmath>

#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {

HessianAccumulator::HessianAccumulator(int64_t num_features)
    : k_(num_features), sum_(static_cast<size_t>(num_features * num_features), 0.0) {}

Status HessianAccumulator::add_rows(const float* x, int64_t rows) {
  for (int64_t i = 0; i < rows * k_; ++i)
    if (!std::isfinite(x[i]))
      return invalid_argument(strformat("input row %lld has a non-finite value at feature %lld",
                                        static_cast<long long>(i / k_),
                                        static_cast<long long>(i % k_)));
  // Row a of the upper triangle: sum over the batch of x[a] * x[a..K).
  ThreadPool::global().parallel_for(
      k_,
      [&](int64_t a0, int64_t a1) {
        for (int64_t a = a0; a < a1; ++a) {
          double* out = sum_.data() + a * k_;
          for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * k_;
            const double xa = xr[a];
            if (xa == 0.0) continue;
            for (int64_t b = a; b < k_; ++b) out[b] += xa * static_cast<double>(xr[b]);
          }
        }
      },
      std::max<int64_t>(1, 65536 / std::max<int64_t>(k_ * std::max<int64_t>(rows, 1), 1)));
  n_ += rows;
  return Status();
}

std::vector<double> HessianAccumulator::hessian() const {
  std::vector<double> h(sum_.size(), 0.0);
  if (n_ == 0) return h;
  const double f = 2.0 / static_cast<double>(n_);
  for (int64_t a = 0; a < k_; ++a)
    for (int64_t b = a; b < k_; ++b) {
      const double v = f * sum_[static_cast<size_t>(a * k_ + b)];
      h[static_cast<size_t>(a * k_ + b)] = v;
      h[static_cast<size_t>(b * k_ + a)] = v;
    }
  return h;
}

}  // namespace lathe
