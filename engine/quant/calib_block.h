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
// Every stage is an op of the job's CalibOps (calib_ops.h: the CPU's or the GPU's) on its tensors,
// so on a GPU the activations stay in device memory from the embeddings to the last block; the
// host holds the weights and the small results. Sliding-window attention is applied as the CPU
// runner applies it. Every method returns its Status: a GPU out of memory or a CUDA error is an
// error of the job, never a crash. Shapes: every activation is [rows, features] row-major, rows =
// the batch's tokens, sample after sample.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/model_config.h"
#include "engine/quant/calib_ops.h"
#include "engine/quant/quant_source.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

CalibLayout make_calib_layout(const std::vector<std::vector<TokenId>>& samples);

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
  // `ops` runs the arithmetic and holds the tensors; it must outlive the block (the job owns it).
  CalibBlock(const ModelConfig& config, const CalibLayout& layout, CalibOps& ops);

  int64_t rows() const { return layout_.rows(); }
  CalibOps& ops() const { return *ops_; }
  // A new [rows, cols] tensor on the block's ops (contents unspecified).
  Result<CalibTensorPtr> alloc(int64_t cols) const;
  // out = rms_norm(x, weight) over [rows, hidden]; out may be x.
  Status norm(const CalibTensor& x, const std::vector<float>& weight, CalibTensor& out) const;
  // y [x.rows(), n] = x [x.rows(), k] W^T + bias.
  Status linear(const CalibTensor& x, const CalibLinear& l, CalibTensor& y) const;
  // Attention output `out` [rows, q_size] from the projections (q [rows, q_size], k / v [rows,
  // kv_size]); q and k are normalized (QK norm) and rotated in place.
  Status attention(const BlockTensors& t, CalibTensor& q, CalibTensor& k, const CalibTensor& v,
                   CalibTensor& out) const;
  // m [rows, intermediate] = silu(h2 Wgate) * (h2 Wup) (CalibOps::mlp_act).
  Status mlp_act(const CalibTensor& h2, const CalibLinear& gate, const CalibLinear& up,
                 CalibTensor& m) const;
  // GPTQ's Hessian H = 2 X^T X / n of x's first n rows [n, k], [k, k] row-major (hessian.h's
  // quantity; the calibrated quantizer's fitted samples come before the held-out ones):
  // X_c^T X_c over chunks of 1024 rows as float32 products, the chunks summed in double.
  // kInvalidArgument when x has a non-finite value.
  Result<std::vector<double>> hessian(const CalibTensor& x, int64_t n) const;
  Result<std::vector<double>> hessian(const CalibTensor& x) const { return hessian(x, rows()); }
  // The whole block in place: x [rows, hidden] becomes the block's output (the stages above in
  // order, with t's weights; its intermediate tensors allocated for the call). On an error x is
  // partly updated.
  Status forward(const BlockTensors& t, CalibTensor& x) const;

 private:
  // cos_ / sin_ [rows, rotary_dim / 2] of the layout's positions (cpu::rope_table), made on
  // first use.
  Status rope_tables() const;

  ModelConfig c_;
  CalibLayout layout_;
  std::vector<float> inv_freq_;
  CalibOps* ops_;
  mutable CalibTensorPtr cos_, sin_;
};

}  // namespace lathe
