// decode_attention.h's split policy and shape limits: host code, no kernels.
#include <algorithm>

#include "engine/backend/cuda/decode_attention.h"

namespace lathe::cuda {
namespace {

// Batch 1-2 of 8 KV heads on an H200: the (sequence, KV head) pairs at most an eighth of the
// multiprocessors, where a step waits on the attention's chain (short splits, cluster merge).
bool latency_regime(int64_t num_seqs, int64_t num_kv_heads, int sm_count) {
  return num_seqs * num_kv_heads * 8 <= sm_count;
}

}  // namespace

bool decode_attention_supports(int64_t head_dim, int64_t num_heads, int64_t num_kv_heads) {
  return (head_dim == 64 || head_dim == 128) && num_kv_heads > 0 && num_heads % num_kv_heads == 0 &&
         num_heads / num_kv_heads <= kDecodeAttentionMaxGroup;
}

int32_t decode_attention_splits_for(int64_t num_seqs, int64_t num_kv_heads, int sm_count,
                                    int blocks_per_sm) {
  const int64_t blocks = std::max<int64_t>(1, num_seqs * num_kv_heads);
  const int64_t want = static_cast<int64_t>(blocks_per_sm) * sm_count / blocks;
  return static_cast<int32_t>(std::clamp<int64_t>(want, 1, kDecodeAttentionMaxSplits));
}

int32_t decode_attention_min_split_tokens(int64_t num_seqs, int64_t num_kv_heads, int sm_count) {
  return latency_regime(num_seqs, num_kv_heads, sm_count) ? kDecodeAttentionShortSplitTokens
                                                          : kDecodeAttentionMinSplitTokens;
}

bool decode_attention_cluster_pays(int64_t num_seqs, int64_t num_kv_heads, int sm_count) {
  return latency_regime(num_seqs, num_kv_heads, sm_count);
}

DecodeSplitPlan decode_attention_split_plan(int64_t num_seqs, int64_t num_kv_heads, int sm_count,
                                            int32_t cluster_splits, int blocks_per_sm) {
  DecodeSplitPlan plan;
  plan.max_splits = decode_attention_splits_for(num_seqs, num_kv_heads, sm_count, blocks_per_sm);
  plan.min_split_tokens = decode_attention_min_split_tokens(num_seqs, num_kv_heads, sm_count);
  plan.cluster_merge =
      cluster_splits > 1 && decode_attention_cluster_pays(num_seqs, num_kv_heads, sm_count);
  if (plan.cluster_merge) plan.max_splits = std::min(plan.max_splits, cluster_splits);
  return plan;
}

int64_t decode_attention_workspace_bytes(int64_t num_seqs, int64_t num_heads, int64_t head_dim,
                                         int32_t max_splits) {
  if (max_splits <= 1) return 0;
  return num_seqs * num_heads * max_splits * (head_dim + 2) * static_cast<int64_t>(sizeof(float));
}

}  // namespace lathe::cuda
