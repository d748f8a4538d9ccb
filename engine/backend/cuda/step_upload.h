// One step's inputs onto the device: check, pack into page-locked host memory (step_inputs.h's
// layout), one asynchronous copy to the device buffer the kernels (and captured graphs) read.
#pragma once

#include <cuda_runtime.h>

#include "engine/backend/cuda/cuda_common.h"
#include "engine/backend/cuda/step_inputs.h"
#include "engine/runtime/model_io.h"

namespace lathe::cuda {

// Checks `in` against `limits`, grows `host` when the step needs more (after synchronizing
// `stream`: a copy from it may be in flight), packs (pad_to / graph_rows / pad_query_len as
// pack_step(), and masks: MaskPacking, mask_slots: MaskSlots) and copies the packed bytes to `dev`
// on `stream`. `packed` describes the result.
Status upload_step(const ModelInput& in, const StepLimits& limits, int32_t pad_to, bool graph_rows,
                   PinnedBuffer& host, DeviceBuffer& dev, PackedStep* packed, cudaStream_t stream,
                   int32_t pad_query_len = 1, MaskPacking masks = MaskPacking::kNow,
                   MaskSlots mask_slots = {});

}  // namespace lathe::cuda
