#include "engine/backend/cuda/add_rms_norm.h"
#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/kernel_utils.cuh"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    add_rms_norm_kernel(float* __restrict__ residual, const T* __restrict__ x,
                        const float* __restrict__ weight, T* __restrict__ out,
                        const int32_t* __restrict__ row_index, int64_t dim, float eps) {
  __shared__ double scratch[32];
  pdl_begin();
  const int64_t r = blockIdx.x;
  const int64_t s = row_index != nullptr ? row_index[r] : r;
  float* res = residual + s * dim;
  const T* xr = x != nullptr ? x + s * dim : nullptr;
  const bool write_back = xr != nullptr && row_index == nullptr;

  double ss = 0.0;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    float h = res[i];
    if (xr != nullptr) h += to_float(xr[i]);
    if (write_back) res[i] = h;
    ss += static_cast<double>(h) * static_cast<double>(h);
  }
  ss = block_sum(ss, scratch);  // synchronizes: residual writes are visible to the block below
  const float inv =
      static_cast<float>(1.0 / sqrt(ss / static_cast<double>(dim) + static_cast<double>(eps)));
  T* o = out + r * dim;
  for (int64_t i = threadIdx.x; i < dim; i += kThreads) {
    // Each thread re-reads only the elements it wrote itself, so no extra barrier is needed.
    float h = res[i];
    if (xr != nullptr && !write_back) h += to_float(xr[i]);
    o[i] = from_float<T>((h * inv) * weight[i]);
  }
}

}  // namespace

Status add_rms_norm(const AddRmsNormArgs& a, cudaStream_t stream) {
  if (!is_act_dtype(a.dtype)) return invalid_argument("add_rms_norm: dtype must be bf16 or f16");
  if (a.rows <= 0) return Status();
  cudaError_t err = cudaSuccess;
  LATHE_DISPATCH_ACT(a.dtype, T, {
    err = launch_kernel(add_rms_norm_kernel<T>, dim3(static_cast<unsigned>(a.rows)), dim3(kThreads),
                        0, stream, a.residual, static_cast<const T*>(a.x), a.weight,
                        static_cast<T*>(a.out), a.row_index, a.dim, a.eps);
  });
  if (err != cudaSuccess) return cuda_error(err, "launch of add_rms_norm_kernel");
  return check_launch("add_rms_norm_kernel");
}

}  // namespace lathe::cuda
