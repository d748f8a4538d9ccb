// The decode-shaped product (M <= kQuantGemvMaxM) for integer parts without act-order and for FP8
// parts, at the bandwidth limit: quant_linear.h's quant_gemv for those formats. Included by
// quant_linear_int.cu only.
//
// Each warp computes kRowsPerWarp consecutive rows. A row is read in 32-byte steps (64 int4 or 32
// 8-bit weights); lane l takes steps l, l + 32, ... of all its warp's rows. A lane loads its next
// step of every row (4 x 32 B) while it computes the current one (double buffering), so that about
// 256 B per lane are in flight; each activation it loads serves all the warp's rows. The first
// step's weights are loaded before the wait on the previous kernel (PDL): weights are never written
// by the forward pass. Scales (and zero points) of a step are loaded with its codes.
// Requires k % (weights per step) == 0 (quant_gemv falls back to the one-row kernel otherwise).
#pragma once

#include <cuda_fp8.h>

#include "engine/backend/cuda/quant_decode.cuh"

namespace lathe::cuda::quant {

constexpr int kRowsPerWarp = 4;
constexpr int kRowsWarps = 4;  // warps per block

template <int K>
__host__ __device__ constexpr int step_weights() {
  return K == kInt4 ? 64 : 32;
}

// One row's step: 32 bytes of codes, and the scale (and zero point) of each of its two halves
// (int4: 32 weights each, which may lie in different groups; 8-bit: both halves the same group).
struct RowStep {
  uint4 a, b;
  float s0, s1, z0, z1;
};

template <int K>
__device__ __forceinline__ RowStep load_step(const QuantPart& p, int64_t row, int64_t step) {
  constexpr int kW = step_weights<K>();
  RowStep r;
  const int64_t row_bytes = K == kInt4 ? p.k / 2 : p.k;
  const uint8_t* q = static_cast<const uint8_t*>(p.data) + row * row_bytes + step * 32;
  r.a = __ldg(reinterpret_cast<const uint4*>(q));
  r.b = __ldg(reinterpret_cast<const uint4*>(q + 16));
  const int64_t e0 = step * kW, e1 = e0 + kW / 2;
  if constexpr (K == kFp8) {
    const float* sc = static_cast<const float*>(p.scales);
    float s = sc[0];
    if (p.fp8_scale == ScaleGranularity::kChannel) s = sc[row];
    if (p.fp8_scale == ScaleGranularity::kBlock)
      s = sc[(row / 128) * ((p.k + 127) / 128) + e0 / 128];
    r.s0 = r.s1 = s;
    r.z0 = r.z1 = 0.0f;
  } else {
    const int64_t groups = p.k / p.group_size;
    const int64_t g0 = row * groups + e0 / p.group_size, g1 = row * groups + e1 / p.group_size;
    if (p.scale_dtype == DType::kF32) {
      r.s0 = static_cast<const float*>(p.scales)[g0];
      r.s1 = static_cast<const float*>(p.scales)[g1];
    } else {
      r.s0 = __half2float(static_cast<const __half*>(p.scales)[g0]);
      r.s1 = __half2float(static_cast<const __half*>(p.scales)[g1]);
    }
    constexpr float kMid = K == kInt4 ? 8.0f : 128.0f;
    r.z0 = p.zeros != nullptr ? static_cast<float>(p.zeros[g0]) : kMid;
    r.z1 = p.zeros != nullptr ? static_cast<float>(p.zeros[g1]) : kMid;
  }
  return r;
}

// Weights [8 v, 8 v + 8) of a step (v < step_weights / 8) before their scale, which is returned:
// weight = scale * w[j]. Decoding is the kernel's ALU cost, so it avoids integer-to-float
// conversions (a quarter-rate instruction): a code c (< 2^8) ORed into the mantissa of 2^23 is the
// float 2^23 + c, and subtracting 2^23 + z gives c - z exactly; FP8 pairs convert in hardware.
__device__ __forceinline__ float magic_minus(uint32_t code_bits, float magic_z) {
  return __int_as_float(static_cast<int>(code_bits | 0x4B000000u)) - magic_z;
}

template <int K>
__device__ __forceinline__ float decode8(const RowStep& r, int v, float (&w)[8]) {
  const uint32_t words[8] = {r.a.x, r.a.y, r.a.z, r.a.w, r.b.x, r.b.y, r.b.z, r.b.w};
  if constexpr (K == kInt4) {
    // word v holds weights 8 v .. 8 v + 7; the first 4 words are the first half.
    const uint32_t word = words[v];
    const float mz = 8388608.0f + (v < 4 ? r.z0 : r.z1);
#pragma unroll
    for (int j = 0; j < 8; ++j) w[j] = magic_minus((word >> (4 * j)) & 15u, mz);
    return v < 4 ? r.s0 : r.s1;
  } else if constexpr (K == kInt8) {
    const float mz = 8388608.0f + r.z0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t word = words[2 * v + h];
#pragma unroll
      for (int j = 0; j < 4; ++j)  // byte j under the exponent byte 0x4B in one byte permute
        w[4 * h + j] =
            __int_as_float(static_cast<int>(__byte_perm(word, 0x4B000000u, 0x7440 | j))) - mz;
    }
    return r.s0;
  } else {  // kFp8: E4M3 pairs to half2 in one instruction (sm_89+)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t word = words[2 * v + h];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const __half2_raw hr = __nv_cvt_fp8x2_to_halfraw2(
            static_cast<__nv_fp8x2_storage_t>(word >> (16 * j)), __NV_E4M3);
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&hr));
        w[4 * h + 2 * j] = f.x;
        w[4 * h + 2 * j + 1] = f.y;
      }
    }
    return r.s0;
  }
}

