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

// The batch's amax: each block one row, then one atomicMax on the float's bits (non-negative floats
// order as their bit patterns).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8_amax_kernel(const T* __restrict__ x, int64_t k, uint32_t* __restrict__ amax_bits) {
  __shared__ float scratch[32];
  pdl_begin();
  const T* xr = x + static_cast<int64_t>(blockIdx.x) * k;
  float amax = 0.0f;
  if (k % 8 == 0) {
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
  if (threadIdx.x == 0) atomicMax(amax_bits, __float_as_uint(amax));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8_quantize_kernel(const T* __restrict__ x, int64_t k, const uint32_t* __restrict__ amax_bits,
                        uint8_t* __restrict__ q, float* __restrict__ scale_out) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const T* xr = x + r * k;
  uint8_t* qr = q + r * k;
  const float scale = fmaxf(__uint_as_float(*amax_bits), kFp8MinAmax) / kFp8E4m3Max;
  if (r == 0 && threadIdx.x == 0) *scale_out = scale;
  if (k % 8 == 0) {
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

Status quantize_fp8_activations(DType act, const void* x, int64_t m, int64_t k, uint8_t* q,
                                float* scale, uint32_t* amax_bits, cudaStream_t stream) {
  if (!is_act_dtype(act)) return invalid_argument("quantize_fp8_activations: bf16 or f16 input");
  if (m <= 0 || k <= 0) return Status();
  if (m > 0x7fffffff) return invalid_argument("quantize_fp8_activations: too many rows");
  cudaError_t err = cudaMemsetAsync(amax_bits, 0, sizeof(uint32_t), stream);
  LATHE_DISPATCH_ACT(act, T, {
    const T* xt = static_cast<const T*>(x);
    if (err == cudaSuccess)
      err = launch_kernel(fp8_amax_kernel<T>, dim3(static_cast<unsigned>(m)), dim3(kThreads), 0,
                          stream, xt, k, amax_bits);
    if (err == cudaSuccess)
      err = launch_kernel(fp8_quantize_kernel<T>, dim3(static_cast<unsigned>(m)), dim3(kThreads), 0,
                          stream, xt, k, static_cast<const uint32_t*>(amax_bits), q, scale);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of the FP8 activation kernels");
  return check_launch("fp8_quantize_kernel");
}

}  // namespace lathe::cuda
