// The engine flags shared by `generate`, `serve` and `bench` (vLLM's names where they exist).
#pragma once

#include <string>

#include "engine/runtime/engine_config.h"

namespace CLI {
class App;
}

namespace lathe::cli {

// Raw flag values as typed; resolve_engine_flags() turns them into an EngineConfig.
struct EngineFlags {
  std::string model;                 // -m/--model (positional for serve); empty: the default model
  std::string device = "auto";       // --device cpu|cuda|auto
  std::string dtype = "auto";        // --dtype auto|bf16|f16
  std::string load_format = "auto";  // --load-format auto|dummy
  std::string quantization;          // --quantization fp8|int8|int4 (quantize at load), or a GGUF
                                     // type of dummy_gguf.h (dummy loads); empty: off
  std::string kv_cache_memory;       // --kv-cache-memory 2GiB (CPU)
  double gpu_memory_utilization = 0.90;
  int max_model_len = 0;
  int max_num_seqs = 0;            // 0: the default for the device
  int max_num_batched_tokens = 0;  // 0: the default for the device
  int block_size = 16;
  bool enable_prefix_caching = true;  // --enable-prefix-caching / --no-enable-prefix-caching
  std::string scheduling = "continuous";
  int num_threads = 0;
  bool enforce_eager = false;
  std::string chat_template;  // --chat-template FILE
  // --speculative-config JSON, vLLM's form: {"method": "ngram", "num_speculative_tokens": 4,
  // "prompt_lookup_max": 4, "prompt_lookup_min": 2}; empty: off.
  std::string speculative_config;
};

// Adds the flags to `cmd`. with_model_option: also -m/--model (serve takes it positionally too).
void add_engine_flags(CLI::App& cmd, EngineFlags& flags, bool with_model_option = true);

// Validates and converts; errors name the flag ("--gpu-memory-utilization must be in (0, 1],
// got 1.5").
Result<EngineConfig> resolve_engine_flags(const EngineFlags& flags);

// Reads --speculative-config's JSON object (keys method, num_speculative_tokens,
// prompt_lookup_min, prompt_lookup_max); errors name the key. Ranges are checked by
// validate_engine_config().
Result<SpeculativeConfig> parse_speculative_config(const std::string& json_text);

}  // namespace lathe::cli
