// Loads a model from a path: a GGUF file, a Hugging Face folder (config.json + *.safetensors,
// sharded or not, + tokenizer files), or (LoadFormat::kDummy) a config.json alone.
#pragma once

#include <string>

#include "engine/core/status.h"
#include "engine/model/checkpoint_quant.h"
#include "engine/model/dummy_gguf.h"
#include "engine/model/loaded_model.h"

namespace lathe {

enum class LoadFormat { kAuto, kDummy };

struct LoadOptions {
  LoadFormat load_format = LoadFormat::kAuto;
  bool load_tokenizer =
      true;  // false: config and weights only (inspect of big models is quick anyway)
  std::string chat_template_override;  // Jinja source that replaces the model's template
  // vLLM's --quantization: quantize the 16-bit layer projections when they are bound (RTN); a
  // checkpoint that is already quantized (or a GGUF of block types) is refused by name.
  OnlineQuant quantization = OnlineQuant::kNone;
  // --quantization q4_k_m|q4_k|q4_0|q8_0|q5_k_m|q6_k: random weights in GGUF block types
  // (dummy_gguf.h); only with kDummy, refused otherwise.
  DummyGguf dummy_gguf;
};

// Errors name the file and the problem, e.g.
//   "model.gguf: truncated: tensor 'blk.3.ffn_up.weight' ends at byte 81234567 but the file has
//   8000000 bytes".
Result<LoadedModel> load_model(const std::string& path, const LoadOptions& options = {});

// The default model (SmolLM2-135M-Instruct Q4_1 GGUF) in the model cache:
// $LATHE_MODEL_DIR or ~/.cache/lathe/models. Does not download; scripts/fetch-default-model.sh
// does.
std::string default_model_path();
// A folder of Lathe's cache: $<env_override> when set, else $XDG_CACHE_HOME/lathe/<sub>, else
// ~/.cache/lathe/<sub> (e.g. ("LATHE_TEXT_DIR", "text")).
std::string lathe_cache_dir(const char* env_override, const char* sub);
// default_model_path() when it exists; otherwise an error that says how to fetch it.
Result<std::string> resolve_model_path(const std::string& maybe_empty);

}  // namespace lathe
