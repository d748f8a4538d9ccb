#include "engine/runtime/prompt_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/status_guard.h"
#include "engine/core/strings.h"
#include "engine/runtime/sampler.h"

namespace lathe {
namespace {

// The id the borrowed blocks are held under (never a real request's: those count up from 1).
constexpr RequestId kScoringId = ~RequestId{0};

struct Borrowed {
  KvCacheManager& kv;
  ~Borrowed() { kv.free(kScoringId); }
};

}  // namespace

Result<std::vector<SampledToken>> compute_prompt_logprobs(ModelRunner& runner, KvCacheManager& kv,
                                                          std::span<const TokenId> prompt,
                                                          int32_t top_k) {
  const int32_t n = static_cast<int32_t>(prompt.size());
  std::vector<SampledToken> out(static_cast<size_t>(n));
  if (n == 0) return out;
  out[0].token = prompt[0];
  out[0].logprob = std::numeric_limits<float>::quiet_NaN();
  if (n == 1) return out;
  // Logits after token i score token i + 1: the last token's logits are not needed.
  const int32_t scored = n - 1;
  if (!kv.can_allocate(kScoringId, scored))
    return resource_exhausted(strformat(
        "prompt logprobs need %d free KV blocks for the prompt's %d tokens; retry when the server "
        "is less busy",
        kv.blocks_for_tokens(scored), n));
  if (!kv.allocate(kScoringId, scored))
    return resource_exhausted("prompt logprobs: the KV cache could not lend its blocks");
  Borrowed borrowed{kv};
  const std::span<const int32_t> table = kv.block_table(kScoringId);
  const int32_t bs = kv.block_size();
  const int64_t vocab = runner.vocab_size();
  std::vector<float> row(static_cast<size_t>(vocab));
  for (int32_t start = 0; start < scored; start += kPromptLogprobChunk) {
    const int32_t len = std::min(kPromptLogprobChunk, scored - start);
    ModelInput in;
    for (int32_t j = 0; j < len; ++j) {
      const int32_t pos = start + j;
      in.token_ids.push_back(prompt[static_cast<size_t>(pos)]);
      in.positions.push_back(pos);
      in.slot_mapping.push_back(static_cast<int64_t>(table[static_cast<size_t>(pos / bs)]) * bs +
                                pos % bs);
    }
    in.query_start = {0, len};
    in.seq_lens = {start + len};
    in.block_tables.assign(table.begin(), table.end());
    in.max_blocks_per_seq = static_cast<int32_t>(table.size());
    in.max_seq_len = start + len;
    in.max_query_len = len;
    in.sample_seqs = {0};
    in.sample_counts = {len};
    in.sampling.assign(static_cast<size_t>(len), SamplingRow{});
    LATHE_ASSIGN_OR_RETURN(
        std::vector<float> logits,
        call_catching("computing prompt logits", [&]() { return runner.compute_logits(in); }));
    if (logits.size() != static_cast<size_t>(len) * static_cast<size_t>(vocab))
      return internal_error("compute_logits returned the wrong number of rows");
    for (int32_t j = 0; j < len; ++j) {
      const float* l = logits.data() + static_cast<size_t>(j) * static_cast<size_t>(vocab);
      for (int64_t v = 0; v < vocab; ++v)
        row[static_cast<size_t>(v)] =
            std::isnan(l[v]) ? -std::numeric_limits<float>::infinity() : l[v];
      SampledToken& t = out[static_cast<size_t>(start + j + 1)];
      t.token = prompt[static_cast<size_t>(start + j + 1)];
      row_logprobs(row.data(), vocab, top_k, &t);
    }
  }
  return out;
}

}  // namespace lathe
