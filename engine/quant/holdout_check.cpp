#include "engine/quant/holdout_check.h"

#include <algorithm>
#include <cmath>

#include "engine/core/strings.h"

namespace lathe {

int64_t default_holdout_samples(int64_t n) {
  if (n < 8) return 0;
  return std::max<int64_t>(1, n / 16);
}

std::vector<bool> holdout_mask(int64_t n, int64_t h) {
  std::vector<bool> mask(static_cast<size_t>(std::max<int64_t>(n, 0)), false);
  h = std::clamp<int64_t>(h, 0, std::max<int64_t>(n - 1, 0));
  for (int64_t j = 0; j < h; ++j) mask[static_cast<size_t>((j + 1) * n / h - 1)] = true;
  return mask;
}

HoldoutSummary summarize_holdout(const std::vector<HoldoutBlock>& blocks, const std::string& method,
                                 int64_t samples, int64_t tokens) {
  HoldoutSummary s;
  double log_sum = 0.0;
  for (const HoldoutBlock& b : blocks) {
    if (!(b.rtn_error > 0.0) || !(b.method_error >= 0.0)) continue;  // nothing to compare
    ++s.blocks;
    const double r = std::max(b.ratio(), 1e-12);
    log_sum += std::log(r);
    if (r >= 1.0) ++s.blocks_not_better;
  }
  if (s.blocks == 0) {
    s.message = "held-out check: nothing to compare (no held-out samples)";
    return s;
  }
  s.geomean_ratio = std::exp(log_sum / static_cast<double>(s.blocks));
  s.warn = s.geomean_ratio >= kHoldoutWarnRatio;
  const std::string facts = strformat(
      "on %lld held-out calibration samples (%lld tokens kept out of the fit), %s's block outputs "
      "have %.2fx the error of round-to-nearest on the same grid (geometric mean over %lld "
      "blocks; %lld not better)",
      static_cast<long long>(samples), static_cast<long long>(tokens), method.c_str(),
      s.geomean_ratio, static_cast<long long>(s.blocks),
      static_cast<long long>(s.blocks_not_better));
  if (!s.warn) {
    s.message = "held-out check: " + facts;
    return s;
  }
  s.message = "warning: " + method + " is not better than round-to-nearest here: " + facts +
              ". The calibration set does not generalize; try a calibration text in the model's "
              "own languages and domain (--calibration, e.g. calibration-en.txt for an English "
              "model), more samples (--num-samples, --seq-len)" +
              (method == "GPTQ" ? std::string(", or more damping (--damp-percent 0.2)") : "") +
              "; or use --scheme rtn";
  return s;
}

}  // namespace lathe
