// `lathe quantize MODEL --scheme S --output OUT [--bits B] [--group-size G] [--sym|--asym]
// [--format F] [--desc-act] [--damp-percent P] [--calibration FILE] [--num-samples N]
// [--seq-len L] [--holdout-samples H] [--device D] [--load-format auto|dummy] [--no-resume]
// [--profile]
// [--restart] [--force] [--shard-size SIZE]`: quantization of a Hugging Face folder or a GGUF
// file, calibrated for gptq and awq on the CPU or a GPU (--device), or of random weights of a
// config's shape (--load-format dummy, for speed measurements) (engine/quant/quantize_model.h does
// the work; this file parses flags and prints progress). Per-layer progress with an ETA, where the
// work runs and the GPU's peak memory goes to stderr; Ctrl-C stops cleanly and leaves nothing
// under OUT (gptq and awq keep their finished blocks in OUT.partial, and the same command resumes
// from there). The last line of a finished run is "lathe quantize: peak memory: host RSS X[, device
// Y]" (scripts/gpu/quantize-bench.sh reads it). Errors: one line, exit code 1; interrupted: exit
// code 130. LATHE_QUANTIZE_STOP_AFTER_LAYERS=N (a test hook) stops gptq / awq as if interrupted
// once N blocks are finished.
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <sys/resource.h>

#include "app/commands.h"
#include "engine/core/strings.h"
#include "engine/quant/quantize_model.h"

