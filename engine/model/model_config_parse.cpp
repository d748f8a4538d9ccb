#include "engine/model/model_config_parse.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/log.h"
#include "engine/core/read_file.h"
#include "engine/core/strings.h"
#include "engine/model/gguf_file.h"

namespace lathe {
using json = nlohmann::json;

namespace {

struct ArchInfo {
  const char* name;
  Architecture arch;
  int64_t default_max_position_embeddings;  // transformers' config-class default
};
constexpr ArchInfo kHfArchs[] = {
    {"llama", Architecture::kLlama, 2048},
    {"mistral", Architecture::kMistral, 4096 * 32},
    {"qwen2", Architecture::kQwen2, 32768},
    {"qwen3", Architecture::kQwen3, 32768},
};

// Typed reads of config.json fields. Absent or null: nullopt. Wrong type: an error naming the
// field.
class JsonFields {
 public:
  JsonFields(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  Status missing(const std::string& field) const {
    return corrupt_file(path_ + ": missing required field '" + field + "'");
  }
  Status wrong(const std::string& field, const char* expected) const {
    return corrupt_file(path_ + ": field '" + field + "' must be " + expected + ", got " +
                        j_.at(field).dump());
  }

  Result<std::optional<int64_t>> opt_int(const std::string& field) const {
    const auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return std::optional<int64_t>();
    if (it->is_number_integer()) return std::optional<int64_t>(it->get<int64_t>());
    if (it->is_number_float()) {
      const double d = it->get<double>();
      if (std::floor(d) == d && std::fabs(d) < 9.0e15)
        return std::optional<int64_t>(static_cast<int64_t>(d));
    }
    return wrong(field, "an integer");
  }
  Result<int64_t> req_int(const std::string& field) const {
    LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> v, opt_int(field));
    if (!v) return missing(field);
    return *v;
  }
  Result<std::optional<double>> opt_float(const std::string& field) const {
    const auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return std::optional<double>();
    if (!it->is_number()) return wrong(field, "a number");
    return std::optional<double>(it->get<double>());
  }
  Result<std::optional<bool>> opt_bool(const std::string& field) const {
    const auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return std::optional<bool>();
    if (!it->is_boolean()) return wrong(field, "true or false");
    return std::optional<bool>(it->get<bool>());
  }
  Result<std::optional<std::string>> opt_string(const std::string& field) const {
    const auto it = j_.find(field);
    if (it == j_.end() || it->is_null()) return std::optional<std::string>();
    if (!it->is_string()) return wrong(field, "a string");
    return std::optional<std::string>(it->get<std::string>());
  }

 private:
  const json& j_;
  std::string path_;
};

// rope_scaling (transformers 4) or rope_parameters (transformers 5).
Status parse_rope_scaling(const json& rs, const std::string& field, const std::string& path,
                          RopeScaling* out) {
  if (!rs.is_object())
    return corrupt_file(path + ": field '" + field + "' must be an object, got " + rs.dump());
  const JsonFields f(rs, path + " (" + field + ")");
  std::optional<std::string> type;
  LATHE_ASSIGN_OR_RETURN(type, f.opt_string("rope_type"));
  if (!type) {
    LATHE_ASSIGN_OR_RETURN(type, f.opt_string("type"));
  }
  if (!type || *type == "default") {
    out->type = RopeScalingType::kNone;
    return Status();
  }
  auto factor = [&]() -> Result<double> {
    LATHE_ASSIGN_OR_RETURN(std::optional<double> v, f.opt_float("factor"));
    if (!v) return corrupt_file(path + ": missing required field '" + field + ".factor'");
    return *v;
  };
  if (*type == "linear") {
    out->type = RopeScalingType::kLinear;
    LATHE_ASSIGN_OR_RETURN(out->factor, factor());
    return Status();
  }
  if (*type == "llama3") {
    out->type = RopeScalingType::kLlama3;
    LATHE_ASSIGN_OR_RETURN(out->factor, factor());
    LATHE_ASSIGN_OR_RETURN(std::optional<double> low, f.opt_float("low_freq_factor"));
    LATHE_ASSIGN_OR_RETURN(std::optional<double> high, f.opt_float("high_freq_factor"));
    LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> orig,
                           f.opt_int("original_max_position_embeddings"));
    if (!low)
      return corrupt_file(path + ": missing required field '" + field + ".low_freq_factor'");
    if (!high)
      return corrupt_file(path + ": missing required field '" + field + ".high_freq_factor'");
    if (!orig)
      return corrupt_file(path + ": missing required field '" + field +
                          ".original_max_position_embeddings'");
    out->low_freq_factor = *low;
    out->high_freq_factor = *high;
    out->original_max_position_embeddings = *orig;
    return Status();
  }
  return unsupported(path + ": " + field + " type '" + *type +
                     "' is not supported (supported: default, linear, llama3)");
}

std::optional<DType> parse_torch_dtype(const std::string& s) {
  if (s == "bfloat16") return DType::kBF16;
  if (s == "float16") return DType::kF16;
  if (s == "float32") return DType::kF32;
  return parse_float_dtype(s);
}

}  // namespace

