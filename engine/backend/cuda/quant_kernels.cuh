// The quantized linear kernels (quant_linear.h), templated on the storage kind and the activation
// type; quant_linear_gguf.cu and quant_linear_int.cu instantiate them (split so that two cores
// compile them in parallel).
#pragma once

#include "engine/backend/cuda/quant_decode.cuh"

namespace lathe::cuda::quant {

constexpr int kWarpsPerBlock = 4;

// One warp per output row; lanes stride over the row's 32-weight chunks.
template <int K, typename T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    quant_gemv_kernel(QuantPart p, const T* x, void* y, int64_t ldy, int m, bool out_f32) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (row >= p.n) return;
  float acc[kQuantGemvMaxM];
#pragma unroll
  for (int i = 0; i < kQuantGemvMaxM; ++i) acc[i] = 0.0f;
  const int64_t chunks = p.k / 32;
  for (int64_t c = lane; c < chunks; c += 32) {
    float w[32];
    decode_chunk<K, T>(p, row, c, w);
#pragma unroll
    for (int mi = 0; mi < kQuantGemvMaxM; ++mi) {
      if (mi >= m) break;
      const T* xr = x + mi * p.k + c * 32;
      float s = 0.0f;
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        float f[8];
        load8(xr + 8 * v, f);
#pragma unroll
        for (int j = 0; j < 8; ++j) s = fmaf(f[j], w[8 * v + j], s);
      }
      acc[mi] += s;
    }
  }
#pragma unroll
  for (int mi = 0; mi < kQuantGemvMaxM; ++mi) {
    if (mi >= m) break;
    const float v = warp_sum(acc[mi]);
    if (lane == 0) {
      const int64_t at = mi * ldy + p.row_offset + row;
      if (out_f32) {
        static_cast<float*>(y)[at] = v;
      } else {
        static_cast<T*>(y)[at] = from_float<T>(v);
      }
    }
  }
}

// One thread per 32-weight chunk of rows [r0, r1): the weights in the activation type.
template <int K, typename T>
__global__ void quant_dequantize_kernel(QuantPart p, T* out, int64_t r0, int64_t r1) {
  pdl_begin();
  const int64_t chunks = p.k / 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= (r1 - r0) * chunks) return;
  const int64_t row = r0 + i / chunks, c = i % chunks;
  float w[32];
  decode_chunk<K, T>(p, row, c, w);
  T* o = out + (row - r0) * p.k + c * 32;
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    float f[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) f[j] = w[8 * v + j];
    store8(o + 8 * v, f);
  }
}

// Host side: launch the kernel of kind K for either activation type.
template <int K>
cudaError_t launch_gemv(const QuantPart& p, DType act, const void* x, DType out_dtype, void* y,
                        int64_t ldy, int64_t m, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.n + kWarpsPerBlock - 1) / kWarpsPerBlock));
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(act, T, {
    err = launch_kernel(quant_gemv_kernel<K, T>, grid, dim3(kWarpsPerBlock * 32), 0, stream, p,
                        static_cast<const T*>(x), y, ldy, static_cast<int>(m),
                        out_dtype == DType::kF32);
  });
  return err;
}

template <int K>
cudaError_t launch_dequantize(const QuantPart& p, DType act, void* out, int64_t r0, int64_t r1,
                              cudaStream_t stream) {
  const int64_t total = (r1 - r0) * (p.k / 32);
  const dim3 grid(static_cast<unsigned>((total + 255) / 256));
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(act, T, {
    err = launch_kernel(quant_dequantize_kernel<K, T>, grid, dim3(256), 0, stream, p,
                        static_cast<T*>(out), r0, r1);
  });
  return err;
}

}  // namespace lathe::cuda::quant
