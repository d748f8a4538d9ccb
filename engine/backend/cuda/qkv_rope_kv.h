// The attention block's epilogue of the fused QKV projection, for every token of a step:
//   qkv: [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim] of `dtype`, per token q heads,
//   then
//        k heads, then v heads (the fused projection's output layout).
//   For each q and k head, in float32 and in this order (the CPU runner's order):
//     1. + bias (Qwen2; q_bias [num_heads * head_dim], k_bias [num_kv_heads * head_dim], else null)
//     2. per-head RMSNorm with q_norm / k_norm [head_dim] (Qwen3, else null), as cpu::rms_norm
//     3. RoPE at positions[t]: angle_i = float(position) * inv_freq[i] (float32 product), cos/sin
//     in
//        double rounded to float (as cpu::rope); kNeox rotates pairs (i, i + head_dim/2),
//        kInterleaved pairs (2i, 2i + 1)
//   and the result is stored back in place (rounded to `dtype`). v heads get + v_bias.
//   When k_cache is set, k and v of token t are also written to slot slot_mapping[t]
//   (k_cache/v_cache: [num_blocks, block_size, num_kv_heads, head_dim] of `dtype`, slot = block *
//   block_size + offset); negative slots are skipped (cpu::write_kv's contract). The v heads in
//   qkv are left without bias when only the cache is written: nothing reads them afterwards.
// Launch: grid (num_tokens, ceil(heads / 4)), 128 threads; one warp per head.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/model/model_config.h"

namespace lathe::cuda {

struct QkvRopeKvArgs {
  void* qkv = nullptr;
  int64_t num_tokens = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;  // [head_dim / 2]
  RopeStyle style = RopeStyle::kNeox;
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  void* k_cache = nullptr;  // null: no cache write
  void* v_cache = nullptr;
  const int64_t* slot_mapping = nullptr;
  DType dtype = DType::kBF16;     // qkv
  DType kv_dtype = DType::kBF16;  // k_cache and v_cache (kv_cache.h); must equal dtype today
};

Status qkv_rope_kv(const QkvRopeKvArgs& args, cudaStream_t stream);

}  // namespace lathe::cuda
