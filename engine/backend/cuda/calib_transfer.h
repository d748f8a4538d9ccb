// Large copies between pageable host memory and the device through two page-locked staging
// buffers (CudaCalibOps, cuda_calib_ops.cpp): a copy is cut into pieces of the staging size; the
// host-side memcpy of one piece (spread over a few threads when large) runs while the DMA of the
// previous one is in flight, so the activations (GBs) move at near PCIe speed instead of the
// driver's pageable-copy speed.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/status.h"

namespace lathe::cuda {

class HostStaging {
 public:
  HostStaging() = default;
  ~HostStaging();
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // Two pinned buffers of `piece_bytes` and their events.
  Status init(int64_t piece_bytes);

  // dst (device) = src (host), `bytes`, enqueued on `stream`. Returns once src has been read in
  // full (src may then change); the device copy completes in stream order.
  Status upload(void* dst, const void* src, int64_t bytes, cudaStream_t stream);

  // dst (host) = src (device) after the work already enqueued on `stream`. Returns when dst holds
  // the data.
  Status download(void* dst, const void* src, int64_t bytes, cudaStream_t stream);

  int64_t piece_bytes() const { return piece_; }

 private:
  PinnedBuffer stage_[2];
  cudaEvent_t done_[2] = {nullptr, nullptr};  // the last DMA through stage_[i] has finished
  int64_t piece_ = 0;
};

// memcpy on up to `threads` threads for large sizes (one thread moves ~10 GB/s; PCIe 5 ~50 GB/s).
void parallel_memcpy(void* dst, const void* src, int64_t bytes, int threads = 4);

}  // namespace lathe::cuda
