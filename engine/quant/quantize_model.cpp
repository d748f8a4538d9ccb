#include "engine/quant/quantize_model.h"

#include <chrono>
#include <filesystem>
#include <optional>

#include "engine/core/log.h"
#include "engine/core/strings.h"
#include "engine/model/model_loader.h"
#include "engine/quant/atomic_output.h"
#include "engine/quant/calibrated_quantizer.h"
#include "engine/quant/calibration_language.h"
#include "engine/quant/gguf_quant_writer.h"
#include "engine/quant/hf_quant_writer.h"
#include "engine/quant/quant_checkpoint.h"
#include "engine/quant/quant_device.h"
#include "engine/quant/quant_job_identity.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

int64_t layer_of(const std::string& canonical) {
  if (!starts_with(canonical, "blk.")) return -1;
  return std::atoll(canonical.c_str() + 4);
}

int64_t path_bytes(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return static_cast<int64_t>(fs::file_size(path, ec));
  int64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(path, ec))
    if (e.is_regular_file(ec)) total += static_cast<int64_t>(e.file_size(ec));
  return total;
}

}  // namespace

Result<std::unique_ptr<QuantizeJob>> QuantizeJob::prepare(const QuantizeRequest& request) {
  QuantizeRequest r = request;
  while (r.output.size() > 1 && r.output.back() == '/') r.output.pop_back();  // "out/" is "out"
  if (r.model.empty()) return invalid_argument("no model given: pass MODEL (an HF folder or GGUF)");
  if (r.output.empty()) return invalid_argument("no output given: pass --output OUT");
  // Cheap checks first: the scheme and the output name need no model.
  LATHE_RETURN_IF_ERROR(resolve_quant_scheme(r.scheme, DType::kBF16).status());
  LATHE_RETURN_IF_ERROR(check_output_path(r.output, r.force));
  LATHE_ASSIGN_OR_RETURN(const QuantScheme early, resolve_quant_scheme(r.scheme, DType::kBF16));
  const bool dummy = r.load_format == LoadFormat::kDummy;
  LATHE_ASSIGN_OR_RETURN(const QuantDevice device, parse_quant_device(r.device));
  if (early.needs_calibration()) {
    if (dummy && !r.calibration.file.empty())
      return invalid_argument(
          "--calibration " + r.calibration.file +
          ": --load-format dummy reads no tokenizer, so it calibrates on random token ids; drop "
          "--calibration (--num-samples and --seq-len still apply)");
    LATHE_RETURN_IF_ERROR(dummy ? check_calibration_sizes(r.calibration)
                                : check_calibration_config(r.calibration));
  }
  const fs::path out_abs = fs::weakly_canonical(fs::absolute(r.output));
  if (out_abs == fs::weakly_canonical(fs::absolute(r.model)))
    return invalid_argument(r.output + " is the source model itself; write to another name");

  std::unique_ptr<QuantizeJob> job(new QuantizeJob());
  job->request_ = r;
  if (early.needs_calibration()) {  // an explicit GPU that is not usable fails here, before work
    LATHE_ASSIGN_OR_RETURN(QuantDeviceChoice choice, open_quant_device(device));
    job->ops_ = std::move(choice.ops);
    job->device_ = device;
    job->ops_on_gpu_ = choice.gpu;
    if (r.profile) {
      job->ops_ = make_timed_calib_ops(std::move(job->ops_), &job->timing_);
      job->quantizer_options_.timing = &job->timing_;
    }
    job->device_choice_ = std::move(choice.reason);
  }
  LATHE_ASSIGN_OR_RETURN(job->source_, QuantSource::open(r.model, r.load_format));
  LATHE_ASSIGN_OR_RETURN(job->scheme_,
                         resolve_quant_scheme(r.scheme, hf_output_dtype(job->source_)));
  if (job->scheme_.kind == QuantKind::kGguf) {
    LATHE_ASSIGN_OR_RETURN(job->writer_, make_gguf_quant_writer(job->source_, job->scheme_));
  } else {
    LATHE_ASSIGN_OR_RETURN(job->writer_,
                           make_hf_quant_writer(job->source_, job->scheme_, r.max_shard_bytes));
  }
  if (job->scheme_.needs_calibration() && dummy) {
    job->calibration_ = random_calibration(r.calibration, job->source_.config().vocab_size);
  } else if (job->scheme_.needs_calibration()) {
    // The tokenizer and chat template (QuantSource reads weights only).
    LATHE_ASSIGN_OR_RETURN(LoadedModel with_tokenizer, load_model(r.model));
    if (with_tokenizer.tokenizer == nullptr)
      return invalid_argument(r.model + " has no tokenizer; --scheme " + job->scheme_.name +
                              " needs one to read the calibration text");
    CalibrationConfig cc = r.calibration;
    if (cc.file.empty()) {
      const CalibrationChoice choice = choose_default_calibration(
          declared_languages(job->source_), vocab_language_share(*with_tokenizer.tokenizer),
          fs::path(default_calibration_path()).parent_path().string());
      cc.file = choice.path;
      job->calibration_choice_ = choice.reason;
    }
    LATHE_ASSIGN_OR_RETURN(job->calibration_, load_calibration(cc, *with_tokenizer.tokenizer,
                                                               with_tokenizer.chat_template));
  }
  if (job->scheme_.needs_calibration()) {
    const int64_t n = static_cast<int64_t>(job->calibration_.samples.size());
    const int64_t h = r.holdout_samples < 0 ? default_holdout_samples(n) : r.holdout_samples;
    if (h >= n)
      return invalid_argument(strformat(
          "--holdout-samples %lld leaves no calibration sample to fit (the set gives %lld); pass "
          "fewer, or 0 to skip the held-out check",
          static_cast<long long>(h), static_cast<long long>(n)));
    job->quantizer_options_.holdout_samples = h;
    job->job_identity_ =
        quant_job_identity(job->source_, job->scheme_, job->calibration_, job->quantizer_options_);
    if (r.resumable && !r.restart) {  // a work folder of another job, or a damaged one: said now
      LATHE_ASSIGN_OR_RETURN(QuantCheckpoint ckpt,
                             QuantCheckpoint::open(r.output, job->job_identity_, false));
      job->checkpointed_layers_ = ckpt.finished_layers();
    }
  }
  int64_t bytes = job->writer_->expected_bytes();
  if (job->scheme_.needs_calibration() && r.resumable)  // the work folder: blocks and two states
    bytes += job->writer_->expected_bytes() +
             2 * job->calibration_.num_tokens() * job->source_.config().hidden_size * 4;
  LATHE_RETURN_IF_ERROR(check_free_space(r.output, bytes));
  return job;
}

