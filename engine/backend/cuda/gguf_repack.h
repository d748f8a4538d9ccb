// GGUF Q8_0 and Q4_0 parts in Lathe's integer row layout (quant_linear.h), so that they run the
// integer kernels (the multi-row decode kernel of quant_gemv_rows.cuh) instead of the generic
// one-warp-per-row GGUF kernel, in the same bytes per weight (8.5 and 4.5 bits):
//   Q8_0  (32 weights: f16 d; i8 q[32]; w = d * q)        -> 8-bit codes q + 128 (zero 128
//         implicit), one f16 scale d per group of 32 inputs;
//   Q4_0  (32 weights: f16 d; u8 qs[16], byte j holds q[j] in its low nibble and q[j + 16] in its
//         high nibble; w = d * (q - 8))                   -> 4-bit codes q (zero 8 implicit) in
//         sequential nibbles (element j of a row in word j / 8, nibble j % 8), one f16 scale d per
//         group of 32 inputs.
// The codes and scales are the file's, moved: the kernels decode w = d * (code - zero), the same
// float32 product as dequant.h's dequantize_row, so every weight is bit-identical. The repacked
// bytes are also a symmetric compressed-tensors matrix (gguf_repacked_matrix), which the reference
// decoder (engine/model/weight_dequant.h) reads. Other GGUF types keep their blocks.
// CudaSwitches::gguf_repack (LATHE_CUDA_GGUF_REPACK=0) turns the conversion off for A/B runs.
#pragma once

#include "engine/backend/cuda/weight_repack.h"
#include "engine/core/status.h"
#include "engine/model/weight_matrix.h"

namespace lathe::cuda {

// Whether the GGUF part `m` takes the integer row layout: a Q8_0 or Q4_0 part (k a multiple of 32,
// as every such part's is).
bool gguf_repacks(const WeightMatrix& m);

// The repacked shape of such a part: bits 8 (Q8_0) or 4 (Q4_0), group 32, f16 scales, no zero
// points, no g_idx, row layout (never the 4-bit tile layout). data_bytes + scale_bytes equal the
// GGUF blocks' bytes. Contract: gguf_repacks(m).
RepackShape gguf_repack_shape(const WeightMatrix& m);

// The codes and scales of a part whose blocks are in host memory (a GGUF file's tensor), in
// parallel on ThreadPool::global(). kInvalidArgument when the part is not one gguf_repacks takes
// or has no host bytes (a dummy part: dummy_quant.h fills its repacked layout on the device).
Result<RepackedPart> gguf_repack(const WeightMatrix& m);

// The repacked bytes `r` of part `m` as the WeightMatrix the reference decoder reads: kInt,
// compressed-tensors layout (rows of packed u32 codes along k), symmetric, group 32, f16 scales.
// Views into r (which must outlive it). Contract: r = gguf_repack(m).
WeightMatrix gguf_repacked_matrix(const WeightMatrix& m, const RepackedPart& r);

}  // namespace lathe::cuda
