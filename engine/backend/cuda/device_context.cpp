#include "engine/backend/cuda/device_context.h"

#include <map>
#include <mutex>

#include "engine/backend/cuda/cuda_runner_factory.h"
#include "engine/core/strings.h"

namespace lathe::cuda {
namespace {

// One planner per device ordinal for the process, alive while some context uses it.
Result<std::shared_ptr<MemoryPlanner>> device_planner(int32_t device) {
  static std::mutex mu;
  static std::map<int32_t, std::weak_ptr<MemoryPlanner>> planners;
  std::lock_guard<std::mutex> lock(mu);
  if (std::shared_ptr<MemoryPlanner> p = planners[device].lock()) return p;
  size_t free_b = 0, total_b = 0;
  LATHE_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  auto p = std::make_shared<MemoryPlanner>(static_cast<int64_t>(total_b),
                                           static_cast<int64_t>(total_b - free_b));
  planners[device] = p;
  return p;
}

}  // namespace

Result<std::shared_ptr<CudaDeviceContext>> CudaDeviceContext::create(int32_t device) {
  std::string why;
  if (!cuda_device_available(&why)) return unsupported("no usable CUDA device: " + why);
  int count = 0;
  LATHE_CUDA_TRY(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    return invalid_argument(strformat("CUDA device %d does not exist (%d devices)", device, count));
  LATHE_CUDA_TRY(cudaSetDevice(device));
  std::shared_ptr<CudaDeviceContext> c(new CudaDeviceContext());
  LATHE_ASSIGN_OR_RETURN(c->props_, device_props(device));
  if (c->props_.major < 8)
    return unsupported(
        strformat("%s has compute capability %d.%d; the CUDA backend needs 8.0 (Ampere) or newer",
                  c->props_.name.c_str(), c->props_.major, c->props_.minor));
  LATHE_CUDA_TRY(cudaFree(nullptr));  // create the CUDA context before measuring memory
  LATHE_CUDA_TRY(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
  LATHE_ASSIGN_OR_RETURN(c->planner_, device_planner(device));
  LATHE_ASSIGN_OR_RETURN(c->gemm_, Gemm::create());
  c->gemm_reservation_ = MemoryReservation(
      c->planner_.get(), "cuBLASLt workspace of " + c->describe(), c->gemm_->device_bytes());
  return c;
}

CudaDeviceContext::~CudaDeviceContext() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  gemm_reservation_.reset();
  gemm_.reset();
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::string CudaDeviceContext::describe() const {
  return strformat("%s (device %d)", props_.name.c_str(), props_.ordinal);
}

Status CudaDeviceContext::activate() const {
  LATHE_CUDA_TRY(cudaSetDevice(props_.ordinal));
  return Status();
}

Result<int64_t> CudaDeviceContext::free_bytes() const {
  size_t free_b = 0, total_b = 0;
  LATHE_CUDA_TRY(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<int64_t>(free_b);
}

}  // namespace lathe::cuda
