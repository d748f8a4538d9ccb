// The kernels of GPTQ on the GPU (CudaCalibOps::gptq, cuda_calib_gptq.cpp drives them with cuBLAS
// and cuSOLVER between them). Shapes: k = the matrix's input columns, rows = its output rows;
// "processing order" is GPTQ's column order (act-order permutation perm: position i holds original
// column perm[i], calib_plan.h). All matrices are float64 unless said otherwise.
//
// The factorization works on the Hessian reversed (cholesky.h's trick, which the CPU uses too):
// with J the exchange matrix and Hp the permuted, damped Hessian, J Hp J = M M^T (M lower) gives
// the upper Cholesky factor of Hp^-1 as U = J M^-1 J, i.e. U[i][j] = M^-1[n-1-i][n-1-j]. The device
// holds M and M^-1 column-major (cuSOLVER's layout) and U row-major.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/calib_grid.h"
#include "engine/core/status.h"

namespace lathe::cuda {

// The widest column block one gptq_quantize_block launch takes: 32 lanes x 4 columns.
constexpr int64_t kGptqMaxBlock = 128;

// *flag = 1 when one of the `count` values is not finite (the flag is never cleared here).
Status calib_flag_non_finite(const double* values, int64_t count, int32_t* flag,
                             cudaStream_t stream);

// m [n, n] column-major = the Hessian h [n, n] (row-major) in processing order, reversed:
// m(r, c) = h[perm[n-1-r]][perm[n-1-c]], where a diagonal entry h[a][a] == 0 (a dead column) reads
// 1. Every entry is written.
Status gptq_gather_reversed(const double* h, const int32_t* perm, double* m, int64_t n,
                            cudaStream_t stream);

// a[i + i * ld] += v (rounded addition) for i < n.
Status gptq_add_diagonal(double* a, int64_t n, int64_t ld, double v, cudaStream_t stream);

// u [n, n] row-major from minv (column-major, n x n, lower triangle = M^-1; the strict upper
// triangle is ignored): u[i][j] = minv(n-1-i, n-1-j) for j >= i, 0 below the diagonal.
Status gptq_upper_from_reversed_inverse(const double* minv, double* u, int64_t n,
                                        cudaStream_t stream);

// wp [rows, k] (double) = w [rows, k] (float) in processing order: wp[r][i] = w[r][perm[i]], or 0
// when dead[perm[i]].
Status gptq_permute_weights(const float* w, const int32_t* perm, const uint8_t* dead, double* wp,
                            int64_t rows, int64_t k, cudaStream_t stream);

// codes [rows, k] in the original column order from codes_p [rows, k] in processing order:
// codes[r][perm[i]] = codes_p[r][i].
Status gptq_unpermute_codes(const uint8_t* codes_p, const int32_t* perm, uint8_t* codes,
                            int64_t rows, int64_t k, cudaStream_t stream);

// One piece [s1, s2) (s2 - s1 <= kGptqMaxBlock) of GPTQ's column loop for every row, in processing
// order, as gptq.cpp's quantize_rows does each column j:
//   - when j % group == 0: the group's scale and zero point from the float32 min / max of the
//     row's current weights in [j, min(j + group, k)) (columns past s2 are read from w, which the
//     caller has brought up to date); stored in scales / zeros [rows, num_groups] at j / group.
//     A piece that starts inside a group reads that group's parameters from scales / zeros;
//   - code = the grid's code of float(w_j); d = w_j - value(code) (double);
//     e = d / U_jj; loss += d^2 / U_jj^2 / 2; w_t -= e U_jt for t in (j, s2);
// with the CPU's double operations (no FMA). Writes codes_p[r][j], err[r * ld_err + (j - s1)] = e,
// adds the piece's loss to loss[r]. The caller applies the errors to the columns after s2 (cuBLAS).
struct GptqBlockArgs {
  double* w = nullptr;        // [rows, k], current weights in processing order
  const double* u = nullptr;  // [k, k] row-major upper factor
  double* err = nullptr;      // row r's errors at err[r * ld_err + (j - s1)]
  int64_t ld_err = 0;
  uint8_t* codes_p = nullptr;  // [rows, k], processing order
  float* scales = nullptr;     // [rows, num_groups]
  int32_t* zeros = nullptr;    // [rows, num_groups]
  double* loss = nullptr;      // [rows]
  int64_t rows = 0, k = 0, s1 = 0, s2 = 0, group = 0, num_groups = 0;
  CalibGrid grid;
};
Status gptq_quantize_block(const GptqBlockArgs& a, cudaStream_t stream);

}  // namespace lathe::cuda
