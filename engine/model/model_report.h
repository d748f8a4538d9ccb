// The model card: what `lathe inspect` prints and Lathe Studio shows for a model file, as one plain
// struct, with a human-readable text form and a JSON form whose keys are stable (GUI tests compare
// against `lathe inspect --json`).
//
// JSON layout (sizes in bytes, counts in elements):
//   {"path", "name", "format": "gguf" | "hf" | "config",
//    "architecture", "model_type", "parameters",
//    "layers", "hidden_size", "intermediate_size", "heads", "kv_heads", "head_dim", "vocab_size",
//    "context_length", "rms_norm_eps",
//    "rope": {"theta", "style": "neox" | "interleaved", "scaling": "none" | "linear" | "llama3",
//             "factor", "frequency_factors": bool},
//    "tie_word_embeddings", "attention_bias", "qk_norm", "sliding_window",
//    "weight_dtype", "dtypes": {"embedding", "attention", "mlp", "norms", "output"},
//    "quantization": "none" | "gptq" | "awq" | "compressed-tensors" | "fp8",
//    "file_bytes", "has_chat_template", "eos_token_ids": [..],
//    "memory": {"weights": {"stored", "fp16", "int8", "int4",
//                           "groups": {"embedding", "attention", ...: bytes as stored}},
//               "kv_per_token": {"fp16", "fp32"},
//               "max_model_len", "batch", "kv": {"fp16", "fp32"},
//               "fit": {"device", "budget_bytes", "needed_bytes", "verdict", "max_sequences",
//                       "max_kv_tokens", "message"}}}
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/loaded_model.h"
#include "engine/model/memory_estimate.h"

namespace lathe {

struct ReportOptions {
  int64_t max_model_len =
      0;              // tokens per sequence for the KV figures; 0: the model's context length
  int64_t batch = 1;  // concurrent sequences for the KV figures
  int64_t budget_bytes = 0;  // memory to check the fit against; 0: this machine's RAM
};

struct ModelReport {
  std::string path;
  std::string format;  // "gguf", "hf", "config" (config.json only)
  ModelConfig config;
  std::vector<std::pair<std::string, std::string>> dtypes;   // LoadedModel::dtype_summary
  std::vector<std::pair<std::string, int64_t>> group_bytes;  // LoadedModel::group_bytes
  std::string quantization = "none";                         // the checkpoint's quant_method
  int64_t file_bytes = 0;
  bool has_chat_template = false;
  std::vector<TokenId> eos_token_ids;
  MemoryEstimate memory;
  // Fit on the CPU backend (stored weights, fp32 KV cache) within the budget.
  std::string fit_device;  // "CPU (system RAM)" or "CPU (budget)"
  int64_t budget_bytes = 0;
  FitVerdict fit;
};

ModelReport build_model_report(const LoadedModel& model, const ReportOptions& options);

// Loads `path` for inspection (no tokenizer; a folder with config.json but no weights is read as
// config only) and builds its report.
Result<ModelReport> inspect_model(const std::string& path, const ReportOptions& options);

std::string model_report_json(const ModelReport& report);  // pretty-printed, stable keys
std::string model_report_text(const ModelReport& report);  // aligned "Label  value" lines

}  // namespace lathe
