// Element type conversion on the device, used when weights are uploaded: dst[i] = (dst type) src[i]
// for i < n, round to nearest even. src: f32, f16 or bf16; dst: f32, f16 or bf16. Used to turn
// dequantized float32 rows (GGUF) and f16/bf16/f32 checkpoints into the runner's dtype.
// Launch: grid-stride, 256 threads.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

Status cast(DType src_type, const void* src, DType dst_type, void* dst, int64_t n,
            cudaStream_t stream);

}  // namespace lathe::cuda
