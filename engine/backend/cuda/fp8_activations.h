// Dynamic per-token FP8 quantization of activations, the input side of W8A8 products (FP8_DYNAMIC
// as vLLM and llm-compressor define it):
//   scale[r] = max(amax(x[r, :]), kFp8MinAmax) / 448      (448: the largest e4m3 value)
//   q[r, j]  = e4m3(x[r, j] / scale[r])                    (round to nearest even, saturated)
// so that x[r, j] ≈ scale[r] * q[r, j]. One block per row; rows of any k (16-byte loads when
// k % 8 == 0, else element loads).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

constexpr float kFp8E4m3Max = 448.0f;
// A row of zeros gets this amax (a finite scale; its codes are all zero either way).
constexpr float kFp8MinAmax = 1e-12f;

// x: [m, k] of act (bf16 or f16); q: [m, k] e4m3 bytes; scales: [m] f32.
Status quantize_fp8_per_token(DType act, const void* x, int64_t m, int64_t k, uint8_t* q,
                              float* scales, cudaStream_t stream);

}  // namespace lathe::cuda
