#include "engine/backend/cuda/cast.h"
#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {
namespace {

template <typename S, typename D>
__global__ void cast_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = from_float<D>(to_float(src[i]));
}

template <typename S>
Status launch_to(const S* src, DType dst_type, void* dst, int64_t n, cudaStream_t stream) {
  const int blocks = static_cast<int>(std::min<int64_t>(ceil_div(n, 256), 4096));
  switch (dst_type) {
    case DType::kF32:
      cast_kernel<<<blocks, 256, 0, stream>>>(src, static_cast<float*>(dst), n);
      break;
    case DType::kF16:
      cast_kernel<<<blocks, 256, 0, stream>>>(src, static_cast<__half*>(dst), n);
      break;
    case DType::kBF16:
      cast_kernel<<<blocks, 256, 0, stream>>>(src, static_cast<__nv_bfloat16*>(dst), n);
      break;
    default:
      return invalid_argument("cast: destination must be f32, f16 or bf16");
  }
  return check_launch("cast_kernel");
}

}  // namespace

Status cast(DType src_type, const void* src, DType dst_type, void* dst, int64_t n,
            cudaStream_t stream) {
  if (n <= 0) return Status();
  switch (src_type) {
    case DType::kF32:
      return launch_to(static_cast<const float*>(src), dst_type, dst, n, stream);
    case DType::kF16:
      return launch_to(static_cast<const __half*>(src), dst_type, dst, n, stream);
    case DType::kBF16:
      return launch_to(static_cast<const __nv_bfloat16*>(src), dst_type, dst, n, stream);
    default:
      return invalid_argument("cast: source must be f32, f16 or bf16");
  }
}

}  // namespace lathe::cuda
