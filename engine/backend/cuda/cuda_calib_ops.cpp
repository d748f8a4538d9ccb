// CalibOps on one CUDA device (cuda_calib_ops.h; the contract is calib_ops.h's, the CPU one is the
// reference). Host in, host out: each call uploads its operands through pinned staging buffers
// (calib_transfer.h), works on one stream, and downloads its result. Device buffers are kept
// between calls and grown on demand; when one cannot be grown, the buffers the call does not need
// are released and it is tried once more, so one matrix and one activation at a time are on the
// GPU.
//
//   linear     cuBLAS SGEMM in float32 (CUBLAS_DEFAULT_MATH: no TF32), y preloaded with the bias;
//              rows in pieces of at most kLinearPieceBytes of x + y.
//   mlp_act    both weights uploaded once, then per piece of rows two SGEMMs and the SwiGLU
//              (calib_linear.cu), so a block's MLP moves its weights once, not once per row chunk.
//   attention  calib_attention.cu, whole samples per piece.
//   hessian    chunks of 1024 rows (the CPU's): float32 SGEMM panel products X^T X[:, a0:a0+1024]
//              summed into a float64 [k, k] on the device; first non-finite index by atomicMin.
//   gptq       H (float64) on the device: dead columns and act-order as the CPU (calib_plan.h),
//              the reversed permuted Hessian (calib_gptq.h) damped and factorized by
//              cusolverDnXpotrf, inverted by cusolverDnXtrtri, rearranged into U; retries with
//              growing damping; RTN fallback (U = I) with the CPU's reason. Then the column loop:
//              per block of block_size columns, pieces of <= 128 columns in gptq_block_kernel
//              (one warp per row) and the updates after each piece / block by cuBLAS DGEMM.
#include "engine/backend/cuda/cuda_calib_ops.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "engine/backend/cuda/calib_attention.h"
#include "engine/backend/cuda/calib_gptq.h"
#include "engine/backend/cuda/calib_hessian.h"
#include "engine/backend/cuda/calib_linear.h"
#include "engine/backend/cuda/calib_plan.h"
#include "engine/backend/cuda/calib_transfer.h"
#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/core/strings.h"

