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
//
// Calibrated schemes also keep a resumable work folder, "<output>.partial" (quant_checkpoint.h):
// each finished block is saved there, and a later run of the same job (quant_job_identity.h)
// reads those blocks back instead of quantizing them again, continuing from the first unfinished
// one; its output is byte for byte the output of a run that never stopped. The folder is removed
// when the output is committed. Without --calibration they pick the built-in set by the model's
// languages (calibration_language.h), and keep a few samples out of the fit for the held-out check
// (holdout_check.h).
//
// Where the calibrated schemes' arithmetic runs is the request's device (quant_device.h: auto,
// cpu, cuda, cuda:N); prepare() makes the job's CalibOps (calib_ops.h), so an explicit GPU that is
// not usable is an error before any work, and an error of the GPU during run() (out of memory, a
// CUDA error) is an error of the job. The other schemes ignore the device.
//
// A dummy source (load_format kDummy: a folder with a config.json, random weights generated when
// read, quant_source.h) has no tokenizer: gptq and awq calibrate on random token ids
// (random_calibration(), calibration.h) and the output gets no tokenizer files unless the folder
// holds some.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "engine/core/status.h"

#include "engine/model/model_loader.h"
#include "engine/quant/calib_ops.h"
#include "engine/quant/calibrated_quantizer.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quant_device.h"
#include "engine/quant/quant_output.h"
#include "engine/quant/quant_scheme.h"
#include "engine/quant/quant_source.h"
#include "engine/quant/quant_timing.h"

namespace lathe {

struct QuantizeRequest {
  std::string model;   // HF folder or GGUF file
  std::string output;  // folder (HF formats) or file (GGUF)
  QuantSchemeRequest scheme;
  bool force = false;                          // replace an existing output
  int64_t max_shard_bytes = int64_t{5} << 30;  // HF outputs
  CalibrationConfig calibration;               // gptq, awq
  // gptq, awq: discard "<output>.partial" (a previous run's finished blocks) and start afresh.
  bool restart = false;
  // gptq, awq: calibration samples kept out of the fit for the held-out check; -1: the default
  // (default_holdout_samples()), 0: no check.
  int64_t holdout_samples = -1;
  // Tests (and LATHE_QUANTIZE_STOP_AFTER_LAYERS in the CLI): gptq, awq stop with kCancelled once
  // this many blocks are finished and saved, as if interrupted there; -1: never.
  int64_t stop_after_layers = -1;
  // gptq, awq: where the arithmetic runs, "auto" | "cpu" | "cuda" | "cuda:N" (quant_device.h).
  // The library's default is the CPU, so a caller's results never depend on the machine; the CLI
  // and Lathe Studio pass "auto".
  std::string device = "cpu";
  // gptq, awq: time the CalibOps calls and the job's stages (quant_timing.h) and report the sums
  // with each finished block (QuantizeProgress::timing; `lathe quantize --profile`).
  bool profile = false;
  // kDummy: `model` is a folder with a config.json and the weights are random (quant_source.h).
  LoadFormat load_format = LoadFormat::kAuto;
  // gptq, awq: false keeps no work folder ("<output>.partial" is neither read nor written): an
  // interrupted run starts over, and the run needs about half the disk (no second copy of the
  // quantized blocks).
  bool resumable = true;
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
  // gptq, awq, when `layer_finished` for a block with a held-out check: its held-out output error
  // over round-to-nearest's; -1 otherwise.
  double holdout_ratio = -1.0;
  bool layer_resumed = false;  // the block was read back from the work folder
  // gptq, awq: where the arithmetic runs (CalibOps::name(), "cuda:0 NVIDIA H200"), and the most
  // device memory it has held so far, bytes (0 on the CPU). Empty / 0 for the other schemes.
  std::string device;
  int64_t peak_device_bytes = 0;
  // With QuantizeRequest::profile, when `layer_finished` for a calibrated block: QuantTiming's
  // summary so far. Empty otherwise.
  std::string timing;
};
using QuantizeProgressFn = std::function<void(const QuantizeProgress&)>;

struct QuantizeResult {
  std::string output;
  int64_t output_bytes = 0;
  int64_t quantized_tensors = 0;
  int64_t kept_tensors = 0;
  double seconds = 0.0;
  std::vector<std::string> notes;  // what the writer wants to tell (type mix, shards)
  int64_t resumed_layers = 0;      // gptq, awq: blocks read back from "<output>.partial"
  std::string holdout_message;     // gptq, awq: the held-out check's summary line (or empty)
  bool holdout_warning = false;    // the method was not better than round-to-nearest there
  std::string device;              // gptq, awq: CalibOps::name() (empty otherwise)
  int64_t peak_device_bytes = 0;   // gptq, awq: CalibOps::peak_device_bytes()
};

class QuantizeJob {
 public:
  static Result<std::unique_ptr<QuantizeJob>> prepare(const QuantizeRequest& request);

  const QuantScheme& scheme() const { return scheme_; }
  const QuantSource& source() const { return source_; }
  int64_t expected_bytes() const { return writer_->expected_bytes(); }
  // gptq, awq: the calibration set read by prepare() (empty otherwise).
  const CalibrationSet& calibration() const { return calibration_; }
  // gptq, awq without --calibration: which built-in set was chosen and why (else empty).
  const std::string& calibration_choice() const { return calibration_choice_; }
  // gptq, awq: the work folder ("<output>.partial") and how many finished blocks it holds now.
  std::string checkpoint_folder() const;
  int64_t checkpointed_layers() const { return checkpointed_layers_; }
  // gptq, awq: where the arithmetic runs (CalibOps::name()); empty for the other schemes.
  std::string device_name() const;
  // gptq, awq with --device auto: which device was taken and why (else empty).
  const std::string& device_choice() const { return device_choice_; }

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
  std::string calibration_choice_;
  CalibratedQuantizerOptions quantizer_options_;
  nlohmann::ordered_json job_identity_;  // gptq, awq
  int64_t checkpointed_layers_ = 0;
  std::unique_ptr<CalibOps> ops_;  // gptq, awq: the device's arithmetic
  QuantDevice device_;             // as parsed from request_.device
  bool ops_on_gpu_ = false;        // ops_ are a GPU's
  QuantTiming timing_;             // request_.profile: ops_ is timed into it
  std::string device_choice_;
};

}  // namespace lathe
