// A linear layer's weight as a value that says its storage format: what a checkpoint holds for one
// projection ([n, k]: k inputs, n outputs, y = W x), without converting it. A checkpoint scheme
// (weight_scheme.h) builds these from a WeightStore; each backend decides at load how to run each
// format (the CPU dequantizes rows on the fly, the CUDA backend uploads and dispatches by format
// and batch size), and refuses a format it has no kernel for with an error that names it.
//
// Formats:
//   kDense  data: [n, k] of f32, f16 or bf16.
//   kGguf   data: [n, k] of one GGUF block type (q8_0, q4_k, ...): blocks run along k.
//   kInt    integer codes (4 or 8 bits) with scales per group of `group_size` inputs (or one group
//           per output channel, or one for the tensor), optional zero points and act-order g_idx
//           (GPTQ, AWQ, compressed-tensors pack-quantized and int8, online int4/int8).
//           `layout` says how the codes, scales and zero points are packed (below).
//   kFp8    data: [n, k] of f8 e4m3 with scales per tensor, per output channel or per 2-D block.
// Quantized parts point into the checkpoint's memory-mapped files in the checkpoint's own layout
// (or, for online quantization, into buffers the bound ModelWeights owns).
//
// Every integer layout decodes to an unsigned code q in [0, 2^bits) and an unsigned zero point z
// (symmetric: z = 2^(bits-1)), and w[n, k] = scale(n, g) * (q - z), g = g_idx[k] or k / group_size.
// weight_dequant.h is the reference decoder of every layout and checks the parts' shapes.
#pragma once

#include <cstdint>
#include <string>

#include "engine/core/tensor_view.h"

namespace lathe {

enum class WeightFormat : uint8_t { kDense, kGguf, kInt, kFp8 };
const char* weight_format_name(WeightFormat f);  // "dense", "gguf", "int", "fp8"

// How integer codes are packed (FORMATS.md, QUANT.md), with b bits and p = 32 / b codes per word,
// G groups:
enum class IntLayout : uint8_t {
  kNone,
  // GPTQ (AutoGPTQ / GPTQModel): data qweight i32 [k / p, n], code (n, k) in bits b*(k % p) of word
  // (k / p, n); scales [G, n]; zeros i32 [G, n / p], zero (g, n) in bits b*(n % p) of word
  // (g, n / p), stored as z - 1 when zeros_minus_one (checkpoint_format "gptq", v1); g_idx i32 [k].
  kGptq,
  // AWQ GEMM: data qweight i32 [k, n / 8], nibble i of word (k, c) holds column 8c + [0, 2, 4, 6,
  // 1, 3, 5, 7][i]; zeros i32 [G, n / 8] in the same order; scales [G, n]; 4 bits only.
  kAwq,
  // compressed-tensors pack-quantized (and Lathe's online int4): data i32 [n, ceil(k / p)], code
  // (n, k) in bits b*(k % p) of word (n, k / p), stored as signed value + 2^(b-1); scales [n, G];
  // zeros i32 [ceil(n / p), G] packed along n, signed zero + 2^(b-1); g_idx i32 [k].
  kCompressedTensors,
  // Plain signed int8 codes (compressed-tensors naive/int-quantized, online int8): data i8 [n, k],
  // w = scale * code; scales [n, G] (group or channel: G = 1) or one for the tensor.
  kInt8Rows,
};

enum class ScaleGranularity : uint8_t { kNone, kTensor, kChannel, kGroup, kBlock };

struct WeightQuant {
  int32_t bits = 0;        // 4 or 8 (kInt), 8 (kFp8)
  int32_t group_size = 0;  // kGroup: inputs per scale group along k; else 0
  int32_t block_rows = 0;  // kBlock: rows x cols of one scale block (128 x 128)
  int32_t block_cols = 0;
  ScaleGranularity granularity = ScaleGranularity::kNone;
  IntLayout layout = IntLayout::kNone;
  bool symmetric = true;         // no zero points stored: z = 2^(bits-1)
  bool zeros_minus_one = false;  // GPTQ v1: stored zero points are z - 1
  TensorView scales;             // f16/bf16/f32, shape by granularity and layout
  TensorView zeros;              // packed zero points (asymmetric int), else empty
  TensorView g_idx;              // i32 [k]: group of each input (act-order), else empty
  TensorView input_scale;        // f32 static activation scale (fp8/int8 W8A8), else empty

  int64_t num_groups(int64_t k) const;  // scale groups along k (1 unless kGroup)
};

struct WeightMatrix {
  std::string name;  // canonical tensor name, for errors and reports ("blk.3.attn_q")
  WeightFormat format = WeightFormat::kDense;
  DType dtype = DType::kBF16;  // element or block type of `data`
  int64_t n = 0;               // outputs (rows of W)
  int64_t k = 0;               // inputs
  TensorView data;
  WeightQuant quant;   // quantized formats only
  std::string scheme;  // the checkpoint scheme that stores it quantized ("gptq", "awq",
                       // "compressed-tensors", "fp8", "online"); empty for dense and GGUF tensors

  bool is_dense() const { return format == WeightFormat::kDense; }
  // Bytes of every part as stored (data, scales, zero points, g_idx, input scale).
  int64_t bytes() const;
  // "bf16", "q4_k", "int4 g128", "int4 g128 asym act-order", "int8 per-channel", "fp8 per-tensor",
  // "fp8 block 128x128"
  std::string describe() const;
};

// A dense or GGUF matrix viewing `t` ([n, k], PyTorch order) as stored.
WeightMatrix plain_matrix(const std::string& name, const TensorView& t);

}  // namespace lathe