namespace lathe {
namespace {

using cuda::DeviceBuffer;

constexpr int64_t kStagePieceBytes = 64ll << 20;     // each of the two pinned staging buffers
constexpr int64_t kLinearPieceBytes = 512ll << 20;   // x + y rows of one linear piece
constexpr int64_t kAttentionPieceBytes = 2ll << 30;  // q + k + v + out rows of one piece
constexpr int64_t kHessianChunkRows = 1024;          // calib_ops.cpp's chunk
constexpr int64_t kHessianPanel = 1024;              // rows of H per panel product

const char* cusolver_status_name(cusolverStatus_t s) {
  switch (s) {
    case CUSOLVER_STATUS_NOT_INITIALIZED:
      return "CUSOLVER_STATUS_NOT_INITIALIZED";
    case CUSOLVER_STATUS_ALLOC_FAILED:
      return "CUSOLVER_STATUS_ALLOC_FAILED";
    case CUSOLVER_STATUS_INVALID_VALUE:
      return "CUSOLVER_STATUS_INVALID_VALUE";
    case CUSOLVER_STATUS_ARCH_MISMATCH:
      return "CUSOLVER_STATUS_ARCH_MISMATCH";
    case CUSOLVER_STATUS_EXECUTION_FAILED:
      return "CUSOLVER_STATUS_EXECUTION_FAILED";
    case CUSOLVER_STATUS_INTERNAL_ERROR:
      return "CUSOLVER_STATUS_INTERNAL_ERROR";
    case CUSOLVER_STATUS_NOT_SUPPORTED:
      return "CUSOLVER_STATUS_NOT_SUPPORTED";
    default:
      return "cuSOLVER error";
  }
}

#define LATHE_CUSOLVER_TRY(expr)                                                \
  do {                                                                          \
    const cusolverStatus_t lathe_cusolver_st_ = (expr);                         \
    if (lathe_cusolver_st_ != CUSOLVER_STATUS_SUCCESS)                          \
      return internal_error(strformat("%s: %s (%d)", #expr,                     \
                                      cusolver_status_name(lathe_cusolver_st_), \
                                      static_cast<int>(lathe_cusolver_st_)));   \
  } while (0)

std::string bytes_text(int64_t b) {
  return format_bytes(static_cast<double>(b));
}

// A device buffer kept between calls; `what` names it in out-of-memory messages.
struct Slot {
  DeviceBuffer buf;
  const char* what = "";
  template <typename T>
  T* as() const {
    return buf.as<T>();
  }
};

class CudaCalibOps final : public CalibOps {
 public:
  explicit CudaCalibOps(int32_t device) : device_(device) {
    Slot* slots[] = {&w2_,    &bias2_, &y2_,   &w_,     &bias_,  &x_,       &y_,     &q_,
                     &k_,     &v_,     &o_,    &first_, &chunk_, &panel_,   &sum_,   &bad_,
                     &ha_,    &hb_,    &wf_,   &wp_,    &err_,   &codes_p_, &codes_, &scales_,
                     &zeros_, &loss_,  &perm_, &dead_,  &work_,  &info_};
    const char* names[] = {"MLP up weights",
                           "MLP up bias",
                           "MLP up output",
                           "linear weights",
                           "linear bias",
                           "linear input",
                           "linear output",
                           "attention q",
                           "attention k",
                           "attention v",
                           "attention output",
                           "attention sample rows",
                           "Hessian input chunk",
                           "Hessian panel",
                           "Hessian sum",
                           "non-finite index",
                           "GPTQ Hessian",
                           "GPTQ factor",
                           "GPTQ float weights",
                           "GPTQ weights",
                           "GPTQ errors",
                           "GPTQ codes",
                           "GPTQ codes (column order)",
                           "GPTQ scales",
                           "GPTQ zero points",
                           "GPTQ losses",
                           "GPTQ permutation",
                           "GPTQ dead columns",
                           "cuSOLVER workspace",
                           "cuSOLVER info"};
    for (size_t i = 0; i < std::size(slots); ++i) {
      slots[i]->what = names[i];
      slots_.push_back(slots[i]);
    }
  }

