// Lookahead for model runners (ModelInput::next_step_continues, model_io.h): the input of the step
// that follows a decode-only step when every sequence decodes one more token, and the check that a
// later input is that step (or, with constrained rows, runs that step's forward pass: late-bound
// sampling rows). Pure functions of ModelInput; no backend code.
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
// samples). Constrained rows keep this step's masks, which are stale (has_constrained_rows()).
std::optional<ModelInput> predict_next_decode(const ModelInput& in, int32_t block_size);

// Whether `a` and `b` compute the same step: every field but next_step_continues is equal.
bool same_step(const ModelInput& a, const ModelInput& b);

// Whether some sampling row of `in` is constrained (SamplingRow::is_constrained). The mask of such
// a row in the step after `in` follows from the token `in` samples, so it is unknown when a runner
// looks ahead: the predicted step's sampling rows are late-bound. The runner may launch that step's
// forward pass early but must sample it with the rows of the real next input, which it accepts
// when same_forward() holds.
bool has_constrained_rows(const ModelInput& in);

// Whether `a` and `b` run the same forward pass and sample the same rows of it: every field
// same_step() compares but the contents of the sampling rows (their number must be equal). A
// runner that left a predicted step's sampling for later takes the real input `b` as that step
// when this holds, and samples with b's rows (masks, bans, steps, seeds).
bool same_forward(const ModelInput& a, const ModelInput& b);

}  // namespace lathe
