// Device-side helpers shared by the .cu files of the CUDA backend: element conversions for the two
// activation types (bf16, f16), 16-byte vectors of 8 elements, warp and block reductions, and the
// dtype dispatch used by every op's host function.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/dtype.h"

namespace lathe::cuda {

// Programmatic dependent launch (Hopper): every forward-pass kernel starts with this. It waits
// until the kernel before it in the stream has completed and its writes are visible (so the kernel
// may read anything), then lets the next kernel be scheduled onto SMs this one's last wave leaves
// free, which hides the launch latency between dependent kernels (inside CUDA graphs too). Without
// the launch attribute, or before sm_90, both instructions are no-ops.
__device__ __forceinline__ void pdl_begin() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// The two halves of pdl_begin(), for kernels that first load data the previous kernel does not
// write (weights; KV-cache positions written by earlier steps): those loads go before pdl_wait()
// and overlap the previous kernel's tail. Everything the previous kernels wrote is read after it.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// 16 bytes of weights that are read exactly once: not kept in L1.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// Lets `kernel` take `smem` bytes of dynamic shared memory: above 48 KB a kernel needs an opt-in,
// raised once per process to the largest size asked (a process-wide attribute of the kernel);
// `configured` is that kernel's own record (a function-local static of its launcher).
template <typename Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, size_t smem, std::atomic<size_t>& configured) {
  if (smem <= configured.load(std::memory_order_relaxed)) return cudaSuccess;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
  if (err == cudaSuccess) configured.store(smem, std::memory_order_relaxed);
  return err;
}

// Launches `kernel` in thread-block clusters of `cluster` blocks (grid must be a multiple of it;
// dim3(1, 1, 1): no clusters), with the programmatic-stream-serialization attribute when
// pdl_enabled().
template <typename... Params, typename... Args>
cudaError_t launch_kernel_in_clusters(void (*kernel)(Params...), dim3 grid, dim3 block,
                                      dim3 cluster, size_t smem, cudaStream_t stream,
                                      Args&&... args) {
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  // Only on explicit streams (the runner's): the legacy default stream keeps ordinary launches.
  if (stream != nullptr && pdl_enabled()) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster.x;
    attr[n].val.clusterDim.y = cluster.y;
    attr[n].val.clusterDim.z = cluster.z;
    ++n;
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// Launches `kernel`, with the programmatic-stream-serialization attribute when pdl_enabled().
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, Args&&... args) {
  return launch_kernel_in_clusters(kernel, grid, block, dim3(1, 1, 1), smem, stream,
                                   std::forward<Args>(args)...);
}

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_float<float>(float v) {
  return v;
}

// Round to nearest even, as lathe::f32_to_bf16 / f32_to_f16 do on the host.
template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}

// 8 elements of a 16-bit type in one 16-byte load/store (addresses must be 16-byte aligned).
template <typename T>
struct alignas(16) Vec8 {
  T v[8];
};

template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&out)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = to_float(e[i]);
}

template <typename T>
__device__ __forceinline__ void store8(T* p, const float (&in)[8]) {
  uint4 raw;
  T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) e[i] = from_float<T>(in[i]);
  *reinterpret_cast<uint4*>(p) = raw;
}

// 4 elements of a 16-bit type from / to an 8-byte aligned address.
template <typename T>
__device__ __forceinline__ float4 load4(const T* p) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const T* e = reinterpret_cast<const T*>(&raw);
  return make_float4(to_float(e[0]), to_float(e[1]), to_float(e[2]), to_float(e[3]));
}
template <typename T>
__device__ __forceinline__ void store4(T* p, float4 v) {
  uint2 raw;
  T* e = reinterpret_cast<T*>(&raw);
  e[0] = from_float<T>(v.x);
  e[1] = from_float<T>(v.y);
  e[2] = from_float<T>(v.z);
  e[3] = from_float<T>(v.w);
  *reinterpret_cast<uint2*>(p) = raw;
}

// The sum of squares of 4 floats in float64, in element order: the RMSNorm kernels' (add_rms_norm
// and the norm prologue of decode_gemv) share it so that both give the same inverse RMS.
__device__ __forceinline__ double sum_sq4(float4 h) {
  double s = static_cast<double>(h.x) * static_cast<double>(h.x);
  s += static_cast<double>(h.y) * static_cast<double>(h.y);
  s += static_cast<double>(h.z) * static_cast<double>(h.z);
  s += static_cast<double>(h.w) * static_cast<double>(h.w);
  return s;
}

// SwiGLU's gate activation times up, in float32 with the CPU reference's operation order
// (cpu::swiglu: g / (1 + exp(-g)) * u); shared by swiglu.cu and decode_gemv.cu so that both paths
// compute the same function.
__device__ __forceinline__ float silu_mul(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch` holds 32 values; the function synchronizes the block twice.
template <typename V>
__device__ __forceinline__ V block_sum(V v, V* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  V total = lane < nwarps ? scratch[lane] : V(0);
  total = warp_sum(total);
  __syncthreads();
  return total;
}

}  // namespace lathe::cuda

// Runs the body with `T` bound to the device type of `dtype` (bf16 or f16).
// The shared-memory address of a generic pointer into shared memory.
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously (sm_80+); src_bytes 0 writes zeros (rows past the end
// of a range). A thread's copies complete in commit-group order: cp_async_wait<N>() returns when at
// most N of its groups are pending, and then its own copies are visible to it.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

#define LATHE_DISPATCH_ACT(dtype, T, ...)   \
  do {                                      \
    if ((dtype) == ::lathe::DType::kBF16) { \
      using T = __nv_bfloat16;              \
      __VA_ARGS__                           \
    } else {                                \
      using T = __half;                     \
      __VA_ARGS__                           \
    }                                       \
  } while (0)
