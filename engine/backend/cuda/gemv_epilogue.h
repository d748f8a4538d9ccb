// What the decode matrix-vector products (gemv.h, decode_gemv.h) can do with the two output rows
// a task (a block of gemv, a warp task of decode_gemv) computes, besides storing them:
//   kStore:       y[m, r] = acc                         (rows 2t, 2t + 1)
//   kResidualAdd: residual_out[m, r] += float(round_to_dtype(acc))      (decode_gemv only)
//   kSwiglu:      n = 2 * inter (gate rows, then up rows); task t holds rows t and inter + t and
//                 writes y[m, t] = round(silu(g) * u), g = float(round(acc[m, t])),
//                 u = float(round(acc[m, inter + t])): swiglu.h's formula on the values the
//                 unfused path stores (y: [m, inter] of the activation dtype)
//   kRopeKv:      the QKV projection with qkv_rope_kv.h's contract without QK norm: y = qkv
//                 [m, n] with q and k heads + bias and rotated at positions[m] (cos/sin in double
//                 of the float angle; kNeox pairs (i, i + d/2), kInterleaved (2i, 2i + 1)), v heads
//                 as projected; k and v (+ v bias) written to slot slot_mapping[m] of the cache
//                 (negative: not written). Each task holds one rotation pair, so the rotation
//                 happens on the projection's output rounded as qkv_rope_kv reads it.
// Every rounding happens where the unfused path rounds: the fused results equal the unfused ones
// bit for bit when the sums do (gemv.h's epilogues use gemv's own sums: always).
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/model/model_config.h"

namespace lathe::cuda {

enum class GemvOutput : int { kStore, kResidualAdd, kSwiglu, kRopeKv };

// kRopeKv's parameters (n = (num_heads + 2 * num_kv_heads) * head_dim).
struct GemvRopeKv {
  int32_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  const int32_t* positions = nullptr;  // [m]
  const float* inv_freq = nullptr;     // [head_dim / 2]
  RopeStyle style = RopeStyle::kNeox;
  const float* q_bias = nullptr;  // [num_heads * head_dim] or null
  const float* k_bias = nullptr;  // [num_kv_heads * head_dim] or null
  const float* v_bias = nullptr;  // [num_kv_heads * head_dim] or null
  void* k_cache = nullptr;        // [num_blocks, block_size, num_kv_heads, head_dim] of kv_dtype
  void* v_cache = nullptr;
  const int64_t* slot_mapping = nullptr;  // [m]
  DType kv_dtype = DType::kBF16;          // the cache's (kv_cache.h); must be the product's dtype
};

// kRopeKv's argument check for a product of n rows of `dtype`; `who` names the caller in the
// message.
inline Status check_rope_kv(const std::string& who, int64_t n, const GemvRopeKv& r, DType dtype) {
  if (r.kv_dtype != dtype)
    return unsupported(who + ": the RoPE/KV epilogue writes a KV cache of the product's type (" +
                       std::string(dtype_name(dtype)) + "), not " +
                       std::string(dtype_name(r.kv_dtype)));
  if (r.head_dim <= 0 || r.head_dim % 2 != 0 || r.num_heads <= 0 || r.num_kv_heads <= 0 ||
      n != static_cast<int64_t>(r.num_heads + 2 * r.num_kv_heads) * r.head_dim ||
      r.positions == nullptr || r.inv_freq == nullptr || r.slot_mapping == nullptr ||
      r.k_cache == nullptr || r.v_cache == nullptr)
    return invalid_argument(who +
                            ": RoPE/KV output needs n = (heads + 2 kv heads) * even head_dim, "
                            "positions, frequencies, slots and both caches");
  return Status();
}

}  // namespace lathe::cuda
