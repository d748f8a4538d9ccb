// A linear layer's weight as a value that says its storage format: what a checkpoint holds for one
// projection ([n, k]: k inputs, n outputs, y = W x), without converting it. A checkpoint scheme
// (weight_scheme.h) builds these from a WeightStore; each backend decides at load how to run each
// format (the CPU dequantizes rows on the fly, the CUDA backend uploads and dispatches by format
// and batch size), and refuses a format it has no kernel for with an error that names it.
//
// Formats:
//   kDense  data: [n, k] of f32, f16 or bf16.
//   kGguf   data: [n, k] of one GGUF block type (q8_0, q4_k, ...): blocks run along k.
//   kInt    integer codes (4 or 8 bits) with scales per group of `group_size` inputs (-1: one group
//   per
//           output channel), optional zero points and act-order g_idx (GPTQ, AWQ,
//           compressed-tensors pack-quantized, INT8 W8A16). `int_layout` says how the codes are
//           packed.
//   kFp8    data: [n, k] of f8 e4m3 with scales per tensor, per output channel or per 2-D block.
// Quantized parts point into the checkpoint's memory-mapped files in the checkpoint's own layout.
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/tensor_view.h"

namespace lathe {

enum class WeightFormat : uint8_t { kDense, kGguf, kInt, kFp8 };
const char* weight_format_name(WeightFormat f);  // "dense", "gguf", "int", "fp8"

// How integer codes are packed (FORMATS.md).
enum class IntLayout : uint8_t {
  kNone,
  kGptq,               // qweight i32 [k / (32 / bits), n], packed along k; qzeros [groups, n / per]
  kAwq,                // qweight i32 [k, n / 8], nibble order [0, 2, 4, 6, 1, 3, 5, 7] along n
  kCompressedTensors,  // weight_packed i32 [n, k / (32 / bits)], packed along k, values + 2^(b-1)
  kInt8Rows,           // i8 [n, k] (naive-quantized / W8A16)
};

enum class ScaleGranularity : uint8_t { kNone, kTensor, kChannel, kGroup, kBlock };

struct WeightQuant {
  int32_t bits = 0;        // 4 or 8 (kInt), 8 (kFp8)
  int32_t group_size = 0;  // inputs per scale group along k (kGroup); -1: the whole row
  int32_t block_rows = 0;  // kBlock: rows x cols of one scale block (128 x 128)
  int32_t block_cols = 0;
  ScaleGranularity granularity = ScaleGranularity::kNone;
  IntLayout layout = IntLayout::kNone;
  bool symmetric = true;         // no zero points
  bool zeros_minus_one = false;  // GPTQ v1: stored zero points are z - 1
  TensorView scales;             // f16/bf16/f32, shape by granularity and layout
  TensorView zeros;              // packed zero points (asymmetric int), else empty
  TensorView g_idx;              // i32 [k]: group of each input (act-order), else empty
  TensorView input_scale;        // f32 static activation scale (fp8), else empty (dynamic)
};

struct WeightMatrix {
  std::string name;  // canonical tensor name, for errors and reports ("blk.3.attn_q")
  WeightFormat format = WeightFormat::kDense;
  DType dtype = DType::kBF16;  // element or block type of `data`
  int64_t n = 0;               // outputs (rows of W)
  int64_t k = 0;               // inputs
  TensorView data;
  WeightQuant quant;  // quantized formats only

  bool is_dense() const { return format == WeightFormat::kDense; }
  // Bytes of every part as stored (data, scales, zero points, g_idx).
  int64_t bytes() const;
  // "bf16", "q4_k", "int4 g128 asym", "fp8 per-channel"
  std::string describe() const;
};

// A dense or GGUF matrix viewing `t` ([n, k], PyTorch order) as stored.
WeightMatrix plain_matrix(const std::string& name, const TensorView& t);

}  // namespace lathe