  ~CudaCalibOps() override {
    cudaSetDevice(device_);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    if (params_ != nullptr) cusolverDnDestroyParams(params_);
    if (solver_ != nullptr) cusolverDnDestroy(solver_);
    if (blas_ != nullptr) cublasDestroy(blas_);
    for (Slot* s : slots_) s->buf.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Status init() {
    LATHE_CUDA_TRY(cudaSetDevice(device_));
    cudaDeviceProp p{};
    LATHE_CUDA_TRY(cudaGetDeviceProperties(&p, device_));
    name_ = strformat("cuda:%d %s", device_, p.name);
    LATHE_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    LATHE_CUBLAS_TRY(cublasCreate(&blas_));
    LATHE_CUBLAS_TRY(cublasSetStream(blas_, stream_));
    // Plain float32 / float64 arithmetic (no TF32): the CPU reference is float32.
    LATHE_CUBLAS_TRY(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
    LATHE_CUSOLVER_TRY(cusolverDnCreate(&solver_));
    LATHE_CUSOLVER_TRY(cusolverDnSetStream(solver_, stream_));
    LATHE_CUSOLVER_TRY(cusolverDnCreateParams(&params_));
    return staging_.init(kStagePieceBytes);
  }

  std::string name() const override { return name_; }
  int64_t peak_device_bytes() const override { return peak_; }

  Status linear(const float* x, int64_t rows, const CalibLinear& l, float* y) override {
    const int64_t n = l.n, k = l.k;
    if (static_cast<int64_t>(l.w.size()) != n * k ||
        (!l.bias.empty() && static_cast<int64_t>(l.bias.size()) != n))
      return invalid_argument(strformat(
          "linear: the weight has %zu values and the bias %zu for a [%lld, %lld] linear",
          l.w.size(), l.bias.size(), static_cast<long long>(n), static_cast<long long>(k)));
    if (rows <= 0 || n <= 0) return Status();
    if (k <= 0) {  // empty dot products: the bias alone
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n; ++c) y[r * n + c] = l.bias.empty() ? 0.f : l.bias[c];
      return Status();
    }
    LATHE_CUDA_TRY(cudaSetDevice(device_));
    const bool has_bias = !l.bias.empty();
    const int64_t w_bytes = n * k * 4, row_bytes = (n + k) * 4;
    int64_t piece = std::max<int64_t>(1, cuda::plan_chunk_rows(rows, row_bytes, kLinearPieceBytes));
    for (;;) {
      const Status st = reserve({{&w_, w_bytes},
                                 {&bias_, has_bias ? n * 4 : 0},
                                 {&x_, piece * k * 4},
                                 {&y_, piece * n * 4}});
      if (st.is_ok()) break;
      if (st.code() != ErrorCode::kResourceExhausted) return st;
      if (piece == 1)
        return resource_exhausted(strformat(
            "a [%lld, %lld] linear does not fit %s: its weights take %s and each row of input and "
            "output %s; %s. Free the GPU of other processes or calibrate on the CPU",
            static_cast<long long>(n), static_cast<long long>(k), name_.c_str(),
            bytes_text(w_bytes).c_str(), bytes_text(row_bytes).c_str(), memory_text().c_str()));
      piece = std::max<int64_t>(1, piece / 2);
    }
    LATHE_RETURN_IF_ERROR(staging_.upload(w_.buf.get(), l.w.data(), w_bytes, stream_));
    if (has_bias)
      LATHE_RETURN_IF_ERROR(staging_.upload(bias_.buf.get(), l.bias.data(), n * 4, stream_));
    for (int64_t r0 = 0; r0 < rows; r0 += piece) {
      const int64_t m = std::min(piece, rows - r0);
      LATHE_RETURN_IF_ERROR(staging_.upload(x_.buf.get(), x + r0 * k, m * k * 4, stream_));
      LATHE_RETURN_IF_ERROR(rows_times(w_.as<float>(), has_bias ? bias_.as<float>() : nullptr, n, k,
                                       m, y_.as<float>()));
      LATHE_RETURN_IF_ERROR(staging_.download(y + r0 * n, y_.buf.get(), m * n * 4, stream_));
    }
    return Status();
  }

  Status mlp_act(const float* x, int64_t rows, const CalibLinear& gate, const CalibLinear& up,
                 float* m) override {
    const int64_t ff = gate.n, k = gate.k;
    auto bad = [&](const CalibLinear& l) {
      return static_cast<int64_t>(l.w.size()) != l.n * l.k ||
             (!l.bias.empty() && static_cast<int64_t>(l.bias.size()) != l.n);
    };
    if (up.n != ff || up.k != k || k <= 0 || bad(gate) || bad(up))
      return invalid_argument(strformat(
          "mlp_act: gate [%lld, %lld] (%zu weights) and up [%lld, %lld] (%zu weights) are not two "
          "linears of one MLP",
          static_cast<long long>(gate.n), static_cast<long long>(gate.k), gate.w.size(),
          static_cast<long long>(up.n), static_cast<long long>(up.k), up.w.size()));
    if (rows <= 0 || ff <= 0) return Status();
    LATHE_CUDA_TRY(cudaSetDevice(device_));
    const int64_t w_bytes = ff * k * 4, row_bytes = (k + 2 * ff) * 4;
    int64_t piece = std::max<int64_t>(1, cuda::plan_chunk_rows(rows, row_bytes, kLinearPieceBytes));
    for (;;) {
      const Status st = reserve({{&w_, w_bytes},
                                 {&w2_, w_bytes},
                                 {&bias_, gate.bias.empty() ? 0 : ff * 4},
                                 {&bias2_, up.bias.empty() ? 0 : ff * 4},
                                 {&x_, piece * k * 4},
                                 {&y_, piece * ff * 4},
                                 {&y2_, piece * ff * 4}});
      if (st.is_ok()) break;
      if (st.code() != ErrorCode::kResourceExhausted) return st;
      if (piece == 1)
        return resource_exhausted(strformat(
            "an MLP of [%lld, %lld] gate and up does not fit %s: their weights take %s and each "
            "row "
            "of input and outputs %s; %s. Free the GPU of other processes or calibrate on the CPU",
            static_cast<long long>(ff), static_cast<long long>(k), name_.c_str(),
            bytes_text(2 * w_bytes).c_str(), bytes_text(row_bytes).c_str(), memory_text().c_str()));
      piece = std::max<int64_t>(1, piece / 2);
    }
    LATHE_RETURN_IF_ERROR(staging_.upload(w_.buf.get(), gate.w.data(), w_bytes, stream_));
    LATHE_RETURN_IF_ERROR(staging_.upload(w2_.buf.get(), up.w.data(), w_bytes, stream_));
    if (!gate.bias.empty())
      LATHE_RETURN_IF_ERROR(staging_.upload(bias_.buf.get(), gate.bias.data(), ff * 4, stream_));
    if (!up.bias.empty())
      LATHE_RETURN_IF_ERROR(staging_.upload(bias2_.buf.get(), up.bias.data(), ff * 4, stream_));
    for (int64_t r0 = 0; r0 < rows; r0 += piece) {
      const int64_t n = std::min(piece, rows - r0);
      LATHE_RETURN_IF_ERROR(staging_.upload(x_.buf.get(), x + r0 * k, n * k * 4, stream_));
      LATHE_RETURN_IF_ERROR(rows_times(w_.as<float>(),
                                       gate.bias.empty() ? nullptr : bias_.as<float>(), ff, k, n,
                                       y_.as<float>()));
      LATHE_RETURN_IF_ERROR(rows_times(w2_.as<float>(),
                                       up.bias.empty() ? nullptr : bias2_.as<float>(), ff, k, n,
                                       y2_.as<float>()));
      LATHE_RETURN_IF_ERROR(cuda::calib_swiglu(y_.as<float>(), y2_.as<float>(), n * ff, stream_));
      LATHE_RETURN_IF_ERROR(staging_.download(m + r0 * ff, y_.buf.get(), n * ff * 4, stream_));
    }
    return Status();
  }

  Status attention(const CalibLayout& layout, const CalibAttentionShape& s, const float* q,
                   const float* k, const float* v, float* out) override {
    const int64_t nh = s.num_heads, nkv = s.num_kv_heads, hd = s.head_dim;
    if (nh <= 0 || nkv <= 0 || nh % nkv != 0 || hd <= 0)
      return invalid_argument(strformat(
          "attention: %lld query heads, %lld kv heads and head_dim %lld do not make a GQA shape",
          static_cast<long long>(nh), static_cast<long long>(nkv), static_cast<long long>(hd)));
    if (hd > cuda::kCalibAttentionMaxHeadDim)
      return unsupported(strformat(
          "the CUDA calibration attention takes head_dim up to %lld, this model has %lld; "
          "calibrate on the CPU",
          static_cast<long long>(cuda::kCalibAttentionMaxHeadDim), static_cast<long long>(hd)));
    const int64_t samples = layout.num_samples();
    if (samples == 0 || layout.rows() == 0) return Status();
    LATHE_CUDA_TRY(cudaSetDevice(device_));
    const int64_t qo_row = nh * hd * 4, kv_row = nkv * hd * 4;
    const int64_t row_bytes = 2 * qo_row + 2 * kv_row + 4;
    const std::vector<int64_t> b =
        cuda::plan_sample_pieces(layout.start, row_bytes, kAttentionPieceBytes);
    int64_t max_rows = 0;
    for (size_t p = 0; p + 1 < b.size(); ++p)
      max_rows = std::max(max_rows, layout.start[static_cast<size_t>(b[p + 1])] -
                                        layout.start[static_cast<size_t>(b[p])]);
    LATHE_RETURN_IF_ERROR(reserve({{&q_, max_rows * qo_row},
                                   {&k_, max_rows * kv_row},
                                   {&v_, max_rows * kv_row},
                                   {&o_, max_rows * qo_row},
                                   {&first_, max_rows * 4}}));
    std::vector<int32_t> first;
    for (size_t p = 0; p + 1 < b.size(); ++p) {
      const int64_t s0 = b[p], s1 = b[p + 1];
      const int64_t row0 = layout.start[static_cast<size_t>(s0)];
      const int64_t m = layout.start[static_cast<size_t>(s1)] - row0;
      if (m <= 0) continue;
      first.assign(static_cast<size_t>(m), 0);
      for (int64_t smp = s0; smp < s1; ++smp) {
        const int64_t a = layout.start[static_cast<size_t>(smp)];
        const int64_t e = layout.start[static_cast<size_t>(smp) + 1];
        for (int64_t r = a; r < e; ++r)
          first[static_cast<size_t>(r - row0)] = static_cast<int32_t>(a - row0);
      }
      LATHE_RETURN_IF_ERROR(staging_.upload(first_.buf.get(), first.data(), m * 4, stream_));
      LATHE_RETURN_IF_ERROR(staging_.upload(q_.buf.get(), q + row0 * nh * hd, m * qo_row, stream_));
      LATHE_RETURN_IF_ERROR(
          staging_.upload(k_.buf.get(), k + row0 * nkv * hd, m * kv_row, stream_));
      LATHE_RETURN_IF_ERROR(
          staging_.upload(v_.buf.get(), v + row0 * nkv * hd, m * kv_row, stream_));
      cuda::CalibAttentionArgs a;
      a.q = q_.as<float>();
      a.k = k_.as<float>();
      a.v = v_.as<float>();
      a.out = o_.as<float>();
      a.sample_first = first_.as<int32_t>();
      a.rows = m;
      a.num_heads = static_cast<int32_t>(nh);
      a.num_kv_heads = static_cast<int32_t>(nkv);
      a.head_dim = static_cast<int32_t>(hd);
      a.window = s.sliding_window;
      a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
      LATHE_RETURN_IF_ERROR(cuda::calib_attention(a, stream_));
      LATHE_RETURN_IF_ERROR(
          staging_.download(out + row0 * nh * hd, o_.buf.get(), m * qo_row, stream_));
    }
    return Status();
  }

  Result<std::vector<double>> hessian(const float* x, int64_t n, int64_t k) override {
    if (k <= 0) return std::vector<double>();
    if (n <= 0) return std::vector<double>(static_cast<size_t>(k * k), 0.0);
    LATHE_CUDA_TRY(cudaSetDevice(device_));
    const int64_t chunk = std::min(n, kHessianChunkRows), panel = std::min(k, kHessianPanel);
    LATHE_RETURN_IF_ERROR(reserve(
        {{&chunk_, chunk * k * 4}, {&panel_, panel * k * 4}, {&sum_, k * k * 8}, {&bad_, 8}}));
    double* sum = sum_.as<double>();
    auto* bad = bad_.as<unsigned long long>();
    LATHE_CUDA_TRY(cudaMemsetAsync(sum, 0, static_cast<size_t>(k * k * 8), stream_));
    LATHE_CUDA_TRY(cudaMemsetAsync(bad, 0xFF, 8, stream_));
    const float one = 1.f, zero = 0.f;
    for (int64_t r0 = 0; r0 < n; r0 += kHessianChunkRows) {
      const int64_t m = std::min(kHessianChunkRows, n - r0);
      LATHE_RETURN_IF_ERROR(staging_.upload(chunk_.buf.get(), x + r0 * k, m * k * 4, stream_));
      LATHE_RETURN_IF_ERROR(
          cuda::calib_first_non_finite(chunk_.as<float>(), m * k, r0 * k, bad, stream_));
      for (int64_t a0 = 0; a0 < k; a0 += kHessianPanel) {
        const int64_t ta = std::min(kHessianPanel, k - a0), nb = a0 + ta;
        // Column-major: panel [nb, ta] = X^T[0:nb, :] (the chunk [m, k] read as [k, m]) times
        // X[:, a0:a0+ta]: panel(c, r) = sum over the chunk's rows of x[., c] x[., a0 + r].
        LATHE_CUBLAS_TRY(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(nb),
                                     static_cast<int>(ta), static_cast<int>(m), &one,
                                     chunk_.as<float>(), static_cast<int>(k),
                                     chunk_.as<float>() + a0, static_cast<int>(k), &zero,
                                     panel_.as<float>(), static_cast<int>(nb)));
        LATHE_RETURN_IF_ERROR(
            cuda::hessian_accumulate_panel(sum, panel_.as<float>(), k, a0, ta, nb, stream_));
      }
    }
    unsigned long long first_bad = 0;
    LATHE_CUDA_TRY(cudaMemcpyAsync(&first_bad, bad, 8, cudaMemcpyDeviceToHost, stream_));
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    if (first_bad != ~0ull)
      return invalid_argument(strformat(
          "calibration activations are not finite (row %lld, feature %lld): the source weights "
          "overflow on this text",
          static_cast<long long>(first_bad / static_cast<unsigned long long>(k)),
          static_cast<long long>(first_bad % static_cast<unsigned long long>(k))));
    LATHE_RETURN_IF_ERROR(cuda::hessian_finish(sum, k, 2.0 / static_cast<double>(n), stream_));
    std::vector<double> out(static_cast<size_t>(k * k));
    LATHE_RETURN_IF_ERROR(staging_.download(out.data(), sum, k * k * 8, stream_));
    return out;
  }

  Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols, const std::vector<double>& h,
                          const GptqConfig& c) override;

