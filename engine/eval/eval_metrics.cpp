#include "engine/eval/eval_metrics.h"

#include <algorithm>
#include <cmath>

namespace lathe {
namespace {

struct LogSoftmax {
  double max = 0.0;
  double log_sum = 0.0;  // log sum exp(l - max)
  int64_t argmax = 0;
  double log_p(const float* l, int64_t v) const {
    return static_cast<double>(l[v]) - max - log_sum;
  }
};

LogSoftmax log_softmax(const float* l, int64_t vocab) {
  LogSoftmax s;
  s.max = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v)
    if (static_cast<double>(l[v]) > s.max) {
      s.max = l[v];
      s.argmax = v;
    }
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(l[v]) - s.max);
  s.log_sum = std::log(sum);
  return s;
}

}  // namespace

PositionScore score_position(const float* logits, int64_t vocab, int32_t target) {
  const LogSoftmax m = log_softmax(logits, vocab);
  PositionScore s;
  s.nll = -m.log_p(logits, target);
  return s;
}

PositionScore score_position(const float* logits, const float* ref_logits, int64_t vocab,
                             int32_t target) {
  const LogSoftmax m = log_softmax(logits, vocab);
  const LogSoftmax r = log_softmax(ref_logits, vocab);
  PositionScore s;
  s.nll = -m.log_p(logits, target);
  s.ref_nll = -r.log_p(ref_logits, target);
  double kl = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double lr = r.log_p(ref_logits, v);
    kl += std::exp(lr) * (lr - m.log_p(logits, v));
  }
  s.kld = std::max(kl, 0.0);
  s.same_top = m.argmax == r.argmax;
  s.delta_p = std::exp(-s.nll) - std::exp(-s.ref_nll);
  return s;
}

SummaryStats summarize(std::vector<double> values) {
  SummaryStats s;
  if (values.empty()) return s;
  double sum = 0.0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.median = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  // Nearest rank: the smallest value with at least 99% of the sample at or below it.
  const size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(n)));
  s.p99 = values[std::max<size_t>(rank, 1) - 1];
  s.max = values.back();
  return s;
}

void EvalAccumulator::add(const PositionScore& s, bool with_reference) {
  ++count_;
  nll_sum_ += s.nll;
  if (!with_reference) return;
  ref_nll_sum_ += s.ref_nll;
  delta_p_sum_ += s.delta_p;
  same_top_ += s.same_top ? 1 : 0;
  kld_.push_back(s.kld);
}

double EvalAccumulator::mean_nll() const {
  return count_ > 0 ? nll_sum_ / static_cast<double>(count_) : 0.0;
}
double EvalAccumulator::perplexity() const {
  return std::exp(mean_nll());
}
double EvalAccumulator::reference_perplexity() const {
  return count_ > 0 ? std::exp(ref_nll_sum_ / static_cast<double>(count_)) : 0.0;
}
double EvalAccumulator::top1_agreement() const {
  return count_ > 0 ? static_cast<double>(same_top_) / static_cast<double>(count_) : 0.0;
}
double EvalAccumulator::mean_delta_p() const {
  return count_ > 0 ? delta_p_sum_ / static_cast<double>(count_) : 0.0;
}
SummaryStats EvalAccumulator::kld() const {
  return summarize(kld_);
}

}  // namespace lathe
