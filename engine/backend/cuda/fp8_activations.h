// Dynamic FP8 quantization of activations, the input side of W8A8 products: one scale for the
// whole batch, as vLLM's `--quantization fp8` computes it at run time (cuBLASLt 13.1 on Hopper
// takes per-tensor FP8 scales only: its outer-vector mode for per-token scales is refused on sm_90,
// run 40):
//   scale = max(amax(x), kFp8MinAmax) / 448      (448: the largest e4m3 value)
//   q[r, j] = e4m3(x[r, j] / scale)               (round to nearest even, saturated)
// so that x ≈ scale * q. Two kernels (the batch's amax, then the codes) and a 4-byte reset.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

constexpr float kFp8E4m3Max = 448.0f;
// A batch of zeros gets this amax (a finite scale; its codes are all zero either way).
constexpr float kFp8MinAmax = 1e-12f;

// x: [m, k] of act (bf16 or f16); q: [m, k] e4m3 bytes; scale: [1] f32 (device); amax_bits: [1]
// u32 device scratch (overwritten).
Status quantize_fp8_activations(DType act, const void* x, int64_t m, int64_t k, uint8_t* q,
                                float* scale, uint32_t* amax_bits, cudaStream_t stream);

}  // namespace lathe::cuda
