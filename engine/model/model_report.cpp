#include "engine/model/model_report.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/core/strings.h"
#include "engine/model/hf_model.h"
#include "engine/model/model_loader.h"

namespace lathe {
namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

namespace {

const char* format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::kGguf:
      return "gguf";
    case ModelFormat::kHfFolder:
      return "hf";
    case ModelFormat::kDummy:
      return "config";
  }
  return "unknown";
}

const char* rope_style_name(RopeStyle s) {
  return s == RopeStyle::kNeox ? "neox" : "interleaved";
}

const char* rope_scaling_name(RopeScalingType t) {
  switch (t) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kLlama3:
      return "llama3";
  }
  return "none";
}

// The folder a path to a Hugging Face model names (itself, or the folder of a file in it); empty
// for anything else (a GGUF file).
std::string hf_folder_of(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return path;
  const fs::path p(path);
  const std::string name = p.filename().string();
  if (name == "config.json") return p.has_parent_path() ? p.parent_path().string() : ".";
  return "";
}

bool folder_has_weights(const std::string& folder) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".safetensors") return true;
  return false;
}

std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string bytes(int64_t n) {
  return format_bytes(static_cast<double>(n));
}

}  // namespace

ModelReport build_model_report(const LoadedModel& m, const ReportOptions& o) {
  ModelReport r;
  r.path = m.path;
  r.format = format_name(m.format);
  r.config = m.config;
  r.dtypes = m.dtype_summary;
  r.group_bytes = m.group_bytes;
  if (m.quantization.quantized()) r.quantization = m.quantization.method;
  r.file_bytes = m.file_bytes;
  r.has_chat_template = !m.chat_template.empty();
  r.eos_token_ids = m.generation.eos_token_ids;
  const int64_t stored = m.format == ModelFormat::kDummy ? 0 : m.weights.total_bytes();
  r.memory = estimate_memory(m.config, stored, o.max_model_len, o.batch);

  // CPU backend plan: weights as stored (or bf16 for a config without weights), fp32 KV cache.
  const int64_t ram = system_memory_bytes();
  r.budget_bytes = o.budget_bytes > 0 ? o.budget_bytes : ram;
  r.fit_device = o.budget_bytes > 0 ? "CPU (given budget)" : "CPU (system RAM)";
  FitRequest fr;
  fr.budget_bytes = r.budget_bytes;
  fr.weight_bytes = stored > 0 ? stored : r.memory.weight_bytes_fp16;
  fr.kv_bytes_per_token = r.memory.kv_bytes_per_token_fp32;
  fr.max_model_len = r.memory.max_model_len;
  fr.num_sequences = r.memory.num_sequences;
  fr.int4_weight_bytes = r.memory.weight_bytes_int4;
  r.fit = check_fit(fr);
  return r;
}

Result<ModelReport> inspect_model(const std::string& path, const ReportOptions& options) {
  LoadOptions lo;
  lo.load_tokenizer = false;
  const std::string folder = hf_folder_of(path);
  if (!folder.empty() && fs::exists(fs::path(folder) / "config.json") &&
      !folder_has_weights(folder))
    lo.load_format = LoadFormat::kDummy;
  LATHE_ASSIGN_OR_RETURN(LoadedModel m, load_model(path, lo));
  return build_model_report(m, options);
}