namespace lathe::cli {
namespace {

struct QuantizeFlags {
  std::string model;
  std::string output;
  std::string scheme;
  int bits = -1;
  int64_t group_size = 0;
  bool sym = false;
  bool asym = false;
  std::string format;
  bool desc_act = false;
  double damp_percent = -1.0;
  std::string calibration;
  int num_samples = 128;
  int seq_len = 512;
  int holdout_samples = -1;
  std::string device = "auto";
  std::string load_format = "auto";
  bool no_resume = false;
  bool profile = false;
  bool restart = false;
  bool force = false;
  std::string shard_size = "5GiB";
};

std::atomic<bool> g_cancel{false};
void on_sigint(int) {
  g_cancel.store(true);
}

// The process's peak resident set so far, bytes.
int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux: KiB
}

std::string seconds_text(double s) {
  if (s < 90) return strformat("%.1f s", s);
  if (s < 5400) return strformat("%.1f min", s / 60);
  return strformat("%.1f h", s / 3600);
}

int run_quantize(const QuantizeFlags& f) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "lathe quantize: %s\n", message.c_str());
    return 1;
  };
  if (f.sym && f.asym) return fail("--sym and --asym exclude each other");
  QuantizeRequest r;
  r.model = f.model;
  r.output = f.output;
  r.scheme.scheme = f.scheme;
  r.scheme.bits = f.bits;
  r.scheme.group_size = f.group_size;
  r.scheme.symmetric = f.sym ? 1 : f.asym ? 0 : -1;
  r.scheme.format = f.format;
  r.scheme.desc_act = f.desc_act;
  r.scheme.damp_percent = f.damp_percent;
  r.calibration.file = f.calibration;
  r.calibration.num_samples = f.num_samples;
  r.calibration.seq_len = f.seq_len;
  r.holdout_samples = f.holdout_samples;
  r.restart = f.restart;
  r.device = f.device;
  r.load_format = f.load_format == "dummy" ? LoadFormat::kDummy : LoadFormat::kAuto;
  r.resumable = !f.no_resume;
  r.profile = f.profile;
  if (const char* stop = std::getenv("LATHE_QUANTIZE_STOP_AFTER_LAYERS"); stop != nullptr)
    r.stop_after_layers = std::atoll(stop);
  r.force = f.force;
  r.max_shard_bytes = parse_byte_size(f.shard_size);
  if (r.max_shard_bytes <= 0)
    return fail("--shard-size: cannot read '" + f.shard_size + "' as a size; write it like 5GiB");

  Result<std::unique_ptr<QuantizeJob>> prepared = QuantizeJob::prepare(r);
  if (!prepared.is_ok()) return fail(prepared.status().message());
  QuantizeJob& job = *prepared.value();
  const ModelConfig& c = job.source().config();
  std::fprintf(stderr, "lathe quantize: %s (%s, %s parameters, %lld layers, %s) -> %s\n",
               f.model.c_str(), architecture_name(c.arch),
               format_count(static_cast<double>(c.num_parameters())).c_str(),
               static_cast<long long>(c.num_layers),
               std::string(dtype_name(job.source().weight_dtype())).c_str(), f.output.c_str());
  std::fprintf(stderr, "  scheme: %s; output about %s\n", job.scheme().description().c_str(),
               format_bytes(static_cast<double>(job.expected_bytes())).c_str());
  if (job.source().is_dummy())
    std::fprintf(stderr,
                 "  weights: random (--load-format dummy), generated as they are read; %s\n",
                 job.scheme().needs_calibration()
                     ? "no tokenizer: calibration on random token ids, no tokenizer files copied "
                       "to the output unless the folder has them"
                     : "no tokenizer read; tokenizer files are copied only if the folder has them");
  if (job.scheme().needs_calibration()) {
    std::fprintf(stderr, "  device: %s%s%s%s\n", job.device_name().c_str(),
                 job.device_choice().empty() ? "" : " (", job.device_choice().c_str(),
                 job.device_choice().empty() ? "" : ")");
  } else if (f.device != "auto" && f.device != "cpu") {
    std::fprintf(stderr, "  device: the CPU (--device %s applies to gptq and awq only)\n",
                 f.device.c_str());
  }
  if (job.scheme().needs_calibration()) {
    const CalibrationSet& cal = job.calibration();
    if (!job.calibration_choice().empty())
      std::fprintf(stderr, "  calibration set: %s\n", job.calibration_choice().c_str());
    if (cal.format == CalibrationFormat::kRandom) {
      std::fprintf(stderr, "  calibration: %zu samples, %lld tokens of random token ids\n",
                   cal.samples.size(), static_cast<long long>(cal.num_tokens()));
    } else {
      std::fprintf(stderr, "  calibration: %zu samples, %lld tokens from %s (%s)\n",
                   cal.samples.size(), static_cast<long long>(cal.num_tokens()), cal.origin.c_str(),
                   calibration_format_name(cal.format));
    }
    if (job.checkpointed_layers() > 0 && !f.restart && !f.no_resume)
      std::fprintf(
          stderr, "  resuming: %s holds blocks 0-%lld of this job (--restart starts afresh)\n",
          job.checkpoint_folder().c_str(), static_cast<long long>(job.checkpointed_layers() - 1));
  }

  g_cancel.store(false);
  std::signal(SIGINT, on_sigint);
  Result<QuantizeResult> result = job.run(
      [](const QuantizeProgress& p) {
        if (!p.layer_finished) return;
        const std::string what =
            p.layer < 0 ? std::string("embedding, norm and head")
                        : strformat("layer %lld/%lld", static_cast<long long>(p.layer + 1),
                                    static_cast<long long>(p.num_layers));
        std::string extra;
        if (p.layer_resumed) extra += ", read back from the work folder";
        if (p.holdout_ratio >= 0)
          extra += strformat(", held-out error %.2fx RTN's", p.holdout_ratio);
        if (!p.device.empty()) extra += ", on " + p.device;
        if (p.peak_device_bytes > 0)
          extra += ", peak device memory " + format_bytes(static_cast<double>(p.peak_device_bytes));
        std::fprintf(
            stderr, "  [%3lld%%] %s done, %s elapsed, ETA %s%s\n",
            static_cast<long long>(100 * p.tensors_done / std::max<int64_t>(1, p.tensors_total)),
            what.c_str(), seconds_text(p.elapsed_s).c_str(), seconds_text(p.eta_s).c_str(),
            extra.c_str());
        if (!p.timing.empty()) std::fprintf(stderr, "         time so far: %s\n", p.timing.c_str());
      },
      &g_cancel);
  std::signal(SIGINT, SIG_DFL);
  if (!result.is_ok()) {
    if (result.status().code() == ErrorCode::kCancelled) {
      std::fprintf(stderr, "lathe quantize: %s\n", result.status().message().c_str());
      return 130;
    }
    return fail(result.status().message());
  }
  const QuantizeResult& q = result.value();
  std::fprintf(stderr, "lathe quantize: wrote %s (%s) in %s: %lld tensors quantized, %lld kept\n",
               q.output.c_str(), format_bytes(static_cast<double>(q.output_bytes)).c_str(),
               seconds_text(q.seconds).c_str(), static_cast<long long>(q.quantized_tensors),
               static_cast<long long>(q.kept_tensors));
  for (const std::string& note : q.notes) std::fprintf(stderr, "  %s\n", note.c_str());
  if (!q.holdout_message.empty())
    std::fprintf(stderr, "%s%s\n", q.holdout_warning ? "lathe quantize: " : "  ",
                 q.holdout_message.c_str());
  std::string peak = "lathe quantize: peak memory: host RSS " +
                     format_bytes(static_cast<double>(peak_rss_bytes()));
  if (!q.device.empty() && q.device.rfind("cpu", 0) != 0)  // a GPU
    peak += ", device " + format_bytes(static_cast<double>(q.peak_device_bytes)) + " (" + q.device +
            ")";
  std::fprintf(stderr, "%s\n", peak.c_str());
  return 0;
}

}  // namespace

