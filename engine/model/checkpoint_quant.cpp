#include "engine/model/checkpoint_quant.h"

#include <cctype>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "engine/core/read_file.h"
#include "engine/core/strings.h"

namespace lathe {
namespace fs = std::filesystem;
// ordered: GPTQModel's `dynamic` overrides are matched in the order the file lists them.
using json = nlohmann::ordered_json;

namespace {

constexpr const char* kMethods[] = {"gptq", "awq", "compressed-tensors", "fp8"};

Result<json> read_json_object(const fs::path& p) {
  LATHE_ASSIGN_OR_RETURN(std::string text, read_file(p.string()));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt_file(p.string() + ": not a JSON object");
  return j;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string supported_quant_methods() {
  std::string s;
  for (const char* m : kMethods) s += (s.empty() ? "" : ", ") + std::string(m);
  return s;
}

Result<CheckpointQuant> read_checkpoint_quant(const std::string& folder) {
  const fs::path dir(folder);
  std::error_code ec;
  CheckpointQuant q;
  json config;
  const fs::path config_path = dir / "config.json";
  if (fs::exists(config_path, ec)) {
    LATHE_ASSIGN_OR_RETURN(json c, read_json_object(config_path));
    const auto it = c.find("quantization_config");
    if (it != c.end() && !it->is_null()) {
      if (!it->is_object())
        return corrupt_file(config_path.string() + ": quantization_config must be an object");
      config = *it;
      q.source = config_path.string() + " (quantization_config)";
    }
  }
  // AutoGPTQ writes quantize_config.json, AutoAWQ quant_config.json (sometimes also named
  // quantize_config.json); config.json's copy, when present, is what vLLM and transformers read.
  for (const char* name : {"quantize_config.json", "quant_config.json"}) {
    if (!config.is_null()) break;
    const fs::path p = dir / name;
    if (!fs::exists(p, ec)) continue;
    LATHE_ASSIGN_OR_RETURN(config, read_json_object(p));
    q.source = p.string();
  }
  if (config.is_null()) return q;

  std::string method;
  const auto m = config.find("quant_method");
  if (m != config.end() && m->is_string()) {
    method = lower(m->get<std::string>());
  } else if (m != config.end()) {
    return corrupt_file(q.source + ": quant_method must be a string");
  } else if (config.contains("w_bit") || config.contains("q_group_size") ||
             config.contains("version")) {
    method = "awq";  // AutoAWQ's own file names no method
  } else if (config.contains("bits")) {
    method = "gptq";  // AutoGPTQ's quantize_config.json before quant_method existed
  } else {
    return corrupt_file(q.source +
                        ": the quantization config names no quant_method; supported methods: " +
                        supported_quant_methods());
  }
  bool known = false;
  for (const char* k : kMethods) known = known || method == k;
  if (!known)
    return unsupported(q.source + ": quant_method '" + method + "' is not supported; Lathe reads " +
                       supported_quant_methods() +
                       " checkpoints (or use an unquantized checkpoint or a GGUF file)");
  q.method = method;
  q.config_json = config.dump();
  return q;
}

const char* online_quant_name(OnlineQuant q) {
  switch (q) {
    case OnlineQuant::kNone:
      return "none";
    case OnlineQuant::kFp8:
      return "fp8";
    case OnlineQuant::kInt8:
      return "int8";
    case OnlineQuant::kInt4:
      return "int4";
  }
  return "none";
}

bool parse_online_quant(std::string_view s, OnlineQuant* out) {
  for (OnlineQuant q :
       {OnlineQuant::kNone, OnlineQuant::kFp8, OnlineQuant::kInt8, OnlineQuant::kInt4}) {
    if (s == online_quant_name(q)) {
      *out = q;
      return true;
    }
  }
  return false;
}

}  // namespace lathe
