// The unit layout of GGUF Q4_1, Q5_0, Q5_1, Q2_K and Q3_K parts on the GPU (QuantPart::gguf_units):
// each block's bytes moved into three arrays so that the k-quant decode kernel
// (quant_gemv_kquants.cuh) reads a 64-weight unit of a row in aligned 16-, 8- and 4-byte loads.
// The blocks' bytes, no more (20, 22, 24, 84 and 110 bytes per block as in the file):
//
//   type  block (file order)                    data (per block)        scales        aux
//   Q4_1  f16 d, m; u8 qs[16]                   qs (16)                 d, m (4)      -
//   Q5_0  f16 d; u8 qh[4]; u8 qs[16]            qs (16)                 d (2)         qh' (4)
//   Q5_1  f16 d, m; u8 qh[4]; u8 qs[16]         qs (16)                 d, m (4)      qh' (4)
//   Q2_K  u8 scales[16]; u8 qs[64]; f16 d, dmin scales, qs' (80)         d, dmin (4)   -
//   Q3_K  u8 hmask[32]; u8 qs[64]; u8 sc[12]; d  hmask', qs' (96)       d (2)         sc (12)
//
// Arrays are [n, k / block] of those sizes, row after row (data, then scales, then aux, each
// 256-byte aligned in the part). Primes mark reordered bits (same bits, other places):
//  - qh' (Q5_0 / Q5_1): the high bit of weight 4 i + e + 16 s (i, e < 4; s < 2) at bit 2 i + s of
//    byte e. The file has it at bit 4 i + e + 16 s. Then for word i of qs (its low nibbles are
//    weights 4 i + e, its high ones 16 + 4 i + e, byte e) one shift and mask put the high bits at
//    bit 4 of each byte.
//  - qs' (Q2_K / Q3_K): 16 bytes per 64-weight unit c (weights 64 c .. 64 c + 63 of the block):
//    byte 4 i + e at bits 2 s holds the 2-bit code of weight 64 c + 16 s + 4 i + e. (The file holds
//    weight 128 h + 32 j + l at bits 2 j of qs[32 h + l].) Shift 2 s and mask 0x03030303 of word i
//    are the codes of 4 consecutive weights.
//  - hmask' (Q3_K): 8 bytes per unit c: the high bit of weight 64 c + 16 s + 4 i + e at bit
//    4 (s % 2) + i of byte e of word s / 2 (the file: bit w / 32 of hmask[w % 32]).
// Q2_K's 16 scale bytes (byte j: sub-block half j's scale | min << 4) and Q3_K's 12 bytes of 6-bit
// scales keep their order: unit c needs Q2_K bytes 4 c .. 4 c + 3, and Q3_K's scales 4 c + s from
// the words at bytes 4 (c % 2) and 8 (quant_gemv_kquants.cuh).
// CudaSwitches::gguf_repack (LATHE_CUDA_GGUF_REPACK=0) keeps the blocks as they are.
#pragma once

#include <cstdint>

#include "engine/backend/cuda/weight_repack.h"
#include "engine/core/status.h"
#include "engine/model/weight_matrix.h"

namespace lathe::cuda {

// Whether the GGUF part `m` takes the unit layout: a Q4_1, Q5_0 or Q5_1 part whose k is a multiple
// of 64 (the kernel's rows are whole 64-weight units: two blocks), or a Q2_K or Q3_K part (k a
// multiple of 256, as every such part's is).
bool gguf_takes_units(const WeightMatrix& m);

// Bytes per block of the three arrays of `type` (a type gguf_takes_units takes), and where in the
// file's block each array's bytes come from (the pieces in the table above: data is the bytes
// [data_from, data_from + data) of a block, and so on).
struct GgufUnitPieces {
  int32_t data = 0, scales = 0, aux = 0;
  int32_t data_from = 0, scales_from = 0, aux_from = 0;
};
GgufUnitPieces gguf_unit_pieces(DType type);

// The layout's shape for part m: data_bytes, scale_bytes (scales_at()) and zero_bytes (the aux
// array at zeros_at(), has_zeros when it has one). Contract: gguf_takes_units(m).
RepackShape gguf_units_shape(const WeightMatrix& m);

// The arrays of a part whose blocks are in host memory (RepackedPart::data, ::scales, ::zeros), in
// parallel on ThreadPool::global(); kInvalidArgument naming the part when it has no host blocks (a
// dummy part: dummy_quant.h fills the layout on the device) or is not a part the layout takes.
Result<RepackedPart> gguf_to_units(const WeightMatrix& m);

// One block into its three pieces (each of gguf_unit_pieces' size), and back.
void gguf_block_to_units(DType type, const uint8_t* block, uint8_t* data, uint8_t* scales,
                         uint8_t* aux);
void gguf_block_from_units(DType type, const uint8_t* data, const uint8_t* scales,
                           const uint8_t* aux, uint8_t* block);

}  // namespace lathe::cuda
