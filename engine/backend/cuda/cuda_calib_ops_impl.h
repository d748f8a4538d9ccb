// The CUDA CalibOps' class (private to the plugin: cuda_calib_ops.cpp defines the tensors, the
// forward's ops, the Hessian and the reductions, cuda_calib_gptq.cpp GPTQ). See cuda_calib_ops.cpp
// for what runs where and how device memory is held.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cuda/calib_transfer.h"
#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/status.h"
#include "engine/core/strings.h"
#include "engine/quant/calib_ops.h"

namespace lathe::cuda {

inline const char* cusolver_status_name(cusolverStatus_t s) {
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

#define LATHE_CUSOLVER_TRY(expr)                                                         \
  do {                                                                                   \
    const cusolverStatus_t lathe_cusolver_st_ = (expr);                                  \
    if (lathe_cusolver_st_ != CUSOLVER_STATUS_SUCCESS)                                   \
      return ::lathe::internal_error(::lathe::strformat(                                 \
          "%s: %s (%d)", #expr, ::lathe::cuda::cusolver_status_name(lathe_cusolver_st_), \
          static_cast<int>(lathe_cusolver_st_)));                                        \
  } while (0)

// What to do when the calibration's activations do not fit the GPU (the `lathe quantize` flags).
inline constexpr const char* kCalibMemoryAdvice =
    "pass fewer --num-samples, a shorter --seq-len, or --device cpu";

// A CalibTensor in device memory: [rows, cols] float32, row-major, one cudaMalloc. Its bytes count
// toward its CudaCalibOps' held bytes (the counter `held` points to, decremented here; the tensor
// must not outlive the ops, calib_ops.h's contract).
class CudaCalibTensor final : public CalibTensor {
 public:
  CudaCalibTensor(int64_t rows, int64_t cols, DeviceBuffer buf, int32_t device, int64_t* held)
      : CalibTensor(rows, cols), buf_(std::move(buf)), device_(device), held_(held) {}
  ~CudaCalibTensor() override {
    *held_ -= buf_.bytes();
    cudaSetDevice(device_);
    buf_.reset();  // cudaFree waits for the work still reading it
  }
  float* data() const { return buf_.as<float>(); }

 private:
  DeviceBuffer buf_;
  int32_t device_;
  int64_t* held_;
};

// The device memory of a tensor of this CalibOps (calib_ops.h: a CalibOps is only given its own
// tensors).
inline float* dev(const CalibTensor& t) {
  return static_cast<const CudaCalibTensor&>(t).data();
}

// "[rows, cols]" for messages.
inline std::string shape_text(const CalibTensor& t) {
  return strformat("[%lld, %lld]", static_cast<long long>(t.rows()),
                   static_cast<long long>(t.cols()));
}
inline bool same_shape(const CalibTensor& a, const CalibTensor& b) {
  return a.rows() == b.rows() && a.cols() == b.cols();
}

// A device buffer kept between calls (weights, workspaces); `what` names it in out-of-memory
// messages.
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
  explicit CudaCalibOps(int32_t device);
  ~CudaCalibOps() override;
  Status init();

  std::string name() const override { return name_; }
  int64_t peak_device_bytes() const override { return peak_; }

  Result<CalibTensorPtr> alloc(int64_t rows, int64_t cols) override;
  Status upload(const float* host, CalibTensor& t) override;
  Status download(const CalibTensor& t, int64_t row0, int64_t count, float* host) override;
  Result<CalibTensorPtr> gather_rows(const CalibTensor& x,
                                     const std::vector<int64_t>& rows) override;
  Status sync() override;

  Status rms_norm(const CalibTensor& x, int64_t width, const std::vector<float>& weight, float eps,
                  CalibTensor& out) override;
  Status rope(CalibTensor& x, int64_t heads, int64_t head_dim, const CalibTensor& cos_t,
              const CalibTensor& sin_t, RopeStyle style) override;
  Status add(CalibTensor& x, const CalibTensor& y) override;
  Status divide_columns(CalibTensor& x, const std::vector<float>& s) override;

  Status linear(const CalibTensor& x, const CalibLinear& l, CalibTensor& y) override;
  Status mlp_act(const CalibTensor& x, const CalibLinear& gate, const CalibLinear& up,
                 CalibTensor& m) override;
  Status attention(const CalibLayout& layout, const CalibAttentionShape& shape,
                   const CalibTensor& q, const CalibTensor& k, const CalibTensor& v,
                   CalibTensor& out) override;
  Result<std::vector<double>> hessian(const CalibTensor& x, int64_t n) override;
  Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols, const std::vector<double>& h,
                          const GptqConfig& config) override;  // cuda_calib_gptq.cpp
  // One SGEMM on the device.
  Status linear_t(const CalibTensor& x, const CalibTensor& w, CalibTensor& y) override;
  // calib_awq.cu's kernels (cuda_calib_awq.cpp).
  Status awq_fake_quantize(const CalibTensor& w, const std::vector<float>& s,
                           const IntQuantConfig& quant, CalibTensor& out) override;
  Result<std::vector<float>> awq_clip(const CalibTensor& w, const CalibTensor& xs,
                                      const AwqConfig& config) override;

  Result<std::vector<float>> column_abs_mean(const CalibTensor& x, int64_t n) override;
  Result<double> squared_difference(const CalibTensor& a, const CalibTensor& b) override;

 private:
  // y [m, n] = x [m, k] w^T (+ bias): x, w [n, k] and bias [n] on the device (bias null: none).
  // float32 SGEMM with y preloaded with the bias (beta 1), as the CPU's dot + bias rounds.
  Status rows_times(const float* x, const float* w, const float* bias, int64_t n, int64_t k,
                    int64_t m, float* y);
  // Uploads a small host vector (norm weights, column divisors) into vec_.
  Status upload_vec(const std::vector<float>& v);

  // Makes every listed slot at least as large as asked (a slot that grows loses its contents).
  // When one cannot be allocated, every slot not listed is released and it is tried once more;
  // then kResourceExhausted naming the buffer and the device's memory.
  Status reserve(const std::vector<std::pair<Slot*, int64_t>>& needs);
  Status grow(Slot& s, int64_t bytes);
  void release(Slot& s) {
    held_ -= s.buf.bytes();
    s.buf.reset();
  }
  void release_all() {
    for (Slot* s : slots_) release(*s);
  }
  void note_held(int64_t bytes) {
    held_ += bytes;
    peak_ = held_ > peak_ ? held_ : peak_;
  }
  // "A of B are free" (cudaMemGetInfo).
  std::string memory_text() const;
  Status download_int(const int* dev_ptr, int* host);

  // GPTQ's cuSOLVER steps (cuda_calib_gptq.cpp).
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
  HostStaging staging_;
  int64_t held_ = 0, peak_ = 0;  // device bytes of the slots and the live tensors
  Slot w_, bias_;                // linear; mlp_act's gate
  Slot w2_, bias2_, y2_;         // mlp_act's up
  Slot first_;                   // attention's sample_first
  Slot vec_, index_, partial_;   // norm weights / divisors, gathered rows, reduction partials
  Slot panel_, sum_, bad_;       // hessian
  Slot ha_, hb_, wf_, wp_, err_, codes_p_, codes_, scales_, zeros_, loss_, perm_, dead_, work_,
      info_;  // gptq
  std::vector<Slot*> slots_;
  std::vector<char> host_work_;
};

}  // namespace lathe::cuda
