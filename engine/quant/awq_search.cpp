#include "engine/quant/awq_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {
namespace {

// x . w over n entries in double, four interleaved partial sums (independent chains).
inline double dot4(const float* x, const float* w, int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    s0 += static_cast<double>(x[j]) * w[j];
    s1 += static_cast<double>(x[j + 1]) * w[j + 1];
    s2 += static_cast<double>(x[j + 2]) * w[j + 2];
    s3 += static_cast<double>(x[j + 3]) * w[j + 3];
  }
  for (; j < n; ++j) s0 += static_cast<double>(x[j]) * w[j];
  return (s0 + s1) + (s2 + s3);
}

}  // namespace

std::vector<double> awq_weight_means(const std::vector<AwqLinear>& linears, int64_t k, int64_t g) {
  std::vector<double> sum(static_cast<size_t>(k), 0.0);
  int64_t total_rows = 0;
  for (const AwqLinear& l : linears) total_rows += l.rows;
  // Tasks own whole groups of columns; each column still sums its rows in order (the same values
  // as one thread).
  ThreadPool::global().parallel_for(k / g, [&](int64_t g0, int64_t g1) {
    for (const AwqLinear& l : linears)
      for (int64_t r = 0; r < l.rows; ++r) {
        const float* row = l.weight + r * k;
        for (int64_t j0 = g0 * g; j0 < g1 * g; j0 += g) {
          float amax = 0.f;
          for (int64_t j = j0; j < j0 + g; ++j) amax = std::max(amax, std::fabs(row[j]));
          for (int64_t j = j0; j < j0 + g; ++j)
            sum[static_cast<size_t>(j)] += std::fabs(row[j]) / (amax + 1e-6f);
        }
      }
  });
  for (double& s : sum) s /= static_cast<double>(std::max<int64_t>(total_rows, 1));
  return sum;
}

Result<std::vector<float>> awq_fake_quantize_scaled(const float* w, int64_t rows, int64_t k,
                                                    const std::vector<float>& s,
                                                    const IntQuantConfig& quant) {
  std::vector<float> scaled(w, w + rows * k);
  awq_scale_columns(scaled.data(), rows, k, s.data());
  LATHE_ASSIGN_OR_RETURN(IntQuantizedMatrix q, quantize_int_rtn(scaled.data(), rows, k, quant));
  std::vector<float> out = dequantize_int(q);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      out[static_cast<size_t>(r * k + j)] /= s[static_cast<size_t>(j)];
  return out;
}

std::vector<float> awq_activation_means(const float* x, int64_t rows, int64_t k) {
  std::vector<double> sum(static_cast<size_t>(k), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j) sum[static_cast<size_t>(j)] += std::fabs(x[r * k + j]);
  std::vector<float> out(static_cast<size_t>(k));
  for (int64_t j = 0; j < k; ++j)
    out[static_cast<size_t>(j)] = static_cast<float>(
        sum[static_cast<size_t>(j)] / static_cast<double>(std::max<int64_t>(rows, 1)));
  return out;
}

Result<AwqScaleResult> awq_search_scale_grid(const std::vector<float>& x_mean,
                                             const std::vector<double>& w_mean, int64_t k,
                                             const AwqConfig& c, const AwqScaleLossFn& loss) {
  LATHE_RETURN_IF_ERROR(validate_int_quant_config(c.quant, k));
  if (static_cast<int64_t>(x_mean.size()) != k)
    return invalid_argument(strformat("x_mean has %zu entries for %lld input channels",
                                      x_mean.size(), static_cast<long long>(k)));
  if (c.scale_grid < 1) return invalid_argument("the AWQ scale grid needs at least one point");
  if (static_cast<int64_t>(w_mean.size()) != k)
    return invalid_argument(strformat("w_mean has %zu entries for %lld input channels",
                                      w_mean.size(), static_cast<long long>(k)));
  AwqScaleResult result;
  result.best_loss = std::numeric_limits<double>::infinity();
  bool found = false;
  std::vector<float> s(static_cast<size_t>(k));
  for (int step = 0; step < c.scale_grid; ++step) {
    const double alpha = static_cast<double>(step) / c.scale_grid;
    double smax = 0.0, smin = std::numeric_limits<double>::infinity();
    std::vector<double> raw(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) {
      const double xm = std::pow(static_cast<double>(x_mean[static_cast<size_t>(j)]), alpha);
      double v =
          c.duo_scaling ? xm / (std::pow(w_mean[static_cast<size_t>(j)], 1.0 - alpha) + 1e-4) : xm;
      v = std::max(v, 1e-4);
      raw[static_cast<size_t>(j)] = v;
      smax = std::max(smax, v);
      smin = std::min(smin, v);
    }
    const double norm = std::sqrt(smax * smin);
    for (int64_t j = 0; j < k; ++j) {
      const double v = raw[static_cast<size_t>(j)] / norm;
      s[static_cast<size_t>(j)] = std::isfinite(v) && v > 0.0 ? static_cast<float>(v) : 1.f;
    }
    LATHE_ASSIGN_OR_RETURN(double e, loss(s));
    result.losses.push_back(e);
    if (std::isfinite(e) && e < result.best_loss) {
      result.best_loss = e;
      result.best_alpha = alpha;
      result.scales = s;
      found = true;
    }
  }
  if (!found)
    return invalid_argument(
        "the AWQ scale search found no candidate with a finite output error (the block's loss "
        "callback returned NaN or infinity for every alpha)");
  return result;
}

