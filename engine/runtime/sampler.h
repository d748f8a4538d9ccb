// Turns a row of logits into a token: the CPU reference sampler. The CUDA sampler implements the
// same contract, step by step, so that seeded sampling agrees across backends:
//   1. banned tokens -> -inf.
//   2. penalties: repetition (each distinct token of history_tokens: logit > 0 ? logit / r : logit * r),
//      then frequency and presence over the output part of history (logit -= f * count + p * (count > 0)).
//   3. greedy (temperature < 1e-5): argmax, lowest id on ties. Logprobs come from the penalized logits.
//   4. otherwise logits / temperature -> softmax -> keep top_k largest (ties: lower id first) -> keep the
//      smallest prefix of the descending-probability order whose mass reaches top_p -> drop p < min_p * p_max
//      -> choose argmax over kept tokens of p_i / E_i with E_i = -log(philox_uniform(seed, step, i))
//      (an exponential race: an exact draw from the renormalized distribution).
//   5. logprobs (when num_logprobs >= 0): log-softmax of the logits after step 2 (before temperature),
//      the chosen token's value and the top num_logprobs.
#pragma once

#include <cstdint>

#include "engine/runtime/model_io.h"

namespace lathe {

// logits: [vocab_size], modified in place (used as scratch).
SampledToken sample_token(float* logits, int64_t vocab_size, const SamplingRow& row);

}  // namespace lathe
