// Where the heavy arithmetic of a calibrated quantization (calibrated_quantizer.h) runs: the
// linears of the calibration forward (the MLP's gate and up with their SwiGLU in one call), the
// causal attention over the calibration samples, the Hessians of the linears' inputs, and GPTQ on
// each matrix. Everything else of the forward (norms, RoPE, SwiGLU, residual adds) stays in
// calib_block.cpp on the host: it is O(rows x features).
//
// Two implementations with one contract (the CPU one's):
//   - make_cpu_calib_ops(): calib_block's float32 loops, gptq.h's column loop, on
//     ThreadPool::global();
//   - the CUDA plugin's (cuda_backend::create_calib_ops(device), engine/runtime/cuda_plugin.h):
//     cuBLAS for the products, cuSOLVER for GPTQ's Cholesky factorizations, its column loop in a
//     kernel. One matrix and one activation at a time are on the GPU (host in, host out), so a
//     model far larger than the GPU's memory quantizes block by block ("layer streaming").
// The two agree up to float32 summation order; test_cuda_calib_ops checks each op against the CPU
// one (GPTQ: the same codes but for values on a rounding boundary, the same loss to 1e-3).
//
// All pointers are host memory, row-major. An implementation may keep device buffers between
// calls but never reads a host buffer after the call returns. Not thread-safe: one quantization
// job owns one CalibOps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/calib_block.h"
#include "engine/quant/gptq.h"

namespace lathe {

// The attention of one calibration batch: q [rows, num_heads, head_dim], k and v [rows,
// num_kv_heads, head_dim] (QK norm and RoPE already applied), causal within each sample of
// `layout` (rows of sample s: layout.start[s] .. start[s + 1]); query head h reads kv head
// h / (num_heads / num_kv_heads); scores scaled by 1 / sqrt(head_dim); sliding_window > 0: row i
// sees rows i - sliding_window + 1 .. i of its sample. out [rows, num_heads, head_dim].
struct CalibAttentionShape {
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t sliding_window = 0;  // 0: none
};

class CalibOps {
 public:
  virtual ~CalibOps() = default;

  // Where the work runs, for logs and the progress line: "cpu (16 threads)", "cuda:0 NVIDIA H200".
  virtual std::string name() const = 0;

  // y [rows, l.n] = x [rows, l.k] l.w^T + l.bias (bias empty: none); float32 products and sums.
  // kResourceExhausted (CUDA) when the operands do not fit the device even in row chunks.
  virtual Status linear(const float* x, int64_t rows, const CalibLinear& l, float* y) = 0;

  // The MLP's activation, the input of its down projection: m [rows, gate.n] = SiLU(x gate.w^T) *
  // (x up.w^T) for x [rows, gate.k] (each with its bias, if any; SiLU(g) = g / (1 + exp(-g)),
  // float32). One call per block, so an implementation can keep both weights resident for all rows.
  virtual Status mlp_act(const float* x, int64_t rows, const CalibLinear& gate,
                         const CalibLinear& up, float* m) = 0;

  // The causal attention above.
  virtual Status attention(const CalibLayout& layout, const CalibAttentionShape& shape,
                           const float* q, const float* k, const float* v, float* out) = 0;

  // GPTQ's H = 2 X^T X / n of x's first n rows [n, k] as [k, k] row-major doubles: float32
  // products over chunks of 1024 rows, the chunks summed in double. kInvalidArgument naming the
  // first non-finite row and feature ("calibration activations are not finite ...").
  virtual Result<std::vector<double>> hessian(const float* x, int64_t n, int64_t k) = 0;

  // gptq_quantize (gptq.h): the same arguments, checks, fallbacks and result.
  virtual Result<GptqResult> gptq(const float* w, int64_t rows, int64_t cols,
                                  const std::vector<double>& h, const GptqConfig& config) = 0;

  // The most device memory this object has held at once, bytes (0 on the CPU).
  virtual int64_t peak_device_bytes() const { return 0; }
};

// The CPU implementation (never fails to create).
std::unique_ptr<CalibOps> make_cpu_calib_ops();

}  // namespace lathe
