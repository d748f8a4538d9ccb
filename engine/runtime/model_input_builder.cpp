#include "engine/runtime/model_input_builder.h"

#include <algorithm>

namespace lathe {

ModelInput build_model_input(const SchedulerOutput& out, int32_t block_size) {
  ModelInput in;
  const size_t num_seqs = out.seqs.size();
  in.query_start.reserve(num_seqs + 1);
  in.seq_lens.reserve(num_seqs);
  in.token_ids.reserve(out.num_batched_tokens);
  in.positions.reserve(out.num_batched_tokens);
  in.slot_mapping.reserve(out.num_batched_tokens);

  int32_t max_blocks = 1;
  for (const ScheduledSequence& s : out.seqs)
    max_blocks = std::max(max_blocks, static_cast<int32_t>(s.block_table.size()));
  in.max_blocks_per_seq = max_blocks;
  in.block_tables.assign(num_seqs * static_cast<size_t>(max_blocks), 0);

  in.query_start.push_back(0);
  bool counted = false;  // sample_counts is being filled
  for (size_t i = 0; i < num_seqs; ++i) {
    const ScheduledSequence& s = out.seqs[i];
    for (int32_t j = 0; j < s.num_new_tokens; ++j) {
      const int32_t pos = s.num_computed_tokens + j;
      in.token_ids.push_back(s.token_ids[static_cast<size_t>(j)]);
      in.positions.push_back(pos);
      const int64_t block = s.block_table[static_cast<size_t>(pos / block_size)];
      in.slot_mapping.push_back(block * block_size + pos % block_size);
    }
    in.query_start.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(s.context_len());
    std::copy(s.block_table.begin(), s.block_table.end(),
              in.block_tables.begin() + static_cast<ptrdiff_t>(i * max_blocks));
    in.max_seq_len = std::max(in.max_seq_len, s.context_len());
    in.max_query_len = std::max(in.max_query_len, s.num_new_tokens);
    if (s.sample) {
      // sample_counts stays empty (all ones) until a sequence carries drafts.
      if (s.num_draft_tokens > 0 && !counted) {
        in.sample_counts.assign(in.sample_seqs.size(), 1);
        counted = true;
      }
      in.sample_seqs.push_back(static_cast<int32_t>(i));
      if (counted) in.sample_counts.push_back(1 + s.num_draft_tokens);
    }
  }
  return in;
}

SamplingRow make_sampling_row(const SamplingRowInput& in) {
  const SamplingParams& p = *in.params;
  SamplingRow row;
  row.temperature = p.temperature;
  row.top_p = p.top_p;
  row.top_k = p.top_k;
  row.min_p = p.min_p;
  row.repetition_penalty = p.repetition_penalty;
  row.presence_penalty = p.presence_penalty;
  row.frequency_penalty = p.frequency_penalty;
  row.seed = in.seed;
  // The output index of the token this row samples: the drafts before it count as outputs.
  const int32_t num_output =
      static_cast<int32_t>(in.tokens.size() + in.drafts.size()) - in.num_prompt_tokens;
  row.step = static_cast<uint64_t>(num_output);
  row.num_logprobs = p.logprobs;
  row.logit_bias = p.logit_bias;
  if (num_output < p.min_tokens) row.banned_tokens.assign(in.stop_ids.begin(), in.stop_ids.end());
  if (p.has_penalties()) {
    row.history_tokens.reserve(in.tokens.size() + in.drafts.size());
    row.history_tokens.assign(in.tokens.begin(), in.tokens.end());
    row.history_tokens.insert(row.history_tokens.end(), in.drafts.begin(), in.drafts.end());
    row.history_prompt_len = in.num_prompt_tokens;
  }
  return row;
}

}  // namespace lathe