std::string model_report_json(const ModelReport& r) {
  const ModelConfig& c = r.config;
  ordered_json j;
  j["path"] = r.path;
  j["name"] = c.name;
  j["format"] = r.format;
  j["architecture"] = architecture_name(c.arch);
  j["model_type"] = c.hf_model_type;
  j["parameters"] = r.memory.num_parameters;
  j["layers"] = c.num_layers;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["heads"] = c.num_heads;
  j["kv_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["vocab_size"] = c.vocab_size;
  j["context_length"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope"] = {
      {"theta", c.rope_theta},
      {"style", rope_style_name(c.rope_style)},
      {"scaling", rope_scaling_name(c.rope_scaling.type)},
      {"factor", c.rope_scaling.type == RopeScalingType::kNone ? 1.0 : c.rope_scaling.factor},
      {"frequency_factors", !c.rope_freq_factors.empty()}};
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["qk_norm"] = c.qk_norm;
  j["sliding_window"] = c.sliding_window;
  j["weight_dtype"] = std::string(dtype_name(c.weight_dtype));
  ordered_json dt = ordered_json::object();
  for (const auto& [group, type] : r.dtypes) dt[group] = type;
  j["dtypes"] = dt;
  j["quantization"] = r.quantization;
  j["file_bytes"] = r.file_bytes;
  j["has_chat_template"] = r.has_chat_template;
  j["eos_token_ids"] = r.eos_token_ids;
  const MemoryEstimate& m = r.memory;
  ordered_json mem;
  mem["weights"] = {{"stored", m.weight_bytes_stored},
                    {"fp16", m.weight_bytes_fp16},
                    {"int8", m.weight_bytes_int8},
                    {"int4", m.weight_bytes_int4}};
  ordered_json groups = ordered_json::object();
  for (const auto& [group, b] : r.group_bytes) groups[group] = b;
  mem["weights"]["groups"] = groups;
  mem["kv_per_token"] = {{"fp16", m.kv_bytes_per_token_fp16}, {"fp32", m.kv_bytes_per_token_fp32}};
  mem["max_model_len"] = m.max_model_len;
  mem["batch"] = m.num_sequences;
  mem["kv"] = {{"fp16", m.kv_bytes_fp16}, {"fp32", m.kv_bytes_fp32}};
  mem["fit"] = {{"device", r.fit_device},
                {"budget_bytes", r.budget_bytes},
                {"needed_bytes", r.fit.needed_bytes},
                {"verdict", fit_kind_name(r.fit.kind)},
                {"max_sequences", r.fit.max_sequences},
                {"max_kv_tokens", r.fit.max_kv_tokens},
                {"message", r.fit.message}};
  j["memory"] = mem;
  // Names and paths may hold any bytes; replace invalid UTF-8 instead of throwing.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string model_report_text(const ModelReport& r) {
  const ModelConfig& c = r.config;
  const MemoryEstimate& m = r.memory;
  std::string out;
  auto line = [&](const char* label, const std::string& value) {
    out += strformat("%-14s%s\n", label, value.c_str());
  };

  line("Model", c.name.empty() ? r.path : c.name);
  line("Path", r.path);
  line("Format", r.format == "gguf" ? "GGUF"
                 : r.format == "hf" ? "Hugging Face safetensors"
                                    : "config.json only (no weights)");
  std::string arch = architecture_name(c.arch);
  if (c.hf_model_type != arch && !c.hf_model_type.empty()) arch += " (" + c.hf_model_type + ")";
  line("Architecture", arch);
  line("Parameters", format_count(static_cast<double>(m.num_parameters)) + " (" +
                         with_thousands(m.num_parameters) + ")");
  line("Layers", std::to_string(c.num_layers) + ", hidden " + std::to_string(c.hidden_size) +
                     ", FFN " + std::to_string(c.intermediate_size));
  line(
      "Attention",
      strformat("%lld heads, %lld KV heads, head dim %lld%s%s", static_cast<long long>(c.num_heads),
                static_cast<long long>(c.num_kv_heads), static_cast<long long>(c.head_dim),
                c.attention_bias ? ", q/k/v bias" : "", c.qk_norm ? ", q/k norm" : ""));
  std::string rope = strformat("theta %g, %s", c.rope_theta, rope_style_name(c.rope_style));
  if (c.rope_scaling.type != RopeScalingType::kNone)
    rope += strformat(", %s scaling x%g", rope_scaling_name(c.rope_scaling.type),
                      c.rope_scaling.factor);
  if (!c.rope_freq_factors.empty()) rope += ", per-frequency factors";
  line("RoPE", rope);
  line("Context", with_thousands(c.max_position_embeddings) + " tokens" +
                      (c.sliding_window > 0 ? strformat(" (sliding window %lld)",
                                                        static_cast<long long>(c.sliding_window))
                                            : std::string()));
  line("Vocabulary", with_thousands(c.vocab_size) +
                         (c.tie_word_embeddings ? ", embeddings tied to the output" : ""));
  if (r.dtypes.empty()) {
    line("Weights dtype", std::string(dtype_name(c.weight_dtype)) + " (from config.json)");
  } else {
    std::string s;
    for (const auto& [group, type] : r.dtypes) {
      if (!s.empty()) s += ", ";
      s += group + " " + type;
    }
    line("Storage", s);
  }
  if (r.quantization != "none") line("Quantization", r.quantization + " checkpoint");
  if (r.file_bytes > 0) line("File size", bytes(r.file_bytes));
  if (r.format != "config")
    line("Chat template", r.has_chat_template ? "yes" : "none (plain completion only)");

  out += "\nMemory\n";
  std::string w = "FP16 " + bytes(m.weight_bytes_fp16) + ", INT8 " + bytes(m.weight_bytes_int8) +
                  ", INT4 " + bytes(m.weight_bytes_int4);
  if (m.weight_bytes_stored > 0) w += ", as stored " + bytes(m.weight_bytes_stored);
  line("  Weights", w);
  if (!r.group_bytes.empty()) {
    std::string g;
    for (const auto& [group, b] : r.group_bytes)
      g += (g.empty() ? "" : ", ") + group + " " + bytes(b);
    line("  As stored", g);
  }
  line("  KV / token", bytes(m.kv_bytes_per_token_fp16) + " (fp16/bf16), " +
                           bytes(m.kv_bytes_per_token_fp32) + " (fp32)");
  line("  KV cache",
       strformat("%s (fp16/bf16), %s (fp32) for %lld tokens x %lld sequence%s",
                 bytes(m.kv_bytes_fp16).c_str(), bytes(m.kv_bytes_fp32).c_str(),
                 static_cast<long long>(m.max_model_len), static_cast<long long>(m.num_sequences),
                 m.num_sequences == 1 ? "" : "s"));
  if (r.budget_bytes > 0)
    line("  Fit", r.fit_device + ", " + bytes(r.budget_bytes) + ": " + r.fit.message);
  return out;
}

}  // namespace lathe
