#include "engine/eval/eval_windows.h"

#include "engine/core/strings.h"

namespace lathe {

Result<std::vector<EvalWindow>> plan_eval_windows(int64_t num_tokens, int32_t context,
                                                  int32_t stride, int32_t max_windows) {
  if (context < 2) return invalid_argument(strformat("--ctx must be at least 2, got %d", context));
  if (stride < 1 || stride > context)
    return invalid_argument(
        strformat("--stride must be in [1, --ctx = %d], got %d", context, stride));
  if (max_windows < 0)
    return invalid_argument(strformat("--max-windows must be >= 0, got %d", max_windows));
  if (num_tokens < context)
    return invalid_argument(strformat(
        "the text has %lld tokens, fewer than one window of --ctx %d; pass a longer text or a "
        "smaller --ctx",
        static_cast<long long>(num_tokens), context));
  std::vector<EvalWindow> windows;
  for (int64_t begin = 0; begin + context <= num_tokens; begin += stride) {
    if (max_windows > 0 && static_cast<int32_t>(windows.size()) == max_windows) break;
    windows.push_back({begin, begin == 0 ? 1 : context - stride});
  }
  return windows;
}

}  // namespace lathe
