// RMSNorm fused with the residual add (cpu::add_rms_norm's contract; cpu::rms_norm when x is null):
//   for r < rows, with s = row_index ? row_index[r] : r:
//     h = residual[s, :] (+ float(x[s, :]) when x != null)
//     residual[s, :] = h                            (only when x != null and row_index == null)
//     out[r, :] = (h * inv_rms) * weight,  inv_rms = float(1 / sqrt(sum(h^2) / dim + eps)), the sum
//                                           in double as the CPU reference computes it
//   residual: [*, dim] float32 (the residual stream); x: [*, dim] of `dtype` (a matmul output);
//   weight: [dim] float32; out: [rows, dim] of `dtype`. row_index gathers rows (the final norm of
//   the sampled tokens only) and leaves the residual untouched.
// Launch: one block of 256 threads per row. When dim % 4 == 0 and the rows are aligned, each thread
// loads its groups of 4 elements (16-byte residual loads) all at once and keeps up to 16 of them in
// registers between the sum of squares and the output, so a row of up to 4096 elements costs one
// memory latency; otherwise one element per thread and step.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

struct AddRmsNormArgs {
  float* residual = nullptr;
  const void* x = nullptr;
  const float* weight = nullptr;
  void* out = nullptr;
  const int32_t* row_index = nullptr;
  int64_t rows = 0;
  int64_t dim = 0;
  float eps = 1e-5f;
  DType dtype = DType::kBF16;
};

Status add_rms_norm(const AddRmsNormArgs& args, cudaStream_t stream);

}  // namespace lathe::cuda
