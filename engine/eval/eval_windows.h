// Which positions of a tokenized text an evaluation runs and scores: windows of `context` tokens
// that start every `stride` tokens (HF's sliding-window perplexity). Every window is a full
// `context` tokens; the first scores every prediction it makes (targets 1 .. context-1), each later
// one only its last `stride` targets, which the windows before it did not score, so each scored
// target sees at least context - stride tokens of context (except in the first window). Tokens
// after the last full window are not scored (fewer than `stride`).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

struct EvalWindow {
  int64_t begin = 0;         // first token of the window in the text
  int32_t first_target = 1;  // first scored target, as an offset in the window (>= 1)
};

// context >= 2, 1 <= stride <= context; max_windows 0 = all. kInvalidArgument when the text holds
// fewer than `context` tokens, or for bad sizes (the message names --ctx / --stride).
Result<std::vector<EvalWindow>> plan_eval_windows(int64_t num_tokens, int32_t context,
                                                  int32_t stride, int32_t max_windows);

}  // namespace lathe
