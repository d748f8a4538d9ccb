#include "engine/quant/config_export.h"

#include <vector>

#include <nlohmann/json.hpp>

namespace lathe {
using ojson = nlohmann::ordered_json;

namespace {

const char* gguf_arch(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
    case Architecture::kMistral:
      return "llama";  // llama.cpp writes Mistral models as "llama"
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
  }
  return "llama";
}

const char* hf_architecture_class(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return "LlamaForCausalLM";
    case Architecture::kMistral:
      return "MistralForCausalLM";
    case Architecture::kQwen2:
      return "Qwen2ForCausalLM";
    case Architecture::kQwen3:
      return "Qwen3ForCausalLM";
  }
  return "LlamaForCausalLM";
}

ojson eos_value(const GenerationDefaults& g) {
  if (g.eos_token_ids.empty()) return nullptr;
  if (g.eos_token_ids.size() == 1) return g.eos_token_ids[0];
  return g.eos_token_ids;
}

}  // namespace

GgufMetadata gguf_model_metadata(const ModelConfig& c) {
  const std::string a = gguf_arch(c.arch);
  GgufMetadata m;
  gguf_set(m, "general.architecture", gguf_string(a));
  gguf_set(m, "general.type", gguf_string("model"));
  if (!c.name.empty()) gguf_set(m, "general.name", gguf_string(c.name));
  auto u32 = [](int64_t v) { return gguf_u32(static_cast<uint32_t>(v)); };
  gguf_set(m, a + ".vocab_size", u32(c.vocab_size));
  gguf_set(m, a + ".context_length", u32(c.max_position_embeddings));
  gguf_set(m, a + ".embedding_length", u32(c.hidden_size));
  gguf_set(m, a + ".block_count", u32(c.num_layers));
  gguf_set(m, a + ".feed_forward_length", u32(c.intermediate_size));
  gguf_set(m, a + ".attention.head_count", u32(c.num_heads));
  gguf_set(m, a + ".attention.head_count_kv", u32(c.num_kv_heads));
  gguf_set(m, a + ".rope.freq_base", gguf_f32(static_cast<float>(c.rope_theta)));
  gguf_set(m, a + ".attention.layer_norm_rms_epsilon",
           gguf_f32(static_cast<float>(c.rms_norm_eps)));
  gguf_set(m, a + ".rope.dimension_count", u32(c.head_dim));
  if (c.num_heads * c.head_dim != c.hidden_size || c.arch == Architecture::kQwen3) {
    gguf_set(m, a + ".attention.key_length", u32(c.head_dim));
    gguf_set(m, a + ".attention.value_length", u32(c.head_dim));
  }
  if (c.rope_scaling.type == RopeScalingType::kLinear) {
    gguf_set(m, a + ".rope.scaling.type", gguf_string("linear"));
    gguf_set(m, a + ".rope.scaling.factor", gguf_f32(static_cast<float>(c.rope_scaling.factor)));
  }
  if (c.sliding_window > 0) gguf_set(m, a + ".attention.sliding_window", u32(c.sliding_window));
  return m;
}

std::vector<float> gguf_rope_freq_factors(const ModelConfig& c) {
  if (!c.rope_freq_factors.empty()) return c.rope_freq_factors;
  if (c.rope_scaling.type != RopeScalingType::kLlama3) return {};
  ModelConfig plain = c;
  plain.rope_scaling = RopeScaling{};
  const std::vector<float> unscaled = rope_inverse_frequencies(plain);
  const std::vector<float> scaled = rope_inverse_frequencies(c);
  std::vector<float> f(unscaled.size());
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = static_cast<float>(static_cast<double>(unscaled[i]) / static_cast<double>(scaled[i]));
  return f;
}

Result<std::string> hf_config_json(const ModelConfig& c, const GenerationDefaults& g,
                                   int32_t bos_token_id, const std::string& torch_dtype) {
  if (!c.rope_freq_factors.empty())
    return unsupported(
        "the source stores RoPE scaling as per-frequency factors (GGUF rope_freqs.weight), which "
        "a Hugging Face config.json cannot express; write a GGUF output instead");
  ojson j;
  j["architectures"] = {hf_architecture_class(c.arch)};
  j["model_type"] = architecture_name(c.arch);
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling.type == RopeScalingType::kLinear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  } else if (c.rope_scaling.type == RopeScalingType::kLlama3) {
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", c.rope_scaling.factor},
        {"low_freq_factor", c.rope_scaling.low_freq_factor},
        {"high_freq_factor", c.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.arch == Architecture::kLlama || c.arch == Architecture::kMistral) {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  }
  if (c.arch == Architecture::kMistral)
    j["sliding_window"] = c.sliding_window > 0 ? ojson(c.sliding_window) : ojson(nullptr);
  if (c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen3) {
    j["use_sliding_window"] = c.sliding_window > 0;
    j["sliding_window"] = c.sliding_window > 0 ? ojson(c.sliding_window) : ojson(nullptr);
  }
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_value(g);
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

std::string hf_generation_config_json(const GenerationDefaults& g, int32_t bos_token_id) {
  ojson j;
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  j["eos_token_id"] = eos_value(g);
  if (g.temperature >= 0) {
    j["do_sample"] = g.temperature > 0;
    j["temperature"] = g.temperature;
  }
  if (g.top_p >= 0) j["top_p"] = g.top_p;
  if (g.top_k >= 0) j["top_k"] = g.top_k;
  if (g.repetition_penalty >= 0) j["repetition_penalty"] = g.repetition_penalty;
  return j.dump(2) + "\n";
}

void permute_rope_rows(float* w, int64_t heads, int64_t head_dim, int64_t cols, bool to_gguf) {
  const int64_t half = head_dim / 2;
  std::vector<float> tmp(static_cast<size_t>(head_dim * cols));
  for (int64_t h = 0; h < heads; ++h) {
    float* head = w + h * head_dim * cols;
    for (int64_t i = 0; i < half; ++i)
      for (int64_t p = 0; p < 2; ++p) {
        const int64_t hf_row = p * half + i, gguf_row = 2 * i + p;
        const int64_t src = to_gguf ? hf_row : gguf_row, dst = to_gguf ? gguf_row : hf_row;
        std::copy(head + src * cols, head + (src + 1) * cols, tmp.data() + dst * cols);
      }
    std::copy(tmp.begin(), tmp.end(), head);
  }
}

}  // namespace lathe
