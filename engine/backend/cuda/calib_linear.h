// The bias of the calibration linears on the GPU (CudaCalibOps::linear, cuda_calib_ops.cpp): y is
// preloaded with the bias and cuBLAS adds x W^T to it (beta = 1), which rounds as the CPU's
// dot + bias does.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/status.h"

namespace lathe::cuda {

// y[r][c] = bias[c] for r < rows, c < n (y [rows, n] row-major, float32).
Status calib_broadcast_bias(float* y, const float* bias, int64_t rows, int64_t n,
                            cudaStream_t stream);

}  // namespace lathe::cuda
