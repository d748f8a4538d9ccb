// Per-request generation parameters (OpenAI / vLLM semantics). Plain data; validate() returns an
// error naming the offending field, e.g. "top_p must be in (0, 1], got 1.5".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/runtime/model_io.h"
#include "engine/runtime/token_constraint.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

inline constexpr size_t kMaxLogitBias = 1024;

struct SamplingParams {
  float temperature = 1.0f;  // 0 (or below 1e-5) = greedy
  float top_p = 1.0f;        // nucleus mass in (0, 1]
  int32_t top_k = 0;         // 0 or -1 = off
  float min_p = 0.0f;        // drop tokens with p < min_p * p_max; 0 = off
  float repetition_penalty =
      1.0f;                       // HF/vLLM: logits of seen tokens (prompt and output) / or * by it
  float presence_penalty = 0.0f;  // OpenAI: minus this once per token present in the output
  float frequency_penalty = 0.0f;  // OpenAI: minus this times the token's count in the output
  std::optional<uint64_t>
      seed;  // same seed + same prompt -> same output; unset: random per request

  int32_t max_tokens = 16;        // generated tokens at most (the engine clamps to max-model-len)
  int32_t min_tokens = 0;         // EOS and stop tokens are ignored until this many are generated
  std::vector<std::string> stop;  // stop strings; the output ends before the first match
  std::vector<TokenId> stop_token_ids;  // extra ids that end generation (the token is not shown)
  bool ignore_eos = false;              // keep going past EOS (benchmarks)
  bool skip_special_tokens = true;      // leave control tokens out of the text
  int32_t logprobs = -1;  // -1: none; 0: the chosen token's logprob; k > 0: also top-k
  // -1: none; k >= 0: the logprob of every prompt token given the ones before it (and k
  // alternatives), delivered with the first output token (prompt_logprobs.h).
  int32_t prompt_logprobs = -1;
  // OpenAI's logit_bias: added to these tokens' logits before sampling, each in [-100, 100], at
  // most kMaxLogitBias entries, ids inside the vocabulary.
  std::vector<TokenBias> logit_bias;
  // Constrained decoding (structured output, tool calls): which tokens may come next; null =
  // unconstrained. Shared by the choices of one request; used by the engine thread once
  // submitted (token_constraint.h).
  std::shared_ptr<TokenConstraint> constraint;

  bool is_greedy() const { return temperature < 1e-5f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }

  // Checks ranges; vocab_size bounds stop_token_ids. Errors name the field.
  Status validate(int64_t vocab_size) const;
};

}  // namespace lathe
