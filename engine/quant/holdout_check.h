// The held-out check of the calibrated schemes (gptq, awq): a few calibration samples are kept out
// of every statistic the method fits (GPTQ's Hessians, AWQ's activation means, scale and clip
// searches) and only run through the blocks. After each block is quantized, its output on those
// samples is computed three ways from the same input: with the float weights (the reference), with
// the method's quantized block, and with round-to-nearest on the same grid; the mean squared
// errors against the reference are the block's HoldoutBlock. At the end the per-block ratios
// (method / RTN) are summarized, and when the method is not better than RTN on them
// (geometric-mean ratio >= kHoldoutWarnRatio) the summary is a warning that says what to try.
//
// Held-out samples are spread evenly over the set (sample floor((j + 1) * n / h) - 1 for j < h), so
// a plain-text file contributes every region to both sides. What the check can see: a calibration
// set too small or too uniform for the method (it overfits: the fitted statistics do not hold on
// other samples of the same text), a bad --damp-percent. What it cannot see: a calibration text
// of another domain than the user's own (the held-out samples come from the same text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

constexpr double kHoldoutWarnRatio = 1.0;

// The default number of held-out samples for a set of `num_samples`: one in 16, at least 1 from 8
// samples on, none below 8 (the check is skipped).
int64_t default_holdout_samples(int64_t num_samples);

// mask[i] is true for the held-out samples; h is clamped to [0, n - 1] (at least one sample fits).
std::vector<bool> holdout_mask(int64_t num_samples, int64_t holdout);

// One block's output error on the held-out samples, mean squared difference from the float block.
struct HoldoutBlock {
  double method_error = 0.0;
  double rtn_error = 0.0;
  double ratio() const { return rtn_error > 0.0 ? method_error / rtn_error : 1.0; }
};

struct HoldoutSummary {
  int64_t blocks = 0;
  int64_t blocks_not_better = 0;  // ratio >= 1
  double geomean_ratio = 1.0;     // over the blocks
  bool warn = false;
  std::string message;  // one line for the log; a warning with what to try when `warn`
};

// `method` is "GPTQ" or "AWQ"; `samples` / `tokens` describe the held-out part.
HoldoutSummary summarize_holdout(const std::vector<HoldoutBlock>& blocks, const std::string& method,
                                 int64_t samples, int64_t tokens);

}  // namespace lathe
