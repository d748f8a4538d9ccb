#include "engine/model/model_config.h"

#include "engine/core/strings.h"

namespace lathe {

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::kLlama: return "llama";
    case Architecture::kMistral: return "mistral";
    case Architecture::kQwen2: return "qwen2";
    case Architecture::kQwen3: return "qwen3";
  }
  return "unknown";
}

int64_t ModelConfig::num_parameters() const {
  const int64_t embed = vocab_size * hidden_size;
  int64_t attn = hidden_size * q_size() + 2 * hidden_size * kv_size() + q_size() * hidden_size;
  if (attention_bias) attn += q_size() + 2 * kv_size();
  if (qk_norm) attn += 2 * head_dim;
  const int64_t mlp = 3 * hidden_size * intermediate_size;
  const int64_t norms = 2 * hidden_size;
  return embed + num_layers * (attn + mlp + norms) + hidden_size + (tie_word_embeddings ? 0 : embed);
}

Status ModelConfig::validate() const {
  auto positive = [](int64_t v, const char* field) -> Status {
    if (v <= 0) return invalid_argument(strformat("%s must be > 0, got %lld", field, static_cast<long long>(v)));
    return Status();
  };
  LATHE_RETURN_IF_ERROR(positive(vocab_size, "vocab_size"));
  LATHE_RETURN_IF_ERROR(positive(hidden_size, "hidden_size"));
  LATHE_RETURN_IF_ERROR(positive(intermediate_size, "intermediate_size"));
  LATHE_RETURN_IF_ERROR(positive(num_layers, "num_hidden_layers"));
  LATHE_RETURN_IF_ERROR(positive(num_heads, "num_attention_heads"));
  LATHE_RETURN_IF_ERROR(positive(num_kv_heads, "num_key_value_heads"));
  LATHE_RETURN_IF_ERROR(positive(head_dim, "head_dim"));
  LATHE_RETURN_IF_ERROR(positive(max_position_embeddings, "max_position_embeddings"));
  if (num_heads % num_kv_heads != 0)
    return invalid_argument(strformat("num_attention_heads (%lld) must be a multiple of num_key_value_heads (%lld)",
                                      static_cast<long long>(num_heads), static_cast<long long>(num_kv_heads)));
  if (head_dim % 2 != 0)
    return invalid_argument(strformat("head_dim must be even for rotary embeddings, got %lld",
                                      static_cast<long long>(head_dim)));
  if (head_dim > 256)
    return unsupported(strformat("head_dim %lld is larger than the 256 Lathe supports",
                                 static_cast<long long>(head_dim)));
  if (!(rms_norm_eps > 0)) return invalid_argument("rms_norm_eps must be > 0");
  if (!(rope_theta > 0)) return invalid_argument("rope_theta must be > 0");
  if (rope_scaling.type != RopeScalingType::kNone && !(rope_scaling.factor >= 1.0))
    return invalid_argument("rope_scaling.factor must be >= 1");
  return Status();
}

}  // namespace lathe
