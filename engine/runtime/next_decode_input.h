// Lookahead for model runners (ModelInput::next_step_continues, model_io.h): the input of the step
// that follows a decode-only step when every sequence decodes one more token, and the check that a
// later input is that step. Pure functions of ModelInput; no backend code.
#pragma once

#include <optional>

#include "engine/runtime/model_io.h"

namespace lathe {

// The step after `in` if each of its sequences decodes one more token in the blocks it already
// has: positions, slots, seq_lens and max_seq_len one further, sampling rows' step + 1, everything
// else unchanged; token ids 0 (the runner fills in the tokens this step samples, on the device).
// nullopt when that step cannot be known now: a sequence with other than one token or not
// sampled, a sampled sequence with drafts, a next position that opens a new KV block (its block is
// not allocated yet), or a sampling row with penalty history (it grows by the token this step
// samples).
std::optional<ModelInput> predict_next_decode(const ModelInput& in, int32_t block_size);

// Whether `a` and `b` compute the same step: every field but next_step_continues is equal.
bool same_step(const ModelInput& a, const ModelInput& b);

}  // namespace lathe
