// Host-to-device weight staging for the upload (cuda_weights.cpp): double-buffered page-locked
// host buffers, so that host work (reading the mmapped file, dequantizing GGUF blocks, repacking)
// overlaps the copies, and device buffers for dtype conversions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/core/status.h"
#include "engine/core/tensor_view.h"

namespace lathe::cuda {

// A part of a destination tensor: rows [row_offset, row_offset + rows) of a [*, cols] matrix.
struct Target {
  void* base = nullptr;  // the destination tensor
  DType dtype = DType::kBF16;
  int64_t row_offset = 0;
  int64_t cols = 0;
};

// Double-buffered host-to-device staging: pinned host buffers, device buffers for conversions.
class Uploader {
 public:
  static constexpr int64_t kStagingBytes = int64_t{64} << 20;

  Status init(cudaStream_t stream) {
    stream_ = stream;
    for (int i = 0; i < 2; ++i) {
      LATHE_RETURN_IF_ERROR(host_[i].allocate(kStagingBytes, "weight upload staging"));
      LATHE_RETURN_IF_ERROR(dev_[i].allocate(kStagingBytes, "weight conversion staging"));
      LATHE_CUDA_TRY(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
    }
    return Status();
  }
  ~Uploader() {
    for (cudaEvent_t e : done_)
      if (e != nullptr) cudaEventDestroy(e);
  }

  // Copies the host tensor `src` ([rows, cols] of any dequantizable type) into `dst`.
  Status upload(const std::string& name, const TensorView& src, const Target& dst);
  // Copies `bytes` bytes from host `src` to device `dst` as they are (stored formats).
  Status upload_raw(const std::string& name, const void* src, int64_t bytes, void* dst);

 private:
  cudaStream_t stream_ = nullptr;
  PinnedBuffer host_[2];
  DeviceBuffer dev_[2];
  cudaEvent_t done_[2] = {nullptr, nullptr};
  int next_ = 0;
};

}  // namespace lathe::cuda
