#include "engine/backend/cuda/calib_hessian.h"

#include <algorithm>

#include "engine/backend/cuda/cuda_common.h"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void first_non_finite_kernel(const float* __restrict__ x, int64_t count, int64_t base,
                                        unsigned long long* __restrict__ first) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (!isfinite(x[i])) {
      atomicMin(first, static_cast<unsigned long long>(base + i));
      return;  // this thread's later indices are larger
    }
  }
}

__global__ void accumulate_panel_kernel(double* __restrict__ sum, const float* __restrict__ panel,
                                        int64_t k, int64_t a0, int64_t ta, int64_t nb) {
  for (int64_t r = blockIdx.y; r < ta; r += gridDim.y) {
    double* out = sum + (a0 + r) * k;
    const float* in = panel + r * nb;
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < nb;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x)
      out[c] += static_cast<double>(in[c]);
  }
}

__global__ void finish_kernel(double* __restrict__ sum, int64_t k, double f) {
  for (int64_t i = blockIdx.y; i < k; i += gridDim.y) {
    for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j <= i;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const double v = sum[i * k + j] * f;
      sum[i * k + j] = v;
      if (j < i) sum[j * k + i] = v;
    }
  }
}

dim3 grid_2d(int64_t outer, int64_t inner) {
  return dim3(static_cast<unsigned>(
                  std::max<int64_t>(1, std::min<int64_t>(ceil_div(inner, kThreads), 4096))),
              static_cast<unsigned>(std::min<int64_t>(outer, 65535)));
}

}  // namespace

Status calib_first_non_finite(const float* x, int64_t count, int64_t base,
                              unsigned long long* first, cudaStream_t stream) {
  if (count <= 0) return Status();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(count, kThreads), 8192));
  first_non_finite_kernel<<<blocks, kThreads, 0, stream>>>(x, count, base, first);
  return check_launch("first_non_finite_kernel");
}

Status hessian_accumulate_panel(double* sum, const float* panel, int64_t k, int64_t a0, int64_t ta,
                                int64_t nb, cudaStream_t stream) {
  if (ta <= 0 || nb <= 0) return Status();
  accumulate_panel_kernel<<<grid_2d(ta, nb), kThreads, 0, stream>>>(sum, panel, k, a0, ta, nb);
  return check_launch("accumulate_panel_kernel");
}

Status hessian_finish(double* sum, int64_t k, double f, cudaStream_t stream) {
  if (k <= 0) return Status();
  finish_kernel<<<grid_2d(k, k), kThreads, 0, stream>>>(sum, k, f);
  return check_launch("finish_kernel");
}

}  // namespace lathe::cuda
