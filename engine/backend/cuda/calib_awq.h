// AWQ's two searches on the GPU (awq_search.h), bit for bit the CPU's results:
//   awq_fake_quantize  = awq_fake_quantize_scaled: Q(W diag(s)) diag(s)^-1 on the integer grid;
//   awq_clip_search    = awq_search_clip: the clipping range per (row, group).
// Every float and double operation is the CPU's, in its order, rounded to nearest (no FMA where
// the CPU rounds a product, no fast math), and the grid is calib_grid.h's device twin of
// int_quant.h. All pointers are device pointers; matrices are row-major float32. A `group` <= 0
// means one group per row (group = k); a positive one must divide k. Launches are asynchronous on
// `stream`; the Status reports bad arguments and launch errors only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/calib_grid.h"
#include "engine/core/status.h"

namespace lathe::cuda {

// out [rows, k] = awq_fake_quantize_scaled(w, rows, k, s, quant) for w [rows, k], s [k] (> 0):
// scaled = w[r][j] * s[j]; round to nearest on the grid of each (row, group) of the scaled matrix
// (quantize_int_rtn: its min / max, scale rounded to the scale dtype, zero point, clamped codes);
// the code's value (dequantize_int) divided by s[j]. out may be w itself (in place); no other
// overlap.
Status awq_fake_quantize(const float* w, const float* s, int64_t rows, int64_t k, int64_t group,
                         const CalibGrid& grid, float* out, cudaStream_t stream);

// best [rows, k / group] = awq_search_clip(w, rows, k, x, tokens, config) for w [rows, k] and the
// sampled input rows x [tokens, k] (tokens >= 1), with clip_grid = config.clip_grid and steps =
// int(config.max_shrink * config.clip_grid): per (row, group), amax = max |w| over the group; for
// i < max(steps, 1) the range mv = amax * (1 - i / clip_grid) (float), w clamped to +-mv and
// fake-quantized (the grid from the clamped values' min / max with 0); the error is the mean over
// the tokens of (x_t . qw - x_t . w)^2, both dots in double as dot4 (four interleaved partial sums
// over j mod 4, combined (s0 + s1) + (s2 + s3)) and the squares summed in token order, so it equals
// the CPU's bit for bit; the first strictly smallest error's mv wins (amax when none is finite).
Status awq_clip_search(const float* w, int64_t rows, int64_t k, const float* x, int64_t tokens,
                       int64_t group, const CalibGrid& grid, int clip_grid, int steps, float* best,
                       cudaStream_t stream);

}  // namespace lathe::cuda
