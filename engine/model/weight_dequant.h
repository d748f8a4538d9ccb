// The reference decoder of every WeightMatrix format (weight_matrix.h): the values a backend's
// kernels for a format must reproduce, and the checks that a matrix's parts agree with its format.
//
// Numerics, per element, in float32:
//   kDense, kGguf  dequant.h's dequantize_row (bit-identical to ggml's dequantize_row_*).
//   kInt           w = s * float(q - z): the integer difference is exact and s (an f16/bf16/f32
//                  scale widened to f32) multiplies it once, so the result is s * (q - z) rounded
//                  once to float32; with the checkpoint's 16-bit scales it is exactly the value
//                  PyTorch's reference dequantization computes in float32.
//   kFp8           w = e4m3(code) * s, one float32 product (e4m3 values are exact in float32).
// No other rounding happens: a checkpoint whose dequantized values are representable in 16 bits
// dequantizes to exactly those 16-bit values.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/weight_matrix.h"

namespace lathe {

// Checks that every part of `m` has the dtype and shape its format and layout imply ([n, k],
// groups, packing), that the group size divides k, and that g_idx names existing groups. Errors
// are kCorruptFile (kUnsupported for a format the decoder does not know) and name the tensor, its
// part and both shapes, e.g. "blk.0.attn_q (model.layers.0.self_attn.q_proj): qzeros has shape
// [2, 4], expected [2, 8] (4-bit zero points of 64 outputs in 2 groups)".
Status validate_weight_matrix(const WeightMatrix& m);

// Rows [r0, r1) of W as float32: row r at dst + (r - r0) * ld (ld >= m.k). Contract: `m` passed
// validate_weight_matrix() (or is dense/GGUF); host memory. Thread-safe, no allocation.
void dequantize_matrix_rows(const WeightMatrix& m, int64_t r0, int64_t r1, float* dst, int64_t ld);

// The whole matrix, [n, k] row-major (tests and tools).
std::vector<float> dequantize_matrix(const WeightMatrix& m);

}  // namespace lathe
