// Flattens one step's SchedulerOutput into the runner's ModelInput (model_io.h): tokens,
// positions, KV slots, block tables, which sequences are sampled and, when some carry drafts, how
// many rows of each (sample_counts; left empty otherwise). Sampling rows are left empty: they
// depend on per-request state the engine core holds (make_sampling_row).
#pragma once

#include <span>

#include "engine/runtime/model_io.h"
#include "engine/runtime/sampling_params.h"
#include "engine/sched/scheduler_output.h"

namespace lathe {

ModelInput build_model_input(const SchedulerOutput& out, int32_t block_size);

// The sampler's view of a request at its next token (or, with drafts, at the token after the
// first drafts.size() drafts, as if they were accepted):
//   seed/step: the RNG stream (step = index of the token being sampled among the outputs);
//   banned_tokens: `stop_ids` (EOS and stop token ids) while fewer than min_tokens are generated;
//   history: prompt ++ output ++ drafts, only when a penalty is active;
//   logit_bias: the request's, copied per row.
struct SamplingRowInput {
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;
  std::span<const TokenId> tokens;  // prompt ++ output so far
  int32_t num_prompt_tokens = 0;
  std::span<const TokenId> stop_ids;
  std::span<const TokenId> drafts;  // the drafts before the sampled position (row j: the first j)
};
SamplingRow make_sampling_row(const SamplingRowInput& in);

}  // namespace lathe
