// Integer and FP8 checkpoint weights (WeightMatrix kInt / kFp8, engine/model/weight_matrix.h) in
// the layout the quantized kernels read (quant_linear.h): GPTQ, AWQ and compressed-tensors codes
// unpacked from their packings into Lathe's row layout (unsigned codes along k, true zero points as
// u8), signed int8 rows shifted to unsigned with zero 128, scales per (row, group) in f16 when the
// checkpoint's are f16 and f32 otherwise (no scale is rounded), act-order g_idx kept; FP8 codes as
// stored with their scales widened to f32. The values the kernels decode equal those of
// engine/model/weight_dequant.h's reference decoder exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/quant_linear.h"
#include "engine/core/status.h"
#include "engine/model/weight_matrix.h"

namespace lathe::cuda {

// The shape of a repacked part, known before repacking (to plan the single weight allocation). On
// the device the four pieces follow each other, each at a multiple of kRepackAlign bytes.
constexpr int64_t kRepackAlign = 256;
struct RepackShape {
  int64_t data_bytes = 0, scale_bytes = 0, zero_bytes = 0, g_idx_bytes = 0;
  int32_t bits = 0, group_size = 0;
  DType scale_dtype = DType::kF32;
  bool has_zeros = false, has_g_idx = false;
  bool int4_tiles = false;  // 4-bit codes in the tensor-core tile layout (int4_tiles.h)
  ScaleGranularity fp8_scale = ScaleGranularity::kTensor;

  // Offsets of the pieces from the part's start, and the part's device bytes.
  int64_t scales_at() const;
  int64_t zeros_at() const;
  int64_t g_idx_at() const;
  int64_t bytes() const;
};
// Fails (naming the tensor) for what the kernels cannot take: a group size that is not a multiple
// of 32, an FP8 block other than 128 x 128, k not a multiple of 32. 4-bit codes take the tile
// layout where int4_tiles_fit and `int4_tiles` (CudaSwitches::int4_tiles) allows it.
Result<RepackShape> repack_shape(const WeightMatrix& m, bool int4_tiles = true);

// The repacked host bytes, in the order data | scales | zeros | g_idx of `shape`.
struct RepackedPart {
  std::vector<uint8_t> data, scales, zeros, g_idx;
};
RepackedPart repack(const WeightMatrix& m, const RepackShape& shape);

}  // namespace lathe::cuda