std::string QuantizeJob::checkpoint_folder() const {
  return QuantCheckpoint::folder_for(request_.output);
}

std::string QuantizeJob::device_name() const {
  return ops_ ? ops_->name() : std::string();
}

Result<QuantizeResult> QuantizeJob::run(const QuantizeProgressFn& progress,
                                        const std::atomic<bool>* cancel) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  LATHE_ASSIGN_OR_RETURN(
      AtomicOutput out,
      AtomicOutput::begin(request_.output, writer_->output_is_folder(), request_.force));
  LATHE_RETURN_IF_ERROR(writer_->begin(out.temp_path()));

  const std::vector<std::string>& order = writer_->order();
  // A tensor's elements in the source (0 when it has none).
  auto elems_of = [&](const std::string& name) -> int64_t {
    if (!source_.has(name)) return 0;
    int64_t n = 1;
    for (int64_t d : source_.shape(name)) n *= d;
    return n;
  };
  int64_t total_elems = 0;
  for (const std::string& name : order) total_elems += elems_of(name);
  QuantizeResult result;
  std::optional<CalibratedQuantizer> calibrated;
  std::optional<QuantCheckpoint> ckpt;
  std::vector<HoldoutBlock> holdout;
  CalibratedBlock block;  // the calibrated block being written
  int64_t block_layer = -1;
  if (scheme_.needs_calibration()) {
    Result<CalibratedQuantizer> cq =
        CalibratedQuantizer::create(source_, scheme_, calibration_, *ops_, quantizer_options_);
    if (!cq.is_ok() && quant_device_falls_back(device_, ops_on_gpu_, cq.status())) {
      // --device auto: the GPU cannot hold the batch's activations; the CPU can (host memory).
      result.notes.push_back("--device auto: " + cq.status().message() +
                             "; calibrating on the CPU instead");
      ops_ = make_cpu_calib_ops();
      ops_on_gpu_ = false;
      if (request_.profile) ops_ = make_timed_calib_ops(std::move(ops_), &timing_);
      cq = CalibratedQuantizer::create(source_, scheme_, calibration_, *ops_, quantizer_options_);
    }
    if (!cq.is_ok()) return cq.status();
    calibrated.emplace(std::move(cq).value());
    if (request_.resumable) {
      LATHE_ASSIGN_OR_RETURN(
          QuantCheckpoint c,
          QuantCheckpoint::open(request_.output, job_identity_, request_.restart));
      ckpt.emplace(std::move(c));
      result.resumed_layers = std::min(ckpt->finished_layers(), source_.config().num_layers);
    }
    if (result.resumed_layers > 0) {
      LATHE_ASSIGN_OR_RETURN(std::vector<float> state, ckpt->read_state());
      LATHE_RETURN_IF_ERROR(calibrated->restore(result.resumed_layers, std::move(state)));
      result.notes.push_back(
          strformat("resumed from %s: blocks 0-%lld read back, quantized from block %lld on",
                    ckpt->folder().c_str(), static_cast<long long>(result.resumed_layers - 1),
                    static_cast<long long>(result.resumed_layers)));
    }
    const std::string from =
        calibration_.format == CalibrationFormat::kRandom
            ? calibration_.origin
            : calibration_.origin + ", " + calibration_format_name(calibration_.format);
    result.notes.push_back(
        strformat("calibrated on %zu samples, %lld tokens (%s)", calibration_.samples.size(),
                  static_cast<long long>(calibration_.num_tokens()), from.c_str()));
    if (!calibration_.note.empty()) result.notes.push_back(calibration_.note);
  }
  auto interrupted = [&]() {
    std::string m = "interrupted; nothing was written under " + request_.output;
    if (ckpt && ckpt->finished_layers() > 0)
      m += strformat("; blocks 0-%lld are saved in %s: run the same command again to resume",
                     static_cast<long long>(ckpt->finished_layers() - 1), ckpt->folder().c_str());
    return cancelled(m);
  };
  QuantizeProgress p;
  p.device = device_name();
  p.tensors_total = static_cast<int64_t>(order.size());
  p.num_layers = source_.config().num_layers;
  int64_t done_elems = 0;
  // The part read back from the work folder (fast), left out of the ETA's rate.
  int64_t resumed_elems = 0;
  double resumed_s = 0.0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (cancel != nullptr && cancel->load()) return interrupted();
    const std::string& name = order[i];
    std::vector<float> data;
    Clock::time_point t0 = Clock::now();
    // Adds the seconds since t0 to `into` and restarts t0 (request_.profile's stage times).
    auto lap = [&](double& into) {
      const Clock::time_point now = Clock::now();
      into += std::chrono::duration<double>(now - t0).count();
      t0 = now;
    };
    if (writer_->is_quantized(name)) {
      ++result.quantized_tensors;
    } else {
      ++result.kept_tensors;
    }
    const int64_t layer = layer_of(name);
    if (calibrated && layer >= 0 && layer != block_layer) {
      block_layer = layer;
      if (layer < result.resumed_layers) {
        LATHE_ASSIGN_OR_RETURN(block, ckpt->read_block(layer));
      } else {
        Result<CalibratedBlock> b = calibrated->quantize_block(layer, cancel);
        if (!b.is_ok() && b.status().code() == ErrorCode::kCancelled) return interrupted();
        if (!b.is_ok()) return b.status().with_context("quantizing on " + p.device);
        block = std::move(b).value();
        lap(timing_.block_s);
        if (ckpt) {
          LATHE_ASSIGN_OR_RETURN(const std::vector<float> state, calibrated->hidden_state());
          LATHE_RETURN_IF_ERROR(ckpt->save(layer, block, state));
        }
        lap(timing_.checkpoint_s);
        if (request_.stop_after_layers >= 0 && layer + 1 >= request_.stop_after_layers)
          return interrupted();
      }
      for (const std::string& n : block.notes) result.notes.push_back(n);
      if (block.has_holdout) holdout.push_back(block.holdout);
    }
    // A tensor the block replaces (its quantized linears; AWQ's folded norms) is not read again:
    // the block read it already.
    const auto q = block.linears.find(name);
    const auto f = block.replaced.find(name);
    if (q == block.linears.end() && f == block.replaced.end() && source_.has(name)) {
      LATHE_ASSIGN_OR_RETURN(data, source_.read(name));
    }
    lap(timing_.read_s);
    done_elems += elems_of(name);
    if (q != block.linears.end()) {
      LATHE_RETURN_IF_ERROR(writer_->write_quantized(name, q->second));
    } else if (f != block.replaced.end()) {
      LATHE_RETURN_IF_ERROR(writer_->write_tensor(name, std::move(f->second)));
    } else {
      LATHE_RETURN_IF_ERROR(writer_->write_tensor(name, std::move(data)));
    }
    lap(timing_.write_s);
    if (progress) {
      p.tensors_done = static_cast<int64_t>(i) + 1;
      p.tensor = name;
      p.layer = layer_of(name);
      p.layer_finished = i + 1 == order.size() || layer_of(order[i + 1]) != p.layer;
      p.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
      const bool calibrated_layer = calibrated && p.layer >= 0 && p.layer == block_layer;
      p.holdout_ratio = calibrated_layer && block.has_holdout ? block.holdout.ratio() : -1.0;
      p.layer_resumed = calibrated_layer && p.layer < result.resumed_layers;
      p.peak_device_bytes = ops_ ? ops_->peak_device_bytes() : 0;
      p.timing = request_.profile && calibrated_layer && p.layer_finished ? timing_.summary() : "";
      if (p.layer_resumed) {
        resumed_elems = done_elems;  // read back so far
        resumed_s = p.elapsed_s;
      }
      const int64_t worked = done_elems - resumed_elems;
      p.eta_s = worked > 0
                    ? (p.elapsed_s - resumed_s) * static_cast<double>(total_elems - done_elems) /
                          static_cast<double>(worked)
                    : 0.0;
      progress(p);
    }
  }
  if (cancel != nullptr && cancel->load()) return interrupted();
  std::vector<std::string> notes = std::move(result.notes);
  LATHE_ASSIGN_OR_RETURN(result.notes, writer_->finish());
  result.notes.insert(result.notes.begin(), notes.begin(), notes.end());
  LATHE_RETURN_IF_ERROR(out.commit());
  if (ckpt)
    if (Status s = ckpt->remove(); !s.is_ok()) result.notes.push_back(s.message());
  if (calibrated && !holdout.empty()) {
    const HoldoutSummary h =
        summarize_holdout(holdout, scheme_.method == QuantMethod::kGptq ? "GPTQ" : "AWQ",
                          calibrated->holdout_samples(), calibrated->holdout_tokens());
    result.holdout_message = h.message;
    result.holdout_warning = h.warn;
  }
  result.output = request_.output;
  result.output_bytes = path_bytes(request_.output);
  result.device = device_name();
  result.peak_device_bytes = ops_ ? ops_->peak_device_bytes() : 0;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace lathe
