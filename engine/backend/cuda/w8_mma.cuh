// The tensor-core arithmetic of decode_gemv's kernel for 8-bit weights (decode_gemv_kernel.cuh):
// a warp task's two rows against the block's activations as mma.sync.m16n8k16 (f16 in, f32 sums),
// with the 8-bit codes decoded to f16 pairs (FP8: one cvt per pair; integers: one byte permute
// under 0x64 and one subtraction per pair) instead of to floats for scalar FMAs.
//
// Layout. A task's lanes hold, per row r in {0, 1} and vector slot u, the 16-byte vector
// v = base + 32 u + lane (16 weights at inputs [16 v, 16 v + 16)). Lane t = 4 g + q supplies A rows
// g (row 0) and g + 8 (row 1) and B column g of the mma, so that the 16 x 8 product's entry
// (g, g) is row 0's dot over the vectors of lanes 4 g .. 4 g + 3 (and (g + 8, g) row 1's): a k-step
// j (0..3) of one vector is its inputs 16 v + 4 j .. + 3, which the fragment's k slots (2 q, 2 q +
// 1) and (2 q + 8, 2 q + 9) take in that order, in A from the lane's codes and in B from the lane's
// activations. The off-diagonal entries mix lanes' inputs and are discarded. Scales apply per
// vector slot to the diagonal (lanes 4 g .. 4 g + 3 hold 4 consecutive vectors, one group when
// groups are 64 inputs or more, or per tensor / channel / 128 x 128 block).
//
// The activations are f16 in shared memory: rows of f16 as they are; bf16 rows scaled per token by
// a power of two that puts the row's largest magnitude in [2^14, 2^15) (exact for every value of
// magnitude 2^-29 of the largest and up; sums are unscaled at the end, exactly).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "engine/backend/cuda/gemv_w8.h"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/mma.cuh"

namespace lathe::cuda {

// Whether the tensor-core path takes a scale layout: one scale per row, or groups of 64 inputs and
// up (a diagonal entry's four vectors in one group).
__host__ __device__ constexpr bool w8_mma_takes(int group_shift) {
  return group_shift >= 6;
}

// The integer path's subtrahend for a zero point `mz` = 2^23 + zero (scale_at's form): the f16
// pair (1024 + zero, 1024 + zero).
__device__ __forceinline__ uint32_t w8_mma_zero(float mz) {
  const __half h = __float2half_rn(mz - 8388608.f + 1024.f);
  const uint32_t b = __half_as_ushort(h);
  return b | (b << 16);
}

// Two 8-bit codes (bits [16 s, 16 s + 16) of `word`) as an f16 pair, low code in the low half.
template <GemvWeights WK>
__device__ __forceinline__ uint32_t w8_pair(uint32_t word, int s, uint32_t zero) {
  if constexpr (WK == GemvWeights::kInt8) {
    // 0x64xx is the f16 1024 + xx; minus 1024 + zero leaves code - zero, exactly.
    const uint32_t biased = __byte_perm(word, 0x64646464u, s == 0 ? 0x4140u : 0x4342u);
    const __half2 d = __hsub2(*reinterpret_cast<const __half2*>(&biased),
                              *reinterpret_cast<const __half2*>(&zero));
    return *reinterpret_cast<const uint32_t*>(&d);
  } else {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> (16 * s)), __NV_E4M3);
    return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
  }
}

// Word j of a 16-byte vector (j a compile-time constant after unrolling).
__device__ __forceinline__ uint32_t word_of(const uint4& v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// The A fragment of k-step j: row 0's codes from v0, row 1's from v1 (zero points z0, z1).
template <GemvWeights WK>
__device__ __forceinline__ void w8_fragment(const uint4& v0, const uint4& v1, int j, uint32_t z0,
                                            uint32_t z1, uint32_t (&a)[4]) {
  const uint32_t w0 = word_of(v0, j), w1 = word_of(v1, j);
  a[0] = w8_pair<WK>(w0, 0, z0);
  a[2] = w8_pair<WK>(w0, 1, z0);
  a[1] = w8_pair<WK>(w1, 0, z1);
  a[3] = w8_pair<WK>(w1, 1, z1);
}

// The lane's share of row r's sum from its accumulators c (the mma's d fragment, summed over the
// task): the diagonal entry where the lane holds it, else 0.
__device__ __forceinline__ float w8_diagonal(const float (&c)[4], int r, int lane) {
  const int g = lane >> 2, q = lane & 3;
  if (q != (g >> 1)) return 0.f;
  const float even = r == 0 ? c[0] : c[2], odd = r == 0 ? c[1] : c[3];  // no dynamic index
  return (g & 1) ? odd : even;
}

// The block's M rows of k activations (xs, of type T) as f16 in place, with unscale[m] the factor
// that undoes row m's scaling. T = f16 is left as it is (unscale 1). red: kWarps * M floats of
// scratch. Ends with a block barrier.
template <typename T, int M, int kWarps>
__device__ __forceinline__ void w8_mma_activations(T* xs, int k, float* red, float* unscale) {
  if constexpr (std::is_same_v<T, __half>) {
    if (threadIdx.x < M) unscale[threadIdx.x] = 1.f;
    __syncthreads();
  } else {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __nv_bfloat162* x2 = reinterpret_cast<__nv_bfloat162*>(xs);
    const int pairs = k / 2;
    float mx[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      mx[m] = 0.f;
      for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
        const float2 f = __bfloat1622float2(x2[m * pairs + i]);
        mx[m] = fmaxf(mx[m], fmaxf(fabsf(f.x), fabsf(f.y)));
      }
      mx[m] = warp_max(mx[m]);
      if (lane == 0) red[warp * M + m] = mx[m];
    }
    __syncthreads();
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float top = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) top = fmaxf(top, red[w * M + m]);
      // top < 2^e with e = its biased exponent - 126; scale by 2^(15 - e), clamped to normal
      // powers of two; infinities and NaN rows unscaled.
      const int biased = (__float_as_int(top) >> 23) & 0xFF;
      const int s = biased == 0xFF ? 0 : min(126, max(-126, 15 - (biased - 126)));
      const float up = __int_as_float((127 + s) << 23);
      if (threadIdx.x == 0) unscale[m] = __int_as_float((127 - s) << 23);
      __half2* h2 = reinterpret_cast<__half2*>(xs);
      for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
        const float2 f = __bfloat1622float2(x2[m * pairs + i]);
        h2[m * pairs + i] = __floats2half2_rn(f.x * up, f.y * up);
      }
    }
    __syncthreads();
  }
}

}  // namespace lathe::cuda
