#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"
#include "engine/backend/cuda/swiglu.h"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 128;

template <typename T, bool kVec>
__global__ void __launch_bounds__(kThreads)
    swiglu_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t inter) {
  pdl_begin();
  const int64_t t = blockIdx.x;
  const T* g = gate_up + t * 2 * inter;
  const T* u = g + inter;
  T* o = out + t * inter;
  if constexpr (kVec) {
    const int64_t i = (static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x) * 8;
    if (i >= inter) return;
    float gv[8], uv[8], ov[8];
    load8(g + i, gv);
    load8(u + i, uv);
#pragma unroll
    for (int j = 0; j < 8; ++j) ov[j] = silu_mul(gv[j], uv[j]);
    store8(o + i, ov);
  } else {
    for (int64_t i = static_cast<int64_t>(blockIdx.y) * kThreads * 8 + threadIdx.x;
         i < min(inter, static_cast<int64_t>(blockIdx.y + 1) * kThreads * 8); i += kThreads)
      o[i] = from_float<T>(silu_mul(to_float(g[i]), to_float(u[i])));
  }
}

}  // namespace

Status swiglu(DType dtype, const void* gate_up, void* out, int64_t num_tokens, int64_t inter,
              cudaStream_t stream) {
  if (!is_act_dtype(dtype)) return invalid_argument("swiglu: dtype must be bf16 or f16");
  if (num_tokens <= 0) return Status();
  const dim3 grid(static_cast<unsigned>(num_tokens),
                  static_cast<unsigned>(ceil_div(inter, kThreads * 8)));
  const bool vec = inter % 8 == 0;
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(dtype, T, {
    err =
        launch_kernel(vec ? swiglu_kernel<T, true> : swiglu_kernel<T, false>, grid, dim3(kThreads),
                      0, stream, static_cast<const T*>(gate_up), static_cast<T*>(out), inter);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of swiglu_kernel");
  return check_launch("swiglu_kernel");
}

}  // namespace lathe::cuda
