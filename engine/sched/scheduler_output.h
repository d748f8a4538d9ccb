// One step's scheduling decision, as plain data. The engine core turns it into a ModelInput
// (build_model_input) and the scheduler's state already reflects it (num_computed_tokens advanced).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv/kv_cache_manager.h"

namespace lathe {

struct ScheduledSequence {
  RequestId id = 0;
  int32_t num_computed_tokens = 0;  // before this step: the position of token_ids[0]
  int32_t num_new_tokens = 0;       // tokens computed this step (== token_ids.size()), drafts too
  int32_t num_prompt_tokens = 0;
  // Of token_ids, the trailing ones that are proposed drafts (speculative decoding): the step
  // verifies them; 0 on every ordinary step.
  int32_t num_draft_tokens = 0;
  // The step computes the sequence's last uncomputed token: one token is sampled from its logits
  // (with drafts, one per draft more).
  bool sample = false;
  std::vector<TokenId> token_ids;    // the tokens computed this step, drafts last
  std::vector<int32_t> block_table;  // all of the sequence's blocks after this step's allocation

  int32_t context_len() const { return num_computed_tokens + num_new_tokens; }
  // Of this step's tokens, how many are prompt tokens (the rest are generated tokens: a decode or
  // a recompute after preemption).
  int32_t num_new_prompt_tokens() const {
    const int32_t end = context_len() < num_prompt_tokens ? context_len() : num_prompt_tokens;
    return end > num_computed_tokens ? end - num_computed_tokens : 0;
  }
};

// A sequence admitted from the waiting queue this step (first time, or again after preemption).
struct AdmittedSequence {
  RequestId id = 0;
  int32_t num_tokens = 0;         // tokens looked up in the prefix cache
  int32_t num_cached_tokens = 0;  // of which were found (prefix-cache hit)
  bool first_admission = true;    // false: re-admitted after preemption
};

// A sequence the cache can never hold (it needs more blocks than exist). The engine ends it with
// an error; Engine::submit's validation keeps this from happening.
struct FailedSequence {
  RequestId id = 0;
  int32_t num_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> seqs;  // in the order they were scheduled
  std::vector<AdmittedSequence> admitted;
  std::vector<RequestId> preempted;    // preempted by this call (blocks freed, back to waiting)
  std::vector<FailedSequence> failed;  // removed by this call
  int32_t num_batched_tokens = 0;      // sum of num_new_tokens (drafts included)
  int32_t num_draft_tokens = 0;        // sum of num_draft_tokens

  bool empty() const { return seqs.empty(); }
};

}  // namespace lathe
