// RoPE/KV setup shared by the CUDA op tests (cuda_ops_test.cpp, cuda_tile_pairs_test.cpp): the CPU
// reference of what qkv_rope_kv does (split, bias, per-head RMSNorm, RoPE, KV write: the CPU
// runner's order), the device inputs of a RoPE/KV launch, and the arguments of qkv_rope_kv and of
// the gemv RoPE/KV epilogue that do the same thing, so that a fused path can be compared with the
// unfused sequence it replaces.
#pragma once

#include <QString>

#include <cmath>
#include <cstdint>
#include <vector>

#include "cuda_test_util.h"
#include "engine/backend/cpu/cpu_ops.h"
#include "engine/backend/cuda/gemv_epilogue.h"
#include "engine/backend/cuda/qkv_rope_kv.h"

namespace lathe::test {

// Heads and paged-cache geometry of one RoPE/KV call. A qkv row is [q heads | k heads | v heads] of
// head_dim each; a cache is [num_blocks, block_size, kv_heads, head_dim].
struct RopeKvShape {
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int32_t block_size = 16;
  int64_t num_blocks = 0;

  int64_t row() const { return (heads + 2 * kv_heads) * head_dim; }
  int64_t cache_elems() const { return num_blocks * block_size * kv_heads * head_dim; }
};

// Unscaled RoPE inverse frequencies 10000^(-2i / head_dim), i < head_dim / 2.
inline std::vector<float> plain_inv_freq(int64_t head_dim) {
  std::vector<float> inv(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i)
    inv[static_cast<size_t>(i)] = static_cast<float>(std::pow(10000.0, -2.0 * i / head_dim));
  return inv;
}

// The CPU reference's optional parts: an empty vector means none (no bias, no QK norm).
struct RopeKvHostExtras {
  std::vector<float> q_bias, k_bias, v_bias;  // [heads * d], [kv_heads * d], [kv_heads * d]
  std::vector<float> q_norm, k_norm;          // [d] each (Qwen3's per-head RMSNorm)
  float eps = 1e-6f;
};

// The CPU reference's results: q [tokens, heads, d] and k [tokens, kv_heads, d] after RoPE, and
// both caches (every element `fill`, then the tokens with a slot >= 0 written).
struct RopeKvReference {
  std::vector<float> q, k, k_cache, v_cache;
};

// What qkv_rope_kv computes from `qkv` [tokens, s.row()] in float32 on the CPU ops.
inline RopeKvReference cpu_qkv_rope_kv(const std::vector<float>& qkv, int64_t tokens,
                                       const RopeKvShape& s, const RopeKvHostExtras& x,
                                       const std::vector<float>& inv_freq, RopeStyle style,
                                       const std::vector<int32_t>& positions,
                                       const std::vector<int64_t>& slot_ids, float fill = 0.25f) {
  const int64_t hq = s.heads, hkv = s.kv_heads, d = s.head_dim, row = s.row();
  auto at = [](const std::vector<float>& v, int64_t j) {
    return v.empty() ? 0.f : v[static_cast<size_t>(j)];
  };
  RopeKvReference r;
  r.q.resize(static_cast<size_t>(tokens * hq * d));
  r.k.resize(static_cast<size_t>(tokens * hkv * d));
  std::vector<float> v(static_cast<size_t>(tokens * hkv * d));
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t j = 0; j < hq * d; ++j) r.q[i * hq * d + j] = qkv[i * row + j] + at(x.q_bias, j);
    for (int64_t j = 0; j < hkv * d; ++j) {
      r.k[i * hkv * d + j] = qkv[i * row + hq * d + j] + at(x.k_bias, j);
      v[i * hkv * d + j] = qkv[i * row + (hq + hkv) * d + j] + at(x.v_bias, j);
    }
  }
  if (!x.q_norm.empty())
    cpu::rms_norm(r.q.data(), x.q_norm.data(), tokens * hq, d, x.eps, r.q.data());
  if (!x.k_norm.empty())
    cpu::rms_norm(r.k.data(), x.k_norm.data(), tokens * hkv, d, x.eps, r.k.data());
  cpu::rope(r.q.data(), positions.data(), tokens, hq, d, inv_freq, style);
  cpu::rope(r.k.data(), positions.data(), tokens, hkv, d, inv_freq, style);
  r.k_cache.assign(static_cast<size_t>(s.cache_elems()), fill);
  r.v_cache.assign(static_cast<size_t>(s.cache_elems()), fill);
  cpu::KvLayerView view;
  view.k = r.k_cache.data();
  view.v = r.v_cache.data();
  view.block_size = s.block_size;
  view.num_kv_heads = hkv;
  view.head_dim = d;
  cpu::write_kv(r.k.data(), v.data(), slot_ids.data(), tokens, view);
  return r;
}

