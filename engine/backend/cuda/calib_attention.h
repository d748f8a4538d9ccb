// The causal attention of a calibration batch on the GPU (CalibOps::attention, calib_ops.h),
// float32:
//   q [rows, num_heads, head_dim], k / v [rows, num_kv_heads, head_dim], out [rows, num_heads,
//   head_dim]; row t belongs to the sample starting at row sample_first[t] and attends to the rows
//   of its sample from max(first, t - window + 1) (window > 0) or first, to t itself; query head h
//   reads kv head h / (num_heads / num_kv_heads); scores scaled by `scale`.
// One warp per (row, head): keys in tiles of 32 (lane = key) with an online softmax, the output
// dimensions spread over the lanes. head_dim <= kCalibAttentionMaxHeadDim.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/core/status.h"

namespace lathe::cuda {

constexpr int64_t kCalibAttentionMaxHeadDim = 256;

struct CalibAttentionArgs {
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;
  const int32_t* sample_first = nullptr;  // [rows]
  int64_t rows = 0;
  int32_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t window = 0;  // 0: none
  float scale = 1.f;
};
Status calib_attention(const CalibAttentionArgs& a, cudaStream_t stream);

}  // namespace lathe::cuda
