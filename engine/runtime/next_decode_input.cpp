#include "engine/runtime/next_decode_input.h"

#include <algorithm>

namespace lathe {

std::optional<ModelInput> predict_next_decode(const ModelInput& in, int32_t block_size) {
  const int32_t s = in.num_seqs();
  if (s == 0 || block_size <= 0 || in.num_tokens() != s ||
      static_cast<int32_t>(in.sample_seqs.size()) != s ||
      in.sampling.size() != in.sample_seqs.size() || in.has_drafts())
    return std::nullopt;
  for (int32_t i = 0; i < s; ++i) {
    const size_t k = static_cast<size_t>(i);
    if (in.sample_seqs[k] != i || in.query_start[k] != i ||
        (in.positions[k] + 1) % block_size == 0 || !in.sampling[k].history_tokens.empty())
      return std::nullopt;
  }
  ModelInput next = in;
  std::fill(next.token_ids.begin(), next.token_ids.end(), 0);
  for (int32_t& p : next.positions) ++p;
  for (int64_t& slot : next.slot_mapping) ++slot;
  for (int32_t& len : next.seq_lens) ++len;
  ++next.max_seq_len;
  for (SamplingRow& row : next.sampling) ++row.step;
  return next;
}

bool same_forward(const ModelInput& a, const ModelInput& b) {
  return a.token_ids == b.token_ids && a.positions == b.positions &&
         a.slot_mapping == b.slot_mapping && a.query_start == b.query_start &&
         a.seq_lens == b.seq_lens && a.block_tables == b.block_tables &&
         a.max_blocks_per_seq == b.max_blocks_per_seq && a.max_seq_len == b.max_seq_len &&
         a.max_query_len == b.max_query_len && a.sample_seqs == b.sample_seqs &&
         a.sample_counts == b.sample_counts && a.sampling.size() == b.sampling.size();
}

bool same_step(const ModelInput& a, const ModelInput& b) {
  return same_forward(a, b) && a.sampling == b.sampling;
}

bool has_constrained_rows(const ModelInput& in) {
  return std::any_of(in.sampling.begin(), in.sampling.end(),
                     [](const SamplingRow& r) { return r.is_constrained(); });
}

}  // namespace lathe
