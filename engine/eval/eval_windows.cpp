#include "engine/eval/eval_windows.h"

#include <algorithm>

#include "engine/core/strings.h"

namespace lathe {

Result<std::vector<EvalWindow>> plan_eval_windows(int64_t num_tokens, int32_t context,
                                                  int32_t stride, int32_t max_windows,
                                                  int32_t score_from) {
  if (context < 2) return invalid_argument(strformat("--ctx must be at least 2, got %d", context));
  if (stride < 1 || stride > context)
    return invalid_argument(
        strformat("--stride must be in [1, --ctx = %d], got %d", context, stride));
  if (max_windows < 0)
    return invalid_argument(strformat("--max-windows must be >= 0, got %d", max_windows));
  if (score_from < 0 || score_from >= context)
    return invalid_argument(strformat(
        "--score-from must be in [0, --ctx - 1 = %d] (0: score the sliding-window plan), got %d",
        context - 1, score_from));
  if (num_tokens < context)
    return invalid_argument(strformat(
        "the text has %lld tokens, fewer than one window of --ctx %d; pass a longer text or a "
        "smaller --ctx",
        static_cast<long long>(num_tokens), context));
  std::vector<EvalWindow> windows;
  for (int64_t begin = 0; begin + context <= num_tokens; begin += stride) {
    if (max_windows > 0 && static_cast<int32_t>(windows.size()) == max_windows) break;
    // Target 0 of a window has no prediction in it (stride == context): the first is offset 1.
    const int32_t plan_first = begin == 0 ? 1 : std::max(1, context - stride);
    windows.push_back({begin, std::max(plan_first, score_from)});
  }
  return windows;
}

}  // namespace lathe
