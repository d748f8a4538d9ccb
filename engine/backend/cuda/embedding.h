// Embedding gather: out[t, :] = float(table[ids[t], :]), the first residual-stream value of token
// t.
//   table: [vocab, dim] of `dtype` (bf16 or f16) on the device; ids: [num_tokens] int32 on the
//   device; out: [num_tokens, dim] float32. Ids outside [0, vocab) give a row of zeros (they cannot
//   occur in a validated step; padding rows of a CUDA-graph bucket carry id 0).
// Launch: one block of 128 threads per token, 16-byte loads when dim % 8 == 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

Status embedding(DType dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
                 int64_t num_tokens, float* out, cudaStream_t stream);

}  // namespace lathe::cuda
