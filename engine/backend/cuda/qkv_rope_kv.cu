#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/kv_cache.h"
#include "engine/backend/cuda/qkv_rope_kv.h"

namespace lathe::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHeadDim = 256;
constexpr int kPerLane = kMaxHeadDim / 32;  // elements of a head one lane holds

// One warp per (token, head). Lane l holds elements l, l + 32, ... of the head in registers.
template <typename T>
__global__ void __launch_bounds__(kWarps * 32) qkv_rope_kv_kernel(QkvRopeKvArgs a) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t t = blockIdx.x;
  const int64_t h = static_cast<int64_t>(blockIdx.y) * kWarps + (threadIdx.x >> 5);
  const int64_t hq = a.num_heads, hkv = a.num_kv_heads, d = a.head_dim;
  if (h >= hq + 2 * hkv) return;
  const bool is_q = h < hq, is_k = !is_q && h < hq + hkv, is_v = h >= hq + hkv;
  T* row = static_cast<T*>(a.qkv) + (t * (hq + 2 * hkv) + h) * d;

  float v[kPerLane];
  const float* bias = is_q ? a.q_bias : (is_k ? a.k_bias : a.v_bias);
  const int64_t bias_off = (is_q ? h : (is_k ? h - hq : h - hq - hkv)) * d;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    v[j] = 0.f;
    if (i < d) {
      v[j] = to_float(row[i]);
      if (bias != nullptr) v[j] += bias[bias_off + i];
    }
  }

  if (!is_v) {
    const float* norm = is_q ? a.q_norm : a.k_norm;
    if (norm != nullptr) {
      double ss = 0.0;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        ss += static_cast<double>(v[j]) * static_cast<double>(v[j]);
      ss = warp_sum(ss);
      const float inv =
          static_cast<float>(1.0 / sqrt(ss / static_cast<double>(d) + static_cast<double>(a.eps)));
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int64_t i = lane + 32 * j;
        if (i < d) v[j] = (v[j] * inv) * norm[i];
      }
    }
    // RoPE through shared memory: the pair partner of an element may sit in another lane.
    __shared__ float buf[kWarps][kMaxHeadDim];
    float* hb = buf[threadIdx.x >> 5];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < d) hb[i] = v[j];
    }
    __syncwarp();
    const float pos = static_cast<float>(a.positions[t]);
    const int64_t half = d / 2;
    for (int64_t i = lane; i < half; i += 32) {
      const float angle = pos * a.inv_freq[i];
      const float c = static_cast<float>(cos(static_cast<double>(angle)));
      const float s = static_cast<float>(sin(static_cast<double>(angle)));
      const int64_t ia = a.style == RopeStyle::kNeox ? i : 2 * i;
      const int64_t ib = a.style == RopeStyle::kNeox ? i + half : 2 * i + 1;
      const float x0 = hb[ia], x1 = hb[ib];
      // Written out so that no fused multiply-add changes the rounding against the CPU reference.
      const float r0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
      const float r1 = __fadd_rn(__fmul_rn(x1, c), __fmul_rn(x0, s));
      hb[ia] = r0;
      hb[ib] = r1;
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < d) v[j] = hb[i];
    }
  }

  const bool to_cache = a.k_cache != nullptr && !is_q;
  const int64_t slot = to_cache ? a.slot_mapping[t] : -1;
  T* cache_row = nullptr;
  if (slot >= 0) {
    T* base = static_cast<T*>(is_k ? a.k_cache : a.v_cache);
    const int64_t kvh = is_k ? h - hq : h - hq - hkv;
    cache_row = base + (slot * hkv + kvh) * d;
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    if (i < d) {
      const T out = from_float<T>(v[j]);
      if (!is_v || a.k_cache == nullptr) row[i] = out;
      if (cache_row != nullptr) cache_row[i] = out;
    }
  }
}

}  // namespace

Status qkv_rope_kv(const QkvRopeKvArgs& a, cudaStream_t stream) {
  if (!is_act_dtype(a.dtype)) return invalid_argument("qkv_rope_kv: dtype must be bf16 or f16");
  if (a.k_cache != nullptr)
    LATHE_RETURN_IF_ERROR(check_kv_dtype("qkv_rope_kv", a.dtype, a.kv_dtype));
  if (a.head_dim <= 0 || a.head_dim > kMaxHeadDim || a.head_dim % 2 != 0)
    return unsupported("qkv_rope_kv: head_dim must be even and at most 256");
  if (a.num_tokens <= 0) return Status();
  const int64_t heads = a.num_heads + 2 * a.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(a.num_tokens),
                  static_cast<unsigned>(ceil_div(heads, kWarps)));
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(a.dtype, T, {
    err = launch_kernel(qkv_rope_kv_kernel<T>, grid, dim3(kWarps * 32), 0, stream, a);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of qkv_rope_kv_kernel");
  return check_launch("qkv_rope_kv_kernel");
}

}  // namespace lathe::cuda
