// GPTQ (Frantar et al. 2022) on one weight matrix, given the Hessian of its inputs
// (hessian.h: H = 2 X^T X / n). Written from llm-compressor's gptq_quantize.py and AutoGPTQ's
// fasterquant, on the grid of int_quant.h:
//   1. dead columns (H_ii == 0): H_ii = 1 and the column's weights set to 0;
//   2. act-order (AutoGPTQ desc_act): columns permuted by descending diag(H); groups are formed
//      in that order, so g_idx[k] = (position of k in the order) / group_size (non-monotonic);
//   3. damping: H_ii += damp_percent * mean(diag H); the upper Cholesky factor U of H^-1
//      (cholesky.h). When a factorization fails, damp_percent grows by damp_increment and it is
//      retried (GPTQModel's recovery), up to max_damp_percent / max_damp_retries; if it still fails
//      the matrix is quantized with round-to-nearest and GptqResult says why;
//   4. columns left to right in blocks of block_size: each column is quantized, its error
//      (w - q) / U_jj is spread over the block's remaining columns at once, and over the columns
//      after the block in one batched update when the block ends ("lazy batch updates");
//   5. a group's scale and zero point are computed when its first column comes up, from the
//      group's current (error-updated) weights; per-channel (-1) params come from the whole
//      matrix after step 1.
// Rows are independent given U: they are processed in parallel on ThreadPool::global().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/int_quant.h"

namespace lathe {

struct GptqConfig {
  IntQuantConfig quant;            // bits, group size, symmetric, scale dtype
  bool act_order = false;          // AutoGPTQ desc_act
  double damp_percent = 0.1;       // of mean(diag H); AutoGPTQ's seed value
  double damp_increment = 0.0015;  // added per failed factorization (GPTQModel)
  double max_damp_percent = 1.0;   // give up (RTN fallback) beyond this ...
  int max_damp_retries = 40;       // ... or after this many retries
  int64_t block_size = 128;        // columns per lazy-update block
};

struct GptqResult {
  IntQuantizedMatrix q;            // codes in the original column order, g_idx per column
  double loss = 0.0;               // sum over rows of sum (w - q)^2 / U_jj^2 / 2 (the reference's)
  double damp_percent_used = 0.0;  // the damping that factorized
  int64_t dead_columns = 0;        // columns whose Hessian diagonal was 0 (weights zeroed)
  bool fell_back_to_rtn = false;
  std::string fallback_reason;  // why, when fell_back_to_rtn ("H is not positive definite ...")
};

// Quantizes w [rows, cols] (row-major) with the Hessian h [cols, cols] (row-major; copied).
// kInvalidArgument for a bad config or a Hessian of the wrong size or with non-finite values.
Result<GptqResult> gptq_quantize(const float* w, int64_t rows, int64_t cols,
                                 const std::vector<double>& h, const GptqConfig& config);

// The same with a float32 Hessian.
Result<GptqResult> gptq_quantize(const float* w, int64_t rows, int64_t cols,
                                 const std::vector<float>& h, const GptqConfig& config);

}  // namespace lathe
