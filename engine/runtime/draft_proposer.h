// The proposer seam of speculative decoding: before each step the engine core asks, per decoding
// sequence, for up to k draft tokens to follow it; the step verifies them (model_io.h,
// draft_acceptance.h). A proposer only ever guesses: whatever it proposes, the output is what the
// model alone would produce, so a bad proposer costs speed, never correctness.
//
// Called on the engine core's thread only, once per decoding sequence per step: it must be cheap
// (batch-256 steps are hot) and must not allocate once its output vector has grown.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/runtime/engine_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;

  // Writes at most `max_drafts` (>= 1) tokens proposed to follow `tokens` (the sequence's prompt ++
  // output) to `drafts`, replacing its contents; none when there is no proposal.
  virtual void propose(std::span<const TokenId> tokens, int32_t max_drafts,
                       std::vector<TokenId>* drafts) = 0;
};

// The proposer `config` names (resolved and validated), or null for method none.
std::unique_ptr<DraftProposer> create_draft_proposer(const SpeculativeConfig& config);

}  // namespace lathe
