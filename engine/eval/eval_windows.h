// Which positions of a tokenized text an evaluation runs and scores: windows of `context` tokens
// that start every `stride` tokens (HF's sliding-window perplexity). Every window is a full
// `context` tokens; the first scores every prediction it makes (targets 1 .. context-1), each later
// one only its last `stride` targets, which the windows before it did not score, so each scored
// target sees at least context - stride tokens of context (except in the first window). Tokens
// after the last full window are not scored (fewer than `stride`).
//
// `score_from` > 0 narrows every window to its targets at offsets >= score_from (the tokens before
// are context only). With stride == context and score_from = context / 2 + 1 this is the plan of
// llama.cpp's `llama-perplexity` (non-overlapping chunks of n_ctx tokens, each scoring the
// predictions made from its second half: targets n_ctx/2 + 1 .. n_ctx - 1).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

struct EvalWindow {
  int64_t begin = 0;         // first token of the window in the text
  int32_t first_target = 1;  // first scored target, as an offset in the window (>= 1)
};

// context >= 2, 1 <= stride <= context, 0 <= score_from < context; max_windows 0 = all.
// kInvalidArgument when the text holds fewer than `context` tokens, or for bad sizes (the message
// names --ctx / --stride / --max-windows / --score-from).
Result<std::vector<EvalWindow>> plan_eval_windows(int64_t num_tokens, int32_t context,
                                                  int32_t stride, int32_t max_windows,
                                                  int32_t score_from = 0);

}  // namespace lathe
