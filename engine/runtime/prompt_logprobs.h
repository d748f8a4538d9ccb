// Prompt logprobs (the completions API's echo with logprobs, what evaluation harnesses use for
// log-likelihoods): the logprob of every prompt token given the tokens before it.
//
// The prompt runs through the runner's compute_logits() (all-position logits: sample_counts
// covering every token of a chunk) in chunks of kPromptLogprobChunk tokens, over KV blocks borrowed
// from the cache for the duration of the call and freed after (nothing is published to the prefix
// cache). Called on the engine thread between steps, so it never overlaps a step. Entry i is
// token i of the prompt with logprob log_softmax(logits after tokens[0..i-1])[token i] computed as
// the sampler's step 5 computes a chosen token's (row_logprobs), and top_k alternatives; entry 0
// has no context: logprob NaN, no alternatives.
#pragma once

#include <span>
#include <vector>

#include "engine/core/status.h"
#include "engine/kv/kv_cache_manager.h"
#include "engine/runtime/model_runner.h"

namespace lathe {

inline constexpr int32_t kPromptLogprobChunk = 64;

Result<std::vector<SampledToken>> compute_prompt_logprobs(ModelRunner& runner, KvCacheManager& kv,
                                                          std::span<const TokenId> prompt,
                                                          int32_t top_k);

}  // namespace lathe
