// The bias of the calibration linears on the GPU (CudaCalibOps::linear, cuda_calib_ops.cpp): y is
// preloaded with the bias and cuBLAS adds x W^T to it (beta = 1), which rounds as the CPU's
// dot + bias does.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/status.h"

namespace lathe::cuda {

// y[r][c] = bias[c] for r < rows, c < n (y [rows, n] row-major, float32).
// g[i] = g[i] / (1 + exp(-g[i])) * u[i] for i < n (SiLU(g) * u in float32, calib_ops.h's
// mlp_act; expf, not the fast intrinsic).
Status calib_swiglu(float* g, const float* u, int64_t n, cudaStream_t stream);

Status calib_broadcast_bias(float* y, const float* bias, int64_t rows, int64_t n,
                            cudaStream_t stream);

}  // namespace lathe::cuda
