#include <cuda_fp8.h>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/fp8_activations.h"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float block_max(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? scratch[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

__device__ __forceinline__ uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    quantize_fp8_kernel(const T* __restrict__ x, int64_t k, uint8_t* __restrict__ q,
                        float* __restrict__ scales) {
  __shared__ float scratch[32];
  pdl_begin();
  const int64_t r = blockIdx.x;
  const T* xr = x + r * k;
  uint8_t* qr = q + r * k;
  const bool vec = k % 8 == 0;
  float amax = 0.0f;
  if (vec) {
    for (int64_t i = threadIdx.x; i < k / 8; i += kThreads) {
      const uint4 v = reinterpret_cast<const uint4*>(xr)[i];
      const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
      for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(to_float(e[j])));
    }
  } else {
    for (int64_t i = threadIdx.x; i < k; i += kThreads) amax = fmaxf(amax, fabsf(to_float(xr[i])));
  }
  amax = block_max(amax, scratch);
  const float scale = fmaxf(amax, kFp8MinAmax) / kFp8E4m3Max;
  if (threadIdx.x == 0) scales[r] = scale;
  if (vec) {
    for (int64_t i = threadIdx.x; i < k / 8; i += kThreads) {
      const uint4 v = reinterpret_cast<const uint4*>(xr)[i];
      const T* e = reinterpret_cast<const T*>(&v);
      uint2 out;
      uint8_t* o = reinterpret_cast<uint8_t*>(&out);
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = to_e4m3(to_float(e[j]) / scale);
      reinterpret_cast<uint2*>(qr)[i] = out;
    }
  } else {
    for (int64_t i = threadIdx.x; i < k; i += kThreads) qr[i] = to_e4m3(to_float(xr[i]) / scale);
  }
}

}  // namespace

Status quantize_fp8_per_token(DType act, const void* x, int64_t m, int64_t k, uint8_t* q,
                              float* scales, cudaStream_t stream) {
  if (!is_act_dtype(act)) return invalid_argument("quantize_fp8_per_token: bf16 or f16 input");
  if (m <= 0 || k <= 0) return Status();
  if (m > 0x7fffffff) return invalid_argument("quantize_fp8_per_token: too many rows");
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(act, T, {
    err = launch_kernel(quantize_fp8_kernel<T>, dim3(static_cast<unsigned>(m)), dim3(kThreads), 0,
                        stream, static_cast<const T*>(x), k, q, scales);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of quantize_fp8_kernel");
  return check_launch("quantize_fp8_kernel");
}

}  // namespace lathe::cuda