std::string supported_architectures() {
  return "llama, mistral, qwen2, qwen3";
}

Result<ModelConfig> load_hf_config(const std::string& path) {
  Result<std::string> text = read_file(path);
  if (!text.is_ok()) return not_found(path + ": cannot read the model config");
  return parse_hf_config(*text, path);
}

Result<ModelConfig> parse_hf_config(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return corrupt_file(path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return corrupt_file(path + ": expected a JSON object");

  ModelConfig c;
  try {
    const JsonFields f(j, path);
    LATHE_ASSIGN_OR_RETURN(std::optional<std::string> model_type, f.opt_string("model_type"));
    if (!model_type) return f.missing("model_type");
    const ArchInfo* info = nullptr;
    for (const ArchInfo& a : kHfArchs)
      if (*model_type == a.name) info = &a;
    if (info == nullptr)
      return unsupported(path + ": model_type '" + *model_type +
                         "' is not supported; supported: " + supported_architectures());
    c.arch = info->arch;
    c.hf_model_type = *model_type;
    LATHE_ASSIGN_OR_RETURN(std::optional<std::string> name, f.opt_string("_name_or_path"));
    if (name) c.name = *name;

    LATHE_ASSIGN_OR_RETURN(c.hidden_size, f.req_int("hidden_size"));
    LATHE_ASSIGN_OR_RETURN(c.intermediate_size, f.req_int("intermediate_size"));
    LATHE_ASSIGN_OR_RETURN(c.num_layers, f.req_int("num_hidden_layers"));
    LATHE_ASSIGN_OR_RETURN(c.num_heads, f.req_int("num_attention_heads"));
    LATHE_ASSIGN_OR_RETURN(c.vocab_size, f.req_int("vocab_size"));
    if (c.num_heads <= 0)
      return corrupt_file(strformat("%s: num_attention_heads must be > 0, got %lld", path.c_str(),
                                    static_cast<long long>(c.num_heads)));
    LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> kv_heads, f.opt_int("num_key_value_heads"));
    c.num_kv_heads = kv_heads.value_or(c.num_heads);
    LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, f.opt_int("head_dim"));
    c.head_dim =
        head_dim ? *head_dim : (c.arch == Architecture::kQwen3 ? 128 : c.hidden_size / c.num_heads);
    LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> max_pos, f.opt_int("max_position_embeddings"));
    c.max_position_embeddings = max_pos.value_or(info->default_max_position_embeddings);
    LATHE_ASSIGN_OR_RETURN(std::optional<double> eps, f.opt_float("rms_norm_eps"));
    c.rms_norm_eps = eps.value_or(1e-6);

    // RoPE: transformers 5 keeps theta and scaling in rope_parameters; 4 uses rope_theta +
    // rope_scaling.
    LATHE_ASSIGN_OR_RETURN(std::optional<double> theta, f.opt_float("rope_theta"));
    const auto rp = j.find("rope_parameters");
    if (rp != j.end() && !rp->is_null()) {
      if (!rp->is_object()) return f.wrong("rope_parameters", "an object");
      const JsonFields rf(*rp, path + " (rope_parameters)");
      LATHE_ASSIGN_OR_RETURN(std::optional<double> t, rf.opt_float("rope_theta"));
      if (t) theta = t;
      LATHE_RETURN_IF_ERROR(parse_rope_scaling(*rp, "rope_parameters", path, &c.rope_scaling));
    }
    const auto rs = j.find("rope_scaling");
    if (rs != j.end() && !rs->is_null() && c.rope_scaling.type == RopeScalingType::kNone)
      LATHE_RETURN_IF_ERROR(parse_rope_scaling(*rs, "rope_scaling", path, &c.rope_scaling));
    c.rope_theta = theta.value_or(10000.0);
    c.rope_style = RopeStyle::kNeox;

    LATHE_ASSIGN_OR_RETURN(std::optional<bool> tie, f.opt_bool("tie_word_embeddings"));
    c.tie_word_embeddings = tie.value_or(false);

    LATHE_ASSIGN_OR_RETURN(std::optional<std::string> act, f.opt_string("hidden_act"));
    if (act && *act != "silu")
      return unsupported(path + ": hidden_act '" + *act +
                         "' is not supported (Lathe implements silu / SwiGLU)");
    LATHE_ASSIGN_OR_RETURN(std::optional<bool> mlp_bias, f.opt_bool("mlp_bias"));
    if (mlp_bias.value_or(false)) return unsupported(path + ": mlp_bias = true is not supported");
    LATHE_ASSIGN_OR_RETURN(std::optional<bool> attn_bias, f.opt_bool("attention_bias"));
    if (c.arch == Architecture::kQwen2) {
      c.attention_bias = true;  // Qwen2 always has q/k/v biases (and none on o_proj)
    } else if (attn_bias.value_or(false)) {
      return unsupported(
          path + ": attention_bias = true (biases on q/k/v and o_proj) is not supported for " +
          c.hf_model_type);
    }
    c.qk_norm = c.arch == Architecture::kQwen3;

    // Sliding window: Mistral applies it whenever set (transformers' default is 4096); Qwen only
    // with use_sliding_window. A window at least as long as the context changes nothing.
    LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> window, f.opt_int("sliding_window"));
    if (c.arch == Architecture::kMistral) {
      c.sliding_window = j.contains("sliding_window") ? window.value_or(0) : 4096;
    } else if (c.arch == Architecture::kQwen2 || c.arch == Architecture::kQwen3) {
      LATHE_ASSIGN_OR_RETURN(std::optional<bool> use, f.opt_bool("use_sliding_window"));
      if (use.value_or(false)) c.sliding_window = window.value_or(0);
    }
    if (c.sliding_window >= c.max_position_embeddings) c.sliding_window = 0;
    if (c.sliding_window > 0)
      log_info(strformat("%s: sliding-window attention over %lld tokens", path.c_str(),
                         static_cast<long long>(c.sliding_window)));

    LATHE_ASSIGN_OR_RETURN(std::optional<std::string> dtype, f.opt_string("torch_dtype"));
    if (!dtype) {
      LATHE_ASSIGN_OR_RETURN(dtype, f.opt_string("dtype"));
    }
    if (dtype) {
      if (const std::optional<DType> d = parse_torch_dtype(*dtype)) c.weight_dtype = *d;
    }
  } catch (const json::exception& e) {
    return corrupt_file(path + ": unexpected content: " + e.what());
  }
  LATHE_RETURN_IF_ERROR(c.validate().with_context(path));
  return c;
}

