// Lathe's own paged attention: causal, grouped-query, reading K/V through per-sequence page lists,
// with the KV range of each query split across blocks (split-KV) so that long contexts and small
// batches still fill the GPU. It is the decode kernel (one query token per sequence), and serves
// prefill too when FlashInfer is not built in or cannot take the shape (it reads each query's whole
// causal prefix, so it is slow for long prompts but exact).
//
// Contract (cpu::paged_attention's, with the page table in CSR form):
//   q:   token t, query head h at q + t * q_stride + h * head_dim (q_stride in elements; the
//        fused QKV buffer's row), `dtype`.
//   out: [num_tokens, num_heads, head_dim] of `dtype`.
//   k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim] of `dtype`.
//   Tokens of sequence s are [query_start[s], query_start[s+1]); query j of s sits at position
//   seq_lens[s] - (query_start[s+1] - query_start[s]) + j and attends to positions
//   [max(0, pos - sliding_window + 1) if sliding_window > 0 else 0, pos]. Position p of s is in
//   page kv_indices[kv_indptr[s] + p / block_size], offset p % block_size. A query with no position
//   to attend to (padding rows of a CUDA-graph bucket: seq_len 0) gets 0.
// Numerics: s_p = dot(q, k_p) * scale in float32, online softmax in float32 (exp of s - running
// max), output rounded once to `dtype`.
// Split-KV: a query's range is cut into ceil(len / kMinSplitTokens) parts, at most max_splits; the
// parts are merged by a second kernel (log-sum-exp weights). The split count per query depends only
// on its own length and max_splits, so a CUDA graph captured with a fixed max_splits is valid for
// any lengths.
// Launch: grid (num_tokens, num_kv_heads, max_splits), 128 threads; all query heads of one KV head
// share each K/V tile (32 positions) staged in shared memory with cp.async, double-buffered.
// Limits: head_dim in {16, 32, 64, 128, 256}; num_heads / num_kv_heads <= 16.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

constexpr int kAttentionMinSplitTokens = 64;  // two 32-position tiles: short contexts still spread
constexpr int kAttentionMaxSplits = 32;

struct PagedAttentionArgs {
  const void* q = nullptr;
  int64_t q_stride = 0;
  void* out = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* query_start = nullptr;  // [num_seqs + 1], device
  const int32_t* seq_lens = nullptr;     // [num_seqs], device
  const int32_t* kv_indptr = nullptr;    // [num_seqs + 1], device
  const int32_t* kv_indices = nullptr;   // device
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  float scale = 1.0f;
  int32_t sliding_window = 0;
  int32_t max_splits = 1;         // 1..kAttentionMaxSplits
  float* workspace = nullptr;     // paged_attention_workspace_bytes(); needed when max_splits > 1
  DType dtype = DType::kBF16;     // q and out
  DType kv_dtype = DType::kBF16;  // k_cache and v_cache (kv_cache.h); must equal dtype today
};

// Bytes of workspace for num_tokens queries with max_splits > 1 (0 otherwise).
int64_t paged_attention_workspace_bytes(int64_t num_tokens, int64_t num_heads, int64_t head_dim,
                                        int32_t max_splits);

// A max_splits that fills the GPU: about two blocks per multiprocessor over all queries and KV
// heads.
int32_t paged_attention_splits_for(int64_t num_tokens, int64_t num_kv_heads, int sm_count);

Status paged_attention(const PagedAttentionArgs& args, cudaStream_t stream);

}  // namespace lathe::cuda
