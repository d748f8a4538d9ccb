// Matrix-vector products for small batches (decode): y[m, n] = sum_k x[m, k] * w[n, k] for m < M,
// M in [1, kGemvMaxM]. Bandwidth-bound: every weight byte is read once with 16-byte streaming
// loads, float32 accumulation. cuBLASLt often reaches only part of the HBM bandwidth at M = 1 with
// bf16; the Linear dispatcher times both at load and picks the faster per shape (linear.h).
//   x: [M, K] of `dtype` (row stride K); w: [N, K] of `dtype`; y: [M, N] of `out_dtype` (`dtype` or
//   f32). K % 8 == 0 and x, w 16-byte aligned (checked).
// Launch: one block of 128 threads per two rows of w (at M <= 2 with K > 4096, stores only: 256
// threads per four rows, gemv.cu's kWide); threads stride over K in 8-element vectors, several
// loads in flight per thread, each iteration's weights requested one iteration ahead (the first
// before griddepcontrol.wait: weights do not depend on the previous kernel, so under programmatic
// dependent launch they overlap its tail); a block reduction per output.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/gemv_epilogue.h"
#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe::cuda {

constexpr int kGemvMaxM = 8;
// The SwiGLU and RoPE/KV epilogues (gemv_epilogue.h) exist for M <= this.
constexpr int kGemvEpilogueMaxM = 4;

// output: kStore (y: [M, N] of out_dtype), or for M <= kGemvEpilogueMaxM and out_dtype == dtype
// kSwiglu (y: [M, N / 2], the SwiGLU of the gate and up rows: one kernel instead of gemv + swiglu)
// or kRopeKv (y: qkv [M, N]; `rope` describes the heads, positions and cache: one kernel instead
// of gemv + qkv_rope_kv without QK norm). Results equal the unfused sequence's bit for bit.
Status gemv(DType dtype, DType out_dtype, const void* x, const void* w, void* y, int64_t m,
            int64_t n, int64_t k, cudaStream_t stream, GemvOutput output = GemvOutput::kStore,
            const GemvRopeKv& rope = {});

}  // namespace lathe::cuda
