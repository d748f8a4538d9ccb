// A model's configuration written for another format: GGUF architecture metadata (llama.cpp's
// key names, as convert_hf_to_gguf.py writes them for llama / mistral ("llama"), qwen2, qwen3) and
// Hugging Face config.json / generation_config.json from a ModelConfig (for HF outputs of a GGUF
// source). engine/model/model_config_parse reads both back to the same ModelConfig.
#pragma once

#include <string>
#include <vector>

#include "engine/core/status.h"
#include "engine/model/loaded_model.h"
#include "engine/model/model_config.h"
#include "engine/quant/gguf_writer.h"

namespace lathe {

// general.architecture, general.name and <arch>.* (context_length, embedding_length, block_count,
// feed_forward_length, attention.head_count(_kv), attention.key/value_length, rope.freq_base,
// rope.dimension_count, attention.layer_norm_rms_epsilon, vocab_size, rope.scaling.* for linear
// scaling, attention.sliding_window). Llama 3 rope scaling is not metadata: see
// gguf_rope_freq_factors().
GgufMetadata gguf_model_metadata(const ModelConfig& config);

// The per-frequency divisors llama.cpp stores as the rope_freqs.weight tensor for a Llama 3 rope
// scaling (head_dim / 2 floats); empty when the config has none (or already carries factors from
// a GGUF file: those are returned as they are).
std::vector<float> gguf_rope_freq_factors(const ModelConfig& config);

// config.json for a model whose weights are stored in `torch_dtype` ("bfloat16", "float16").
// kUnsupported for what config.json cannot say: GGUF rope_freqs factors.
Result<std::string> hf_config_json(const ModelConfig& config, const GenerationDefaults& generation,
                                   int32_t bos_token_id, const std::string& torch_dtype);

// generation_config.json with the eos ids and the sampling defaults that are set.
std::string hf_generation_config_json(const GenerationDefaults& generation, int32_t bos_token_id);

// Q/K rows of a Llama-family GGUF are permuted for adjacent-pair RoPE (llama.cpp's converter);
// Hugging Face checkpoints use rotate-half. Rows of w [heads * head_dim, cols] from the HF order to
// the GGUF order (to_gguf) or back.
void permute_rope_rows(float* w, int64_t heads, int64_t head_dim, int64_t cols, bool to_gguf);

}  // namespace lathe
