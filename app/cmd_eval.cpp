// `lathe eval MODEL [--reference REF] --text FILE [--ctx N] [--stride S] [--max-windows W]
// [--score-from K] [--json]`: perplexity over a text with a sliding window and, against a reference
// model, the KL divergence of MODEL's next-token distributions from REF's, top-1 agreement, the
// change in the actual token's probability and the perplexity ratio, both models side by side in
// one pass (engine/eval/evaluate.h does the work; this file parses flags and prints). Progress per
// window on stderr; the report as a table, or one JSON object with --json, on stdout. Errors: one
// line, exit code 1; interrupted: exit code 130.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "app/commands.h"
#include "engine/core/strings.h"
#include "engine/eval/evaluate.h"

namespace lathe::cli {
namespace {

struct EvalFlags {
  std::string model;
  std::string reference;
  std::string text;
  int ctx = 512;
  int stride = 0;
  int max_windows = 0;
  int score_from = 0;
  bool json = false;
  std::string device = "auto";
  int threads = 0;
};

std::atomic<bool> g_cancel{false};
void on_sigint(int) {
  g_cancel.store(true);
}

std::string report_json(const EvalReport& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  if (r.has_reference) j["reference"] = r.reference;
  j["text"] = r.text_origin;
  j["device"] = r.device;
  j["text_tokens"] = r.text_tokens;
  j["ctx"] = r.context;
  j["stride"] = r.stride;
  j["windows"] = r.windows;
  if (r.score_from > 0) j["score_from"] = r.score_from;
  j["scored_positions"] = r.scored;
  j["mean_nll"] = r.mean_nll;
  j["perplexity"] = r.perplexity;
  if (r.has_reference) {
    j["reference_perplexity"] = r.reference_perplexity;
    j["ppl_ratio"] = r.ppl_ratio;
    j["kld"] = {
        {"mean", r.kld.mean}, {"median", r.kld.median}, {"p99", r.kld.p99}, {"max", r.kld.max}};
    j["top1_agreement"] = r.top1_agreement;
    j["mean_delta_p"] = r.mean_delta_p;
  }
  j["seconds"] = r.seconds;
  return j.dump(2);
}

void print_table(const EvalReport& r) {
  std::printf("model       %s\n", r.model.c_str());
  if (r.has_reference) std::printf("reference   %s\n", r.reference.c_str());
  std::printf("text        %s (%lld tokens)\n", r.text_origin.c_str(),
              static_cast<long long>(r.text_tokens));
  std::printf("windows     %d of %d tokens, stride %d: %lld positions scored (%s, %.1f s)\n",
              r.windows, r.context, r.stride, static_cast<long long>(r.scored), r.device.c_str(),
              r.seconds);
  if (r.score_from > 0)
    std::printf("scored      targets from offset %d of each window\n", r.score_from);
  std::printf("perplexity  %.4f\n", r.perplexity);
  if (!r.has_reference) return;
  std::printf("ref. ppl    %.4f (ratio %.4f)\n", r.reference_perplexity, r.ppl_ratio);
  std::printf("KLD         mean %.6f  median %.6f  p99 %.6f  max %.6f\n", r.kld.mean, r.kld.median,
              r.kld.p99, r.kld.max);
  std::printf("top-1       %.2f%% same top token\n", 100.0 * r.top1_agreement);
  std::printf("mean Δp     %+.4f%%\n", 100.0 * r.mean_delta_p);
}

int run_eval(const EvalFlags& f) {
  EvalConfig c;
  c.model = f.model;
  c.reference = f.reference;
  c.text_file = f.text;
  c.context = f.ctx;
  c.stride = f.stride;
  c.max_windows = f.max_windows;
  c.score_from = f.score_from;
  c.device.num_threads = f.threads;
  if (!parse_device_kind(f.device, &c.device.device)) {
    std::fprintf(stderr, "lathe eval: --device must be auto, cpu or cuda, got '%s'\n",
                 f.device.c_str());
    return 1;
  }
  g_cancel.store(false);
  std::signal(SIGINT, on_sigint);
  Result<EvalReport> result = evaluate(
      c,
      [](const EvalProgress& p) {
        std::fprintf(stderr, "  window %d/%d, ppl so far %.4f, %.1f s elapsed, ETA %.1f s\n",
                     p.windows_done, p.windows_total, p.perplexity, p.elapsed_s, p.eta_s);
      },
      &g_cancel);
  std::signal(SIGINT, SIG_DFL);
  if (!result.is_ok()) {
    std::fprintf(stderr, "lathe eval: %s\n", result.status().message().c_str());
    return result.status().code() == ErrorCode::kCancelled ? 130 : 1;
  }
  if (f.json) {
    std::printf("%s\n", report_json(result.value()).c_str());
  } else {
    print_table(result.value());
  }
  return 0;
}

}  // namespace

void register_eval(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<EvalFlags>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Measure a model on a text: perplexity, and against a reference model the KL divergence, "
      "top-1 agreement and perplexity ratio (both models in one pass)");
  cmd->add_option("model", f->model, "the model to measure: a GGUF file or a Hugging Face folder")
      ->required();
  cmd->add_option("--reference", f->reference,
                  "the model to compare against (e.g. the 16-bit original); same tokenizer");
  cmd->add_option("--text", f->text, "a UTF-8 text file to evaluate on")->required();
  cmd->add_option("--ctx", f->ctx, "tokens per window")->capture_default_str();
  cmd->add_option("--stride", f->stride,
                  "tokens between window starts; each later window scores its last STRIDE "
                  "targets (default ctx/2)");
  cmd->add_option("--max-windows", f->max_windows, "evaluate at most this many windows (0: all)")
      ->capture_default_str();
  cmd->add_option("--score-from", f->score_from,
                  "score only the targets at this offset of each window and later (0: the "
                  "sliding-window plan); --ctx N --stride N --score-from N/2+1 scores the tokens "
                  "llama.cpp's llama-perplexity scores")
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "print the report as one JSON object");
  cmd->add_option("--device", f->device, "auto | cpu | cuda")->capture_default_str();
  cmd->add_option("--threads", f->threads, "CPU threads (0: all)")->capture_default_str();
  cmd->callback([f, exit_code]() { *exit_code = run_eval(*f); });
}

}  // namespace lathe::cli
