// One decoder block of a Llama-family model run in float32 over a calibration batch, in stages, so
// the calibrated quantizers (calibrated_quantizer.h) can read each linear's input and swap in a
// linear's quantized weights before the stages after it run:
//   h1 = rms_norm(x, attn_norm)                 -> input of q, k, v
//   a  = attention(h1 Wq + bq, h1 Wk + bk, h1 Wv + bv)   (QK norm, RoPE, causal per sample, GQA)
//                                               -> input of o
//   x += a Wo
//   h2 = rms_norm(x, ffn_norm)                  -> input of gate, up
//   m  = silu(h2 Wgate) * (h2 Wup)              -> input of down
//   x += m Wdown
// The heavy arithmetic (the linears, the attention over the batch's contiguous samples with no KV
// cache, the Hessians) goes through the job's CalibOps (calib_ops.h: the CPU's or the GPU's); the
// rest (norms, QK norm, RoPE, SwiGLU, residual adds) runs here on the host with the CPU reference
// backend's ops (cpu_ops.h). Sliding-window attention is applied as the CPU runner applies it.
// Every method that reaches the CalibOps returns its Status: a GPU out of memory or a CUDA error is
// an error of the job, never a crash. Shapes: every activation is [rows, features] row-major, rows
// = the batch's tokens, sample after sample.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model_config.h"
#include "engine/quant/quant_source.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

class CalibOps;  // calib_ops.h

// Where each calibration sample's tokens sit in the batch.
struct CalibLayout {
  std::vector<int64_t> start;      // S + 1 row offsets
  std::vector<int32_t> positions;  // per row: its position in its sample
  int64_t rows() const { return start.empty() ? 0 : start.back(); }
  int64_t num_samples() const { return start.empty() ? 0 : static_cast<int64_t>(start.size()) - 1; }
};
CalibLayout make_calib_layout(const std::vector<std::vector<TokenId>>& samples);

// A linear's weight [n, k] and bias [n] (empty: none), float32.
struct CalibLinear {
  std::vector<float> w;
  std::vector<float> bias;
  int64_t n = 0, k = 0;
};

// One block's tensors as float32 (quant_source.h's convention: PyTorch shapes, HF row order).
struct BlockTensors {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> q_norm, k_norm;  // empty without QK norm
  CalibLinear q, k, v, o, gate, up, down;
};
Result<BlockTensors> read_block_tensors(const QuantSource& source, int64_t layer);

// The embeddings of every token of `samples`, [rows, hidden] (any dtype the source stores).
Result<std::vector<float>> calib_embeddings(const QuantSource& source,
                                            const std::vector<std::vector<TokenId>>& samples);

class CalibBlock {
 public:
  // `ops` runs the heavy arithmetic; it must outlive the block (the job owns it).
  CalibBlock(const ModelConfig& config, const CalibLayout& layout, CalibOps& ops);

  int64_t rows() const { return layout_.rows(); }
  CalibOps& ops() const { return *ops_; }
  // out = rms_norm(x, weight) over [rows, hidden] (host).
  void norm(const float* x, const std::vector<float>& weight, float* out) const;
  // y [rows_x, n] = x [rows_x, k] W^T + bias.
  Status linear(const float* x, int64_t rows_x, const CalibLinear& l, float* y) const;
  // Attention output [rows, q_size] from the projections (q [rows, q_size], k / v [rows,
  // kv_size]); q and k are normalized (QK norm) and rotated in place.
  Status attention(const BlockTensors& t, std::vector<float>& q, std::vector<float>& k,
                   const std::vector<float>& v, float* out) const;
  // m [rows, intermediate] = silu(h2 Wgate) * (h2 Wup) (CalibOps::mlp_act).
  Status mlp_act(const float* h2, const CalibLinear& gate, const CalibLinear& up, float* m) const;
  // GPTQ's Hessian H = 2 X^T X / rows of x [rows, k], [k, k] row-major (hessian.h's quantity):
  // X_c^T X_c over chunks of 1024 rows as float32 products (linear()'s dot products), the chunks
  // summed in double. kInvalidArgument when x has a non-finite value.
  Result<std::vector<double>> hessian(const float* x, int64_t k) const;
  // The same over the first `n` rows of x only (the calibrated quantizer's fitted samples, which
  // come before the held-out ones); the divisor is n.
  Result<std::vector<double>> hessian(const float* x, int64_t n, int64_t k) const;
  // The whole block in place: x [rows, hidden] becomes the block's output (the stages above in
  // order, with t's weights). On an error x is partly updated.
  Status forward(const BlockTensors& t, float* x) const;
  // x += y over [rows, hidden].
  static void add(float* x, const std::vector<float>& y);

 private:
  ModelConfig c_;
  CalibLayout layout_;
  std::vector<float> inv_freq_;
  CalibOps* ops_;
};

}  // namespace lathe