 private:
  // y [m, n] = x_ [m, k] w^T (+ bias): w [n, k] and bias [n] on the device (bias null: none),
  // the input in x_. float32 SGEMM.
  Status rows_times(const float* w, const float* bias, int64_t n, int64_t k, int64_t m, float* y) {
    if (bias != nullptr) LATHE_RETURN_IF_ERROR(cuda::calib_broadcast_bias(y, bias, m, n, stream_));
    const float one = 1.f, beta = bias != nullptr ? 1.f : 0.f;
    // Column-major view: y^T [n, m] = W [n, k] (the row-major [n, k] read transposed) x^T [k, m].
    LATHE_CUBLAS_TRY(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n),
                                 static_cast<int>(m), static_cast<int>(k), &one, w,
                                 static_cast<int>(k), x_.as<float>(), static_cast<int>(k), &beta, y,
                                 static_cast<int>(n)));
    return Status();
  }

  // Makes every listed slot at least as large as asked (a slot that grows loses its contents).
  // When one cannot be allocated, every slot not listed is released and it is tried once more;
  // then kResourceExhausted naming the buffer and the device's memory.
  Status reserve(const std::vector<std::pair<Slot*, int64_t>>& needs);
  Status grow(Slot& s, int64_t bytes);
  void release(Slot& s) {
    held_ -= s.buf.bytes();
    s.buf.reset();
  }
  std::string memory_text() const {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
      cudaGetLastError();
      return "its free memory is unknown";
    }
    return strformat("%s of %s are free", bytes_text(static_cast<int64_t>(free_b)).c_str(),
                     bytes_text(static_cast<int64_t>(total_b)).c_str());
  }
  Status download_int(const int* dev, int* host) {
    LATHE_CUDA_TRY(cudaMemcpyAsync(host, dev, sizeof(int), cudaMemcpyDeviceToHost, stream_));
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status();
  }
  // Workspace of cusolverDnXpotrf (n) and cusolverDnXtrtri (n) on the factor buffer.
  Status solver_workspace(int64_t n, double* a, int64_t lda, size_t* dev_bytes, size_t* host_bytes);
  // potrf of the leading n x n of a (lda): 0 when positive definite, else cuSOLVER's info (the
  // 1-based order of the first leading minor that is not).
  Result<int> potrf(double* a, int64_t n, int64_t lda);
  // cholesky.h's message for a factorization of the damped matrix (a = m + dm I, column-major
  // n x n) that failed at 0-based pivot j: the pivot's value m_jj + dm - |L_j|^2 from the
  // factor of the leading j x j block (which is positive definite) and a triangular solve.
  Result<std::string> pivot_failure(const double* m, double* a, int64_t n, double dm, int64_t j);

  int32_t device_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  cusolverDnParams_t params_ = nullptr;
  cuda::HostStaging staging_;
  int64_t held_ = 0, peak_ = 0;
  Slot w_, bias_, x_, y_;           // linear; mlp_act's gate
  Slot w2_, bias2_, y2_;            // mlp_act's up
  Slot q_, k_, v_, o_, first_;      // attention
  Slot chunk_, panel_, sum_, bad_;  // hessian
  Slot ha_, hb_, wf_, wp_, err_, codes_p_, codes_, scales_, zeros_, loss_, perm_, dead_, work_,
      info_;  // gptq
  std::vector<Slot*> slots_;
  std::vector<char> host_work_;
};

