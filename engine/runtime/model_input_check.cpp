#include "engine/runtime/model_input_check.h"

#include "engine/core/strings.h"

namespace lathe {

Status check_model_input(const ModelInput& in, const ModelInputBounds& b, int64_t* total_pages) {
  const int64_t t_count = in.num_tokens();
  const int32_t s_count = in.num_seqs();
  if (t_count == 0 || s_count == 0)
    return invalid_argument("a step needs at least one token and one sequence");
  if (in.positions.size() != static_cast<size_t>(t_count) ||
      in.slot_mapping.size() != static_cast<size_t>(t_count))
    return invalid_argument("token_ids, positions and slot_mapping must have the same length");
  if (in.query_start.size() != static_cast<size_t>(s_count) + 1 || in.query_start[0] != 0 ||
      in.query_start[s_count] != t_count)
    return invalid_argument("query_start must have num_seqs + 1 entries from 0 to num_tokens");
  if (in.max_blocks_per_seq <= 0 ||
      in.block_tables.size() !=
          static_cast<size_t>(s_count) * static_cast<size_t>(in.max_blocks_per_seq))
    return invalid_argument("block_tables must hold num_seqs rows of max_blocks_per_seq entries");
  if (!in.sample_counts.empty() && in.sample_counts.size() != in.sample_seqs.size())
    return invalid_argument(strformat(
        "sample_counts must be empty or have one entry per sampled sequence (%zu), got %zu",
        in.sample_seqs.size(), in.sample_counts.size()));
  int64_t num_rows = 0;
  for (size_t i = 0; i < in.sample_seqs.size(); ++i) {
    const int32_t s = in.sample_seqs[i];
    if (s < 0 || s >= s_count || (i > 0 && s <= in.sample_seqs[i - 1]))
      return invalid_argument("sample_seqs must be ascending indices of scheduled sequences");
    const int32_t count = in.sample_count(i);
    const int32_t query = in.query_start[s + 1] - in.query_start[s];
    if (count < 1 || count > query)
      return invalid_argument(
          strformat("sampled sequence %d: sample count %d, must be in [1, its %d query tokens]", s,
                    count, query));
    num_rows += count;
  }
  if (in.sampling.size() != static_cast<size_t>(num_rows))
    return invalid_argument(strformat("sampling must have one row per sampled row (%lld), got %zu",
                                      static_cast<long long>(num_rows), in.sampling.size()));
  const int32_t bs = b.block_size;
  const int64_t num_slots = static_cast<int64_t>(b.num_blocks) * bs;
  int64_t pages_total = 0;
  for (int32_t s = 0; s < s_count; ++s) {
    const int32_t q0 = in.query_start[s], q1 = in.query_start[s + 1];
    const int32_t len = in.seq_lens[s];
    if (q1 <= q0 || len < q1 - q0)
      return invalid_argument(
          strformat("sequence %d: %d query tokens but context length %d", s, q1 - q0, len));
    const int32_t pages = (len + bs - 1) / bs;
    if (pages > in.max_blocks_per_seq)
      return invalid_argument(
          strformat("sequence %d: context length %d needs more than max_blocks_per_seq (%d) blocks",
                    s, len, in.max_blocks_per_seq));
    pages_total += pages;
    const int32_t* table = in.block_tables.data() + static_cast<int64_t>(s) * in.max_blocks_per_seq;
    for (int32_t p = 0; p < pages; ++p)
      if (table[p] < 0 || table[p] >= b.num_blocks)
        return invalid_argument(strformat("sequence %d: block id %d outside the cache's %d blocks",
                                          s, table[p], b.num_blocks));
    for (int32_t t = q0; t < q1; ++t) {
      const int32_t pos = len - (q1 - q0) + (t - q0);
      if (in.positions[t] != pos)
        return invalid_argument(
            strformat("token %d of sequence %d: position %d, expected %d from seq_lens", t, s,
                      in.positions[t], pos));
      const int64_t slot = in.slot_mapping[t];
      if (slot >= num_slots || (slot >= 0 && table[pos / bs] * int64_t{bs} + pos % bs != slot))
        return invalid_argument(
            strformat("token %d of sequence %d: slot %lld does not match its block table", t, s,
                      static_cast<long long>(slot)));
      if (in.token_ids[t] < 0 || in.token_ids[t] >= b.vocab_size)
        return invalid_argument(strformat("token id %d is outside the vocabulary (%lld)",
                                          in.token_ids[t], static_cast<long long>(b.vocab_size)));
    }
  }
  if (total_pages != nullptr) *total_pages = pages_total;
  return Status();
}

}  // namespace lathe
