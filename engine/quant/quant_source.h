// The model a quantization starts from: a Hugging Face folder of F32 / F16 / BF16 safetensors, or
// a GGUF file of any type the engine loads (its tensors are dequantized with engine/model/dequant).
// Tensors are read one at a time, as float32 in PyTorch shape order and in Hugging Face row order:
// the Q/K rows a Llama GGUF stores permuted for adjacent-pair RoPE are put back in rotate-half
// order, so every writer starts from the same convention; config() says so (rope_style kNeox), and
// the calibrated quantizer's float forward (calib_block.h) applies RoPE by it.
//
// With LoadFormat::kDummy the source is a folder holding a config.json (benchmarks/configs/...):
// its tensors are random (dummy_weights.h), generated when read, never all in memory at once, and
// no tokenizer is read (the calibrated schemes then calibrate on random token ids).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/gguf_file.h"
#include "engine/model/loaded_model.h"
#include "engine/model/model_loader.h"
#include "engine/quant/dummy_weights.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

class QuantSource {
 public:
  // Opens `path` (weights memory-mapped, no tokenizer built). Errors: the loader's (missing files,
  // a quantized HF checkpoint), and kUnsupported naming the first tensor stored in a type
  // quantization cannot start from ("unsupported source dtype ...").
  // kDummy: `path` is a folder with a config.json (or that file); kInvalidArgument for a GGUF file
  // or another file, kNotFound for a folder without config.json.
  static Result<QuantSource> open(const std::string& path, LoadFormat format = LoadFormat::kAuto);

  const std::string& path() const { return path_; }
  bool is_gguf() const { return gguf_ != nullptr; }
  // Random weights (LoadFormat::kDummy): model().weights is empty, read() generates.
  bool is_dummy() const { return dummy_ != nullptr; }
  // The configuration of the tensors read() returns: the loaded model's, except that a Llama GGUF's
  // rope_style is kNeox (read() un-permutes its Q/K rows; model().config keeps the stored
  // kInterleaved). A forward over read()'s tensors must use this one.
  const ModelConfig& config() const { return config_; }
  const LoadedModel& model() const { return model_; }
  // GGUF sources: the file (metadata to copy, tokenizer data); null for HF folders.
  const std::shared_ptr<const GgufFile>& gguf() const { return gguf_; }
  // HF and dummy sources: the folder (config, tokenizer and template files to copy).
  const std::string& hf_folder() const { return hf_folder_; }
  // The dominant stored type of the source's weights (bf16, f16, f32, q4_1, ...).
  DType weight_dtype() const { return model_.config.weight_dtype; }

  // A canonical tensor (weight_store.h names) as float32, shape = shape(canonical).
  Result<std::vector<float>> read(const std::string& canonical) const;
  std::vector<int64_t> shape(const std::string& canonical) const;
  bool has(const std::string& canonical) const;
  // Rows `rows` of the 2-D tensor `canonical` [n, k] as float32 [rows.size(), k] (the calibration
  // embeddings: only the rows asked for are read). Rows must be in [0, n). The rows as stored: not
  // for a Llama GGUF's attn_q / attn_k, whose rows read() un-permutes.
  Result<std::vector<float>> read_rows(const std::string& canonical,
                                       const std::vector<TokenId>& rows) const;

 private:
  std::string path_;
  std::string hf_folder_;
  LoadedModel model_;
  ModelConfig config_;  // model_.config in read()'s row order (see config())
  std::shared_ptr<const GgufFile> gguf_;
  std::shared_ptr<const DummyWeights> dummy_;  // kDummy only
};

}  // namespace lathe
