// Turns a row of logits into a token: the CPU reference sampler. The CUDA sampler implements the
// same contract, step by step, so that seeded sampling agrees across backends. l_i is the logit of
// token i (float32), V the vocabulary size.
//   0. NaN logits count as -inf.
//   1. banned tokens (ids outside [0, V) are ignored) -> -inf; then each logit_bias entry in range:
//      l_t = l_t + bias (in list order); then, with an `allowed` mask, every token whose bit is
//      clear -> -inf.
//   2. penalties, when set:
//      repetition r != 1: each DISTINCT token t of history_tokens (prompt and output):
//        l_t = l_t > 0 ? l_t / r : l_t * r.
//      then frequency f / presence p != 0: for each token t with c_t > 0 occurrences in the output
//      part
//        history_tokens[history_prompt_len:]:  l_t = l_t - (f * c_t + p).
//   3. greedy (temperature < 1e-5): the argmax, lowest id on ties.
//   4. otherwise, in float32 unless stated:
//      a. z_i = l_i / temperature; m = max z; e_i = exp(z_i - m); S = sum of e_i (double);
//         p_i = e_i / S.
//      b. top_k > 0 and < V: keep the top_k largest p (ties: lower id first); otherwise keep all.
//      c. top_p < 1: order the kept tokens by p descending (ties: lower id first); keep the token
//      of rank
//         r iff (sum of p over ranks < r) < top_p * (sum of p over the kept tokens), sums in double
//         — the smallest prefix whose renormalized mass reaches top_p.
//      d. min_p > 0: drop kept tokens with p_i < min_p * p_max (p_max: the largest p; always kept).
//      e. the exponential race: among kept tokens with p_i > 0 choose the argmax of p_i / E_i, with
//         E_i = -log(philox_uniform(seed, step, i)) (E_i = 0 makes the key +inf), lowest id on
//         ties. This is an exact draw from the kept tokens' renormalized distribution, and each
//         token's random number depends only on (seed, step, token id), never on the batch.
//   5. logprobs (num_logprobs >= 0): the log-softmax of the logits after step 2 (before
//   temperature),
//      logprob_i = (l_i - max l) - log(sum_j exp(l_j - max l)) (sum in double); `logprob` is the
//      chosen token's; `top_logprobs` the num_logprobs largest (at most V), highest first, ties
//      lower id first.
//   If every logit is -inf after step 2, the result is token 0 (logprobs -inf).
#pragma once

#include <cstdint>

#include "engine/runtime/model_io.h"

namespace lathe {

// logits: [vocab_size], modified in place (used as scratch). The row's mask is row_mask(row)
// (token_constraint.h: a lookup on the calling thread for a row with a constraint).
SampledToken sample_token(float* logits, int64_t vocab_size, const SamplingRow& row);
// The same with the row's mask given (null: none), ignoring the row's own: for callers that
// sample rows on worker threads after resolving their masks on the engine thread.
SampledToken sample_token(float* logits, int64_t vocab_size, const SamplingRow& row,
                          const TokenMask* mask);

// Step 5 alone on a row of logits: fills out->logprob (of out->token) and, for num_logprobs > 0,
// out->top_logprobs, exactly as sample_token() does (prompt logprobs use it on raw logits).
void row_logprobs(const float* logits, int64_t vocab_size, int32_t num_logprobs, SampledToken* out);

}  // namespace lathe
