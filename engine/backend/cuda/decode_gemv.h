// The decode-step matrix-vector product with the element-wise neighbours of a Llama layer fused in,
// for M <= kDecodeGemvMaxM rows (batch-1..4 decode):
//   acc[m, n] = sum_k x[m, k] * w[n, k]      (float32 accumulation; w: [n, k] of `dtype`)
// where x is one of (DecodeGemvArgs::input)
//   kPlain:   x = x_in[m, :]                               (x_in: [m, k] of `dtype`)
//   kRmsNorm: x = rms_norm(residual[s, :]) * norm_weight   (add_rms_norm's formula without the add,
//             s = row_index ? row_index[m] : m; residual: f32 rows of k; the sum of squares in
//             double; x rounded to `dtype` as the unfused norm stores it)
// and the output is one of (DecodeGemvArgs::output; gemv_epilogue.h): kStore (y: [m, n] of
// out_dtype, `dtype` or f32), kResidualAdd (what add_rms_norm adds), kSwiglu, kRopeKv. With these a
// layer's decode step is
//   qkv + rope + KV write = gemv(norm(res)) ; attention ; res += gemv(attn) ;
//   act = swiglu(gemv(norm(res))) ; res += gemv(act)
// five kernels instead of nine, and every rounding happens where the unfused path rounds.
//
// Launch: blocks_per_sm (1 or 2) x multiprocessors blocks of 256 threads, fewer when the rows run
// out. x is built once per block in shared memory (M * k * 2 bytes); each warp then walks its tasks
// (two output rows: 2t and 2t + 1; i and inter + i for kSwiglu; a rotation pair for kRopeKv) in
// chunks of 1024 elements with 16-byte streaming loads, two chunks (16 loads per lane) in flight,
// and reduces each row with warp shuffles (no block barrier after the prologue). The first two
// chunks are loaded before griddepcontrol.wait: weights do not depend on the previous kernel, so
// under programmatic dependent launch these loads overlap its tail.
// Instantiated combinations: plain -> store | residual add, norm -> store | SwiGLU | RoPE/KV.
// Requires k % 8 == 0, 16-byte aligned w and x, and M * k * 2 bytes of shared memory
// (decode_gemv_fits()).
//
// 8-bit weights (DecodeGemvArgs::weights, W8A16; gemv_w8.h): the same kernel on rows of 8-bit codes
// in parts; each lane dots a vector's 16 weights, decoded to f16 pairs, with x staged in f16
// (scaled per token by a power of two that puts its largest |x| in [4, 8), undone after the sum):
// 8 HFMA2 per vector, each half's 8-term partial sum in f16, then scale * dot into the row's
// float32 sum (~5e-4 relative to a float32 dot; a row's single scale loaded once per task, group
// scales per vector).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/gemv_epilogue.h"
#include "engine/backend/cuda/gemv_w8.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"
#include "engine/model/model_config.h"

namespace lathe::cuda {

constexpr int kDecodeGemvMaxM = 4;

enum class GemvInput : int { kPlain, kRmsNorm };

struct DecodeGemvArgs {
  DType dtype = DType::kBF16;  // w and x (bf16 or f16)
  const void* w = nullptr;     // [n, k]
  int64_t n = 0, k = 0, m = 0;
  GemvInput input = GemvInput::kPlain;
  const void* x = nullptr;             // kPlain: [m, k]
  const float* residual = nullptr;     // kRmsNorm: f32 rows of k
  const float* norm_weight = nullptr;  // kRmsNorm: [k]
  const int32_t* row_index = nullptr;  // kRmsNorm: optional row gather
  float eps = 1e-5f;
  GemvOutput output = GemvOutput::kStore;
  void* y = nullptr;               // kStore: [m, n] of out_dtype; kSwiglu: [m, n / 2] of dtype
  DType out_dtype = DType::kBF16;  // kStore: dtype or f32
  float* residual_out = nullptr;   // kResidualAdd: [m, n] f32
  GemvRopeKv rope;                 // kRopeKv
  int blocks_per_sm = 1;
  GemvWeights weights = GemvWeights::kAct;  // kAct: w; else w8 (w unused)
  GemvW8 w8;
};

// Whether the kernel takes this shape (k % 8 == 0, m in range, x fits in shared memory).
bool decode_gemv_fits(int64_t m, int64_t k, int max_smem_optin);

Status decode_gemv(const DecodeGemvArgs& args, cudaStream_t stream);

}  // namespace lathe::cuda
