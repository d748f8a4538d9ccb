// The elementwise ops and small reductions of a calibration forward on the GPU (CudaCalibOps,
// cuda_calib_ops.h; the contract is calib_ops.h's, the CPU reference cpu_ops.h's). All tensors are
// float32 row-major in device memory; every float operation is written as an _rn intrinsic, so
// nvcc contracts nothing into a fused multiply-add and the results equal the host's uncontracted
// float32 arithmetic bit for bit, but for the double sums, which run in another order (tree /
// row-chunk reductions instead of one loop): those agree with the CPU's to double rounding.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/status.h"

namespace lathe::cuda {

// cpu::rms_norm of each of `runs` consecutive runs of `width` values: inv = float(1 / sqrt(ss /
// width + eps)) with ss the sum of squares in double, out = (x * inv) * weight[e]. One warp per
// run. out may be x.
Status calib_rms_norm(const float* x, const float* weight, int64_t runs, int64_t width, float eps,
                      float* out, cudaStream_t stream);

// cpu::rope's rotation of x [rows, heads, head_dim] in place with cos / sin [rows, half] (half <=
// head_dim / 2): pair i of a head is (i, i + half) (neox) or (2i, 2i + 1) (interleaved); a' = a c
// - b s, b' = b c + a s. Dimensions the pairs do not reach (half < head_dim / 2: partial rotary)
// are left as they are.
Status calib_rope(float* x, const float* cos_t, const float* sin_t, int64_t rows, int64_t heads,
                  int64_t head_dim, int64_t half, bool interleaved, cudaStream_t stream);

// x[i] += y[i] for i < n.
Status calib_add(float* x, const float* y, int64_t n, cudaStream_t stream);

// x[r][j] /= s[j] (IEEE division) for x [rows, cols].
Status calib_divide_columns(float* x, const float* s, int64_t rows, int64_t cols,
                            cudaStream_t stream);

// The doubles of calib_column_abs_mean's workspace for n rows of `cols` columns.
int64_t calib_column_abs_mean_workspace(int64_t n, int64_t cols);
// out[j] = float(sum_r |x[r][j]| / max(n, 1)) over the first n rows of x [., cols], the sum in
// double: per column, chunks of consecutive rows summed in row order, then the chunks in order.
// `partial` holds calib_column_abs_mean_workspace(n, cols) doubles.
Status calib_column_abs_mean(const float* x, int64_t n, int64_t cols, double* partial, float* out,
                             cudaStream_t stream);

// The number of partial sums calib_squared_difference writes for `count` values (<= 1024).
int64_t calib_squared_difference_blocks(int64_t count);
// partial[b] = the sum of (double(a[i]) - double(b[i]))^2 over block b's share of i < count; the
// caller adds the partials (in order, on the host).
Status calib_squared_difference(const float* a, const float* b, int64_t count, double* partial,
                                cudaStream_t stream);

// out[i][:] = x[rows[i]][:] for i < count (x [., cols], out [count, cols]; rows checked by the
// caller).
Status calib_gather_rows(const float* x, const int64_t* rows, int64_t count, int64_t cols,
                         float* out, cudaStream_t stream);

}  // namespace lathe::cuda
