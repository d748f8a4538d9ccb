// GPTQ's Hessian of one linear layer's reconstruction error: H = 2 X^T X / n over the n input rows
// x (each of K features) the layer saw during calibration. Rows arrive in batches; the sum is kept
// in double and divided on demand, which equals the reference's running rescale
// (H *= n / (n + m); H += 2/(n+m) * X_m^T X_m) up to rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

class HessianAccumulator {
 public:
  explicit HessianAccumulator(int64_t num_features);

  int64_t num_features() const { return k_; }
  int64_t num_rows() const { return n_; }

  // Adds `rows` input rows x [rows, K] (row-major). Non-finite inputs are an error (nothing is
  // added then).
  Status add_rows(const float* x, int64_t rows);

  // H = 2 * sum(x x^T) / n, [K, K] row-major; all zeros before any row was added.
  std::vector<double> hessian() const;

 private:
  int64_t k_ = 0;
  int64_t n_ = 0;
  std::vector<double> sum_;  // sum of x x^T, [K, K]; only the upper triangle is accumulated
};

}  // namespace lathe
