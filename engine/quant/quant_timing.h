// Where a calibrated quantization's time goes (`lathe quantize --profile`): wall seconds of each
// CalibOps kind (its copies to and from the device included) and of the job's own stages, summed
// since the job started. The job fills it when QuantizeRequest::profile is set and reports it
// with each finished block (QuantizeProgress::timing).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/quant/calib_ops.h"

namespace lathe {

struct QuantTiming {
  double linear_s = 0, mlp_s = 0, attention_s = 0, hessian_s = 0, gptq_s = 0;  // inside CalibOps
  int64_t linear_calls = 0, mlp_calls = 0, attention_calls = 0, hessian_calls = 0, gptq_calls = 0;
  double awq_s = 0;  // AWQ's fake quantization (scale grid) and clip search
  int64_t awq_calls = 0;
  // The tensor ops (calib_ops.h): allocations, copies, norms, RoPE, adds, column scaling,
  // reductions.
  double tensor_s = 0;
  int64_t tensor_calls = 0;
  double block_s = 0;       // CalibratedQuantizer::quantize_block in all (the ops above included)
  double block_read_s = 0;  // of which reading the block's tensors (dummy weights: generating them)
  double holdout_s = 0;     // of which the held-out check (its ops included)
  double read_s = 0;        // the writer loop's source reads (dummy weights: their generation)
  double write_s = 0;       // the output writer
  double checkpoint_s = 0;  // saving finished blocks to the work folder

  // "ops 12.1 s (linear 5.0 s / 320, attention 0.4 s / 32, ...), block rest 3.2 s, read ..., ..."
  std::string summary() const;
};

// `inner` with each call's wall time added to `timing` (which must outlive it).
std::unique_ptr<CalibOps> make_timed_calib_ops(std::unique_ptr<CalibOps> inner,
                                               QuantTiming* timing);

}  // namespace lathe
