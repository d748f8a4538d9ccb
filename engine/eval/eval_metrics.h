// Per-position quality figures of a model's next-token distribution, and their accumulation over
// a text: the negative log-likelihood of the actual next token (perplexity), and against a
// reference model's distribution at the same position the KL divergence KL(ref || model), whether
// both put the same token on top, and the change in the probability of the actual token.
//
// Every figure is computed from raw logits in double precision: log p = l - max - log(sum exp(l -
// max)). KL(ref || model) = sum_v p_ref(v) (log p_ref(v) - log p_model(v)) >= 0 (tiny negative
// rounding is clamped to 0).
#pragma once

#include <cstdint>
#include <vector>

namespace lathe {

// One scored position. logits rows are [vocab] float32.
struct PositionScore {
  double nll = 0.0;       // -log p_model(target)
  double ref_nll = 0.0;   // -log p_ref(target) (with a reference)
  double kld = 0.0;       // KL(ref || model) (with a reference)
  bool same_top = false;  // argmax model == argmax ref (with a reference)
  double delta_p = 0.0;   // p_model(target) - p_ref(target) (with a reference)
};

// The score of `target` under `logits` alone (nll only).
PositionScore score_position(const float* logits, int64_t vocab, int32_t target);
// The score of `target` under `logits` against `ref_logits` (every field).
PositionScore score_position(const float* logits, const float* ref_logits, int64_t vocab,
                             int32_t target);

// Mean, median, 99th percentile and maximum of a sample (nearest-rank percentiles).
struct SummaryStats {
  double mean = 0.0;
  double median = 0.0;
  double p99 = 0.0;
  double max = 0.0;
};
SummaryStats summarize(std::vector<double> values);

// Sums of PositionScores over a text.
class EvalAccumulator {
 public:
  void add(const PositionScore& s, bool with_reference);

  int64_t count() const { return count_; }
  double mean_nll() const;
  double perplexity() const;            // exp(mean nll)
  double reference_perplexity() const;  // exp(mean ref nll)
  double top1_agreement() const;        // share of positions with the same top token
  double mean_delta_p() const;
  SummaryStats kld() const;  // over every position (each KL is kept: 8 bytes a position)

 private:
  int64_t count_ = 0;
  double nll_sum_ = 0.0, ref_nll_sum_ = 0.0, delta_p_sum_ = 0.0;
  int64_t same_top_ = 0;
  std::vector<double> kld_;
};

}  // namespace lathe
