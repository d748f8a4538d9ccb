#include "engine/backend/cuda/step_upload.h"

#include <algorithm>

namespace lathe::cuda {

Status upload_step(const ModelInput& in, const StepLimits& limits, int32_t pad_to, bool graph_rows,
                   PinnedBuffer& host, DeviceBuffer& dev, PackedStep* packed, cudaStream_t stream,
                   int32_t pad_query_len, MaskPacking masks, MaskSlots mask_slots) {
  LATHE_RETURN_IF_ERROR(check_step(in, limits));
  const int64_t need = step_bytes(in, limits, pad_to, pad_query_len, masks, mask_slots);
  if (need > host.bytes()) {
    LATHE_CUDA_TRY(cudaStreamSynchronize(stream));
    LATHE_RETURN_IF_ERROR(host.allocate(std::max(need, 2 * host.bytes()), "step inputs (host)"));
  }
  LATHE_RETURN_IF_ERROR(pack_step(in, limits, pad_to, graph_rows, host.as<uint8_t>(), host.bytes(),
                                  dev.bytes(), packed, pad_query_len, masks, mask_slots));
  LATHE_CUDA_TRY(cudaMemcpyAsync(dev.get(), host.get(), static_cast<size_t>(packed->bytes),
                                 cudaMemcpyHostToDevice, stream));
  return Status();
}

}  // namespace lathe::cuda
