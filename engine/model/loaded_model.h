// Everything a model folder or GGUF file provides, loaded and validated: the config, the weights
// (memory-mapped), the tokenizer, the chat template and generation defaults.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/checkpoint_quant.h"
#include "engine/model/dummy_gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_store.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

enum class ModelFormat { kHfFolder, kGguf, kDummy };

// Defaults from generation_config.json (HF) or GGUF metadata. Requests override them.
struct GenerationDefaults {
  std::vector<TokenId> eos_token_ids;  // every id that ends generation (config may list several)
  float temperature = -1.f;            // < 0: not set by the model
  float top_p = -1.f;
  int top_k = -1;
  float repetition_penalty = -1.f;
};

struct LoadedModel {
  std::string path;  // what the user passed
  ModelFormat format = ModelFormat::kGguf;
  ModelConfig config;
  WeightStore weights;  // empty for kDummy: backends create random weights of config's shape
  // Null when LoadOptions::load_tokenizer is false, and for kDummy when the folder has no tokenizer
  // files (kDummy with tokenizer files loads them, so text prompts work against dummy weights).
  std::shared_ptr<const Tokenizer> tokenizer;
  std::string chat_template;  // Jinja source; empty when the model has none
  GenerationDefaults generation;
  // Bytes of the weight files on disk (the GGUF file; all safetensors files).
  int64_t file_bytes = 0;
  // Per-group storage types in the order embedding, attention, mlp, norms, output, e.g.
  // {"embedding", "q8_0"}, {"attention", "q4_1"}, {"mlp", "q4_k+q6_k"}, {"norms", "f32"},
  // {"output", "tied"}; several types in a group are joined with '+', most bytes first. Quantized
  // checkpoints name their formats: {"attention", "int4 g128 (gptq)"}. Empty for kDummy.
  std::vector<std::pair<std::string, std::string>> dtype_summary;
  // Bytes of the stored tensors per group (same groups and order; quantized parts included).
  std::vector<std::pair<std::string, int64_t>> group_bytes;
  // How the checkpoint is quantized (empty method: it is not); weight_scheme.h reads it.
  CheckpointQuant quantization;
  // Quantization applied when the weights are bound (LoadOptions::quantization).
  OnlineQuant online_quantization = OnlineQuant::kNone;
  // kDummy only: the layer projections (and LM head) in GGUF block types (LoadOptions::dummy_gguf).
  DummyGguf dummy_gguf;
};

}  // namespace lathe
