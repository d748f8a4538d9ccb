#include "engine/backend/cuda/calib_linear.h"

#include <algorithm>

#include "engine/backend/cuda/cuda_common.h"

namespace lathe::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void broadcast_bias_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                      int64_t rows, int64_t n) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < n;
         c += static_cast<int64_t>(gridDim.x) * blockDim.x)
      y[r * n + c] = bias[c];
}

__global__ void swiglu_kernel(float* __restrict__ g, const float* __restrict__ u, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = g[i];
    g[i] = x / (1.0f + expf(-x)) * u[i];
  }
}

}  // namespace

Status calib_swiglu(float* g, const float* u, int64_t n, cudaStream_t stream) {
  if (n <= 0) return Status();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(n, kThreads), 8192));
  swiglu_kernel<<<blocks, kThreads, 0, stream>>>(g, u, n);
  return check_launch("swiglu_kernel");
}

Status calib_broadcast_bias(float* y, const float* bias, int64_t rows, int64_t n,
                            cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return Status();
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(ceil_div(n, kThreads), 1024)),
                  static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  broadcast_bias_kernel<<<grid, kThreads, 0, stream>>>(y, bias, rows, n);
  return check_launch("broadcast_bias_kernel");
}

}  // namespace lathe::cuda
