// The CUDA backend's A/B switches and escape hatches as plain options (docs/gpu-notes.md says which
// experiment each one served). Plain C++ (no CUDA headers): CudaRunnerOptions carries them, so that
// tests and tools set them directly; cuda_switches_from_environment() is the one place that reads
// the LATHE_CUDA_* environment variables, for the command line and the GPU run scripts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lathe {

enum class FusedDecodeMode : uint8_t {
  kAuto,   // time the fused batch-1..4 path at load, use it where it is faster and checked
  kOff,    // LATHE_CUDA_FUSED=0: never
  kForce,  // LATHE_CUDA_FUSED=1: wherever it fits, untimed (still checked; a failed check is an
           // error)
};

struct CudaSwitches {
  bool own_prefill_attention = false;  // LATHE_CUDA_ATTENTION=own: no FlashInfer for prefill
  bool decode_attention = true;        // LATHE_CUDA_DECODE_ATTENTION=split: the split-KV kernel
  int32_t decode_split_tokens = 0;     // LATHE_CUDA_DECODE_SPLIT_TOKENS (16..; 0: the policy's)
  int32_t decode_split_blocks_per_sm =
      0;                            // LATHE_CUDA_DECODE_SPLIT_BLOCKS_PER_SM (0: the policy's)
  int32_t decode_cluster = -1;      // LATHE_CUDA_DECODE_CLUSTER: 0 off, 2..16 cap; -1 the device's
  int32_t lookahead_max_seqs = -1;  // LATHE_CUDA_LOOKAHEAD (0..256); -1: the runner option's
  FusedDecodeMode fused = FusedDecodeMode::kAuto;  // LATHE_CUDA_FUSED
  bool fused_rope = true;      // LATHE_CUDA_FUSED_ROPE=0: RoPE/KV never in the fused QKV epilogue
  bool gemv_epilogues = true;  // LATHE_CUDA_GEMV_EPILOGUES=0: separate SwiGLU and RoPE/KV kernels
  bool pdl = true;             // LATHE_CUDA_PDL=0: no programmatic dependent launch
  // LATHE_CUDA_NATIVE_FORMATS=0: quantized (GGUF) projections dequantized to the activation dtype
  // at upload, as before native kernels (more memory; the dense kernels' speed).
  bool native_formats = true;
  // LATHE_CUDA_QUANT_ROWS=0: decode products of integer and FP8 parts by the one-row kernel instead
  // of the multi-row one (quant_gemv_rows.cuh), for A/B runs.
  bool quant_rows = true;
  // LATHE_CUDA_INT4_TILES=0: 4-bit codes uploaded in the row layout (the multi-row kernel) instead
  // of the tensor-core tile layout (quant_gemv_tiles.cuh), for A/B runs.
  bool int4_tiles = true;
  // LATHE_CUDA_GGUF_REPACK=0: GGUF Q8_0 and Q4_0 parts kept in their blocks (the one-warp-per-row
  // GGUF kernel) instead of converted at upload into the integer row layout (gguf_repack.h: the
  // multi-row kernel, same bytes per weight, bit-identical weights), for A/B runs.
  bool gguf_repack = true;
  // LATHE_CUDA_FP8_GEMM=0: FP8 parts above batch 8 dequantized for a 16-bit GEMM (W8A16) instead of
  // W8A8 on FP8 tensor cores (per-token activation scales; LinearDispatcher), for A/B runs.
  bool fp8_gemm = true;
  // LATHE_CUDA_FP8_GEMM_MIN_M (1 to 4096): the smallest batch that takes W8A8 (below it, the
  // bandwidth-bound W8A16 decode kernels). Run 45 (against the rows kernel): B2 431 vs 410, B4 882
  // vs 528, B8 1791 vs 612; B1 219 vs 299. Run 81 (against the fused 8-bit decode kernel, 8B
  // tok/s): B2 430 vs 547, B4 873 vs 741: W8A8 from batch 3. Run 94 (the decode kernel's f16-pair
  // products): 8B B3 647-655 vs 665-670, B4 873-882 vs 878-881; 70B B3 125 vs 92, B4 169 vs 122.
  // Run 104 (its row pointers kept per task): 8B B3 649 vs 672, B4 876 vs 890; 70B 123 vs 100, 167
  // vs 133.
  int32_t fp8_gemm_min_m = 3;
  // LATHE_CUDA_FP8_DECODE_MAX_K (0 to 1 << 30): FP8 projections of k <= this keep the W8A16 decode
  // kernels up to batch 4 even from fp8_gemm_min_m (0: none). Run 106, one pass: 4096 gave 8B B3
  // 663 vs 647, B4 883 vs 876, 70B unchanged (no such k); 8192 70B B3 108 vs 123: off by default
  // until alternated runs and other shapes say more.
  int32_t fp8_decode_max_k = 0;
  int32_t int4_tile_warps = 8;    // LATHE_CUDA_INT4_TILE_WARPS (4 or 8): the tile kernel's k split
  int32_t int4_tiles_max_m = 8;   // LATHE_CUDA_INT4_TILES_MAX_M (8 to 4096): see QuantPart
  int32_t int4_gemm_max_m = 128;  // LATHE_CUDA_INT4_GEMM_MAX_M (8 to 65536): see QuantPart
  // LATHE_CUDA_INT4_TILE_PAIRS=0: each 4-bit part its own launch and the SwiGLU / RoPE-KV epilogues
  // their own kernels, instead of one launch per projection (quant_tile_plan.h), for A/B runs.
  bool int4_tile_pairs = true;
  // LATHE_CUDA_INT4_NORM_MAX_M (0 to 8): the largest batch at which 4-bit tiled QKV and gate|up
  // launches build their RMSNorm input themselves (each block normalizes every row, so its cost
  // grows with the batch). Batch 1 only by default: run 45 measured +1.2% there (298-299 vs 295,
  // alternated twice), run 41 losses from 2 (574 vs 617 tok/s at batch 2; 1347 vs 2199 at 8).
  int32_t int4_norm_max_m = 1;
  // The streaming W4A16 decode kernel (quant_gemv_stream.cu: a persistent grid, each warp's codes
  // copied ahead by the bulk-copy engine into a ring of stages in shared memory), Hopper only:
  // LATHE_CUDA_INT4_STREAM_MAX_M (0 to 8): the largest batch it takes (0: never; the tile kernel
  // takes the rest up to 8); LATHE_CUDA_INT4_STREAM_STAGES (1 to 8): stages of each warp's ring
  // (4 chunks of both tiles, 4 KB, each), fewer where the rings of the blocks per multiprocessor
  // would not fit (70B, run 83: 54.3 tok/s with 2 stages against 43.8 with 4 and one block);
  // LATHE_CUDA_INT4_STREAM_BLOCKS (1 to 4): blocks per
  // multiprocessor. Run 77 (8B, tok/s at batch 1 / 2 / 4 / 8; the tile kernel 298 / 568 / 1069 /
  // 2040): these defaults 358 / 681 / (tile kernel) / (tile kernel); up to batch 8: 358 / 682 /
  // 1127 / 2030; 1 block per multiprocessor 274 / 567. 70B batch 1: 44.0 (its 4-stage rings of
  // 128 KB leave one block per multiprocessor; run 76's 1 KB copies gave 47.0).
  int32_t int4_stream_max_m = 2;
  int32_t int4_stream_stages = 4;
  int32_t int4_stream_blocks = 2;
  // The stages are fitted (fewer) where a product has tasks for the blocks a multiprocessor would
  // get but their rings would not fit together (quant_gemv_stream.cu stream_args()).
  // LATHE_CUDA_INT4_STREAM_FIT=0: the configured stages even where fewer blocks then fit (A/B).
  bool int4_stream_fit = true;
  // FP8 and 8-bit integer projections at decode batches on the fused decode kernel (decode_gemv.h,
  // all of a projection's parts in one launch with the RMSNorm input and the SwiGLU / RoPE-KV /
  // residual-add epilogues): LATHE_CUDA_W8_DECODE_MAX_M (0 to 4): the largest batch it takes (0:
  // never; then the rows kernel and W8A8 as before); LATHE_CUDA_W8_DECODE_BLOCKS (1 or 2): blocks
  // per multiprocessor.
  int32_t w8_decode_max_m = 4;
  int32_t w8_decode_blocks = 2;
  // LATHE_CUDA_KQUANT_NORM=1: k-quant QKV and gate|up launches at batch 1 normalize the residual
  // row themselves instead of reading the RMSNorm kernel's output. Off by default: run 59 measured
  // it slower (Q4_K_M 333 vs 338 tok/s, Q5_K_M 256 vs 286: the prologue adds to a register-bound
  // kernel's work before its first product).
  bool kquant_norm = false;
  // Constrained decoding (issue 18), three A/B switches whose defaults took the batch-64 overhead
  // under 5% (docs/PERFORMANCE.md); all three 0 is the path before them:
  // LATHE_CUDA_MASK_LOOKUP_LATE=0: a step's masks are looked up (a grammar cache miss walks the
  // vocabulary) before its forward pass is launched instead of while it runs.
  bool mask_lookup_late = true;
  // LATHE_CUDA_MASK_CACHE=0: every step uploads each constrained row's mask words (19 KB a row at
  // 152k tokens) instead of naming the slot of a device-resident copy (mask_slot_table.h).
  bool mask_cache = true;
  // LATHE_CUDA_SAMPLER_MASKS=0: process_logits() writes -inf over each row's masked tokens instead
  // of sample_tokens() reading the mask with the logits.
  bool sampler_masks = true;

  // "fused=0 lookahead=0" for the switches that differ from the defaults; "defaults" when none.
  std::string describe() const;
};

// The switches set in the environment (over the defaults). Values out of range are ignored with a
// line in `warnings` each ("LATHE_CUDA_LOOKAHEAD=x ignored (0 to 256 sequences)").
CudaSwitches cuda_switches_from_environment(std::vector<std::string>* warnings);

}  // namespace lathe
