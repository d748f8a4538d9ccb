// A request as the scheduler sees it: its tokens and how many of them have K/V in the cache.
//
// The one rule of scheduling: each step, a scheduled sequence computes some of its
// num_tokens() - num_computed_tokens uncomputed tokens. Prefill, chunked prefill, decode, a
// prefix-cache hit (num_computed_tokens jumps ahead) and recompute after preemption
// (num_computed_tokens drops to 0) are all cases of it. When a step brings num_computed_tokens up
// to num_tokens(), the model samples one token, which append_token() adds.
//
// Speculative decoding: a decoding sequence may carry proposed draft tokens. They ride in the step
// after its last token (num_computed_tokens then runs ahead of num_tokens() until the step's result
// is known), the model verifies them, and append_tokens() adds the accepted drafts and one more
// token, rolling num_computed_tokens back by the rejected ones. Drafts never enter `tokens`, so
// the prefix cache only ever hashes verified tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv/kv_cache_manager.h"

namespace lathe {

enum class SeqStatus { kWaiting, kRunning };

struct Sequence {
  RequestId id = 0;
  std::vector<TokenId> tokens;  // prompt ++ generated
  int32_t num_prompt_tokens = 0;
  // Tokens whose K/V are in the cache once the steps scheduled so far have run. schedule() advances
  // it when it schedules tokens (the step that computes them is the next one run).
  int32_t num_computed_tokens = 0;
  uint64_t extra_key = 0;  // mixed into block hashes (e.g. a LoRA id); 0 = none
  SeqStatus status = SeqStatus::kWaiting;
  uint64_t arrival_index = 0;      // FCFS order, assigned by Scheduler::add()
  int32_t num_cached_tokens = -1;  // prefix-cache hit at first admission; -1 before it
  // Proposed tokens to follow `tokens` (Scheduler::set_draft_tokens); schedule() trims them to what
  // the step carries, append_tokens() clears them.
  std::vector<TokenId> draft_tokens;
  int32_t num_scheduled_drafts = 0;  // drafts in the scheduled step whose result is not yet in

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  int32_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
};

}  // namespace lathe
