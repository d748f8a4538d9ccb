#include "engine/model/model_config.h"

#include <cmath>

#include "engine/core/strings.h"

namespace lathe {

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kMistral:
      return "mistral";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
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
  return embed + num_layers * (attn + mlp + norms) + hidden_size +
         (tie_word_embeddings ? 0 : embed);
}

Status ModelConfig::validate() const {
  auto positive = [](int64_t v, const char* field) -> Status {
    if (v <= 0)
      return invalid_argument(
          strformat("%s must be > 0, got %lld", field, static_cast<long long>(v)));
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
    return invalid_argument(
        strformat("num_attention_heads (%lld) must be a multiple of num_key_value_heads (%lld)",
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
  if (rope_scaling.type == RopeScalingType::kLlama3 &&
      !(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
        rope_scaling.low_freq_factor > 0 && rope_scaling.original_max_position_embeddings > 0))
    return invalid_argument(
        "rope_scaling (llama3) needs high_freq_factor > low_freq_factor > 0 and "
        "original_max_position_embeddings > 0");
  if (!rope_freq_factors.empty()) {
    if (static_cast<int64_t>(rope_freq_factors.size()) != head_dim / 2)
      return invalid_argument(strformat("rope_freqs has %zu entries; expected head_dim / 2 = %lld",
                                        rope_freq_factors.size(),
                                        static_cast<long long>(head_dim / 2)));
    for (float f : rope_freq_factors)
      if (!(f > 0) || !std::isfinite(f))
        return invalid_argument("rope_freqs holds a factor that is not a positive number");
  }
  return Status();
}

std::vector<float> rope_inverse_frequencies(const ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<float> out(static_cast<size_t>(half > 0 ? half : 0));
  const RopeScaling& s = c.rope_scaling;
  for (int64_t i = 0; i < half; ++i) {
    double inv =
        std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim));
    if (s.type == RopeScalingType::kLinear) {
      inv /= s.factor;
    } else if (s.type == RopeScalingType::kLlama3) {
      // transformers' _compute_llama3_parameters: keep high frequencies, divide low ones by
      // factor, interpolate in between.
      const double old_len = static_cast<double>(s.original_max_position_embeddings);
      const double low_freq_wavelen = old_len / s.low_freq_factor;
      const double high_freq_wavelen = old_len / s.high_freq_factor;
      const double wavelen = 2.0 * M_PI / inv;
      if (wavelen > low_freq_wavelen) {
        inv /= s.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth =
            (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        inv = (1.0 - smooth) * inv / s.factor + smooth * inv;
      }
    }
    if (!c.rope_freq_factors.empty())
      inv /= static_cast<double>(c.rope_freq_factors[static_cast<size_t>(i)]);
    out[static_cast<size_t>(i)] = static_cast<float>(inv);
  }
  return out;
}

}  // namespace lathe
