#include "engine/runtime/draft_acceptance.h"

#include <utility>

#include "engine/core/strings.h"

namespace lathe {

Status accept_draft_tokens(const ModelInput& in, ModelOutput* out) {
  const int32_t rows = in.num_sample_rows();
  if (out->tokens.size() != static_cast<size_t>(rows))
    return internal_error(
        strformat("%zu sampled tokens for %d sampled rows", out->tokens.size(), rows));
  if (!in.has_drafts()) {
    out->num_tokens.clear();
    return Status();
  }
  out->num_tokens.assign(in.sample_seqs.size(), 0);
  size_t row = 0, kept = 0;
  for (size_t i = 0; i < in.sample_seqs.size(); ++i) {
    const int32_t c = in.sample_counts[i];
    const int32_t end = in.query_start[static_cast<size_t>(in.sample_seqs[i]) + 1];
    const TokenId* drafts = in.token_ids.data() + end - (c - 1);  // d_1 .. d_{c-1}
    int32_t n = 1;
    while (n < c && out->tokens[row + n - 1].token == drafts[n - 1]) ++n;
    for (int32_t j = 0; j < n; ++j) {
      if (kept + j != row + j) out->tokens[kept + j] = std::move(out->tokens[row + j]);
    }
    out->num_tokens[i] = n;
    kept += static_cast<size_t>(n);
    row += static_cast<size_t>(c);
  }
  out->tokens.resize(kept);
  return Status();
}

}  // namespace lathe
