#include "engine/model/model_loader.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/core/strings.h"
#include "engine/model/gguf_model.h"
#include "engine/model/hf_model.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {

bool starts_with_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace

Result<LoadedModel> load_model(const std::string& path, const LoadOptions& options) {
  if (path.empty()) return invalid_argument("no model path given");
  if (options.dummy_gguf.active()) {
    OnlineQuant unused = OnlineQuant::kNone;
    DummyGguf g;
    LATHE_RETURN_IF_ERROR(parse_quantization_option(
        options.dummy_gguf.name, options.load_format == LoadFormat::kDummy, &unused, &g));
    if (options.quantization != OnlineQuant::kNone)
      return invalid_argument(
          "one --quantization at a time: " + std::string(online_quant_name(options.quantization)) +
          " or " + options.dummy_gguf.name);
  }
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return not_found(path + ": no such file or folder");

  Result<LoadedModel> result = Status(ErrorCode::kInternal, "unreachable");
  if (fs::is_directory(st)) {
    result = load_hf_model(path, options);
  } else {
    const fs::path p(path);
    const std::string name = p.filename().string();
    if (ends_with(name, ".gguf") || starts_with_gguf_magic(path)) {
      result = load_gguf_model(path, options);
    } else if (name == "config.json" || ends_with(name, ".safetensors") ||
               ends_with(name, ".json") || name == "tokenizer.model") {
      // A file inside a Hugging Face folder: load the folder.
      const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
      result = load_hf_model(parent.string(), options);
    } else {
      return invalid_argument(path +
                              ": not a model: expected a GGUF file or a Hugging Face model folder "
                              "(config.json + *.safetensors + tokenizer files)");
    }
  }
  if (!result.is_ok()) return result;
  LoadedModel& m = result.value();
  m.path = path;
  if (options.quantization != OnlineQuant::kNone) {
    const char* q = online_quant_name(options.quantization);
    if (m.quantization.quantized())
      return invalid_argument(strformat(
          "--quantization %s quantizes 16-bit checkpoints at load, but %s is already quantized "
          "(%s); load it without --quantization",
          q, path.c_str(), m.quantization.method.c_str()));
    for (const auto& [name, t] : m.weights.tensors())
      if (starts_with(name, "blk.") && t.ndim == 2 && is_quantized(t.dtype))
        return invalid_argument(strformat(
            "--quantization %s quantizes 16-bit checkpoints at load, but %s stores %s as %s; "
            "load it without --quantization",
            q, path.c_str(), name.c_str(), std::string(dtype_name(t.dtype)).c_str()));
    m.online_quantization = options.quantization;
  }
  m.dummy_gguf = options.dummy_gguf;
  return result;
}

}  // namespace lathe