void register_quantize(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<QuantizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "quantize",
      "Quantize a model: GPTQ, AWQ (calibrated) or RTN int4/int8 (GPTQ, AWQ or "
      "compressed-tensors folders), FP8, INT8 W8A16, or a GGUF file (q8_0, q6_k, q5_k_m, q4_k_m, "
      "q4_0). An interrupted gptq/awq run keeps its finished layers in OUT.partial; the same "
      "command resumes from them");
  cmd->add_option("model", f->model,
                  "the source: a Hugging Face folder (F32/F16/BF16 safetensors) or a GGUF file; "
                  "with --load-format dummy a folder holding a config.json")
      ->required();
  cmd->add_option("-o,--output", f->output,
                  "where to write: a folder for HF formats, a .gguf file for GGUF types")
      ->required();
  cmd->add_option(
         "-s,--scheme", f->scheme,
         "gptq | awq | rtn | fp8-dynamic | fp8-block | int8-w8a16 | q8_0 | q6_k | q5_k_m | "
         "q4_k_m | q4_0")
      ->required();
  cmd->add_option("--bits", f->bits, "rtn, gptq: 4 or 8 bits per weight (default 4)");
  cmd->add_option("--group-size", f->group_size,
                  "rtn, gptq, awq: input columns per scale, e.g. 32, 64, 128 (default), or -1 for "
                  "one scale per output channel");
  cmd->add_flag("--sym", f->sym,
                "symmetric grid, zero point 2^(bits-1) (default for rtn and gptq)");
  cmd->add_flag("--asym", f->asym, "asymmetric grid with a zero point per group (default for awq)");
  cmd->add_option("--format", f->format,
                  "gptq | awq | compressed-tensors — the layout of the folder (default: gptq for "
                  "gptq, awq for awq, compressed-tensors for rtn)");
  cmd->add_flag("--desc-act", f->desc_act,
                "gptq: act-order, columns by descending Hessian diagonal (GPTQ layout)");
  cmd->add_option("--damp-percent", f->damp_percent,
                  "gptq: damping added to the Hessian diagonal, a share of its mean (default 0.1)");
  cmd->add_option("--calibration", f->calibration,
                  "gptq, awq: calibration data, plain text, JSONL chat conversations or ShareGPT "
                  "JSON (default: the built-in set of scripts/fetch-eval-text.sh, its English part "
                  "calibration-en.txt for an English-only model)");
  cmd->add_option("--num-samples", f->num_samples, "gptq, awq: calibration sequences")
      ->capture_default_str();
  cmd->add_option("--seq-len", f->seq_len, "gptq, awq: tokens per calibration sequence")
      ->capture_default_str();
  cmd->add_option("--holdout-samples", f->holdout_samples,
                  "gptq, awq: calibration samples kept out of the fit to check, per block, that "
                  "the method beats round-to-nearest on them (default: 1 in 16; 0: no check)");
  cmd->add_option("--device", f->device,
                  "gptq, awq: where the calibration runs: auto (CUDA device 0 when usable, else "
                  "the CPU), cpu, cuda, or cuda:N. The other schemes quantize on the CPU and "
                  "ignore it")
      ->capture_default_str();
  cmd->add_option("--load-format", f->load_format,
                  "auto (read MODEL's weights), or dummy: MODEL is a folder with a config.json "
                  "(e.g. benchmarks/configs/llama-3.1-8b) and the weights are random, generated "
                  "as read (speed measurements; gptq/awq calibrate on random token ids)")
      ->check(CLI::IsMember({"auto", "dummy"}))
      ->capture_default_str();
  cmd->add_flag("--no-resume", f->no_resume,
                "gptq, awq: keep no OUT.partial work folder (an interrupted run starts over); "
                "the run needs about half the disk");
  cmd->add_flag("--profile", f->profile,
                "gptq, awq: after each block, where the time went so far (the device's linears, "
                "attention, Hessians and GPTQ with their copies; reading, writing, checkpoints)");
  cmd->add_flag("--restart", f->restart,
                "gptq, awq: discard OUT.partial, the finished blocks of an interrupted run (by "
                "default the same command resumes from them), and start from block 0");
  cmd->add_flag("--force", f->force, "replace OUT when it exists");
  cmd->add_option("--shard-size", f->shard_size,
                  "HF formats: largest safetensors file, e.g. 5GiB (default)")
      ->capture_default_str();
  cmd->callback([f, exit_code]() { *exit_code = run_quantize(*f); });
}

}  // namespace lathe::cli
