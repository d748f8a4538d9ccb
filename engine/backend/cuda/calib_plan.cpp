#include "engine/backend/cuda/calib_plan.h"

#include <algorithm>
#include <numeric>

#include "engine/core/strings.h"

namespace lathe::cuda {

GptqColumnPlan plan_gptq_columns(const std::vector<double>& h, int64_t k, bool act_order) {
  GptqColumnPlan p;
  p.dead.assign(static_cast<size_t>(k), 0);
  std::vector<double> diag(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j) {
    double d = h[static_cast<size_t>(j * k + j)];
    if (d == 0.0) {
      p.dead[static_cast<size_t>(j)] = 1;
      ++p.dead_columns;
      d = 1.0;
    }
    diag[static_cast<size_t>(j)] = d;
  }
  p.perm.resize(static_cast<size_t>(k));
  std::iota(p.perm.begin(), p.perm.end(), 0);
  if (act_order)
    std::stable_sort(p.perm.begin(), p.perm.end(), [&](int32_t a, int32_t b) {
      return diag[static_cast<size_t>(a)] > diag[static_cast<size_t>(b)];
    });
  // gptq.cpp sums the permuted matrix's diagonal, i.e. in processing order.
  double sum = 0.0;
  for (int64_t i = 0; i < k; ++i) sum += diag[static_cast<size_t>(p.perm[static_cast<size_t>(i)])];
  p.mean_diag = sum / static_cast<double>(k);
  return p;
}

std::vector<int32_t> gptq_group_index(const std::vector<int32_t>& perm, int64_t group_size) {
  std::vector<int32_t> g(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    g[static_cast<size_t>(perm[i])] = static_cast<int32_t>(static_cast<int64_t>(i) / group_size);
  return g;
}

std::optional<double> gptq_next_damp(const GptqConfig& c, int attempt, double damp) {
  const double next = damp + c.damp_increment;
  if (attempt >= c.max_damp_retries || next > c.max_damp_percent || c.damp_increment <= 0.0)
    return std::nullopt;
  return next;
}

std::string not_positive_definite_message(int64_t pivot, int64_t n, double value) {
  return strformat("the matrix is not positive definite (pivot %lld of %lld is %g)",
                   static_cast<long long>(pivot), static_cast<long long>(n), value);
}

std::string gptq_fallback_reason(const GptqConfig& c, double last_damp,
                                 const std::string& failure) {
  return strformat(
      "the Hessian could not be factorized with damping from %g to %g of its mean diagonal "
      "(%s); quantized with round-to-nearest instead. More or more varied calibration data "
      "usually fixes this",
      c.damp_percent, last_damp, failure.c_str());
}

int64_t gptq_piece_end(int64_t s1, int64_t i2, int64_t group, int64_t max_piece) {
  const int64_t s2 = std::min(i2, s1 + max_piece);
  if (s2 == i2) return s2;
  // Only the last group starting inside (s1, s2) can reach past s2.
  const int64_t last = (s2 - 1) / group * group;
  return last > s1 && last + group > s2 ? last : s2;
}

int64_t plan_chunk_rows(int64_t rows, int64_t bytes_per_row, int64_t budget_bytes) {
  if (rows <= 0) return 0;
  if (bytes_per_row <= 0) return rows;
  return std::min(rows, std::max<int64_t>(0, budget_bytes / bytes_per_row));
}

CalibGrid calib_grid_of(const IntQuantConfig& q) {
  CalibGrid g;
  g.bits = q.bits;
  g.symmetric = q.symmetric ? 1 : 0;
  g.scale_kind = q.scale_dtype == DType::kF16 ? 1 : (q.scale_dtype == DType::kBF16 ? 2 : 0);
  g.min_zero = q.min_zero;
  return g;
}

}  // namespace lathe::cuda
