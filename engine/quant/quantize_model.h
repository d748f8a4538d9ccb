// `lathe quantize` as an engine call: the quantization of a whole model from its source
// (quant_source.h) to an output format (quant_output.h), with progress and cancellation. The
// calibrated schemes (gptq, awq) read their calibration set in prepare() and quantize one block at
// a time in run() (calibrated_quantizer.h); every other scheme quantizes tensor by tensor.
//
// prepare() does every check that can fail before any long work starts: the scheme and its flags
// (quant_scheme.h), the source and its dtypes, the output name (exists without force), every
// tensor's shape against the scheme (a group size that does not divide a layer's inputs names the
// layer), the calibration set (gptq, awq: an empty file or one that is not text is refused here),
// and the free disk space against the planned output size. run() then reads, quantizes
// and writes one tensor at a time under a temporary name and renames the result into place at the
// end (atomic_output.h): a failure or a cancellation leaves nothing under the output name.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quant_output.h"
#include "engine/quant/quant_scheme.h"
#include "engine/quant/quant_source.h"

namespace lathe {

struct QuantizeRequest {
  std::string model;   // HF folder or GGUF file
  std::string output;  // folder (HF formats) or file (GGUF)
  QuantSchemeRequest scheme;
  bool force = false;                          // replace an existing output
  int64_t max_shard_bytes = int64_t{5} << 30;  // HF outputs
  CalibrationConfig calibration;               // gptq, awq
};

struct QuantizeProgress {
  int64_t tensors_done = 0;
  int64_t tensors_total = 0;
  std::string tensor;  // the canonical name just written
  int64_t layer = -1;  // its block, -1 for globals
  int64_t num_layers = 0;
  bool layer_finished = false;  // the last tensor of `layer` (or of the globals) was written
  double elapsed_s = 0.0;
  double eta_s = 0.0;  // by the elements still to do at the rate so far
};
using QuantizeProgressFn = std::function<void(const QuantizeProgress&)>;

struct QuantizeResult {
  std::string output;
  int64_t output_bytes = 0;
  int64_t quantized_tensors = 0;
  int64_t kept_tensors = 0;
  double seconds = 0.0;
  std::vector<std::string> notes;  // what the writer wants to tell (type mix, shards)
};

class QuantizeJob {
 public:
  static Result<std::unique_ptr<QuantizeJob>> prepare(const QuantizeRequest& request);

  const QuantScheme& scheme() const { return scheme_; }
  const QuantSource& source() const { return source_; }
  int64_t expected_bytes() const { return writer_->expected_bytes(); }
  // gptq, awq: the calibration set read by prepare() (empty otherwise).
  const CalibrationSet& calibration() const { return calibration_; }

  // Runs the job once. `cancel` (may be null) is polled between tensors: when set, the job stops
  // with kCancelled and removes its temporary output.
  Result<QuantizeResult> run(const QuantizeProgressFn& progress, const std::atomic<bool>* cancel);

 private:
  QuantizeJob() = default;
  QuantizeRequest request_;
  QuantSource source_;
  QuantScheme scheme_;
  std::unique_ptr<QuantOutputWriter> writer_;
  CalibrationSet calibration_;
};

}  // namespace lathe
