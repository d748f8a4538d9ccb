// Device side of gemv_epilogue.h, shared by gemv.cu and decode_gemv.cu: which two output rows a
// task holds, and the RoPE/KV epilogue on them.
#pragma once

#include "engine/backend/cuda/gemv_epilogue.h"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {

// The output side of a product, as kernels take it (a plain struct passed by value).
struct PairOut {
  void* y = nullptr;
  int32_t n = 0;
  int32_t pair_stride = 0;  // kSwiglu: task t covers rows t and t + pair_stride
  // kRopeKv (GemvRopeKv): rows of q heads, then k heads, then v heads, head_dim each.
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;
  const float* q_bias = nullptr;
  const float* k_bias = nullptr;
  const float* v_bias = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  const int64_t* slot_mapping = nullptr;
  int32_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int32_t neox = 0;  // 1: pairs (i, i + head_dim / 2); 0: (2i, 2i + 1)
};

inline PairOut pair_out(GemvOutput out, void* y, int64_t n, const GemvRopeKv& r) {
  PairOut p;
  p.y = y;
  p.n = static_cast<int32_t>(n);
  p.pair_stride = static_cast<int32_t>(out == GemvOutput::kSwiglu ? n / 2 : 0);
  p.positions = r.positions;
  p.inv_freq = r.inv_freq;
  p.q_bias = r.q_bias;
  p.k_bias = r.k_bias;
  p.v_bias = r.v_bias;
  p.k_cache = r.k_cache;
  p.v_cache = r.v_cache;
  p.slot_mapping = r.slot_mapping;
  p.num_heads = r.num_heads;
  p.num_kv_heads = r.num_kv_heads;
  p.head_dim = r.head_dim;
  p.neox = r.style == RopeStyle::kNeox ? 1 : 0;
  return p;
}

// Tasks of a product with n rows.
inline int64_t pair_tasks(GemvOutput out, int64_t n) {
  return out == GemvOutput::kSwiglu ? n / 2 : (n + 1) / 2;
}

// The two output rows of task t.
template <GemvOutput OUT>
__device__ __forceinline__ void task_rows(const PairOut& p, int t, int& r0, int& r1) {
  if constexpr (OUT == GemvOutput::kSwiglu) {
    r0 = t, r1 = t + p.pair_stride;
  } else if constexpr (OUT == GemvOutput::kRopeKv) {
    // Rotation pairs of the q and k heads first, then pairs of adjacent v rows.
    const int half = p.head_dim / 2;
    const int rope_tasks = (p.num_heads + p.num_kv_heads) * half;
    if (t < rope_tasks && p.neox) {
      const int h = t / half;
      r0 = h * p.head_dim + (t - h * half), r1 = r0 + half;
    } else {
      r0 = 2 * t, r1 = r0 + 1;
    }
  } else {
    r0 = 2 * t, r1 = r0 + 1;
  }
}

// kSwiglu for token m of task t from the two sums.
template <typename T>
__device__ __forceinline__ void swiglu_epilogue(const PairOut& p, int m, int t, float acc0,
                                                float acc1) {
  const float g = to_float(from_float<T>(acc0)), u = to_float(from_float<T>(acc1));
  static_cast<T*>(p.y)[static_cast<int64_t>(m) * p.pair_stride + t] = from_float<T>(silu_mul(g, u));
}

// kRopeKv for token m of a task whose rows r0 < r1 hold acc0, acc1 (qkv_rope_kv's arithmetic on
// the rounded projection: + bias, rotation with cos/sin in double, one rounding).
template <typename T>
__device__ __forceinline__ void rope_kv_epilogue(const PairOut& p, int m, int r0, int r1,
                                                 float acc0, float acc1) {
  const int d = p.head_dim;
  const int qk_rows = (p.num_heads + p.num_kv_heads) * d;
  const T y0 = from_float<T>(acc0), y1 = from_float<T>(acc1);
  T* y = static_cast<T*>(p.y) + static_cast<int64_t>(m) * p.n;
  const int64_t slot = p.slot_mapping[m];
  if (r0 >= qk_rows) {  // v: stored as projected (qkv_rope_kv leaves v without bias there)
    y[r0] = y0, y[r1] = y1;
    if (slot < 0) return;
    const int vh = (r0 - qk_rows) / d, i0 = r0 - qk_rows - vh * d, i1 = i0 + 1;
    float v0 = to_float(y0), v1 = to_float(y1);
    if (p.v_bias != nullptr) v0 += p.v_bias[vh * d + i0], v1 += p.v_bias[vh * d + i1];
    T* dst = static_cast<T*>(p.v_cache) + (slot * p.num_kv_heads + vh) * d;
    dst[i0] = from_float<T>(v0), dst[i1] = from_float<T>(v1);
    return;
  }
  const int h = r0 / d, i0 = r0 - h * d, i1 = r1 - h * d;
  const bool is_q = h < p.num_heads;
  float x0 = to_float(y0), x1 = to_float(y1);
  const float* bias = is_q ? p.q_bias : p.k_bias;
  if (bias != nullptr) {
    const int hb = is_q ? h : h - p.num_heads;
    x0 += bias[hb * d + i0], x1 += bias[hb * d + i1];
  }
  const int fi = p.neox ? i0 : i0 / 2;
  const float angle = static_cast<float>(p.positions[m]) * p.inv_freq[fi];
  const float c = static_cast<float>(cos(static_cast<double>(angle)));
  const float s = static_cast<float>(sin(static_cast<double>(angle)));
  const T o0 = from_float<T>(__fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s)));
  const T o1 = from_float<T>(__fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s)));
  y[r0] = o0, y[r1] = o1;
  if (is_q || slot < 0) return;
  T* dst = static_cast<T*>(p.k_cache) + (slot * p.num_kv_heads + (h - p.num_heads)) * d;
  dst[i0] = o0, dst[i1] = o1;
}

}  // namespace lathe::cuda
