// Shared helpers of the CUDA backend (internal: includes CUDA headers; the engine core includes
// only cuda_runner_factory.h). Errors become Status values whose message names the call that failed
// and the CUDA error, e.g. "cudaMalloc(KV cache, 12.0 GiB): cudaErrorMemoryAllocation: out of
// memory".
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

// kOutOfMemory for allocation failures, kInternal for everything else.
Status cuda_error(cudaError_t err, const std::string& what);
Status cublas_error(cublasStatus_t st, const std::string& what);

// The error state after a kernel launch (a bad launch configuration, or a sticky error of an
// earlier asynchronous failure). Cheap: no synchronization.
Status check_launch(const char* kernel);

// Activations and weights on the GPU are bf16 or f16; everything else is refused.
inline bool is_act_dtype(DType t) {
  return t == DType::kBF16 || t == DType::kF16;
}
inline cudaDataType_t cuda_data_type(DType t) {
  return t == DType::kBF16 ? CUDA_R_16BF : (t == DType::kF16 ? CUDA_R_16F : CUDA_R_32F);
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Whether forward-pass kernels use programmatic dependent launch: on devices of compute capability
// 9.0 or newer, unless turned off (disable_pdl(); a runner does so when CudaSwitches::pdl is off).
bool pdl_enabled();
// Turns programmatic dependent launch off for the rest of the process (the runner's fallback when a
// CUDA graph with programmatic edges cannot be captured).
void disable_pdl();

// Device facts read once per device.
struct DeviceProps {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int major = 0, minor = 0;
  int64_t total_bytes = 0;
  int64_t l2_bytes = 0;
  int max_smem_optin = 0;  // bytes of dynamic shared memory a block may opt into
};
Result<DeviceProps> device_props(int ordinal);

// The current device's multiprocessors, compute capability major and opt-in shared memory per
// block, asked once per device (kernel launch plans read them on every call). When the device
// cannot be asked: 132 multiprocessors, major 0 and 48 KB, so that no Hopper-only kernel is chosen.
struct DeviceLimits {
  int sm_count = 132;
  int major = 0;
  int smem_optin = 48 * 1024;
};
DeviceLimits current_device_limits();

// Where a CudaBuffer's bytes live: device memory (cudaMalloc) or page-locked host memory
// (cudaHostAlloc, the source of asynchronous host-to-device copies).
enum class BufferKind { kDevice, kPinnedHost };

// RAII CUDA allocation. Move-only.
template <BufferKind Kind>
class CudaBuffer {
 public:
  CudaBuffer() = default;
  ~CudaBuffer() { reset(); }
  CudaBuffer(CudaBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr, o.bytes_ = 0;
  }
  CudaBuffer& operator=(CudaBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_, bytes_ = o.bytes_;
      o.ptr_ = nullptr, o.bytes_ = 0;
    }
    return *this;
  }
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  // `what` names the buffer in the out-of-memory message. bytes <= 0: empty.
  Status allocate(int64_t bytes, const std::string& what);
  void reset();
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  int64_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
};

using DeviceBuffer = CudaBuffer<BufferKind::kDevice>;
using PinnedBuffer = CudaBuffer<BufferKind::kPinnedHost>;
extern template class CudaBuffer<BufferKind::kDevice>;
extern template class CudaBuffer<BufferKind::kPinnedHost>;

}  // namespace lathe::cuda

#define LATHE_CUDA_TRY(expr)                                                                      \
  do {                                                                                            \
    const cudaError_t lathe_cuda_err_ = (expr);                                                   \
    if (lathe_cuda_err_ != cudaSuccess) return ::lathe::cuda::cuda_error(lathe_cuda_err_, #expr); \
  } while (0)

#define LATHE_CUBLAS_TRY(expr)                                     \
  do {                                                             \
    const cublasStatus_t lathe_cublas_st_ = (expr);                \
    if (lathe_cublas_st_ != CUBLAS_STATUS_SUCCESS)                 \
      return ::lathe::cuda::cublas_error(lathe_cublas_st_, #expr); \
  } while (0)
