// Which draft tokens a multi-token step accepts (speculative decoding, model_io.h). One pure
// function, shared by every model runner, so that all backends accept exactly the same tokens.
//
// For a sampled sequence with count c (ModelInput::sample_count), the drafts are its last c - 1
// input tokens d_1..d_{c-1}, and sampled row j gave s_j (the token after trailing token j). s_0 is
// accepted; while j < c - 1 and s_j == d_{j+1}, s_{j+1} is accepted too. So 1..c tokens come out:
// the accepted drafts and the first token that differs (or the bonus token after all drafts).
// Each s_j is what a run without drafts would sample at that output index, given the drafts before
// it were right (seeded draws depend only on seed, step and token; greedy on the logits), so the
// accepted tokens are exactly those of a run without speculation.
#pragma once

#include "engine/core/status.h"
#include "engine/runtime/model_io.h"

namespace lathe {

// On entry out->tokens holds one sampled token per sampled row of `in` (in.num_sample_rows(), in
// the order of in.sampling); on return it holds the accepted tokens, sequence after sequence, with
// out->num_tokens giving each sample_seqs entry's share. A step without drafts is left as it is
// (num_tokens empty: one token each). `in` must have passed check_model_input(). Errors: a row
// count that does not match the input.
Status accept_draft_tokens(const ModelInput& in, ModelOutput* out);

}  // namespace lathe
