#include "engine/eval/eval_text.h"

#include <filesystem>

#include "engine/core/read_file.h"
#include "engine/core/strings.h"

namespace lathe {

Status check_text(std::string_view text, const std::string& origin, std::string_view what) {
  const std::string flag(what);
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return invalid_argument(flag + " " + origin + " is empty; pass a file with text in it");
  const size_t nul = text.find('\0');
  if (nul != std::string_view::npos)
    return invalid_argument(
        strformat("%s %s is not text: a NUL byte at offset %zu; pass a plain "
                  "UTF-8 text file",
                  flag.c_str(), origin.c_str(), nul));
  if (!is_valid_utf8(text))
    return invalid_argument(
        strformat("%s %s is not text: invalid UTF-8 at byte %zu; pass a plain "
                  "UTF-8 text file",
                  flag.c_str(), origin.c_str(), valid_utf8_prefix(text)));
  return Status();
}

Result<std::string> read_text_file(const std::string& path, std::string_view what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return invalid_argument(std::string(what) + " " + path + " is a folder; pass a text file");
  Result<std::string> text = read_file(path);
  if (!text.is_ok()) return text.status().with_context(std::string(what));
  LATHE_RETURN_IF_ERROR(check_text(text.value(), path, what));
  return text;
}

}  // namespace lathe
