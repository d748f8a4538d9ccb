// Paged prefill attention through FlashInfer's FA2 kernels (tensor cores, mma.sync), behind Lathe's
// own interface. Same contract as paged_attention.h (causal, GQA, queries attending to cached
// prefix pages: chunked prefill and prefix-cache hits), for steps whose queries are longer than one
// token; decode steps use decode_attention.h (or the split-KV kernel of paged_attention.h), which
// need no host-side planning and are therefore CUDA-graph friendly.
//
// Per step: plan() once on the host (FlashInfer's scheduler splits query tiles and, for long
// contexts, KV chunks; it copies its work list to the device with one asynchronous copy), then
// run() once per layer. Instantiated for bf16/f16 with head_dim 64 and 128, page-size agnostic,
// without sliding window (supports() says whether a shape is covered; otherwise use
// paged_attention()). FlashInfer's exceptions are caught and returned as errors.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

struct PrefillRunArgs {
  const void* q = nullptr;  // token t, head h at q + t * q_stride + h * head_dim
  int64_t q_stride = 0;     // elements
  void* out = nullptr;      // [num_tokens, num_heads, head_dim]
  void* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim], this layer
  void* v_cache = nullptr;
  int32_t* qo_indptr = nullptr;   // [num_seqs + 1] device: query_start
  int32_t* kv_indptr = nullptr;   // [num_seqs + 1] device: pages per sequence, CSR
  int32_t* kv_indices = nullptr;  // device: page ids
  int32_t* kv_last_page_len =
      nullptr;  // [num_seqs] device: positions in each sequence's last page (>= 1)
  float scale = 1.0f;
};

class PrefillAttention {
 public:
  // Whether FlashInfer is built in and instantiated for this shape.
  static bool supports(DType dtype, int64_t head_dim, int32_t sliding_window);
  // Workspaces sized for steps of up to max_tokens tokens and max_seqs sequences.
  static Result<std::unique_ptr<PrefillAttention>> create(DType dtype, int32_t num_heads,
                                                          int32_t num_kv_heads, int32_t head_dim,
                                                          int32_t block_size, int64_t max_tokens,
                                                          int32_t max_seqs);
  ~PrefillAttention();

  // Host arrays of num_seqs + 1 entries: query_start and the page CSR offsets. The page-locked
  // staging buffer is reused: the previous step's copy must be complete (the runner synchronizes
  // every step).
  Status plan(const int32_t* qo_indptr_host, const int32_t* kv_indptr_host, int32_t num_seqs,
              cudaStream_t stream);
  Status run(const PrefillRunArgs& args, cudaStream_t stream);

  int64_t device_bytes() const;

 private:
  PrefillAttention() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lathe::cuda
