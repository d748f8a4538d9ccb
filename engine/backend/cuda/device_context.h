// The CUDA backend's device context (engine/runtime/device_context.h): one device, the stream its
// runners launch on, the cuBLASLt handle with its workspace (gemm.h), the device's facts, and the
// device's memory planner. A runner creates one, or takes another runner's (CudaRunnerOptions::
// context: a draft model beside its target runs on the same stream, one after the other, and
// shares the cuBLASLt workspace). The memory planner is one per device for the whole process, so
// independent contexts on one device (two engines) still plan together.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/core/status.h"
#include "engine/runtime/device_context.h"
#include "engine/runtime/memory_planner.h"

namespace lathe::cuda {

class CudaDeviceContext final : public DeviceContext {
 public:
  // Selects `device` on the calling thread, creates the CUDA context, a non-blocking stream and
  // the cuBLASLt handle; the device's planner is created on first use (recording what is in use
  // then). Fails with the reason when the device is missing or older than compute capability 8.0.
  static Result<std::shared_ptr<CudaDeviceContext>> create(int32_t device);
  ~CudaDeviceContext() override;
  CudaDeviceContext(const CudaDeviceContext&) = delete;
  CudaDeviceContext& operator=(const CudaDeviceContext&) = delete;

  std::string describe() const override;
  MemoryPlanner& memory_planner() override { return *planner_; }

  int32_t device() const { return props_.ordinal; }
  const DeviceProps& props() const { return props_; }
  cudaStream_t stream() const { return stream_; }
  Gemm& gemm() { return *gemm_; }
  // Makes this context's device current on the calling thread (runners call it on entry).
  Status activate() const;
  // Free device memory now (cudaMemGetInfo), bytes.
  Result<int64_t> free_bytes() const;

 private:
  CudaDeviceContext() = default;
  DeviceProps props_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Gemm> gemm_;
  std::shared_ptr<MemoryPlanner> planner_;
  MemoryReservation gemm_reservation_;  // the cuBLASLt workspace
};

}  // namespace lathe::cuda
