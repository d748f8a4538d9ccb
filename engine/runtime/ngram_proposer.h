// Prompt-lookup (n-gram) draft proposals, as vLLM's "ngram" speculative method: find the most
// recent earlier occurrence of the sequence's last n tokens in prompt ++ output, n from
// prompt_lookup_max down to prompt_lookup_min, and propose the tokens that followed it. It costs
// nothing on the device and helps where outputs repeat their input (summaries, code edits,
// extraction, quoting).
#pragma once

#include "engine/runtime/draft_proposer.h"

namespace lathe {

class NgramProposer final : public DraftProposer {
 public:
  // 1 <= min_n <= max_n.
  NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}

  // Time: O(len(tokens) * n) per n tried, no allocation beyond `drafts`.
  void propose(std::span<const TokenId> tokens, int32_t max_drafts,
               std::vector<TokenId>* drafts) override;

 private:
  int32_t min_n_;
  int32_t max_n_;
};

}  // namespace lathe
