// Shared by the fused-projection tests (cuda_tile_pairs_test.cpp, cuda_kquant_parts_test.cpp,
// cuda_w8_decode_test.cpp): the unfused product their fused launches are compared against, and
// parts' shapes stacked into a projection.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "engine/backend/cuda/linear.h"
#include "engine/backend/cuda/quant_linear.h"
#include "engine/core/status.h"

namespace lathe::test {

// The unfused product: one quant_gemv launch per part of w, y [m, w.n] of `out`.
inline Status per_part(const cuda::DeviceLinear& w, DType act, const void* x, DType out, void* y,
                       int64_t m, cudaStream_t st) {
  for (const cuda::QuantPart& p : w.parts)
    LATHE_RETURN_IF_ERROR(cuda::quant_gemv(p, act, x, out, y, w.n, m, st));
  return Status();
}

// Parts' shapes stacked into one projection: each part's row_offset after the previous part's rows.
inline std::vector<cuda::QuantPart> stacked(std::vector<cuda::QuantPart> parts) {
  int64_t row = 0;
  for (cuda::QuantPart& p : parts) {
    p.row_offset = row;
    row += p.n;
  }
  return parts;
}

}  // namespace lathe::test
