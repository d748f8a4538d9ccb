// Linear layers on weights kept in their quantized format on the GPU (no upload-time
// dequantization): GGUF block types, integer codes with group scales (GPTQ / AWQ /
// compressed-tensors, repacked at upload into Lathe's row layout below), FP8 e4m3 with per-tensor /
// per-channel / 128x128-block scales, and plain rows of the activation dtype (a dense part inside a
// quantized projection). Correct for any batch size; the speed work is issue 14:
//   quant_gemv()        y[m, row_offset + r] = sum_k x[m, k] * W[r, k] for m < M <= kQuantGemvMaxM:
//                       one warp per output row, each lane dequantizes 32 weights at a time in
//                       registers and dots them with every row of x (float32 accumulation).
//   quant_dequantize()  rows [r0, r1) of W in the activation dtype, for a cuBLASLt GEMM at larger M
//                       (linear.cpp runs it over a workspace, in row slabs when W is larger).
// Numerics: each weight is dequantized in float32 exactly as the CPU reference computes it
// (engine/model/dequant.cpp for GGUF; w = scale * (q - zero) for integers; e4m3 * scale for FP8),
// products and sums in float32; the dequantize path rounds weights to the activation dtype first.
//
// Lathe's integer row layout (kInt on the device): codes [n, k * bits / 32] u32, element j of a row
// in word j / (32 / bits) at bit (j % (32 / bits)) * bits, unsigned; scales [n, k / group_size] f16
// or f32 (the checkpoint's f16 kept, others widened to f32, so that no scale is rounded);
// zero points [n, k / group_size] u8 (null: 2^(bits - 1), symmetric); g_idx [k] i32 (act-order:
// the group of input j; null: j / group_size). group_size is a multiple of 32 (per channel: k).
// 4-bit codes may instead be in the tensor-core tile layout (int4_tiles.h, QuantPart::int4_tiles).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/cuda/gemv_epilogue.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/model/weight_matrix.h"

