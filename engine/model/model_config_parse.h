// ModelConfig from a Hugging Face config.json or from GGUF metadata.
//
// config.json (transformers 4 and 5 layouts): model_type llama, mistral, qwen2 or qwen3. Required:
// model_type, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size.
// Defaults follow transformers' config classes: num_key_value_heads = num_attention_heads;
// head_dim = hidden_size / num_attention_heads (Qwen3: 128); rms_norm_eps 1e-6; rope_theta 10000
// (top level, or "rope_parameters".rope_theta in transformers 5); tie_word_embeddings false;
// Mistral's sliding_window 4096 when absent. rope scaling comes from "rope_scaling" or
// "rope_parameters" ("rope_type" or "type": default, linear, llama3). Qwen2 always has q/k/v bias;
// Qwen3 always has per-head q/k RMSNorm. RoPE style is kNeox (rotate-half) for every safetensors
// checkpoint. torch_dtype / dtype sets weight_dtype.
//
// GGUF: general.architecture llama, qwen2 or qwen3 (Mistral GGUFs say "llama"), then <arch>.* keys.
// head_dim from <arch>.attention.key_length, else <arch>.rope.dimension_count, else
// embedding_length / head_count. rope_style kInterleaved for "llama" (llama.cpp permutes Q/K rows),
// kNeox for qwen2/qwen3. Tied embeddings when output.weight is absent, attention bias when
// blk.0.attn_q.bias exists, qk norm when blk.0.attn_q_norm.weight exists, rope_freq_factors from
// rope_freqs.weight. weight_dtype is the type holding most bytes of the blk.* matrices.
//
// Errors: a missing required field is kCorruptFile naming the field and the file; an unknown
// architecture is kUnsupported listing the supported ones. The result passed validate().
#pragma once

#include <string>

#include "engine/core/status.h"
#include "engine/model/model_config.h"

namespace lathe {

class GgufFile;

// "llama, mistral, qwen2, qwen3"
std::string supported_architectures();

// Parses config.json text; `path` names the file in errors.
Result<ModelConfig> parse_hf_config(const std::string& json_text, const std::string& path);
// Reads and parses a config.json file.
Result<ModelConfig> load_hf_config(const std::string& path);

Result<ModelConfig> config_from_gguf(const GgufFile& gguf);

}  // namespace lathe
