#include "engine/runtime/ngram_proposer.h"

#include <algorithm>

namespace lathe {

void NgramProposer::propose(std::span<const TokenId> tokens, int32_t max_drafts,
                            std::vector<TokenId>* drafts) {
  drafts->clear();
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_drafts <= 0) return;
  for (int64_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const TokenId* suffix = tokens.data() + (len - n);
    // Occurrences that start at i and end before the suffix's last token (so at least one token
    // follows them), most recent first.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (tokens[static_cast<size_t>(i)] != suffix[0] ||
          !std::equal(suffix + 1, suffix + n, tokens.data() + i + 1))
        continue;
      const int64_t from = i + n;
      const int64_t count = std::min<int64_t>(max_drafts, len - from);
      drafts->assign(tokens.begin() + from, tokens.begin() + from + count);
      return;
    }
  }
}

}  // namespace lathe