// Device inputs of a RoPE/KV launch over m <= 8 tokens: unscaled frequencies, random q/k/v biases
// (seeds 44, 45, 46), positions {7, 1023, 31000, 2, 5, 6, 9, 100} and slot_ids {5, -1, 77, 12, 0,
// 1, 2, 3} cut to m (slot -1: a token whose K/V is not written).
struct RopeKvDeviceInputs {
  Dev inv_freq, q_bias, k_bias, v_bias, positions, slot_ids;
};

inline RopeKvDeviceInputs rope_kv_device_inputs(const RopeKvShape& s, int64_t m) {
  std::vector<int32_t> pos = {7, 1023, 31000, 2, 5, 6, 9, 100};
  std::vector<int64_t> slot_ids = {5, -1, 77, 12, 0, 1, 2, 3};
  if (m > static_cast<int64_t>(pos.size())) qFatal("rope_kv_device_inputs: at most 8 tokens");
  pos.resize(static_cast<size_t>(m));
  slot_ids.resize(static_cast<size_t>(m));
  RopeKvDeviceInputs in;
  in.inv_freq = Dev::from(plain_inv_freq(s.head_dim));
  in.q_bias = Dev::from(random_floats(static_cast<size_t>(s.heads * s.head_dim), 44));
  in.k_bias = Dev::from(random_floats(static_cast<size_t>(s.kv_heads * s.head_dim), 45));
  in.v_bias = Dev::from(random_floats(static_cast<size_t>(s.kv_heads * s.head_dim), 46));
  in.positions = Dev::from(pos);
  in.slot_ids = Dev::from(slot_ids);
  return in;
}

// qkv_rope_kv over m tokens of `qkv` (of dtype t, in place) with `in`'s positions, frequencies,
// slot_ids and (when `bias`) biases, writing the caches kc and vc of dtype t.
inline cuda::QkvRopeKvArgs qkv_rope_kv_args(void* qkv, int64_t m, const RopeKvShape& s,
                                            const RopeKvDeviceInputs& in, RopeStyle style,
                                            bool bias, void* kc, void* vc, DType t) {
  cuda::QkvRopeKvArgs a;
  a.qkv = qkv;
  a.num_tokens = m;
  a.num_heads = s.heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = s.head_dim;
  a.positions = in.positions.as<int32_t>();
  a.inv_freq = in.inv_freq.as<float>();
  a.style = style;
  if (bias) {
    a.q_bias = in.q_bias.as<float>();
    a.k_bias = in.k_bias.as<float>();
    a.v_bias = in.v_bias.as<float>();
  }
  a.k_cache = kc;
  a.v_cache = vc;
  a.slot_mapping = in.slot_ids.as<int64_t>();
  a.dtype = t;
  a.kv_dtype = t;
  return a;
}

// The gemv RoPE/KV epilogue's parameters that do what `rk` does (no QK norm: the epilogue has
// none), writing the caches kc and vc instead of rk's.
inline cuda::GemvRopeKv gemv_rope_kv_like(const cuda::QkvRopeKvArgs& rk, void* kc, void* vc) {
  cuda::GemvRopeKv r;
  r.num_heads = static_cast<int32_t>(rk.num_heads);
  r.num_kv_heads = static_cast<int32_t>(rk.num_kv_heads);
  r.head_dim = static_cast<int32_t>(rk.head_dim);
  r.positions = rk.positions;
  r.inv_freq = rk.inv_freq;
  r.style = rk.style;
  r.q_bias = rk.q_bias;
  r.k_bias = rk.k_bias;
  r.v_bias = rk.v_bias;
  r.k_cache = kc;
  r.v_cache = vc;
  r.slot_mapping = rk.slot_mapping;
  r.kv_dtype = rk.kv_dtype;
  return r;
}

// Two pairs of K/V caches of `elems` values of t, every value 0.25: one for the unfused reference
// sequence, one for the path under test.
struct RopeKvCaches {
  Dev k_ref, v_ref, k, v;
};

inline RopeKvCaches rope_kv_caches(DType t, int64_t elems) {
  const std::vector<uint16_t> fill =
      encode16(t, std::vector<float>(static_cast<size_t>(elems), 0.25f));
  return {Dev::from(fill), Dev::from(fill), Dev::from(fill), Dev::from(fill)};
}

// Empty when the outputs y and y_ref (n 16-bit values each) and both cache pairs are equal bit for
// bit; else what differs (" output", " k cache", " v cache"), to append to the case's description.
inline QString rope_kv_bit_difference(const Dev& y, const Dev& y_ref, int64_t n,
                                      const RopeKvCaches& c, int64_t cache_elems) {
  const size_t ne = static_cast<size_t>(n), ce = static_cast<size_t>(cache_elems);
  QString diff;
  if (y.download<uint16_t>(ne) != y_ref.download<uint16_t>(ne)) diff += " output";
  if (c.k.download<uint16_t>(ce) != c.k_ref.download<uint16_t>(ce)) diff += " k cache";
  if (c.v.download<uint16_t>(ce) != c.v_ref.download<uint16_t>(ce)) diff += " v cache";
  return diff;
}

}  // namespace lathe::test