Result<ModelConfig> config_from_gguf(const GgufFile& g) {
  const std::string& path = g.path();
  ModelConfig c;
  LATHE_ASSIGN_OR_RETURN(std::optional<std::string> arch, g.get_string("general.architecture"));
  if (!arch) return corrupt_file(path + ": missing required metadata 'general.architecture'");
  if (*arch == "llama") {
    c.arch = Architecture::kLlama;
    c.rope_style = RopeStyle::kInterleaved;  // llama.cpp permuted the Q/K rows
  } else if (*arch == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.rope_style = RopeStyle::kNeox;
  } else if (*arch == "qwen3") {
    c.arch = Architecture::kQwen3;
    c.rope_style = RopeStyle::kNeox;
  } else {
    return unsupported(path + ": GGUF architecture '" + *arch +
                       "' is not supported; supported: llama (also Mistral), qwen2, qwen3");
  }
  c.hf_model_type = *arch;
  const std::string p = *arch + ".";
  LATHE_ASSIGN_OR_RETURN(std::optional<std::string> name, g.get_string("general.name"));
  if (name) c.name = *name;

  auto req_int = [&](const std::string& key) -> Result<int64_t> {
    LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> v, g.get_int(key));
    if (!v) return corrupt_file(path + ": missing required metadata '" + key + "'");
    return *v;
  };
  LATHE_ASSIGN_OR_RETURN(c.num_layers, req_int(p + "block_count"));
  LATHE_ASSIGN_OR_RETURN(c.hidden_size, req_int(p + "embedding_length"));
  LATHE_ASSIGN_OR_RETURN(c.intermediate_size, req_int(p + "feed_forward_length"));
  LATHE_ASSIGN_OR_RETURN(c.num_heads, req_int(p + "attention.head_count"));
  LATHE_ASSIGN_OR_RETURN(c.max_position_embeddings, req_int(p + "context_length"));
  if (c.num_heads <= 0)
    return corrupt_file(strformat("%s: %sattention.head_count must be > 0, got %lld", path.c_str(),
                                  p.c_str(), static_cast<long long>(c.num_heads)));
  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> kv_heads, g.get_int(p + "attention.head_count_kv"));
  c.num_kv_heads = kv_heads.value_or(c.num_heads);

  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> key_length, g.get_int(p + "attention.key_length"));
  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> value_length,
                         g.get_int(p + "attention.value_length"));
  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> rope_dims, g.get_int(p + "rope.dimension_count"));
  c.head_dim = key_length ? *key_length : rope_dims ? *rope_dims : c.hidden_size / c.num_heads;
  if (value_length && *value_length != c.head_dim)
    return unsupported(strformat(
        "%s: attention.key_length (%lld) differs from attention.value_length (%lld)", path.c_str(),
        static_cast<long long>(c.head_dim), static_cast<long long>(*value_length)));
  if (rope_dims && *rope_dims != c.head_dim)
    return unsupported(strformat(
        "%s: partial rotary embeddings (rope.dimension_count %lld < head_dim %lld) are not "
        "supported",
        path.c_str(), static_cast<long long>(*rope_dims), static_cast<long long>(c.head_dim)));

  LATHE_ASSIGN_OR_RETURN(std::optional<double> eps,
                         g.get_float(p + "attention.layer_norm_rms_epsilon"));
  if (!eps)
    return corrupt_file(path + ": missing required metadata '" + p +
                        "attention.layer_norm_rms_epsilon'");
  c.rms_norm_eps = *eps;
  LATHE_ASSIGN_OR_RETURN(std::optional<double> theta, g.get_float(p + "rope.freq_base"));
  c.rope_theta = theta.value_or(10000.0);

  // Vocabulary: the explicit key, else the embedding's rows, else the token list.
  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> vocab, g.get_int(p + "vocab_size"));
  if (vocab) {
    c.vocab_size = *vocab;
  } else if (const GgufTensorInfo* emb = g.find_tensor("token_embd.weight");
             emb != nullptr && emb->n_dims == 2) {
    c.vocab_size = emb->ne[1];
  } else if (const GgufValue* tokens = g.find("tokenizer.ggml.tokens")) {
    c.vocab_size = tokens->array_size();
  } else {
    return corrupt_file(path + ": cannot tell the vocabulary size (no " + p +
                        "vocab_size, token_embd.weight or tokenizer.ggml.tokens)");
  }

  // RoPE scaling: linear and none in metadata; llama3-style factors as the rope_freqs tensor.
  LATHE_ASSIGN_OR_RETURN(std::optional<std::string> scaling, g.get_string(p + "rope.scaling.type"));
  LATHE_ASSIGN_OR_RETURN(std::optional<double> factor, g.get_float(p + "rope.scaling.factor"));
  LATHE_ASSIGN_OR_RETURN(std::optional<double> scale_linear, g.get_float(p + "rope.scale_linear"));
  if (scaling && *scaling != "none" && *scaling != "linear")
    return unsupported(path + ": rope scaling type '" + *scaling +
                       "' is not supported (supported: none, linear)");
  if ((scaling && *scaling == "linear") || (!scaling && scale_linear)) {
    const double f = factor ? *factor : *scale_linear;
    if (f != 1.0) {
      c.rope_scaling.type = RopeScalingType::kLinear;
      c.rope_scaling.factor = f;
    }
  }
  if (const GgufTensorInfo* rf = g.find_tensor("rope_freqs.weight")) {
    if (rf->dtype != DType::kF32 || rf->n_dims != 1)
      return unsupported(path + ": rope_freqs.weight must be a 1-D f32 tensor");
    c.rope_freq_factors.resize(static_cast<size_t>(rf->ne[0]));
    std::memcpy(c.rope_freq_factors.data(), rf->data, c.rope_freq_factors.size() * sizeof(float));
  }

  LATHE_ASSIGN_OR_RETURN(std::optional<int64_t> window, g.get_int(p + "attention.sliding_window"));
  c.sliding_window = window.value_or(0);
  if (c.sliding_window >= c.max_position_embeddings) c.sliding_window = 0;

  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.attention_bias = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = g.find_tensor("blk.0.attn_q_norm.weight") != nullptr;

  // Dominant storage type of the layer matrices, for display.
  std::map<DType, int64_t> bytes;
  for (const GgufTensorInfo& t : g.tensors())
    if (t.n_dims == 2 && starts_with(t.name, "blk.")) bytes[t.dtype] += t.nbytes;
  int64_t best = -1;
  for (const auto& [dt, n] : bytes)
    if (n > best) {
      best = n;
      c.weight_dtype = dt;
    }

  LATHE_RETURN_IF_ERROR(c.validate().with_context(path));
  return c;
}

}  // namespace lathe
