// The search core of AWQ (Lin et al. 2023) on one block, written from AutoAWQ's quantizer
// (_search_best_scale, _compute_best_clip, scale_ln_fcs / scale_fc_fc):
//
//   Scale search. The linears that share one input x (q/k/v after the attention norm, gate/up
//   after the MLP norm, o after v, down after up) are scaled along their K inputs by s and the
//   producer of x by 1/s, which leaves the block's function unchanged but moves quantization error
//   away from channels with large activations. For alpha = 0, 1/20, ..., 19/20:
//       s = (x_mean^alpha / (w_mean^(1-alpha) + 1e-4)).clamp(1e-4),  s /= sqrt(max(s) * min(s))
//   where x_mean is the mean |x| of each input channel and w_mean the mean over the linears' rows
//   of |w| / (max |w| of its group + 1e-6); each candidate's fake-quantized weights
//   Q(W diag(s)) diag(s)^-1 go to a callback that runs the block and returns its output error;
//   the s of the smallest error wins.
//
//   Clip search. Per output row and group, the range max |w| is shrunk by i/20 for i = 0..9
//   (up to 45%), w clamped to +-range and fake-quantized; the range whose group outputs
//   x . w over sampled input rows change least (mean squared) wins.
//
//   Folding. 1/s goes into the preceding RMSNorm weight (and bias) or into the rows of the
//   preceding linear; s into the scaled linears' columns.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/int_quant.h"

namespace lathe {

struct AwqConfig {
  // AutoAWQ's seed: 4 bits, group 128, zero point (asymmetric).
  IntQuantConfig quant{4, 128, false, DType::kF16, 0};
  int scale_grid = 20;      // alphas 0, 1/20, ..., 19/20
  bool duo_scaling = true;  // divide by w_mean^(1-alpha) (AutoAWQ's default)
  int clip_grid = 20;       // shrink steps of 1/20 ...
  double max_shrink = 0.5;  // ... up to (not including) this fraction
};

// One linear of the group that shares the input: w [rows, K] row-major.
struct AwqLinear {
  const float* weight = nullptr;
  int64_t rows = 0;
};

// The block's output error (e.g. mean squared difference to the unquantized output) when linear
// i's weights are replaced by candidate[i] ([rows_i, K] each). Errors abort the search.
using AwqLossFn = std::function<Result<double>(const std::vector<std::vector<float>>& candidate)>;

struct AwqScaleResult {
  std::vector<float> scales;  // [K]: multiply the linears' columns by these, divide the producer
  double best_alpha = 0.0;
  double best_loss = 0.0;
  std::vector<double> losses;  // per alpha, in grid order
};

// Mean |x| of each of the K input channels over `rows` input rows x [rows, K].
std::vector<float> awq_activation_means(const float* x, int64_t rows, int64_t k);

// The loss of the scales s [K] (the caller fake-quantizes with awq_fake_quantize_scaled, or its
// device equivalent, CalibOps::awq_fake_quantize).
using AwqScaleLossFn = std::function<Result<double>(const std::vector<float>& s)>;

// w_mean [K] of the group (above), from the linears' float weights.
std::vector<double> awq_weight_means(const std::vector<AwqLinear>& linears, int64_t k,
                                     int64_t group_size);

// The grid search over alpha from the two statistics, the candidates' losses from `loss`.
Result<AwqScaleResult> awq_search_scale_grid(const std::vector<float>& x_mean,
                                             const std::vector<double>& w_mean, int64_t k,
                                             const AwqConfig& config, const AwqScaleLossFn& loss);

// Q(W diag(s)) diag(s)^-1 of w [rows, K] on `quant`'s grid (round to nearest), float32.
Result<std::vector<float>> awq_fake_quantize_scaled(const float* w, int64_t rows, int64_t k,
                                                    const std::vector<float>& s,
                                                    const IntQuantConfig& quant);

// The grid search over alpha. x_mean has K entries; every linear has K columns. (The scale grid
// above with each candidate's fake-quantized weights handed to `loss`.)
Result<AwqScaleResult> awq_search_scales(const std::vector<float>& x_mean,
                                         const std::vector<AwqLinear>& linears, int64_t k,
                                         const AwqConfig& config, const AwqLossFn& loss);

// The clip search for one linear w [rows, K] on sampled input rows x [tokens, K]: the clipping
// range per (row, group), [rows, K / group] row-major.
Result<std::vector<float>> awq_search_clip(const float* w, int64_t rows, int64_t k, const float* x,
                                           int64_t tokens, const AwqConfig& config);

// The clip search's two pieces for one group of g weights wg, whose inputs are x[t * k + j] for
// tokens rows t (x points at the group's first input): org[t] = x_t . wg in double, in the search's
// order; and the mean over the rows of (x_t . q(clamp(wg, +-max_value)) - org[t])^2 with q the
// fake quantization of config q. qw: g floats of scratch.
void awq_group_dots(const float* wg, int64_t g, const float* x, int64_t k, int64_t tokens,
                    double* org);
double awq_clip_range_error(const float* wg, int64_t g, const float* x, int64_t k, int64_t tokens,
                            const double* org, float max_value, const IntQuantConfig& q, float* qw);

// w [rows, K] clamped to +-max_val of its (row, group).
void awq_apply_clip(float* w, int64_t rows, int64_t k, int64_t group_size,
                    const std::vector<float>& max_val);

// w[:, j] *= s[j] for w [rows, K].
void awq_scale_columns(float* w, int64_t rows, int64_t k, const float* s);
// norm_weight[j] /= s[j] (and norm_bias[j] when given), K entries.
void awq_fold_into_norm(float* norm_weight, float* norm_bias, int64_t k, const float* s);
// Rows of the producing linear prev [k, prev_cols] (its output channels are the K inputs):
// prev[j, :] /= s[j], and bias[j] /= s[j] when given.
void awq_fold_into_linear(float* prev, float* prev_bias, int64_t k, int64_t prev_cols,
                          const float* s);

}  // namespace lathe
