#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/embedding.h"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {
namespace {

template <typename T, bool kVec>
__global__ void embedding_kernel(const T* __restrict__ table, int64_t vocab, int64_t dim,
                                 const int32_t* __restrict__ ids, float* __restrict__ out) {
  pdl_begin();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  float* dst = out + t * dim;
  if (id < 0 || id >= vocab) {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = 0.f;
    return;
  }
  const T* src = table + static_cast<int64_t>(id) * dim;
  if constexpr (kVec) {
    for (int64_t i = threadIdx.x * 8; i < dim; i += blockDim.x * 8) {
      float v[8];
      load8(src + i, v);
      reinterpret_cast<float4*>(dst + i)[0] = make_float4(v[0], v[1], v[2], v[3]);
      reinterpret_cast<float4*>(dst + i)[1] = make_float4(v[4], v[5], v[6], v[7]);
    }
  } else {
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = to_float(src[i]);
  }
}

}  // namespace

Status embedding(DType dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
                 int64_t num_tokens, float* out, cudaStream_t stream) {
  if (!is_act_dtype(dtype)) return invalid_argument("embedding: table must be bf16 or f16");
  if (num_tokens <= 0) return Status();
  const bool vec = dim % 8 == 0 && reinterpret_cast<uintptr_t>(table) % 16 == 0;
  cudaError_t err = cudaSuccess;
  const dim3 grid(static_cast<unsigned>(num_tokens));
  LATHE_DISPATCH_ACT(dtype, T, {
    err = launch_kernel(vec ? embedding_kernel<T, true> : embedding_kernel<T, false>, grid,
                        dim3(128), 0, stream, static_cast<const T*>(table), vocab, dim, ids, out);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of embedding_kernel");
  return check_launch("embedding_kernel");
}

}  // namespace lathe::cuda
