// The CPU reference sampler; the steps are numbered as in sampler.h.
#include "engine/runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "engine/core/philox.h"
#include "engine/runtime/token_constraint.h"

namespace lathe {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void apply_penalties(float* logits, int64_t vocab, const SamplingRow& row) {
  const bool repetition = row.repetition_penalty != 1.0f;
  const bool counted = row.frequency_penalty != 0.0f || row.presence_penalty != 0.0f;
  if (!repetition && !counted) return;
  const std::vector<TokenId>& hist = row.history_tokens;
  std::vector<TokenId> sorted;
  if (repetition) {
    sorted.assign(hist.begin(), hist.end());
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    const float r = row.repetition_penalty;
    for (TokenId t : sorted) {
      if (t < 0 || t >= vocab) continue;
      const float l = logits[t];
      logits[t] = l > 0 ? l / r : l * r;
    }
  }
  if (counted) {
    const size_t start =
        std::min(hist.size(), static_cast<size_t>(std::max(0, row.history_prompt_len)));
    sorted.assign(hist.begin() + static_cast<std::ptrdiff_t>(start), hist.end());
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size();) {
      size_t j = i;
      while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
      const TokenId t = sorted[i];
      if (t >= 0 && t < vocab)
        logits[t] =
            logits[t] - (row.frequency_penalty * static_cast<float>(j - i) + row.presence_penalty);
      i = j;
    }
  }
}

// Index of the largest value, lowest index on ties.
int64_t argmax(const float* v, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

// Steps 4a-4e on the penalized logits; returns the chosen token.
TokenId sample_random(const float* logits, int64_t vocab, const SamplingRow& row) {
  thread_local std::vector<float> p;
  thread_local std::vector<int32_t> ids;
  p.resize(static_cast<size_t>(vocab));

  // a. softmax of logits / temperature.
  float m = kNegInf;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i] = logits[i] / row.temperature;
    m = std::max(m, p[i]);
  }
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i] = std::exp(p[i] - m);
    sum += p[i];
  }
  float p_max = 0.f;
  for (int64_t i = 0; i < vocab; ++i) {
    p[i] = static_cast<float>(static_cast<double>(p[i]) / sum);
    p_max = std::max(p_max, p[i]);
  }
  const float* pp = p.data();
  auto before = [pp](int32_t a, int32_t b) { return pp[a] > pp[b] || (pp[a] == pp[b] && a < b); };

  // b. top-k: `ids` holds the kept tokens, sorted by `before`, when any truncation applies.
  bool all_kept = true;
  const bool top_p_on = row.top_p < 1.0f;
  if (row.top_k > 0 && row.top_k < vocab) {
    ids.resize(static_cast<size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::nth_element(ids.begin(), ids.begin() + row.top_k, ids.end(), before);
    ids.resize(static_cast<size_t>(row.top_k));
    std::sort(ids.begin(), ids.end(), before);
    all_kept = false;
  }

  // c. top-p over the kept tokens, renormalized.
  if (top_p_on) {
    if (all_kept) {
      // Sort only as far as needed: the nucleus is usually a few tokens of a large vocabulary.
      ids.resize(static_cast<size_t>(vocab));
      std::iota(ids.begin(), ids.end(), 0);
      double total = 0.0;
      for (int64_t i = 0; i < vocab; ++i) total += pp[i];
      const double target = static_cast<double>(row.top_p) * total;
      int64_t sorted = 0;
      int64_t keep = vocab;
      for (int64_t want = std::min<int64_t>(64, vocab);;
           want = std::min<int64_t>(want * 8, vocab)) {
        // Sorting [sorted, end) again keeps the global order: all of [0, sorted) precede the rest.
        std::partial_sort(ids.begin() + sorted, ids.begin() + want, ids.end(), before);
        double mass = 0.0;
        int64_t r = 0;
        while (r < want && mass < target) mass += pp[ids[r++]];
        if (mass >= target || want == vocab) {
          keep = r;
          break;
        }
        sorted = want;
      }
      ids.resize(static_cast<size_t>(std::max<int64_t>(keep, 1)));
      all_kept = false;
    } else {
      double total = 0.0;
      for (int32_t t : ids) total += pp[t];
      const double target = static_cast<double>(row.top_p) * total;
      double mass = 0.0;
      size_t r = 0;
      while (r < ids.size() && mass < target) mass += pp[ids[r++]];
      ids.resize(std::max<size_t>(r, 1));
    }
  }

  // d. min-p threshold, e. the exponential race.
  const float threshold = row.min_p > 0.0f ? row.min_p * p_max : 0.0f;
  TokenId best = -1;
  float best_key = -1.0f;
  auto consider = [&](int32_t i) {
    const float pi = pp[i];
    if (!(pi > 0.0f) || pi < threshold) return;
    const float e = -std::log(philox_uniform(row.seed, row.step, static_cast<uint32_t>(i)));
    const float key = e > 0.0f ? pi / e : std::numeric_limits<float>::infinity();
    if (key > best_key || (key == best_key && i < best)) {
      best_key = key;
      best = i;
    }
  };
  if (all_kept) {
    for (int64_t i = 0; i < vocab; ++i) consider(static_cast<int32_t>(i));
  } else {
    for (int32_t i : ids) consider(i);
  }
  return best >= 0 ? best : static_cast<TokenId>(argmax(pp, vocab));
}

}  // namespace

