#include "engine/backend/cuda/cuda_common.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "engine/core/strings.h"

namespace lathe::cuda {

Status cuda_error(cudaError_t err, const std::string& what) {
  std::string msg = what + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) {
    return out_of_memory(
        msg +
        " (lower --gpu-memory-utilization, --max-num-seqs, --max-num-batched-tokens or "
        "--max-model-len, or free the GPU of other processes)");
  }
  return internal_error(msg);
}

Status cublas_error(cublasStatus_t st, const std::string& what) {
  std::string msg = what + ": " + cublasLtGetStatusName(st) + ": " + cublasLtGetStatusString(st);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return out_of_memory(msg);
  return internal_error(msg);
}

Status check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_error(err, std::string("launch of ") + kernel);
  return Status();
}

namespace {
std::atomic<int> g_pdl{-1};  // -1: not decided yet
}  // namespace

bool pdl_enabled() {
  int v = g_pdl.load(std::memory_order_relaxed);
  if (v < 0) {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();
      v = 0;
    } else {
      v = major >= 9 ? 1 : 0;
    }
    int expected = -1;
    g_pdl.compare_exchange_strong(expected, v, std::memory_order_relaxed);
    v = g_pdl.load(std::memory_order_relaxed);
  }
  return v == 1;
}

void disable_pdl() {
  g_pdl.store(0, std::memory_order_relaxed);
}

Result<DeviceProps> device_props(int ordinal) {
  DeviceProps p;
  p.ordinal = ordinal;
  cudaDeviceProp prop{};
  LATHE_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  p.name = prop.name;
  p.sm_count = prop.multiProcessorCount;
  p.major = prop.major;
  p.minor = prop.minor;
  p.total_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  p.l2_bytes = prop.l2CacheSize;
  p.max_smem_optin = static_cast<int>(prop.sharedMemPerBlockOptin);
  return p;
}

DeviceLimits current_device_limits() {
  struct Cached {
    std::atomic<bool> ready{false};
    DeviceLimits limits;
  };
  static std::array<Cached, 64> cache;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return DeviceLimits{};
  }
  Cached& c = cache[static_cast<size_t>(dev)];
  if (c.ready.load(std::memory_order_acquire)) return c.limits;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (c.ready.load(std::memory_order_relaxed)) return c.limits;
  int sms = 0, major = 0, smem = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess ||
      sms <= 0) {
    cudaGetLastError();
    return DeviceLimits{};
  }
  c.limits.sm_count = sms;
  c.limits.major = major;
  c.limits.smem_optin = smem;
  c.ready.store(true, std::memory_order_release);
  return c.limits;
}

template <BufferKind Kind>
Status CudaBuffer<Kind>::allocate(int64_t bytes, const std::string& what) {
  reset();
  if (bytes <= 0) return Status();
  void* p = nullptr;
  const bool device = Kind == BufferKind::kDevice;
  const cudaError_t err = device
                              ? cudaMalloc(&p, static_cast<size_t>(bytes))
                              : cudaHostAlloc(&p, static_cast<size_t>(bytes), cudaHostAllocDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the error so later launches do not report it
    return cuda_error(err, std::string(device ? "cudaMalloc(" : "cudaHostAlloc(") + what + ", " +
                               format_bytes(static_cast<double>(bytes)) + ")");
  }
  ptr_ = p;
  bytes_ = bytes;
  return Status();
}

template <BufferKind Kind>
void CudaBuffer<Kind>::reset() {
  if (ptr_ != nullptr) {
    if constexpr (Kind == BufferKind::kDevice) {
      cudaFree(ptr_);
    } else {
      cudaFreeHost(ptr_);
    }
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

template class CudaBuffer<BufferKind::kDevice>;
template class CudaBuffer<BufferKind::kPinnedHost>;

}  // namespace lathe::cuda
