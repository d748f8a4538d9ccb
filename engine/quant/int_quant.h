// Integer quantization of a weight matrix: the grid every integer scheme shares (RTN, GPTQ, AWQ)
// and round-to-nearest itself.
//
// A linear weight W is [N, K] (N outputs, K inputs, row-major, PyTorch order). Along K the columns
// fall into groups of `group_size` (one group per row when per-channel); each (row, group) has a
// scale s and an integer zero point z, and a weight is stored as the unsigned code
//   q = clamp(round(w / s) + z, 0, 2^bits - 1),   w' = s * (q - z)
// with round half to even (torch.round / numpy.round). The grid is GPTQ's (AutoGPTQ's Quantizer):
//   asymmetric: min <- min(min, 0), max <- max(max, 0) (the range always contains 0),
//               s = (max - min) / (2^bits - 1), z = round(-min / s);
//   symmetric:  a = max(|min|, |max|), s = 2a / (2^bits - 1), z = 2^(bits-1).
// An all-zero group gets the range [-1, 1]. The symmetric grid is also compressed-tensors' (its
// signed codes are q - 2^(bits-1), its scale amax / ((2^bits - 1) / 2)), so one quantized matrix
// can be written in any of the GPTQ, AWQ and compressed-tensors layouts.
//
// Scales are rounded to `scale_dtype` (the type the checkpoint stores them in) before the codes
// are computed, so a written checkpoint dequantizes exactly to dequantize_int()'s values.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe {

struct IntQuantConfig {
  int bits = 4;              // 4 or 8
  int64_t group_size = 128;  // columns per group: 32, 64, 128, ... or -1 (per channel: one group)
  bool symmetric = true;
  DType scale_dtype = DType::kF32;  // f32, f16 or bf16: scales are representable in it
  // Smallest zero point allowed (asymmetric only). GPTQ's v1 layout stores z - 1 in `bits` bits,
  // so a zero point of 0 cannot be stored there: the GPTQ writer asks for 1.
  int min_zero = 0;
};

// Checks the config against a matrix with `cols` columns; errors say which field and the fix
// ("--group-size 96 does not divide the 896 input columns of ...": the caller adds the tensor).
Status validate_int_quant_config(const IntQuantConfig& config, int64_t cols);

// Columns per group for a matrix of `cols` columns (cols when per-channel).
inline int64_t effective_group_size(const IntQuantConfig& c, int64_t cols) {
  return c.group_size <= 0 ? cols : c.group_size;
}

struct IntGroupParams {
  float scale = 1.f;
  int32_t zero = 0;
};

// The grid of one group whose values span [min, max] (see the file comment).
IntGroupParams int_grid_params(float min, float max, const IntQuantConfig& config);

// The code of `w` on a group's grid.
inline int32_t int_code(float w, const IntGroupParams& p, int32_t max_code);
// A code back to a float: s * (q - z).
inline float int_value(int32_t q, const IntGroupParams& p) {
  return p.scale * static_cast<float>(q - p.zero);
}

// Codes, scales and zero points of a quantized [N, K] matrix.
struct IntQuantizedMatrix {
  int64_t rows = 0;  // N
  int64_t cols = 0;  // K
  int bits = 4;
  int64_t group_size = 0;  // columns per group (K when per-channel)
  bool symmetric = true;
  std::vector<uint8_t> codes;  // [N, K], 0 .. 2^bits - 1
  std::vector<float> scales;   // [N, G], exactly representable in the config's scale_dtype
  std::vector<int32_t> zeros;  // [N, G], unsigned (symmetric: 2^(bits-1))
  std::vector<int32_t> g_idx;  // [K]: the group of each column (k / group_size unless act-order)

  int64_t num_groups() const { return group_size > 0 ? (cols + group_size - 1) / group_size : 0; }
  IntGroupParams params(int64_t row, int64_t group) const {
    const size_t i = static_cast<size_t>(row * num_groups() + group);
    return {scales[i], zeros[i]};
  }
  float value(int64_t row, int64_t col) const {
    return int_value(codes[static_cast<size_t>(row * cols + col)],
                     params(row, g_idx[static_cast<size_t>(col)]));
  }
  // An empty matrix of this shape and config, g_idx = k / group_size.
  static IntQuantizedMatrix empty(int64_t rows, int64_t cols, const IntQuantConfig& config);
};

// Round-to-nearest quantization of w [rows, cols] (row-major). kInvalidArgument when the config
// does not fit the shape.
Result<IntQuantizedMatrix> quantize_int_rtn(const float* w, int64_t rows, int64_t cols,
                                            const IntQuantConfig& config);

// The weights a quantized matrix stands for, [rows, cols] row-major.
std::vector<float> dequantize_int(const IntQuantizedMatrix& q);

// Rounds a scale to what `dtype` stores (f32: unchanged), never to zero.
float round_scale_to(float scale, DType dtype);

inline int32_t int_code(float w, const IntGroupParams& p, int32_t max_code) {
  const float r = __builtin_nearbyintf(w / p.scale);  // half to even, as torch.round
  const float q = r + static_cast<float>(p.zero);
  if (!(q > 0.f)) return 0;  // also NaN
  if (q > static_cast<float>(max_code)) return max_code;
  return static_cast<int32_t>(q);
}

}  // namespace lathe
