#include "engine/backend/cuda/calib_attention.h"

#include "engine/backend/cuda/cuda_common.h"

namespace lathe::cuda {
namespace {

constexpr int kWarps = 4;

// kSlots = ceil(head_dim / 32) output dimensions per lane (dimension lane + 32 c).
template <int kSlots>
__global__ void __launch_bounds__(kWarps * 32) calib_attention_kernel(CalibAttentionArgs a) {
  __shared__ __align__(16) float qs[kWarps][kSlots * 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t task = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (task >= a.rows * a.num_heads) return;  // the whole warp; no block-wide barrier follows
  const int64_t row = task / a.num_heads;
  const int h = static_cast<int>(task % a.num_heads);
  const int hd = a.head_dim, nkv = a.num_kv_heads;
  const int kvh = h / (a.num_heads / nkv);
  const int64_t first = a.sample_first[row];
  const int64_t i = row - first;  // position in the sample
  const int64_t j0 = a.window > 0 && i - a.window + 1 > 0 ? i - a.window + 1 : 0;

  const float* qi = a.q + (row * a.num_heads + h) * hd;
  for (int e = lane; e < hd; e += 32) qs[warp][e] = qi[e];
  __syncwarp();
  const float* q_s = qs[warp];
  const bool vec4 = (hd & 3) == 0;

  float m = -INFINITY, sum = 0.f, acc[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) acc[c] = 0.f;

  for (int64_t jt = j0; jt <= i; jt += 32) {
    // Lane = key jt + lane: its score, its dot product in dimension order (the CPU's).
    const int64_t j = jt + lane;
    const bool valid = j <= i;
    float s = -INFINITY;
    if (valid) {
      const float* kj = a.k + ((first + j) * nkv + kvh) * hd;
      float d = 0.f;
      if (vec4) {
        for (int e = 0; e < hd; e += 4) {
          const float4 kv = *reinterpret_cast<const float4*>(kj + e);
          const float4 qv = *reinterpret_cast<const float4*>(q_s + e);
          d += qv.x * kv.x;
          d += qv.y * kv.y;
          d += qv.z * kv.z;
          d += qv.w * kv.w;
        }
      } else {
        for (int e = 0; e < hd; ++e) d += q_s[e] * kj[e];
      }
      s = d * a.scale;
    }
    float tile_max = s;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
    const float m_new = fmaxf(m, tile_max);  // finite: lane 0's key is valid
    const float corr = expf(m - m_new);      // 0 on the first tile (m = -inf)
    const float p = valid ? expf(s - m_new) : 0.f;
    float tile_sum = p;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, o);
    sum = sum * corr + tile_sum;
#pragma unroll
    for (int c = 0; c < kSlots; ++c) acc[c] *= corr;
    const int n_keys = static_cast<int>(i - jt + 1 < 32 ? i - jt + 1 : 32);
#pragma unroll 1  // unrolled, the head_dim 256 variant spills
    for (int jj = 0; jj < n_keys; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
      const float* vj = a.v + ((first + jt + jj) * nkv + kvh) * hd;
#pragma unroll
      for (int c = 0; c < kSlots; ++c) {
        const int e = lane + 32 * c;
        if (e < hd) acc[c] += pj * vj[e];
      }
    }
    m = m_new;
  }
  float* o = a.out + (row * a.num_heads + h) * hd;
#pragma unroll
  for (int c = 0; c < kSlots; ++c) {
    const int e = lane + 32 * c;
    if (e < hd) o[e] = acc[c] / sum;
  }
}

}  // namespace

Status calib_attention(const CalibAttentionArgs& a, cudaStream_t stream) {
  if (a.head_dim <= 0 || a.head_dim > kCalibAttentionMaxHeadDim || a.num_kv_heads <= 0 ||
      a.num_heads % a.num_kv_heads != 0)
    return internal_error("calib_attention: bad head shape");
  if (a.rows <= 0 || a.num_heads <= 0) return Status();
  const int64_t tasks = a.rows * a.num_heads;
  const unsigned blocks = static_cast<unsigned>(ceil_div(tasks, kWarps));
  if (a.head_dim <= 64) {
    calib_attention_kernel<2><<<blocks, kWarps * 32, 0, stream>>>(a);
  } else if (a.head_dim <= 128) {
    calib_attention_kernel<4><<<blocks, kWarps * 32, 0, stream>>>(a);
  } else {
    calib_attention_kernel<8><<<blocks, kWarps * 32, 0, stream>>>(a);
  }
  return check_launch("calib_attention_kernel");
}

}  // namespace lathe::cuda
