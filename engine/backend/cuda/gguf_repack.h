// GGUF Q8_0 and Q4_0 parts in Lathe's integer row layout (quant_linear.h), so that they run the
// integer kernels (Q8_0: decode_gemv's 8-bit kernel at batches 1-4, quant_gemv_rows.cuh's multi-row
// one to 8) instead of the generic one-warp-per-row GGUF kernel, in the same bytes per weight (8.5
// and 4.5 bits):
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
// Q6_K (256 weights: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d; 210 bytes, so a block is only
// 2-byte aligned in a row) is split instead: each block's first 208 bytes into a 16-byte aligned
// slot, its d into an f16 array after the slots (QuantPart::gguf_q6k_split), the same 210 bytes
// per block; the k-quant decode kernel (quant_gemv_kquants.cuh) reads it in 16-byte loads.
// Q5_K (256 weights: f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]; 176 bytes) keeps its place
// but its qh bytes are reordered (QuantPart::gguf_q5k_units): the k-quant kernel's unit c (weights
// 64 c .. 64 c + 63: sub-blocks 2 c and 2 c + 1) needs bits 2 c and 2 c + 1 of all 32 qh bytes,
// which the reorder puts in the 8 bytes 16 + 8 c .. + 7 of the block: byte r (0..7) of unit c
// holds, from bit 0 up, two bits (2 c, 2 c + 1) of each of qh[r], qh[16 + r], qh[8 + r], qh[24 +
// r]. CudaSwitches::gguf_repack (LATHE_CUDA_GGUF_REPACK=0) turns all three conversions off for A/B
// runs.
#pragma once

#include "engine/backend/cuda/weight_repack.h"
#include "engine/core/status.h"
#include "engine/model/weight_matrix.h"

namespace lathe::cuda {

// The host blocks of part m, checked: kInvalidArgument naming the part when there are none (a dummy
// part, filled on the device) or their size is not blocks * block_bytes.
Status check_gguf_host_blocks(const WeightMatrix& m, int64_t blocks, int64_t block_bytes);

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

// Whether the GGUF part `m` takes the Q5_K unit order: a Q5_K part (k a multiple of 256).
bool gguf_reorders_q5k(const WeightMatrix& m);

// The blocks of a Q5_K part whose blocks are in host memory with their qh bytes in unit order
// (RepackedPart::data, the same size as the blocks); kInvalidArgument as gguf_repack.
Result<RepackedPart> gguf_reorder_q5k(const WeightMatrix& m);

// One 32-byte qh array of a Q5_K block into unit order (out: 32 bytes), and back.
void q5k_qh_to_units(const uint8_t* qh, uint8_t* out);
void q5k_qh_from_units(const uint8_t* units, uint8_t* qh);

// Whether the GGUF part `m` takes the split Q6_K layout: a Q6_K part (k a multiple of 256, as every
// such part's is).
bool gguf_splits_q6k(const WeightMatrix& m);

// The split layout's shape: data_bytes = blocks * 208 (the slots), scale_bytes = blocks * 2 (the
// d array at scales_at()), bits 6, group 16. Contract: gguf_splits_q6k(m).
RepackShape gguf_q6k_split_shape(const WeightMatrix& m);

// The split slots (RepackedPart::data) and d array (::scales) of a part whose blocks are in host
// memory; kInvalidArgument as gguf_repack.
Result<RepackedPart> gguf_split_q6k(const WeightMatrix& m);

// The repacked bytes `r` of part `m` as the WeightMatrix the reference decoder reads: kInt,
// compressed-tensors layout (rows of packed u32 codes along k), symmetric, group 32, f16 scales.
// Views into r (which must outlive it). Contract: r = gguf_repack(m).
WeightMatrix gguf_repacked_matrix(const WeightMatrix& m, const RepackedPart& r);

}  // namespace lathe::cuda
