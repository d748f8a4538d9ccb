#include <cstdlib>
#include <filesystem>

#include "engine/model/model_loader.h"

namespace lathe {

namespace {
constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::string default_model_path() {
  std::filesystem::path dir;
  if (const char* env = std::getenv("LATHE_MODEL_DIR"); env != nullptr && *env != '\0') {
    dir = env;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    dir = std::filesystem::path(xdg) / "lathe" / "models";
  } else {
    const char* home = std::getenv("HOME");
    dir = std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "lathe" / "models";
  }
  return (dir / kDefaultModelFile).string();
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
