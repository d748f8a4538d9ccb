// Constrained decoding's seam in the engine: an automaton over tokens that says, at each output
// position, which tokens may come next (a JSON schema, a regex, a choice list, a tool call).
// The engine core keeps one state per sequence, puts the constraint and the state into the
// sequence's sampling row (SamplingRow::constraint: the runner looks the mask up with row_mask()
// once its forward pass is running; the CPU and CUDA samplers apply it) and advances the state
// with every token it appends. Implementation: engine/grammar/grammar_constraint.h.
//
// Thread contract: created on a request thread; once submitted, used only by the engine thread
// (the n choices of one request, and requests with the same grammar, share one, each sequence
// with its own state).
#pragma once

#include <bit>
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

// The mask of `row` (SamplingRow::allowed, or its constraint's, looked up now); null for an
// unconstrained row. A lookup uses the request's constraint, which only the engine thread may
// touch: runners call this on the thread that called execute() (one that samples on worker threads
// resolves every row first), after launching the step's forward pass where they can.
inline std::shared_ptr<const TokenMask> row_mask(const SamplingRow& row) {
  if (row.allowed || row.constraint == nullptr) return row.allowed;
  return row.constraint->allowed(row.constraint_state, row.constraint_end_ids);
}

// Whether `mask` allows some token that is not among `ids`. min_tokens yields to a grammar with
// it: EOS and stop ids stay banned while the grammar allows anything else, and are allowed once
// it allows nothing else (the output is complete and cannot continue), so such a request ends
// with "stop" instead of sampling from an all-masked row.
inline bool mask_allows_other_than(const TokenMask& mask, std::span<const TokenId> ids) {
  int64_t allowed = 0;
  for (const uint32_t word : mask) allowed += std::popcount(word);
  for (size_t i = 0; i < ids.size(); ++i) {
    const TokenId t = ids[i];
    bool repeated = false;
    for (size_t j = 0; j < i && !repeated; ++j) repeated = ids[j] == t;
    const size_t w = static_cast<size_t>(t) >> 5;
    if (!repeated && t >= 0 && w < mask.size() && ((mask[w] >> (t & 31)) & 1u) != 0) --allowed;
  }
  return allowed > 0;
}

}  // namespace lathe
