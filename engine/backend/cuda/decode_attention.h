// Decode attention on tensor cores: one query token per sequence (the token at position
// seq_len - 1), grouped-query heads packed into the rows of one mma tile, so every K/V page of a KV
// head is read once for all query heads of its group.
//
// Contract (paged_attention.h's, for decode steps): sequence s has one query, token s, head h at
// q + s * q_stride + h * head_dim; it attends to positions [lo, seq_lens[s]) with
// lo = max(0, seq_len - sliding_window) when sliding_window > 0, else 0; position p sits in page
// kv_indices[kv_indptr[s] + p / block_size], offset p % block_size; k_cache/v_cache:
// [num_blocks, block_size, num_kv_heads, head_dim]; out: [num_seqs, num_heads, head_dim]. A
// sequence with no position (seq_len 0: padding rows of a CUDA-graph bucket) gets zeros.
// Numerics: S = Q K^T with bf16/f16 products accumulated in float32 (mma.sync m16n8k16), times
// scale; online softmax in float32; P V with P split into two 16-bit parts (P = hi + lo, both
// multiplied by V on the tensor cores) so the probabilities keep ~16 bits instead of 8; one
// rounding of the output. Same tolerance as the split-KV kernel.
//
// Launch: grid (num_seqs, num_kv_heads, max_splits), 128 threads (4 warps). A sequence's range is
// cut into splits of at least min_split_tokens positions (at most max_splits, a multiple of 16
// each); inside a block the warps take 16-position tiles round-robin, each warp
// with its own two-stage cp.async pipeline in shared memory (no block barrier in the loop),
// keeping per-warp softmax state, and the four warps merge through shared memory. With more than
// one split, the splits of a (sequence, KV head) merge in one of two ways, with no second kernel:
//  - cluster merge (Hopper; cluster_merge and max_splits <= decode_attention_cluster_splits()):
//    the max_splits blocks of a (sequence, KV head) are one thread-block cluster; each keeps its
//    partial (max, sum, unnormalized output) in its shared memory, and after a cluster barrier
//    each merges a slice of the output reading every split's partial through distributed shared
//    memory (no global round trip, fence or atomic; a second barrier keeps the partials alive);
//  - workspace merge (otherwise): each block writes its partial to `workspace`, and the last block
//    to finish (counted with an atomic in `counters`, which it resets to zero) merges them.
// Tiles that do not hold the newest position are
// loaded before griddepcontrol.wait (the KV cache of earlier positions does not depend on the
// previous kernel), so under programmatic dependent launch they overlap the QKV kernels.
// Limits: head_dim 64 or 128; num_heads / num_kv_heads <= 16 (decode_attention_supports()).
// The split policy and shape limits are host code (decode_attention_policy.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

// The default split length: 4 warps x 2 stages x 16 positions.
constexpr int kDecodeAttentionMinSplitTokens = 128;
constexpr int kDecodeAttentionMaxSplits = 32;
constexpr int kDecodeAttentionMaxGroup = 16;  // query heads per KV head
// Split policy (measured on the H200, docs/gpu-notes.md run 10): splits only while the blocks
// (sequence, KV head, split) stay within this many per multiprocessor, since the split merge costs
// more than it gains once the GPU is full (batch 64 of 8 KV heads: one split 9715 tok/s, three
// 9165-9313); and splits of 64 positions when the (sequence, KV head) pairs are at most an eighth
// of the multiprocessors (batch 1-2): the chain per block is what batch 1 waits for.
constexpr int kDecodeAttentionBlocksPerSm = 4;
constexpr int kDecodeAttentionShortSplitTokens = 64;
// The largest thread-block cluster the cluster merge uses (a non-portable size on Hopper).
constexpr int kDecodeAttentionMaxClusterSplits = 16;

struct DecodeAttentionArgs {
  const void* q = nullptr;
  int64_t q_stride = 0;  // elements, a multiple of 8
  void* out = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* seq_lens = nullptr;    // [num_seqs], device
  const int32_t* kv_indptr = nullptr;   // [num_seqs + 1], device
  const int32_t* kv_indices = nullptr;  // device
  int32_t num_seqs = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  float scale = 1.0f;
  int32_t sliding_window = 0;
  int32_t max_splits = 1;  // 1..kDecodeAttentionMaxSplits
  // Positions a split holds at least (a positive multiple of 16): fewer make more, shorter blocks.
  int32_t min_split_tokens = kDecodeAttentionMinSplitTokens;
  float* workspace = nullptr;   // decode_attention_workspace_bytes(); needed when max_splits > 1
  int32_t* counters = nullptr;  // [num_seqs * num_kv_heads], zero before and after each launch
  // Merge splits in thread-block clusters where possible (see above); false: always the workspace.
  bool cluster_merge = true;
  DType dtype = DType::kBF16;     // q and out
  DType kv_dtype = DType::kBF16;  // k_cache and v_cache (kv_cache.h); must equal dtype today
};

bool decode_attention_supports(int64_t head_dim, int64_t num_heads, int64_t num_kv_heads);

// The max_splits of the split policy: at most blocks_per_sm blocks per multiprocessor over all
// sequences and KV heads, at least 1, at most kDecodeAttentionMaxSplits.
int32_t decode_attention_splits_for(int64_t num_seqs, int64_t num_kv_heads, int sm_count,
                                    int blocks_per_sm = kDecodeAttentionBlocksPerSm);
// The min_split_tokens of the split policy.
int32_t decode_attention_min_split_tokens(int64_t num_seqs, int64_t num_kv_heads, int sm_count);

// Whether the split policy merges in clusters at this batch: in the latency regime only (the
// (sequence, KV head) pairs at most an eighth of the multiprocessors, as for the short splits),
// where the merge's chain is what a step waits for. Larger batches fill the GPU with blocks, and
// co-scheduling clusters of them cost more than the merge (run 18/21: batch 8, 1 561-1 575 tok/s in
// clusters against 1 625-1 635 through the workspace).
bool decode_attention_cluster_pays(int64_t num_seqs, int64_t num_kv_heads, int sm_count);

// The whole split policy of one decode step: max_splits (decode_attention_splits_for),
// min_split_tokens, and, where decode_attention_cluster_pays() and cluster_splits > 0 (from
// decode_attention_cluster_splits()), the cluster merge with max_splits capped at cluster_splits.
struct DecodeSplitPlan {
  int32_t max_splits = 1;
  int32_t min_split_tokens = kDecodeAttentionMinSplitTokens;
  bool cluster_merge = false;
};
DecodeSplitPlan decode_attention_split_plan(int64_t num_seqs, int64_t num_kv_heads, int sm_count,
                                            int32_t cluster_splits,
                                            int blocks_per_sm = kDecodeAttentionBlocksPerSm);

// The most splits one launch can merge in a cluster on the current device: 16 where the device
// takes that non-portable cluster size for this kernel, else 8, 0 without cluster launch (before
// Hopper, or a build without sm_90 code). Probed once per process for each (dtype, head_dim).
int32_t decode_attention_cluster_splits(DType dtype, int64_t head_dim);

// Bytes of workspace for num_seqs queries with max_splits > 1 (0 otherwise).
int64_t decode_attention_workspace_bytes(int64_t num_seqs, int64_t num_heads, int64_t head_dim,
                                         int32_t max_splits);

Status decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream);

}  // namespace lathe::cuda
