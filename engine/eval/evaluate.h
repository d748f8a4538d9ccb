// `lathe eval` as an engine call (the Studio's quality figures come from here too): the perplexity
// of a model over a text with a sliding window (eval_windows.h), and with a reference model the
// per-position KL divergence KL(ref || model), top-1 agreement, the change in the probability of
// the actual next token and the perplexity ratio (eval_metrics.h).
//
// Both models run side by side in one pass: each window is fed to both runners in chunks of
// `logit_rows` positions, and every chunk's logits (rows x vocab float32 per model) are scored and
// dropped at once, so memory stays at 2 x logit_rows x vocab x 4 bytes beyond the models (no
// logits file). The logits of every position come from ModelRunner::compute_logits with the
// chunk's positions as the sequence's sampled rows (ModelInput::sample_counts).
//
// The text is tokenized once with MODEL's tokenizer; the reference must have the same vocabulary
// size and tokenize the text the same way (checked on its start), else the figures would compare
// different tokens. When the tokenizer adds a BOS token, each window's first token is replaced by
// BOS (as llama.cpp's perplexity does).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "engine/core/status.h"
#include "engine/eval/eval_metrics.h"
#include "engine/runtime/engine_config.h"

namespace lathe {

struct EvalConfig {
  std::string model;        // GGUF file or HF folder (any format Lathe loads)
  std::string reference;    // empty: perplexity only
  std::string text_file;    // UTF-8 text; ignored when `text` is set
  std::string text;         // the text itself (front-ends that hold it in memory)
  int32_t context = 512;    // tokens per window (--ctx)
  int32_t stride = 0;       // tokens between window starts; 0 = context / 2
  int32_t max_windows = 0;  // 0 = every full window of the text
  int32_t score_from =
      0;  // > 0: every window scores only targets at offsets >= this (--score-from)
  int32_t logit_rows = 128;  // positions per forward step, bounds the logits held at once
  DeviceConfig device;       // kAuto picks CUDA when usable; num_threads for the CPU
};

struct EvalReport {
  std::string model, reference, text_origin;  // text_origin: the file, or "(text)"
  std::string device;                         // the model runner's device description
  int64_t text_tokens = 0;
  int32_t context = 0, stride = 0, windows = 0, score_from = 0;
  int64_t scored = 0;  // positions scored (predictions of a next token)
  double mean_nll = 0.0;
  double perplexity = 0.0;
  bool has_reference = false;
  double reference_perplexity = 0.0;
  double ppl_ratio = 0.0;  // perplexity / reference_perplexity
  SummaryStats kld;        // KL(ref || model) per position, nats
  double top1_agreement = 0.0;
  double mean_delta_p = 0.0;  // mean of p_model(target) - p_ref(target)
  double seconds = 0.0;
};

struct EvalProgress {
  int32_t windows_done = 0;
  int32_t windows_total = 0;
  double perplexity = 0.0;  // over the positions scored so far
  double elapsed_s = 0.0;
  double eta_s = 0.0;
};
using EvalProgressFn = std::function<void(const EvalProgress&)>;

// Loads the model(s), tokenizes the text, runs every window and returns the report. `progress`
// (may be empty) is called after each window; `cancel` (may be null) is polled between forward
// steps and stops the run with kCancelled. Errors (each before long work starts): an empty text or
// one that is not text, a text shorter than one window, bad --ctx / --stride, a reference whose
// vocabulary or tokenization differs from the model's, and the loaders' own errors.
Result<EvalReport> evaluate(const EvalConfig& config, const EvalProgressFn& progress,
                            const std::atomic<bool>* cancel);

}  // namespace lathe