SampledToken sample_token(float* logits, int64_t vocab_size, const SamplingRow& row) {
  const std::shared_ptr<const TokenMask> mask = row_mask(row);
  return sample_token(logits, vocab_size, row, mask.get());
}

SampledToken sample_token(float* logits, int64_t vocab_size, const SamplingRow& row,
                          const TokenMask* allowed) {
  SampledToken out;
  if (vocab_size <= 0) return out;
  for (int64_t i = 0; i < vocab_size; ++i)
    if (std::isnan(logits[i])) logits[i] = kNegInf;
  for (TokenId t : row.banned_tokens)
    if (t >= 0 && t < vocab_size) logits[t] = kNegInf;
  for (const TokenBias& b : row.logit_bias)
    if (b.token >= 0 && b.token < vocab_size) logits[b.token] += b.bias;
  if (allowed != nullptr) {
    const TokenMask& mask = *allowed;
    const int64_t covered = std::min<int64_t>(vocab_size, static_cast<int64_t>(mask.size()) * 32);
    for (int64_t i = 0; i < covered; ++i)
      if (((mask[static_cast<size_t>(i >> 5)] >> (i & 31)) & 1u) == 0) logits[i] = kNegInf;
    for (int64_t i = covered; i < vocab_size; ++i) logits[i] = kNegInf;
  }
  apply_penalties(logits, vocab_size, row);

  const float max_logit = logits[argmax(logits, vocab_size)];
  if (max_logit == kNegInf) {
    out.token = 0;
  } else if (row.is_greedy()) {
    out.token = static_cast<TokenId>(argmax(logits, vocab_size));
  } else {
    out.token = sample_random(logits, vocab_size, row);
  }

  if (row.num_logprobs >= 0) row_logprobs(logits, vocab_size, row.num_logprobs, &out);
  return out;
}

void row_logprobs(const float* logits, int64_t vocab_size, int32_t num_logprobs,
                  SampledToken* out) {
  const float max_logit = logits[argmax(logits, vocab_size)];
  double sum = 0.0;
  if (max_logit != kNegInf)
    for (int64_t i = 0; i < vocab_size; ++i)
      sum += std::exp(static_cast<double>(logits[i] - max_logit));
  const float log_sum = max_logit == kNegInf ? 0.f : static_cast<float>(std::log(sum));
  auto logprob = [&](int64_t i) {
    return max_logit == kNegInf ? kNegInf : (logits[i] - max_logit) - log_sum;
  };
  out->logprob = out->token >= 0 && out->token < vocab_size ? logprob(out->token) : kNegInf;
  const int64_t k = std::min<int64_t>(num_logprobs, vocab_size);
  out->top_logprobs.clear();
  if (k > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab_size));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    out->top_logprobs.reserve(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) out->top_logprobs.push_back({ids[i], logprob(ids[i])});
  }
}

}  // namespace lathe
