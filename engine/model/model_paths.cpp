#include <cstdlib>
#include <filesystem>

#include "engine/model/model_loader.h"

namespace lathe {

namespace {
constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::string lathe_cache_dir(const char* env_override, const char* sub) {
  if (const char* env = std::getenv(env_override); env != nullptr && *env != '\0') return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return (std::filesystem::path(xdg) / "lathe" / sub).string();
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "lathe" / sub).string();
}

std::string default_model_path() {
  return (std::filesystem::path(lathe_cache_dir("LATHE_MODEL_DIR", "models")) / kDefaultModelFile)
      .string();
}

Result<std::string> resolve_model_path(const std::string& maybe_empty) {
  if (!maybe_empty.empty()) return maybe_empty;
  std::string path = default_model_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return not_found("no model given and the default model is not in the cache (" + path +
                     "); run scripts/fetch-default-model.sh, or pass a model with -m PATH");
  return path;
}

}  // namespace lathe
