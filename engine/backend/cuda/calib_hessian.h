// The kernels of the calibration Hessian H = 2 X^T X / n on the GPU (CudaCalibOps::hessian,
// cuda_calib_ops.cpp): the non-finite check and the double accumulation of cuBLAS's float32 panel
// products. The sum is [k, k] row-major float64; only its lower triangle (j <= i) is meaningful
// until hessian_finish mirrors it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/status.h"

namespace lathe::cuda {

// *first = min(*first, base + i) over the indices i < count where x[i] is not finite (atomicMin;
// initialize *first to ~0ull). base + i is the element's index in the whole activation, so row =
// index / k and feature = index % k.
Status calib_first_non_finite(const float* x, int64_t count, int64_t base,
                              unsigned long long* first, cudaStream_t stream);

// sum[(a0 + r) * k + c] += panel[c + r * nb] for r < ta, c < nb: one float32 panel product
// X^T[0:nb, :] X[:, a0:a0+ta] of a chunk of rows (column-major [nb, ta]), into rows a0 .. a0+ta-1
// of the double sum.
Status hessian_accumulate_panel(double* sum, const float* panel, int64_t k, int64_t a0, int64_t ta,
                                int64_t nb, cudaStream_t stream);

// sum[i][j] = sum[j][i] = sum[i][j] * f for j <= i: the lower triangle scaled (f = 2 / n) and
// mirrored.
Status hessian_finish(double* sum, int64_t k, double f, cudaStream_t stream);

}  // namespace lathe::cuda