namespace lathe::cuda {

constexpr int kQuantGemvMaxM = 8;
// 4-bit parts in the tile layout take quant_gemv up to this batch (the tile kernel reuses each
// decoded weight for every group of 8 rows); LinearDispatcher runs larger batches in slabs of it.
constexpr int kTileMaxM = 64;

// The RMSNorm input of a fused projection (quant_gemv_tile_pairs): x = rms_norm(residual[r, :]) *
// weight with add_rms_norm's formula (sum of squares in double, one rounding to the activation
// type); residual: f32 rows of k, 16-byte aligned; weight: [k] f32.
struct TileNormInput {
  const float* residual = nullptr;
  const float* weight = nullptr;
  float eps = 1e-5f;
};

// One stored part of a projection: its rows [row_offset, row_offset + n) of the projection's
// output, k inputs, in its format.
struct QuantPart {
  WeightFormat format = WeightFormat::kDense;  // kDense: rows of the activation dtype
  DType gguf_type = DType::kQ8_0;              // kGguf: the block type
  const void* data = nullptr;                  // the format's values (see above)
  int64_t n = 0, k = 0;
  int64_t row_offset = 0;
  int32_t bits = 0;              // kInt: 4 or 8
  int32_t group_size = 0;        // kInt: inputs per scale group
  const void* scales = nullptr;  // kInt: [n, k / group_size] of scale_dtype; kFp8: f32 (fp8_scale)
  DType scale_dtype = DType::kF16;                         // kInt: f16 or f32
  const uint8_t* zeros = nullptr;                          // kInt: u8 [n, k / group_size], or null
  const int32_t* g_idx = nullptr;                          // kInt: [k], or null
  ScaleGranularity fp8_scale = ScaleGranularity::kTensor;  // kFp8: kTensor [1], kChannel [n],
                                                           // kBlock [ceil(n/128), ceil(k/128)]
  bool one_row_gemv = false;  // the one-row decode kernel even where the multi-row one applies
  // kGguf Q6_K: each 210-byte block split into a 208-byte slot (ql, qh, scales; 16-byte aligned)
  // in `data` and its f16 d in `scales` ([n, k / 256]); gguf_repack.h. Set by the upload.
  bool gguf_q6k_split = false;
  // kGguf Q5_K: each block's 32 high-bit bytes reordered so that the bits of each 64-weight unit
  // are 8 contiguous bytes (gguf_repack.h); same bytes. Set by the upload.
  bool gguf_q5k_units = false;
  // kGguf Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K: the blocks moved into the unit layout of gguf_units.h:
  // `data` the codes, `scales` the d (and m / dmin) of each block, `gguf_aux` the high bits (Q5_0,
  // Q5_1) or the 6-bit scales (Q3_K); same bytes. Set by the upload.
  bool gguf_units = false;
  const void* gguf_aux = nullptr;
  // GGUF k-quant kernel: whether it builds its RMSNorm input itself (CudaSwitches::kquant_norm).
  bool kquant_norm = false;
  // kInt 4-bit: codes in the tensor-core tile layout of int4_tiles.h instead of the row layout
  // (set by the upload where int4_tiles_fit); the decode products then run on tensor cores.
  bool int4_tiles = false;
  int32_t int4_tile_warps = 8;  // warps per block of the tile kernel (its k split): 8, or 4 (A/B)
  // The largest batch the tile kernel takes (in slabs of kTileMaxM rows) before the
  // dequantize-then-GEMM path; LATHE_CUDA_INT4_TILES_MAX_M.
  int32_t int4_tiles_max_m = 8;
  // The largest batch the W4A16 GEMM kernel (quant_gemm_int4) takes above int4_tiles_max_m before
  // the dequantize-then-GEMM path; LATHE_CUDA_INT4_GEMM_MAX_M.
  int32_t int4_gemm_max_m = 128;
  // Parts of a projection in one launch, two tiles per block, with the epilogues
  // (quant_gemv_tile_pairs); LATHE_CUDA_INT4_TILE_PAIRS=0 turns it off for A/B runs.
  bool int4_tile_pairs = true;
  // The largest batch at which the tile-pairs kernel takes the RMSNorm input
  // (LATHE_CUDA_INT4_NORM_MAX_M; each block normalizes every activation row; 0: never).
  int32_t int4_norm_max_m = 1;
  // The streaming kernel (quant_gemv_stream.cuh) for tiled parts up to this batch (0: never), its
  // ring's stages per warp and its blocks per multiprocessor (CudaSwitches::int4_stream_*).
  int32_t int4_stream_max_m = 2;
  int32_t int4_stream_stages = 4;
  int32_t int4_stream_blocks = 2;
  bool int4_stream_fit = true;  // fewer stages where the blocks' rings would not fit
  // FP8 and 8-bit integer parts: the largest batch at which a projection's parts run on the fused
  // decode kernel (quant_gemv_w8_parts; 0: never), and its blocks per multiprocessor (1 or 2);
  // CudaSwitches::w8_decode_*.
  int32_t w8_decode_max_m = 4;
  int32_t w8_decode_blocks = 2;
  // Bytes of this part on the device (data and its scales, zero points, g_idx).
  int64_t bytes() const;
};

// Whether the kernels take this part (format, block type, bits, group size, k % 32); `why` when
// not.
bool quant_part_supported(const QuantPart& p, std::string* why);

// Whether quant_gemv takes part p at batch m: m <= kQuantGemvMaxM, or m <= kTileMaxM for parts the
// tile kernel takes.
bool quant_gemv_takes(const QuantPart& p, int64_t m);

// x: [m, k] of `act` (bf16 or f16), 16-byte aligned rows; y: row stride ldy elements of out_dtype
// (act or f32), the part's columns from row_offset. m: see quant_gemv_takes.
Status quant_gemv(const QuantPart& p, DType act, const void* x, DType out_dtype, void* y,
                  int64_t ldy, int64_t m, cudaStream_t stream);

// The parts of one projection (n rows) in one launch of the tile kernel, two 16-row tiles per block
// (quant_tile_plan.h), at m <= kQuantGemvMaxM, with `output` (kStore, kSwiglu, kRopeKv; rope: its
// parameters) applied to the product as gemv_epilogue.h states. Checks with plan_tile_pairs;
// refused (unsupported) where the plan does not fit.
// norm: x is the RMSNorm of norm->residual (built in the kernel; `x` unused), else x: [m, k].
Status quant_gemv_tile_pairs(const std::vector<QuantPart>& parts, DType act, const void* x,
                             DType out_dtype, void* y, int64_t n, int64_t m, GemvOutput output,
                             const GemvRopeKv& rope, cudaStream_t stream,
                             const TileNormInput* norm = nullptr);
// The projection's parts (Q4_K, Q5_K or split Q6_K GGUF parts, Q4_0 as 4-bit rows of group 32, or
// Q4_1 / Q5_0 / Q5_1 / Q2_K / Q3_K in the unit layout; rows 0..n in order, at most 3 of a
// kind in a row) on the k-quant decode kernel (quant_gemv_kquants.cuh), with `output`: kStore
// (y: [m, n] of out_dtype, m <= kQuantGemvMaxM), or at m = 1 kResidualAdd (y: the f32 residual
// [1, n], the rounded product added), kSwiglu or kRopeKv (rope: its parameters) as gemv_epilogue.h
// states. One launch per run of parts of one kind (kRopeKv: q/k rows and v rows apart when their
// kinds differ). norm (m = 1, not with kResidualAdd): x is the RMSNorm of norm->residual, computed
// by each block as add_rms_norm computes it (x itself unused).
Status quant_gemv_kquant_parts(const std::vector<QuantPart>& parts, DType act, const void* x,
                               DType out_dtype, void* y, int64_t n, int64_t m, GemvOutput output,
                               const GemvRopeKv& rope, cudaStream_t stream,
                               const TileNormInput* norm = nullptr);
// Whether quant_gemv_kquant_parts takes these parts at batch m with this output (norm: with the
// RMSNorm input).
bool quant_kquant_parts_take(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                             GemvOutput output, const GemvRopeKv* rope = nullptr,
                             bool norm = false);

// A projection's FP8 or 8-bit integer parts (one format, rows 0..n in order, at most
// kGemvMaxParts, no act-order) on decode_gemv's kernel (decode_gemv.h, W8A16) at m <= the parts'
// w8_decode_max_m (at most kDecodeGemvMaxM), with `output` as gemv_epilogue.h states: kStore (y:
// [m, n] of out_dtype), kResidualAdd (y: the f32 residual [m, n], the rounded product added; x
// plain), kSwiglu or kRopeKv (rope: its parameters). Scales: FP8 per tensor, per channel or in 128
// x 128 blocks; integers per channel or in groups of a power of two, with or without zero points,
// f16 or f32 (the same layout in every part). norm (not with kResidualAdd): x is the RMSNorm of
// norm->residual, built by each block (x itself unused). Float32 sums; each vector of 16 weights
// dotted with x, then scaled into its row's sum.
Status quant_gemv_w8_parts(const std::vector<QuantPart>& parts, DType act, const void* x,
                           DType out_dtype, void* y, int64_t n, int64_t m, GemvOutput output,
                           const GemvRopeKv& rope, cudaStream_t stream,
                           const TileNormInput* norm = nullptr);
// Whether quant_gemv_w8_parts takes these parts at batch m with this output (norm: with the
// RMSNorm input); `why` when not.
bool quant_w8_parts_take(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                         GemvOutput output, const GemvRopeKv* rope = nullptr, bool norm = false,
                         std::string* why = nullptr);

// Whether quant_gemv_tile_pairs takes these parts at batch m with this output (norm: with the
// RMSNorm input).
bool quant_tile_pairs_take(const std::vector<QuantPart>& parts, int64_t n, int64_t m,
                           GemvOutput output, const GemvRopeKv* rope, bool norm = false);
// The residual-add epilogue on a 4-bit tiled part at m <= kQuantGemvMaxM: residual[r, row_offset +
// i] += float(round(product)) (what add_rms_norm adds from a stored projection); residual: f32
// rows of ldr.
Status quant_gemv_residual_add(const QuantPart& p, DType act, const void* x, float* residual,
                               int64_t ldr, int64_t m, cudaStream_t stream);
bool quant_residual_add_takes(const QuantPart& p, int64_t m);

// The W4A16 GEMM on a 4-bit tiled part (quant_gemm_tiles.cuh) at any batch up to the part's
// int4_gemm_max_m: y[r, row_offset + i] = sum_k x[r, k] W[i, k], x: [m, k] of `act` (16-byte
// aligned rows), y: row stride ldy of out_dtype (act or f32). workspace: device memory for the
// partial sums of splits of k (splits * m * n f32; fewer splits when it is smaller, none when
// null).
Status quant_gemm_int4(const QuantPart& p, DType act, const void* x, DType out_dtype, void* y,
                       int64_t ldy, int64_t m, void* workspace, int64_t workspace_bytes,
                       cudaStream_t stream);
bool quant_gemm_int4_takes(const QuantPart& p, int64_t m);

// How quant_gemm_int4 cuts a product: blocks of 128 output rows × rows_per_block activation rows,
// and `splits` runs of chunks_per_split 64-input chunks (each at least kGemmMinChunks long where
// there are enough) so that the grid covers two waves of `sm_count` multiprocessors.
constexpr int kGemmMinChunks = 8;
struct GemmInt4Plan {
  int rows_per_block = 64;
  int mblocks = 1, nblocks = 1, splits = 1, chunks_per_split = 1;
};
GemmInt4Plan plan_gemm_int4(const QuantPart& p, int64_t m, int64_t workspace_bytes, int sm_count);

// out: [r1 - r0, k] of `act`, the part's rows r0..r1 (relative to the part) dequantized.
Status quant_dequantize(const QuantPart& p, DType act, void* out, int64_t r0, int64_t r1,
                        cudaStream_t stream);

}  // namespace lathe::cuda
