// Sampling on the GPU, steps 0 and 3-5 of the sampling contract (runtime/sampler.h) on logits that
// process_logits() has already banned and penalized; only token ids and the requested logprobs go
// back to the host.
//   0. NaN -> -inf (on read). If every logit is -inf: token 0, logprob -inf.
//   1 (masks only). A row with an allowed-token mask (mask_begin >= 0) reads tokens whose bit is
//      clear as -inf, the words in step_words or cache_words as its mask_in_cache says
//      (sampling_rows.h); null bases: masks are not applied here (process_logits() applied them).
//      Reading the mask costs the greedy pass one L1-resident word per 32 tokens, where a separate
//      pass would write -inf over most of the row.
//   3. greedy (temperature < 1e-5): argmax, lowest id on ties.
//   4. z = l / T, m = max z, e = exp(z - m), S = sum e (double), p = float(e / S); top_k keeps the
//      k largest p (ties: lower id first); top_p keeps the smallest prefix of the kept tokens in
//      that order whose mass (double) reaches top_p * (their total); min_p drops p < min_p * p_max;
//      the token is the argmax over kept tokens with p > 0 of p / E, E = -log(philox_uniform(seed,
//      step, id)) (E = 0 -> +inf), lowest id on ties.
//   5. num_logprobs >= 0: logprob = (l - max l) - float(log(sum exp(double(l - max l)))) of the
//   chosen
//      token and of the num_logprobs largest logits (ties: lower id first), at most
//      kMaxTopLogprobs.
// The cuts of step 4 are found without sorting: a radix select over the bits of p (4 passes of 8
// bits with shared-memory histograms of counts and double masses), then a scan in id order among
// the tokens equal to the cut value. Summation orders differ from the CPU's, so results agree with
// the CPU sampler except where two candidates are within rounding of each other.
//   logits: [*, vocab] float32; rows: [num_rows]; out: [num_rows]; top: [num_rows,
//   kMaxTopLogprobs].
// Launch: one block of 512 threads per row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/sampling_rows.h"
#include "engine/core/status.h"

namespace lathe::cuda {

Status sample_tokens(const float* logits, int64_t vocab, const DeviceSamplingRow* rows,
                     int32_t num_rows, DeviceSampledToken* out, DeviceTokenLogprob* top,
                     cudaStream_t stream, const uint32_t* step_words = nullptr,
                     const uint32_t* cache_words = nullptr);

}  // namespace lathe::cuda
