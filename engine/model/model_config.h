// The shape and numerics of a Llama-family decoder, independent of the file format it came from.
// Filled from a Hugging Face config.json or from GGUF metadata (model_config_parse.h), then checked
// by validate(). All sizes are element counts unless a name says otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/status.h"

namespace lathe {

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3 };
const char* architecture_name(Architecture a);  // "llama", "mistral", "qwen2", "qwen3"

// How the two halves of each rotated head pair up.
//   kNeox: rotate-half (Hugging Face safetensors, Qwen2 GGUF): pairs (i, i + head_dim/2).
//   kInterleaved: adjacent pairs (llama.cpp's permuted Llama GGUF): pairs (2i, 2i + 1).
enum class RopeStyle { kNeox, kInterleaved };

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;                              // linear and llama3
  double low_freq_factor = 1.0;                     // llama3
  double high_freq_factor = 4.0;                    // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string hf_model_type;  // as written in the file ("llama", "mistral", "qwen2", "qwen3")
  std::string name;           // general.name or the folder name, for display

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;        // d_model
  int64_t intermediate_size = 0;  // FFN width
  int64_t num_layers = 0;
  int64_t num_heads = 0;                // query heads
  int64_t num_kv_heads = 0;             // key/value heads (GQA: num_heads % num_kv_heads == 0)
  int64_t head_dim = 0;                 // usually hidden_size / num_heads; Qwen3 sets it explicitly
  int64_t max_position_embeddings = 0;  // the model's trained context length

  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeStyle rope_style = RopeStyle::kNeox;
  RopeScaling rope_scaling;
  // Per-frequency divisors of the RoPE inverse frequencies: inv_freq[i] /= rope_freq_factors[i].
  // llama.cpp stores Llama 3.1+ scaling this way (GGUF tensor rope_freqs.weight) instead of
  // rope_scaling metadata. Empty when absent, else head_dim / 2 entries.
  std::vector<float> rope_freq_factors;

  bool tie_word_embeddings = false;  // lm_head shares the embedding matrix
  bool attention_bias = false;       // q/k/v projections have biases (Qwen2)
  bool qk_norm = false;              // per-head RMSNorm on q and k before RoPE (Qwen3)
  int64_t sliding_window = 0;        // 0 = full attention (Mistral v0.1 sets 4096; see validate())

  DType weight_dtype = DType::kBF16;  // dominant stored dtype, for display ("torch_dtype")

  int64_t q_size() const { return num_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }

  // Parameters counted from the shapes (embedding counted once when tied).
  int64_t num_parameters() const;
  // Bytes of K and V for one token across all layers at `bytes_per_element`.
  int64_t kv_bytes_per_token(int64_t bytes_per_element) const {
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_element;
  }

  // Checks internal consistency; the message names the field and the fix.
  Status validate() const;
};

// The RoPE inverse frequencies, head_dim / 2 of them, with every scaling in the config applied
// (linear, llama3, GGUF rope_freq_factors): pair i of a head at position p rotates by the angle
// p * inv_freq[i]. Unscaled: inv_freq[i] = rope_theta^(-2i / head_dim). Computed in double and
// rounded once, so every backend gets the same values.
std::vector<float> rope_inverse_frequencies(const ModelConfig& config);

}  // namespace lathe
