// The calibrated schemes of `lathe quantize` (gptq, awq) over a whole model, one decoder block at a
// time: the calibration set's embeddings go through the blocks in order, and each block is
// quantized from the inputs its linears see (calib_block.h runs the block in stages). The heavy
// arithmetic (linears, attention, Hessians, GPTQ) runs on the job's CalibOps (calib_ops.h: the CPU
// or a GPU); its errors (a GPU out of memory, a CUDA error) are the errors of quantize_block().
//
// GPTQ (true-sequential, as AutoGPTQ's true_sequential=True): within a block, q/k/v are quantized
// from the Hessian of their input, then o from the attention output computed with the quantized
// q/k/v, then gate/up from the MLP input after the quantized o, then down from the activation of
// the quantized gate/up; the block's output with all seven quantized linears is the next block's
// input, so every block is calibrated on what the quantized blocks before it produce. Each matrix
// goes through CalibOps::gptq (gptq.h's gptq_quantize: act-order, damping, RTN fallback with a
// note).
//
// AWQ (AutoAWQ's order): the block's float inputs are captured, the scales of the four groups are
// searched on them (awq_search.h: q/k/v after attn_norm, o after v when v's outputs are o's inputs,
// gate/up after ffn_norm, down after up), folded into attn_norm / v / ffn_norm / up and the scaled
// linears' columns, the clip ranges of every linear but q and k searched on the scaled inputs, and
// the clipped weights quantized to nearest. The scale search's loss is the squared error of the
// group's own outputs (AutoAWQ runs the whole attention or MLP module) over `awq_loss_rows` rows
// spread over the batch; the clip search uses `awq_clip_rows` rows (AutoAWQ: 512 tokens). The next
// block's input is the float block's output, as in AutoAWQ.
//
// Held-out samples (holdout_check.h): `holdout_samples` of the set are kept out of every fitted
// statistic; they are placed after the fitted samples in the batch (rows fit_rows() .. rows), go
// through the blocks with the others, and after each block its output on them is compared for the
// float, the method's and round-to-nearest's weights (CalibratedBlock::holdout).
//
// Resuming (quant_checkpoint.h): the only state carried from one block to the next is the hidden
// states entering the next block (hidden_state()); restore() puts a saved one back, so a run can
// continue from a finished block with the same results as one that never stopped.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/calib_block.h"
#include "engine/quant/calibration.h"
#include "engine/quant/holdout_check.h"
#include "engine/quant/int_quant.h"
#include "engine/quant/quant_scheme.h"
#include "engine/quant/quant_source.h"
#include "engine/quant/quant_timing.h"

namespace lathe {

struct CalibratedQuantizerOptions {
  int64_t awq_loss_rows = 512;    // rows of the scale search's loss
  int64_t awq_clip_rows = 128;    // rows of the clip search
  int64_t holdout_samples = 0;    // calibration samples kept out of the fit (holdout_check.h)
  QuantTiming* timing = nullptr;  // when set: block_read_s and holdout_s are added to it
};

// What one block became: its linears' codes, and the float tensors that changed (AWQ: norm
// weights, v's bias), by canonical name.
struct CalibratedBlock {
  std::map<std::string, IntQuantizedMatrix> linears;
  std::map<std::string, std::vector<float>> replaced;
  std::vector<std::string> notes;  // e.g. a GPTQ fallback to round-to-nearest
  double output_error = 0.0;       // mean squared error of the quantized linears' outputs
  bool has_holdout = false;        // holdout is set (there are held-out samples)
  HoldoutBlock holdout;
};

class CalibratedQuantizer {
 public:
  // Embeds the calibration samples. `source` and `ops` (where the arithmetic runs) must outlive
  // the quantizer. kInvalidArgument for a scheme that is not gptq / awq or a calibration token
  // outside the vocabulary.
  static Result<CalibratedQuantizer> create(const QuantSource& source, const QuantScheme& scheme,
                                            const CalibrationSet& calibration, CalibOps& ops,
                                            const CalibratedQuantizerOptions& options = {});

  // Quantizes block `layer`; blocks must come in order 0, 1, ... `cancel` is polled between
  // linears (kCancelled).
  Result<CalibratedBlock> quantize_block(int64_t layer, const std::atomic<bool>* cancel);

  int64_t next_layer() const { return next_layer_; }
  // The hidden states entering block next_layer(), [rows, hidden] (held-out rows last), copied
  // to the host.
  Result<std::vector<float>> hidden_state() const;
  // Continues from a saved state: `x` is hidden_state() as it was when next_layer() was `layer`.
  // kInvalidArgument when its size does not fit this calibration set and model.
  Status restore(int64_t layer, std::vector<float> x);
  int64_t holdout_samples() const { return holdout_samples_; }
  int64_t holdout_tokens() const { return block_.rows() - fit_rows_; }

 private:
  // `fit` then `held` are the batch's samples, in that order.
  CalibratedQuantizer(const QuantSource& source, const QuantScheme& scheme,
                      const std::vector<std::vector<TokenId>>& fit,
                      const std::vector<std::vector<TokenId>>& held, CalibOps& ops,
                      const CalibratedQuantizerOptions& o);
  // The block's attention output over all rows, from its normed input h1 with t's q/k/v/o as they
  // are now, into scratch_.a (q, k, v in scratch_ too). Errors name `prefix` + "forward".
  Status attention_of(const BlockTensors& t, const CalibTensor& h1, const std::string& prefix);
  // `slot` as a [rows, cols] tensor: kept when it has that shape, else made anew.
  Result<CalibTensor*> scratch(CalibTensorPtr& slot, int64_t cols);
  // The squared error, summed, of the outputs on xs [m, k] of `before` and of `after` (linears
  // of the same shape).
  Result<double> output_error(const CalibTensor& xs, const CalibLinear& before,
                              const CalibLinear& after);
  Status gptq_block(BlockTensors& t, const std::string& prefix, const std::atomic<bool>* cancel,
                    CalibratedBlock* out);
  Status awq_block(BlockTensors& t, const std::string& prefix, const std::atomic<bool>* cancel,
                   CalibratedBlock* out);
  // The held-out comparison of one block: `x_in` the held-out rows entering it, `plain` its float
  // tensors, `quantized` the method's (dequantized weights, folded norms).
  Result<HoldoutBlock> compare_holdout(const BlockTensors& plain, const BlockTensors& quantized,
                                       const CalibTensor& x_in) const;

  const QuantSource* source_;
  CalibOps* ops_;
  QuantScheme scheme_;
  CalibratedQuantizerOptions options_;
  CalibLayout layout_;
  CalibBlock block_;
  int64_t fit_rows_ = 0;  // rows of the fitted samples (the first ones of the batch)
  int64_t holdout_samples_ = 0;
  CalibBlock holdout_block_;  // the held-out samples alone
  CalibTensorPtr x_;          // hidden states entering block next_layer_, [rows, hidden]
  // The block's activations over all rows (gptq_block, awq_block), on the ops' memory and kept
  // from one block to the next: each is overwritten whole before it is read (8B shape, 65536
  // rows: ~9 GiB that would otherwise be allocated again for every block).
  struct BlockScratch {
    CalibTensorPtr h1, q, k, v, a, y, h2, m;
  } scratch_;
  int64_t next_layer_ = 0;
};

}  // namespace lathe