template <int K, typename T, int MaxM>
__global__ void __launch_bounds__(kRowsWarps * 32)
    quant_gemv_rows_kernel(QuantPart p, const T* x, void* y, int64_t ldy, int m, bool out_f32) {
  constexpr int kW = step_weights<K>();
  const int lane = threadIdx.x & 31;
  const int64_t row0 =
      (static_cast<int64_t>(blockIdx.x) * kRowsWarps + (threadIdx.x >> 5)) * kRowsPerWarp;
  const int64_t steps = p.k / kW;
  int64_t rows[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) rows[r] = min(row0 + r, p.n - 1);  // tail rows re-read
  RowStep next[kRowsPerWarp];
  if (row0 < p.n && lane < steps) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) next[r] = load_step<K>(p, rows[r], lane);
  }
  pdl_wait();
  pdl_trigger();
  if (row0 >= p.n) return;
  float acc[kRowsPerWarp][MaxM];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int mi = 0; mi < MaxM; ++mi) acc[r][mi] = 0.0f;
  for (int64_t s = lane; s < steps; s += 32) {
    RowStep cur[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) cur[r] = next[r];
    if (s + 32 < steps) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) next[r] = load_step<K>(p, rows[r], s + 32);
    }
#pragma unroll
    for (int v = 0; v < kW / 8; ++v) {
      float w[kRowsPerWarp][8], scale[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) scale[r] = decode8<K>(cur[r], v, w[r]);
#pragma unroll
      for (int mi = 0; mi < MaxM; ++mi) {
        if (mi >= m) break;
        float f[8];
        load8(x + mi * p.k + s * kW + 8 * v, f);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          float dot = 0.0f;
#pragma unroll
          for (int j = 0; j < 8; ++j) dot = fmaf(f[j], w[r][j], dot);
          acc[r][mi] = fmaf(scale[r], dot, acc[r][mi]);
        }
      }
    }
  }
#pragma unroll
  for (int mi = 0; mi < MaxM; ++mi) {
    if (mi >= m) break;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float v = warp_sum(acc[r][mi]);
      if (lane == r && row0 + r < p.n) {
        const int64_t at = mi * ldy + p.row_offset + row0 + r;
        if (out_f32)
          static_cast<float*>(y)[at] = v;
        else
          static_cast<T*>(y)[at] = from_float<T>(v);
      }
    }
  }
}

// Whether the rows kernel takes part p (else the one-row kernel of quant_kernels.cuh).
template <int K>
bool rows_kernel_takes(const QuantPart& p) {
  return (K == kInt4 || K == kInt8 || K == kFp8) && p.g_idx == nullptr && !p.int4_tiles &&
         p.k % step_weights<K>() == 0;
}

template <int K>
cudaError_t launch_gemv_rows(const QuantPart& p, DType act, const void* x, DType out_dtype, void* y,
                             int64_t ldy, int64_t m, cudaStream_t stream) {
  constexpr int64_t kRowsPerBlock = kRowsWarps * kRowsPerWarp;
  const dim3 grid(static_cast<unsigned>((p.n + kRowsPerBlock - 1) / kRowsPerBlock));
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(act, T, {
    if (m == 1)
      err = launch_kernel(quant_gemv_rows_kernel<K, T, 1>, grid, dim3(kRowsWarps * 32), 0, stream,
                          p, static_cast<const T*>(x), y, ldy, 1, out_dtype == DType::kF32);
    else
      err = launch_kernel(quant_gemv_rows_kernel<K, T, kQuantGemvMaxM>, grid, dim3(kRowsWarps * 32),
                          0, stream, p, static_cast<const T*>(x), y, ldy, static_cast<int>(m),
                          out_dtype == DType::kF32);
  });
  return err;
}

}  // namespace lathe::cuda::quant
