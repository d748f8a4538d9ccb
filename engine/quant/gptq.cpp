#include "engine/quant/gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"
#include "engine/quant/cholesky.h"

namespace lathe {
namespace {

constexpr int64_t kRowsPerChunk = 64;  // rows sharing each pass over U (U of a 4864-column
                                       // matrix is 189 MB: streamed once per chunk)

// The damped, factorized Hessian: U with (H + damp I)^-1 = U^T U, retrying with more damping.
struct Factorization {
  std::vector<double> u;
  double damp_percent = 0.0;
  bool ok = false;
  std::string failure;
};

Factorization factorize(const std::vector<double>& h, int64_t k, const GptqConfig& c) {
  double mean_diag = 0.0;
  for (int64_t i = 0; i < k; ++i) mean_diag += h[static_cast<size_t>(i * k + i)];
  mean_diag /= static_cast<double>(k);
  Factorization f;
  double damp = c.damp_percent;
  for (int attempt = 0;; ++attempt) {
    f.u = h;
    for (int64_t i = 0; i < k; ++i) f.u[static_cast<size_t>(i * k + i)] += damp * mean_diag;
    const Status s = inverse_upper_cholesky(f.u, k);
    if (s.is_ok()) {
      f.ok = true;
      f.damp_percent = damp;
      return f;
    }
    f.failure = s.message();
    const double next = damp + c.damp_increment;
    if (attempt >= c.max_damp_retries || next > c.max_damp_percent || c.damp_increment <= 0.0) {
      f.failure = strformat(
          "the Hessian could not be factorized with damping from %g to %g of its mean diagonal "
          "(%s); quantized with round-to-nearest instead. More or more varied calibration data "
          "usually fixes this",
          c.damp_percent, damp, s.message().c_str());
      f.damp_percent = damp;
      f.u.assign(static_cast<size_t>(k * k), 0.0);
      for (int64_t i = 0; i < k; ++i) f.u[static_cast<size_t>(i * k + i)] = 1.0;
      return f;
    }
    damp = next;
  }
}

// Quantizes rows [r0, r1) of the permuted weights `wp` in place of a working copy.
void quantize_rows(const std::vector<float>& wp, int64_t r0, int64_t r1, int64_t k,
                   const std::vector<double>& u, const GptqConfig& c,
                   const std::vector<int64_t>& perm, IntQuantizedMatrix& q, double* loss) {
  const int64_t nr = r1 - r0;
  const int64_t g = q.group_size, bs = std::max<int64_t>(1, c.block_size);
  const int32_t max_code = (1 << c.quant.bits) - 1;
  std::vector<double> w(static_cast<size_t>(nr * k));
  for (int64_t r = 0; r < nr; ++r)
    for (int64_t j = 0; j < k; ++j)
      w[static_cast<size_t>(r * k + j)] = wp[static_cast<size_t>((r0 + r) * k + j)];
  std::vector<double> err(static_cast<size_t>(nr * bs));
  std::vector<IntGroupParams> params(static_cast<size_t>(nr));
  double total = 0.0;
  for (int64_t i1 = 0; i1 < k; i1 += bs) {
    const int64_t i2 = std::min(i1 + bs, k);
    for (int64_t r = 0; r < nr; ++r) {
      double* wr = w.data() + r * k;
      double* er = err.data() + r * bs;
      for (int64_t j = i1; j < i2; ++j) {
        if (j % g == 0) {  // a group starts: its grid from its current weights
          float lo = static_cast<float>(wr[j]), hi = lo;
          for (int64_t t = j; t < std::min(j + g, k); ++t) {
            lo = std::min(lo, static_cast<float>(wr[t]));
            hi = std::max(hi, static_cast<float>(wr[t]));
          }
          params[static_cast<size_t>(r)] = int_grid_params(lo, hi, c.quant);
          const size_t gi = static_cast<size_t>((r0 + r) * q.num_groups() + j / g);
          q.scales[gi] = params[static_cast<size_t>(r)].scale;
          q.zeros[gi] = params[static_cast<size_t>(r)].zero;
        }
        const IntGroupParams& p = params[static_cast<size_t>(r)];
        const int32_t code = int_code(static_cast<float>(wr[j]), p, max_code);
        q.codes[static_cast<size_t>((r0 + r) * k + perm[static_cast<size_t>(j)])] =
            static_cast<uint8_t>(code);
        const double deq = int_value(code, p);
        const double* uj = u.data() + j * k;
        const double e = (wr[j] - deq) / uj[j];
        total += (wr[j] - deq) * (wr[j] - deq) / (uj[j] * uj[j]) / 2.0;
        for (int64_t t = j + 1; t < i2; ++t) wr[t] -= e * uj[t];
        er[j - i1] = e;
      }
    }
    // Lazy batch update of the columns after the block: W[:, i2:] -= Err1 @ U[i1:i2, i2:].
    for (int64_t j = i1; j < i2; ++j) {
      const double* uj = u.data() + j * k;
      for (int64_t r = 0; r < nr; ++r) {
        const double e = err[static_cast<size_t>(r * bs + (j - i1))];
        double* wr = w.data() + r * k;
        for (int64_t t = i2; t < k; ++t) wr[t] -= e * uj[t];
      }
    }
  }
  *loss = total;
}

}  // namespace

Result<GptqResult> gptq_quantize(const float* w, int64_t rows, int64_t cols,
                                 const std::vector<double>& h_in, const GptqConfig& c) {
  LATHE_RETURN_IF_ERROR(validate_int_quant_config(c.quant, cols));
  if (c.damp_percent < 0.0 || !std::isfinite(c.damp_percent))
    return invalid_argument(strformat("damp_percent must be >= 0, got %g", c.damp_percent));
  if (static_cast<int64_t>(h_in.size()) != cols * cols)
    return invalid_argument(
        strformat("the Hessian has %zu entries; a matrix with %lld input "
                  "columns needs %lld x %lld",
                  h_in.size(), static_cast<long long>(cols), static_cast<long long>(cols),
                  static_cast<long long>(cols)));
  for (double v : h_in)
    if (!std::isfinite(v)) return invalid_argument("the Hessian has non-finite entries");
  const int64_t k = cols;
  GptqResult result;
  result.q = IntQuantizedMatrix::empty(rows, cols, c.quant);

  // 1. Dead columns.
  std::vector<double> h = h_in;
  std::vector<float> wd(w, w + rows * cols);
  for (int64_t j = 0; j < k; ++j) {
    if (h[static_cast<size_t>(j * k + j)] != 0.0) continue;
    ++result.dead_columns;
    h[static_cast<size_t>(j * k + j)] = 1.0;
    for (int64_t r = 0; r < rows; ++r) wd[static_cast<size_t>(r * k + j)] = 0.f;
  }
  // 2. Act-order permutation (stable on ties).
  std::vector<int64_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  if (c.act_order)
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return h[static_cast<size_t>(a * k + a)] > h[static_cast<size_t>(b * k + b)];
    });
  std::vector<float> wp(static_cast<size_t>(rows * k));
  std::vector<double> hp(static_cast<size_t>(k * k));
  for (int64_t i = 0; i < k; ++i) {
    const int64_t pi = perm[static_cast<size_t>(i)];
    for (int64_t r = 0; r < rows; ++r)
      wp[static_cast<size_t>(r * k + i)] = wd[static_cast<size_t>(r * k + pi)];
    for (int64_t j = 0; j < k; ++j)
      hp[static_cast<size_t>(i * k + j)] =
          h[static_cast<size_t>(pi * k + perm[static_cast<size_t>(j)])];
  }
  wd.clear();
  h.clear();
  for (int64_t i = 0; i < k; ++i)
    result.q.g_idx[static_cast<size_t>(perm[static_cast<size_t>(i)])] =
        static_cast<int32_t>(i / result.q.group_size);

  // 3. Damping and the factorization.
  Factorization f = factorize(hp, k, c);
  hp.clear();
  result.damp_percent_used = f.damp_percent;
  if (!f.ok) {
    result.fell_back_to_rtn = true;
    result.fallback_reason = f.failure;
  }

  // 4-5. Columns in blocks, rows in parallel.
  const int64_t num_chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<double> losses(static_cast<size_t>(num_chunks), 0.0);
  ThreadPool::global().parallel_for(num_chunks, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t r0 = ch * kRowsPerChunk, r1 = std::min(rows, r0 + kRowsPerChunk);
      quantize_rows(wp, r0, r1, k, f.u, c, perm, result.q, &losses[static_cast<size_t>(ch)]);
    }
  });
  for (double l : losses) result.loss += l;
  return result;
}

Result<GptqResult> gptq_quantize(const float* w, int64_t rows, int64_t cols,
                                 const std::vector<float>& h, const GptqConfig& config) {
  return gptq_quantize(w, rows, cols, std::vector<double>(h.begin(), h.end()), config);
}

}  // namespace lathe
