// GGUF block quantizers: float32 rows to the ggml block types Lathe reads (dequant.h lists the
// layouts). Written from the algorithms of llama.cpp's reference quantizers (ggml-quants.c,
// quantize_row_*_ref), which are what `llama-quantize` uses when no importance matrix is given:
//   q8_0: d = amax/127, q = round(x/d) (half away from zero)
//   q4_0 / q5_0: d = -max/8 (-max/16) where max is the value of largest magnitude,
//                q = min(15 (31), trunc(x/d + 8.5 (16.5)))
//   q4_1 / q5_1: d = (max - min)/15 (31), m = min, q = trunc((x - min)/d + 0.5)
//   q4_k / q5_k: per 32-weight sub-block a weighted least-squares scale and min search
//                (make_qkx2_quants: weights av|x| + |x|, 20 (15) steps of the inverse scale),
//                6-bit sub-block scales and mins relative to the super-block's f16 d and dmin
//   q6_k:        per 16-weight sub-block make_qx_quants (x^2-weighted search of 19 candidate
//                scales), int8 sub-block scales relative to the f16 d
// Every float operation follows the reference's order in float32 (no fused multiply-add), so the
// blocks are bit-identical to llama.cpp's; q8_0, q4_0, q4_1, q5_0 and q5_1 are also bit-identical
// to the Python gguf package's quantizer (tests check both).
#pragma once

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe {

// True for the types quantize_row_ggml writes: q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k.
bool can_quantize_ggml(DType type);

// Quantizes `n` floats (a multiple of the type's block size) into dtype_bytes(type, n) bytes at
// `dst`. Contract: can_quantize_ggml(type). Thread-safe, no allocation.
void quantize_row_ggml(DType type, const float* src, uint8_t* dst, int64_t n);

// Quantizes a [rows, cols] row-major matrix (cols a multiple of the block size) into
// rows * dtype_bytes(type, cols) bytes, rows in parallel on ThreadPool::global(). kInvalidArgument
// when the type cannot be written or cols does not fit its blocks.
Status quantize_rows_ggml(DType type, const float* src, int64_t rows, int64_t cols, uint8_t* dst);

// The K-quant super-block quantizers (ggml_kquants.cpp); `n` is a multiple of 256.
void quantize_row_q4_k(const float* x, uint8_t* dst, int64_t n);
void quantize_row_q5_k(const float* x, uint8_t* dst, int64_t n);
void quantize_row_q6_k(const float* x, uint8_t* dst, int64_t n);

}  // namespace lathe
