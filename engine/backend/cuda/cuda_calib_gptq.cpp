// GPTQ on the GPU (CudaCalibOps::gptq, cuda_calib_ops_impl.h; gptq_quantize's contract, gptq.h):
// host weights and Hessian in, the host result out, through the ops' pinned staging buffers.
//   H (float64) on the device: dead columns and act-order as the CPU (calib_plan.h), the reversed
//   permuted Hessian (calib_gptq.h) damped and factorized by cusolverDnXpotrf, inverted by
//   cusolverDnXtrtri, rearranged into U; retries with growing damping; RTN fallback (U = I) with
//   the CPU's reason. Then the column loop: per block of block_size columns, pieces of <= 128
//   columns in gptq_block_kernel (one warp per row) and the updates after each piece / block by
//   cuBLAS DGEMM.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cuda/calib_gptq.h"
#include "engine/backend/cuda/calib_plan.h"
#include "engine/backend/cuda/cuda_calib_ops_impl.h"
#include "engine/core/strings.h"

namespace lathe::cuda {

Status CudaCalibOps::download_int(const int* dev_ptr, int* host) {
  LATHE_CUDA_TRY(cudaMemcpyAsync(host, dev_ptr, sizeof(int), cudaMemcpyDeviceToHost, stream_));
  LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
  return Status();
}

Status CudaCalibOps::solver_workspace(int64_t n, double* a, int64_t lda, size_t* dev_bytes,
                                      size_t* host_bytes) {
  size_t pd = 0, ph = 0, td = 0, th = 0;
  LATHE_CUSOLVER_TRY(cusolverDnXpotrf_bufferSize(solver_, params_, CUBLAS_FILL_MODE_LOWER, n,
                                                 CUDA_R_64F, a, lda, CUDA_R_64F, &pd, &ph));
  LATHE_CUSOLVER_TRY(cusolverDnXtrtri_bufferSize(
      solver_, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, n, CUDA_R_64F, a, lda, &td, &th));
  *dev_bytes = std::max(pd, td);
  *host_bytes = std::max(ph, th);
  return Status();
}

Result<int> CudaCalibOps::potrf(double* a, int64_t n, int64_t lda) {
  size_t dev_bytes = 0, host_bytes = 0;
  LATHE_RETURN_IF_ERROR(solver_workspace(n, a, lda, &dev_bytes, &host_bytes));
  LATHE_RETURN_IF_ERROR(grow(work_, static_cast<int64_t>(dev_bytes)));
  if (host_work_.size() < host_bytes) host_work_.resize(host_bytes);
  LATHE_CUSOLVER_TRY(cusolverDnXpotrf(solver_, params_, CUBLAS_FILL_MODE_LOWER, n, CUDA_R_64F, a,
                                      lda, CUDA_R_64F, work_.buf.get(), dev_bytes,
                                      host_work_.data(), host_bytes, info_.as<int>()));
  int info = 0;
  LATHE_RETURN_IF_ERROR(download_int(info_.as<int>(), &info));
  if (info < 0) return internal_error(strformat("cusolverDnXpotrf: parameter %d is wrong", -info));
  return info;
}

Result<std::string> CudaCalibOps::pivot_failure(const double* m, double* a, int64_t n, double dm,
                                                int64_t j) {
  for (;;) {
    LATHE_CUDA_TRY(
        cudaMemcpyAsync(a, m, static_cast<size_t>(n * n * 8), cudaMemcpyDeviceToDevice, stream_));
    LATHE_RETURN_IF_ERROR(gptq_add_diagonal(a, n, n, dm, stream_));
    double dot = 0.0;
    if (j > 0) {
      LATHE_ASSIGN_OR_RETURN(const int info, potrf(a, j, n));
      if (info > 0 && info - 1 < j) {  // an earlier pivot fails on its own: report that one
        j = info - 1;
        continue;
      }
      // Row j of the lower triangle, a(j, 0 .. j-1) at stride n, solved in place: L y = a_j.
      LATHE_CUBLAS_TRY(cublasDtrsv(blas_, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT,
                                   static_cast<int>(j), a, static_cast<int>(n), a + j,
                                   static_cast<int>(n)));
      LATHE_CUBLAS_TRY(cublasDdot(blas_, static_cast<int>(j), a + j, static_cast<int>(n), a + j,
                                  static_cast<int>(n), &dot));  // host pointer mode: waits
    }
    double mjj = 0.0;
    LATHE_CUDA_TRY(cudaMemcpyAsync(&mjj, a + j + j * n, 8, cudaMemcpyDeviceToHost, stream_));
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    return not_positive_definite_message(j, n, mjj - dot);
  }
}

Result<GptqResult> CudaCalibOps::gptq(const float* w, int64_t rows, int64_t cols,
                                      const std::vector<double>& h, const GptqConfig& c) {
  // gptq_quantize's checks, in its order and with its messages.
  LATHE_RETURN_IF_ERROR(validate_int_quant_config(c.quant, cols));
  if (c.damp_percent < 0.0 || !std::isfinite(c.damp_percent))
    return invalid_argument(strformat("damp_percent must be >= 0, got %g", c.damp_percent));
  if (static_cast<int64_t>(h.size()) != cols * cols)
    return invalid_argument(
        strformat("the Hessian has %zu entries; a matrix with %lld input "
                  "columns needs %lld x %lld",
                  h.size(), static_cast<long long>(cols), static_cast<long long>(cols),
                  static_cast<long long>(cols)));
  LATHE_CUDA_TRY(cudaSetDevice(device_));
  const int64_t k = cols;
  const int64_t bs = std::max<int64_t>(1, c.block_size);
  GptqResult result;
  result.q = IntQuantizedMatrix::empty(rows, cols, c.quant);
  const int64_t g = result.q.group_size, ng = result.q.num_groups();

  std::vector<std::pair<Slot*, int64_t>> needs = {{&ha_, k * k * 8},
                                                  {&hb_, k * k * 8},
                                                  {&wf_, rows * k * 4},
                                                  {&wp_, rows * k * 8},
                                                  {&err_, rows * bs * 8},
                                                  {&codes_p_, rows * k},
                                                  {&codes_, c.act_order ? rows * k : 0},
                                                  {&scales_, rows * ng * 4},
                                                  {&zeros_, rows * ng * 4},
                                                  {&loss_, rows * 8},
                                                  {&perm_, k * 4},
                                                  {&dead_, k},
                                                  {&info_, 16}};
  LATHE_RETURN_IF_ERROR(reserve(needs));
  {  // the solver's workspace for the full size, while nothing is on the device yet
    size_t dev_bytes = 0, host_bytes = 0;
    LATHE_RETURN_IF_ERROR(solver_workspace(k, hb_.as<double>(), k, &dev_bytes, &host_bytes));
    needs.push_back({&work_, static_cast<int64_t>(dev_bytes)});
    LATHE_RETURN_IF_ERROR(reserve(needs));
  }
  double* ha = ha_.as<double>();
  double* hb = hb_.as<double>();

  // The Hessian: finite, then in processing order, reversed, dead columns' diagonal 1 (into ha).
  LATHE_RETURN_IF_ERROR(staging_.upload(hb, h.data(), k * k * 8, stream_));
  int32_t* flag = info_.as<int32_t>() + 1;
  LATHE_CUDA_TRY(cudaMemsetAsync(flag, 0, 4, stream_));
  LATHE_RETURN_IF_ERROR(calib_flag_non_finite(hb, k * k, flag, stream_));
  int bad = 0;
  LATHE_RETURN_IF_ERROR(download_int(flag, &bad));
  if (bad != 0) return invalid_argument("the Hessian has non-finite entries");
  const GptqColumnPlan plan = plan_gptq_columns(h, k, c.act_order);
  result.dead_columns = plan.dead_columns;
  result.q.g_idx = gptq_group_index(plan.perm, g);
  LATHE_RETURN_IF_ERROR(staging_.upload(perm_.buf.get(), plan.perm.data(), k * 4, stream_));
  LATHE_RETURN_IF_ERROR(staging_.upload(dead_.buf.get(), plan.dead.data(), k, stream_));
  LATHE_RETURN_IF_ERROR(gptq_gather_reversed(hb, perm_.as<int32_t>(), ha, k, stream_));

  // Damping and the factorization, with the CPU's retries (factorize() in gptq.cpp).
  double damp = c.damp_percent;
  bool ok = false;
  std::string failure;
  for (int attempt = 0;; ++attempt) {
    const double dm = damp * plan.mean_diag;
    LATHE_CUDA_TRY(
        cudaMemcpyAsync(hb, ha, static_cast<size_t>(k * k * 8), cudaMemcpyDeviceToDevice, stream_));
    LATHE_RETURN_IF_ERROR(gptq_add_diagonal(hb, k, k, dm, stream_));
    LATHE_ASSIGN_OR_RETURN(const int info, potrf(hb, k, k));
    if (info == 0) {
      ok = true;
      break;
    }
    const std::optional<double> next = gptq_next_damp(c, attempt, damp);
    if (!next) {
      LATHE_ASSIGN_OR_RETURN(failure, pivot_failure(ha, hb, k, dm, info - 1));
      break;
    }
    damp = *next;
  }
  result.damp_percent_used = damp;
  if (ok) {
    size_t dev_bytes = 0, host_bytes = 0;
    LATHE_RETURN_IF_ERROR(solver_workspace(k, hb, k, &dev_bytes, &host_bytes));
    LATHE_RETURN_IF_ERROR(grow(work_, static_cast<int64_t>(dev_bytes)));
    if (host_work_.size() < host_bytes) host_work_.resize(host_bytes);
    LATHE_CUSOLVER_TRY(cusolverDnXtrtri(solver_, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, k,
                                        CUDA_R_64F, hb, k, work_.buf.get(), dev_bytes,
                                        host_work_.data(), host_bytes, info_.as<int>()));
    int info = 0;
    LATHE_RETURN_IF_ERROR(download_int(info_.as<int>(), &info));
    if (info != 0)
      return internal_error(strformat(
          "cusolverDnXtrtri: the Cholesky factor of a positive definite matrix is singular "
          "(info %d)",
          info));
    LATHE_RETURN_IF_ERROR(gptq_upper_from_reversed_inverse(hb, ha, k, stream_));
  } else {
    result.fell_back_to_rtn = true;
    result.fallback_reason = gptq_fallback_reason(c, damp, failure);
    LATHE_CUDA_TRY(cudaMemsetAsync(ha, 0, static_cast<size_t>(k * k * 8), stream_));
    LATHE_RETURN_IF_ERROR(gptq_add_diagonal(ha, k, k, 1.0, stream_));  // U = I
  }
  const double* u = ha;

  // The weights in processing order, float64.
  LATHE_RETURN_IF_ERROR(staging_.upload(wf_.buf.get(), w, rows * k * 4, stream_));
  double* wp = wp_.as<double>();
  LATHE_RETURN_IF_ERROR(gptq_permute_weights(wf_.as<float>(), perm_.as<int32_t>(),
                                             dead_.as<uint8_t>(), wp, rows, k, stream_));
  LATHE_CUDA_TRY(cudaMemsetAsync(loss_.buf.get(), 0, static_cast<size_t>(rows * 8), stream_));

  // The column loop: blocks of bs columns, each in pieces of at most 128 (one launch each); the
  // errors of a piece update the rest of its block, those of a block the columns after it.
  GptqBlockArgs a;
  a.w = wp;
  a.u = u;
  a.ld_err = bs;
  a.codes_p = codes_p_.as<uint8_t>();
  a.scales = scales_.as<float>();
  a.zeros = zeros_.as<int32_t>();
  a.loss = loss_.as<double>();
  a.rows = rows;
  a.k = k;
  a.group = g;
  a.num_groups = ng;
  a.grid = calib_grid_of(c.quant);
  double* err = err_.as<double>();
  const double minus_one = -1.0, one = 1.0;
  // W[:, c0:c0+m] -= Err[:, e0:e0+kk] U[u0:u0+kk, c0:c0+m]; column-major: W^T[c0.., :] -=
  // U[u0.., c0..]^T (U row-major read as its transpose, ld k) times Err^T (ld bs).
  auto update = [&](int64_t c0, int64_t m, int64_t u0, int64_t e0, int64_t kk) -> Status {
    if (m <= 0 || kk <= 0 || rows <= 0 || result.fell_back_to_rtn) return Status();  // U = I
    LATHE_CUBLAS_TRY(cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m),
                                 static_cast<int>(rows), static_cast<int>(kk), &minus_one,
                                 u + u0 * k + c0, static_cast<int>(k), err + e0,
                                 static_cast<int>(bs), &one, wp + c0, static_cast<int>(k)));
    return Status();
  };
  for (int64_t i1 = 0; i1 < k; i1 += bs) {
    const int64_t i2 = std::min(i1 + bs, k);
    for (int64_t s1 = i1; s1 < i2;) {
      const int64_t s2 = gptq_piece_end(s1, i2, g, kGptqMaxBlock);
      a.s1 = s1;
      a.s2 = s2;
      a.err = err + (s1 - i1);
      LATHE_RETURN_IF_ERROR(gptq_quantize_block(a, stream_));
      LATHE_RETURN_IF_ERROR(update(s2, i2 - s2, s1, s1 - i1, s2 - s1));
      s1 = s2;
    }
    LATHE_RETURN_IF_ERROR(update(i2, k - i2, i1, 0, i2 - i1));
  }

  // Results in the original column order.
  const uint8_t* codes = codes_p_.as<uint8_t>();
  if (c.act_order) {
    LATHE_RETURN_IF_ERROR(
        gptq_unpermute_codes(codes, perm_.as<int32_t>(), codes_.as<uint8_t>(), rows, k, stream_));
    codes = codes_.as<uint8_t>();
  }
  LATHE_RETURN_IF_ERROR(staging_.download(result.q.codes.data(), codes, rows * k, stream_));
  LATHE_RETURN_IF_ERROR(
      staging_.download(result.q.scales.data(), scales_.buf.get(), rows * ng * 4, stream_));
  LATHE_RETURN_IF_ERROR(
      staging_.download(result.q.zeros.data(), zeros_.buf.get(), rows * ng * 4, stream_));
  std::vector<double> losses(static_cast<size_t>(rows));
  LATHE_RETURN_IF_ERROR(staging_.download(losses.data(), loss_.buf.get(), rows * 8, stream_));
  for (double l : losses) result.loss += l;
  return result;
}

}  // namespace lathe::cuda