Result<AwqScaleResult> awq_search_scales(const std::vector<float>& x_mean,
                                         const std::vector<AwqLinear>& linears, int64_t k,
                                         const AwqConfig& c, const AwqLossFn& loss) {
  LATHE_RETURN_IF_ERROR(validate_int_quant_config(c.quant, k));
  if (linears.empty()) return invalid_argument("AWQ scale search needs at least one linear");
  const std::vector<double> w_mean = awq_weight_means(linears, k, effective_group_size(c.quant, k));
  return awq_search_scale_grid(
      x_mean, w_mean, k, c, [&](const std::vector<float>& s) -> Result<double> {
        std::vector<std::vector<float>> candidate;
        candidate.reserve(linears.size());
        for (const AwqLinear& l : linears) {
          LATHE_ASSIGN_OR_RETURN(std::vector<float> fq,
                                 awq_fake_quantize_scaled(l.weight, l.rows, k, s, c.quant));
          candidate.push_back(std::move(fq));
        }
        return loss(candidate);
      });
}

void awq_group_dots(const float* wg, int64_t g, const float* x, int64_t k, int64_t tokens,
                    double* org) {
  for (int64_t t = 0; t < tokens; ++t) org[t] = dot4(x + t * k, wg, g);
}

double awq_clip_range_error(const float* wg, int64_t g, const float* x, int64_t k, int64_t tokens,
                            const double* org, float max_value, const IntQuantConfig& q,
                            float* qw) {
  float lo = 0.f, hi = 0.f;
  for (int64_t j = 0; j < g; ++j) {
    const float v = std::clamp(wg[j], -max_value, max_value);
    qw[j] = v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const IntGroupParams p = int_grid_params(lo, hi, q);
  const int32_t max_code = (1 << q.bits) - 1;
  for (int64_t j = 0; j < g; ++j) qw[j] = int_value(int_code(qw[j], p, max_code), p);
  double err = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    const double d = dot4(x + t * k, qw, g) - org[t];
    err += d * d;
  }
  return err / static_cast<double>(tokens);
}

Result<std::vector<float>> awq_search_clip(const float* w, int64_t rows, int64_t k, const float* x,
                                           int64_t tokens, const AwqConfig& c) {
  LATHE_RETURN_IF_ERROR(validate_int_quant_config(c.quant, k));
  if (tokens <= 0) return invalid_argument("the AWQ clip search needs at least one input row");
  const int64_t g = effective_group_size(c.quant, k), ng = k / g;
  const int steps = static_cast<int>(c.max_shrink * c.clip_grid);
  std::vector<float> best(static_cast<size_t>(rows * ng));
  ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1) {
    std::vector<double> org(static_cast<size_t>(tokens));
    std::vector<float> qw(static_cast<size_t>(g));
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t gi = 0; gi < ng; ++gi) {
        const float* wg = w + r * k + gi * g;
        const float* xg = x + gi * g;
        float amax = 0.f;
        for (int64_t j = 0; j < g; ++j) amax = std::max(amax, std::fabs(wg[j]));
        awq_group_dots(wg, g, xg, k, tokens, org.data());
        double best_err = std::numeric_limits<double>::infinity();
        float best_max = amax;
        for (int i = 0; i < std::max(steps, 1); ++i) {
          const float mv = amax * (1.f - static_cast<float>(i) / static_cast<float>(c.clip_grid));
          const double err =
              awq_clip_range_error(wg, g, xg, k, tokens, org.data(), mv, c.quant, qw.data());
          if (err < best_err) {
            best_err = err;
            best_max = mv;
          }
        }
        best[static_cast<size_t>(r * ng + gi)] = best_max;
      }
    }
  });
  return best;
}

void awq_apply_clip(float* w, int64_t rows, int64_t k, int64_t group_size,
                    const std::vector<float>& max_val) {
  const int64_t g = group_size <= 0 ? k : group_size, ng = k / g;
  ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < k; ++j) {
        const float m = max_val[static_cast<size_t>(r * ng + j / g)];
        w[r * k + j] = std::clamp(w[r * k + j], -m, m);
      }
  });
}

void awq_scale_columns(float* w, int64_t rows, int64_t k, const float* s) {
  ThreadPool::global().parallel_for(rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t j = 0; j < k; ++j) w[r * k + j] *= s[j];
  });
}

void awq_fold_into_norm(float* norm_weight, float* norm_bias, int64_t k, const float* s) {
  for (int64_t j = 0; j < k; ++j) {
    norm_weight[j] /= s[j];
    if (norm_bias != nullptr) norm_bias[j] /= s[j];
  }
}

void awq_fold_into_linear(float* prev, float* prev_bias, int64_t k, int64_t prev_cols,
                          const float* s) {
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t c = 0; c < prev_cols; ++c) prev[j * prev_cols + c] /= s[j];
    if (prev_bias != nullptr) prev_bias[j] /= s[j];
  }
}

}  // namespace lathe
