// 8-bit weights for decode_gemv's kernel (decode_gemv.h; W8A16): rows of FP8 or 8-bit
// integer codes in up to kGemvMaxParts parts (q, k, v; gate, up), each 16-byte vector 16 weights;
// w[n, e] = scale(n, e) * decode(code), decode = e4m3 (kFp8) or code - zero (kInt8, zero 128 when
// the part has none). Scales of a part:
//   scale(r, e) = scales[(r >> row_shift) * row_stride + (e >> group_shift)]   (r: row in the part)
// which covers per-tensor (row_stride 0, group_shift 31), per-channel (1, 31), groups of g = 2^s
// (k / g, s) and 128 x 128 blocks (row_shift 7, ceil(k / 128), 7); zero points u8 at the same
// index. The kernels need k % 16 == 0 and 16-byte aligned codes.
#pragma once

#include <cstdint>

#include "engine/core/status.h"

namespace lathe::cuda {

// What the weights are: rows of the activation dtype, or 8-bit codes in parts.
enum class GemvWeights : int { kAct, kFp8, kInt8 };
constexpr int kGemvMaxParts = 3;

// One part of 8-bit rows: rows [row_begin, the next part's row_begin or n) of the product.
struct GemvW8Part {
  const uint8_t* codes = nullptr;  // [rows, k], 16-byte aligned
  const void* scales = nullptr;    // f32, or f16 (GemvW8Scales::f16)
  const uint8_t* zeros = nullptr;  // kInt8: u8 zero points at the scales' index; null: 128
  int32_t row_begin = 0;
};
// The scale layout, the same in every part of a product.
struct GemvW8Scales {
  int32_t row_shift = 0, row_stride = 0, group_shift = 31;
  bool f16 = false;
};
// A product's 8-bit weights (their kind is the caller's GemvWeights).
struct GemvW8 {
  GemvW8Part parts[kGemvMaxParts];
  int nparts = 0;
  GemvW8Scales scales;
};

// The kernels' checks of w for a product of n rows: 1 to kGemvMaxParts parts in row order from row
// 0, 16-byte aligned codes, scales, a layout they read (`who` names the caller in the message).
Status check_w8(const char* who, const GemvW8& w, int64_t n);

}  // namespace lathe::cuda
