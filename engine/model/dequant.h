// Dequantization of stored weights to float32: the reference every backend kernel is tested
// against (the CPU backend's fused quantized dot products, the CUDA backend's upload of GGUF
// weights to bf16).
//
// Values are bit-identical to ggml's dequantize_row_* and to the Python `gguf` package
// (gguf.quants.dequantize) for the same bytes: each element is computed in float32 with the same
// operation order, e.g. Q4_K x = (d*sc)*q - (dmin*m), Q6_K x = (d*sc)*q, Q4_1 x = d*q + m.
//
// Block layouts (little-endian, f16 = IEEE half), see ggml-common.h:
//   Q8_0  32 w / 34 B: f16 d; i8 qs[32]                          x = d*q
//   Q4_0  32 w / 18 B: f16 d; u8 qs[16]                          x = d*(nibble - 8)
//   Q4_1  32 w / 20 B: f16 d, m; u8 qs[16]                       x = d*nibble + m
//   Q5_0  32 w / 22 B: f16 d; u8 qh[4]; u8 qs[16]                x = d*(q5 - 16)
//   Q5_1  32 w / 24 B: f16 d, m; u8 qh[4]; u8 qs[16]             x = d*q5 + m
//   Q4_K 256 w /144 B: f16 d, dmin; u8 scales[12]; u8 qs[128]
//   Q5_K 256 w /176 B: f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
//   Q6_K 256 w /210 B: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d
//   Q2_K 256 w / 84 B: u8 scales[16]; u8 qs[64]; f16 d, dmin     x = (d*sc)*q2 - (dmin*m)
//   Q3_K 256 w /110 B: u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d   x = (d*(sc-32))*(q3-4)
// In the 32-weight types, byte j of qs holds weight j (low nibble) and weight j+16 (high nibble);
// bit j of the u32 qh is the fifth bit of weight j.
//
// Notes for backend authors:
//   - Fused quantized kernels (CPU dot products, CUDA GEMV) must match dequantize_row followed by a
//     float dot product, up to summation order; test them against it on the fixture blocks of
//     tests/fixtures/model/dequant/ and on random rows.
//   - Whole-tensor conversion (e.g. GGUF weights to bf16 at CUDA upload): dequantize_rows() a chunk
//     of rows at a time into a float buffer, then round with f32_to_bf16 (core/half.h);
//     dequantize_tensor() does the float step for a whole tensor on all CPU threads. Throughput is
//     roughly 0.5-2 G weights/s per core depending on the type.
//   - Weights in a GGUF file are row-major with the row (the contiguous ggml dim 0, PyTorch's last
//     dim) split into blocks; rows of a [N, K] matrix start at row_ptr(r) = data + r * K / block *
//     block_bytes and are only 2-byte aligned in general (load scales with memcpy).
#pragma once

#include <cstdint>

#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/core/tensor_view.h"

namespace lathe {

// True for the types dequantize_row handles: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k,
// q3_k, q4_k, q5_k, q6_k.
bool can_dequantize(DType type);

// Converts `n` consecutive elements stored as `type` at `src` to float32 at `dst`.
// Contract: can_dequantize(type); n is a multiple of dtype_info(type).block_size; src holds
// dtype_bytes(type, n) bytes (no alignment needed); dst holds n floats. Thread-safe, no allocation.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Dequantizes rows [row_begin, row_end) of `t` (rows of the last dimension) into dst, which holds
// (row_end - row_begin) * t.row_elems() floats.
void dequantize_rows(const TensorView& t, int64_t row_begin, int64_t row_end, float* dst);

// Dequantizes a whole host tensor into dst (t.numel() floats), in parallel on ThreadPool::global().
// kUnsupported when the type cannot be dequantized; kInvalidArgument for a device tensor.
Status dequantize_tensor(const TensorView& t, float* dst);

}  // namespace lathe