Status CudaCalibOps::grow(Slot& s, int64_t bytes) {
  if (s.buf.bytes() >= bytes) return Status();
  release(s);
  const Status st = s.buf.allocate(bytes, s.what);
  if (!st.is_ok()) return st;
  held_ += s.buf.bytes();
  peak_ = std::max(peak_, held_);
  return Status();
}

Status CudaCalibOps::reserve(const std::vector<std::pair<Slot*, int64_t>>& needs) {
  Status st;
  for (int attempt = 0; attempt < 2; ++attempt) {
    st = Status();
    for (const auto& [slot, bytes] : needs) {
      st = grow(*slot, bytes);
      if (!st.is_ok()) break;
    }
    if (st.is_ok()) return st;
    if (st.code() != ErrorCode::kOutOfMemory) return st;
    for (Slot* s : slots_) {
      bool needed = false;
      for (const auto& need : needs) needed |= need.first == s;
      if (!needed) release(*s);
    }
  }
  int64_t total = 0;
  for (const auto& need : needs) total += need.second;
  return resource_exhausted(strformat(
      "%s cannot hold this step's buffers (%s in all; %s): %s. Free the GPU of other processes or "
      "calibrate on the CPU",
      name_.c_str(), bytes_text(total).c_str(), memory_text().c_str(), st.message().c_str()));
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
    LATHE_RETURN_IF_ERROR(cuda::gptq_add_diagonal(a, n, n, dm, stream_));
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
    return cuda::not_positive_definite_message(j, n, mjj - dot);
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
  LATHE_RETURN_IF_ERROR(cuda::calib_flag_non_finite(hb, k * k, flag, stream_));
  int bad = 0;
  LATHE_RETURN_IF_ERROR(download_int(flag, &bad));
  if (bad != 0) return invalid_argument("the Hessian has non-finite entries");
  const cuda::GptqColumnPlan plan = cuda::plan_gptq_columns(h, k, c.act_order);
  result.dead_columns = plan.dead_columns;
  result.q.g_idx = cuda::gptq_group_index(plan.perm, g);
  LATHE_RETURN_IF_ERROR(staging_.upload(perm_.buf.get(), plan.perm.data(), k * 4, stream_));
  LATHE_RETURN_IF_ERROR(staging_.upload(dead_.buf.get(), plan.dead.data(), k, stream_));
  LATHE_RETURN_IF_ERROR(cuda::gptq_gather_reversed(hb, perm_.as<int32_t>(), ha, k, stream_));

  // Damping and the factorization, with the CPU's retries (factorize() in gptq.cpp).
  double damp = c.damp_percent;
  bool ok = false;
  std::string failure;
  for (int attempt = 0;; ++attempt) {
    const double dm = damp * plan.mean_diag;
    LATHE_CUDA_TRY(
        cudaMemcpyAsync(hb, ha, static_cast<size_t>(k * k * 8), cudaMemcpyDeviceToDevice, stream_));
    LATHE_RETURN_IF_ERROR(cuda::gptq_add_diagonal(hb, k, k, dm, stream_));
    LATHE_ASSIGN_OR_RETURN(const int info, potrf(hb, k, k));
    if (info == 0) {
      ok = true;
      break;
    }
    const std::optional<double> next = cuda::gptq_next_damp(c, attempt, damp);
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
    LATHE_RETURN_IF_ERROR(cuda::gptq_upper_from_reversed_inverse(hb, ha, k, stream_));
  } else {
    result.fell_back_to_rtn = true;
    result.fallback_reason = cuda::gptq_fallback_reason(c, damp, failure);
    LATHE_CUDA_TRY(cudaMemsetAsync(ha, 0, static_cast<size_t>(k * k * 8), stream_));
    LATHE_RETURN_IF_ERROR(cuda::gptq_add_diagonal(ha, k, k, 1.0, stream_));  // U = I
  }
  const double* u = ha;

  // The weights in processing order, float64.
  LATHE_RETURN_IF_ERROR(staging_.upload(wf_.buf.get(), w, rows * k * 4, stream_));
  double* wp = wp_.as<double>();
  LATHE_RETURN_IF_ERROR(cuda::gptq_permute_weights(wf_.as<float>(), perm_.as<int32_t>(),
                                                   dead_.as<uint8_t>(), wp, rows, k, stream_));
  LATHE_CUDA_TRY(cudaMemsetAsync(loss_.buf.get(), 0, static_cast<size_t>(rows * 8), stream_));

  // The column loop: blocks of bs columns, each in pieces of at most 128 (one launch each); the
  // errors of a piece update the rest of its block, those of a block the columns after it.
  cuda::GptqBlockArgs a;
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
  a.grid.bits = c.quant.bits;
  a.grid.symmetric = c.quant.symmetric ? 1 : 0;
  a.grid.scale_kind =
      c.quant.scale_dtype == DType::kF16 ? 1 : (c.quant.scale_dtype == DType::kBF16 ? 2 : 0);
  a.grid.min_zero = c.quant.min_zero;
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
      const int64_t s2 = cuda::gptq_piece_end(s1, i2, g, cuda::kGptqMaxBlock);
      a.s1 = s1;
      a.s2 = s2;
      a.err = err + (s1 - i1);
      LATHE_RETURN_IF_ERROR(cuda::gptq_quantize_block(a, stream_));
      LATHE_RETURN_IF_ERROR(update(s2, i2 - s2, s1, s1 - i1, s2 - s1));
      s1 = s2;
    }
    LATHE_RETURN_IF_ERROR(update(i2, k - i2, i1, 0, i2 - i1));
  }

  // Results in the original column order.
  const uint8_t* codes = codes_p_.as<uint8_t>();
  if (c.act_order) {
    LATHE_RETURN_IF_ERROR(cuda::gptq_unpermute_codes(codes, perm_.as<int32_t>(),
                                                     codes_.as<uint8_t>(), rows, k, stream_));
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

}  // namespace

Result<std::unique_ptr<CalibOps>> create_cuda_calib_ops(int32_t device) {
  std::string why;
  if (!cuda_device_usable(device, &why))
    return unsupported(
        strformat("CUDA device %d cannot run the calibration: %s", device, why.c_str()));
  auto ops = std::make_unique<CudaCalibOps>(device);
  LATHE_RETURN_IF_ERROR(ops->init());
  return std::unique_ptr<CalibOps>(std::move(ops));
}

}  // namespace lathe
