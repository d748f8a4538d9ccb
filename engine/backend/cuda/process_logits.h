// Logits processing before sampling, steps 1 and 2 of the sampling contract (runtime/sampler.h), in
// place on float32 logits:
//   1. banned tokens (ids outside [0, V) ignored) -> -inf; then l_t += bias for each of the row's
//      logit bias entries (ids unique within a row); then, when apply_masks and the row has a mask
//      (mask_begin >= 0), tokens whose bit in words[mask_begin + t / 32] is clear -> -inf, words
//      being step_words or cache_words as the row's mask_in_cache says (sampling_rows.h). Without
//      apply_masks the masks are left to sample_tokens(), which applies them as it reads (-inf is
//      kept by step 2, so the result is the same);
//   2. repetition penalty r != 1 on each DISTINCT token of the history (prompt and output):
//      l = l > 0 ? l / r : l * r; then for each token with c > 0 occurrences in the output part,
//      l = l - (f * c + p) (frequency f, presence p); the same float operations as the CPU sampler.
//   Step 0 (NaN -> -inf) happens in sample_tokens(); it commutes with these steps.
//   logits: [*, vocab] float32; rows: [num_rows]; banned, history: device int32 arrays indexed by
//   the rows' ranges; biases: the rows' bias entries; step_words, cache_words: allowed-token
//   bitmask words (either may be null when no row reads it);
//   counts: [num_rows, vocab] int32 scratch, all zero on entry and left all zero (distinct tokens
//   are found with atomics on it: a "seen" bit and an occurrence count).
// Launch: one block of 256 threads per row; rows with nothing to do return at once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/sampling_rows.h"
#include "engine/core/status.h"

namespace lathe::cuda {

Status process_logits(float* logits, int64_t vocab, const DeviceSamplingRow* rows, int32_t num_rows,
                      const int32_t* banned, const int32_t* history, const DeviceTokenBias* biases,
                      const uint32_t* step_words, const uint32_t* cache_words, bool apply_masks,
                      int32_t* counts, cudaStream_t stream);

}  // namespace lathe::cuda
