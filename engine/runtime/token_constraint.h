// Constrained decoding's seam in the engine: an automaton over tokens that says, at each output
// position, which tokens may come next (a JSON schema, a regex, a choice list, a tool call).
// The engine core keeps one state per sequence, puts allowed(state) into the sequence's sampling
// row (SamplingRow::allowed, applied by the CPU and CUDA samplers) and advances the state with
// every token it appends. Implementation: engine/grammar/grammar_constraint.h.
//
// Thread contract: created on a request thread; once submitted, used only by the engine thread
// (the n choices of one request, and requests with the same grammar, share one, each sequence
// with its own state).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "engine/runtime/model_io.h"

namespace lathe {

class TokenConstraint {
 public:
  static constexpr int32_t kDead = -1;
  virtual ~TokenConstraint() = default;

  // The state before any output.
  virtual int32_t start() const = 0;
  // The state after `token`; kDead when the token was not allowed.
  virtual int32_t advance(int32_t state, TokenId token) = 0;
  // The tokens allowed at `state`: those that keep the output completable, plus `end_ids` (EOS,
  // stop ids) when the output so far is complete. A dead state allows only `end_ids`.
  virtual std::shared_ptr<const TokenMask> allowed(int32_t state,
                                                   std::span<const TokenId> end_ids) = 0;
};

}  // namespace lathe
