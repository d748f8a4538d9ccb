#include "engine/runtime/sampling_params.h"

#include <cmath>

#include "engine/core/strings.h"

namespace lathe {

namespace {
constexpr int32_t kMaxLogprobs = 20;
}

Status SamplingParams::validate(int64_t vocab_size) const {
  if (!std::isfinite(temperature) || temperature < 0.0f)
    return invalid_argument(strformat("temperature must be >= 0, got %g", temperature));
  if (!(top_p > 0.0f && top_p <= 1.0f))
    return invalid_argument(strformat("top_p must be in (0, 1], got %g", top_p));
  if (top_k < -1)
    return invalid_argument(
        strformat("top_k must be -1, 0 (off) or a positive count, got %d", top_k));
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    return invalid_argument(strformat("min_p must be in [0, 1], got %g", min_p));
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return invalid_argument(
        strformat("repetition_penalty must be > 0 (1 = off), got %g", repetition_penalty));
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return invalid_argument(
        strformat("presence_penalty must be in [-2, 2], got %g", presence_penalty));
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return invalid_argument(
        strformat("frequency_penalty must be in [-2, 2], got %g", frequency_penalty));
  if (max_tokens < 1)
    return invalid_argument(strformat("max_tokens must be >= 1, got %d", max_tokens));
  if (min_tokens < 0 || min_tokens > max_tokens)
    return invalid_argument(
        strformat("min_tokens must be in [0, max_tokens = %d], got %d", max_tokens, min_tokens));
  for (const std::string& s : stop)
    if (s.empty()) return invalid_argument("stop strings must not be empty");
  for (TokenId t : stop_token_ids)
    if (t < 0 || t >= vocab_size)
      return invalid_argument(strformat("stop_token_ids: %d is outside the vocabulary [0, %lld)", t,
                                        static_cast<long long>(vocab_size)));
  if (logprobs < -1 || logprobs > kMaxLogprobs)
    return invalid_argument(
        strformat("logprobs must be in [0, %d] (or unset), got %d", kMaxLogprobs, logprobs));
  if (prompt_logprobs < -1 || prompt_logprobs > kMaxLogprobs)
    return invalid_argument(strformat("prompt_logprobs must be in [0, %d] (or unset), got %d",
                                      kMaxLogprobs, prompt_logprobs));
  if (logit_bias.size() > kMaxLogitBias)
    return invalid_argument(strformat("logit_bias takes at most %zu tokens, got %zu", kMaxLogitBias,
                                      logit_bias.size()));
  for (const TokenBias& b : logit_bias) {
    if (b.token < 0 || b.token >= vocab_size)
      return invalid_argument(strformat("logit_bias: token %d is outside the vocabulary [0, %lld)",
                                        b.token, static_cast<long long>(vocab_size)));
    if (!(b.bias >= -100.0f && b.bias <= 100.0f))
      return invalid_argument(strformat(
          "logit_bias: the bias of token %d must be in [-100, 100], got %g", b.token, b.bias));
  }
  return Status::ok();
}

}  // namespace lathe
