// Reading a user's text file for evaluation or calibration: it must exist, hold something other
// than whitespace, and be text (UTF-8 without NUL bytes). Errors name the file and say what to pass
// instead.
#pragma once

#include <string>
#include <string_view>

#include "engine/core/status.h"

namespace lathe {

// `what` names the flag in messages ("--text", "--calibration").
Result<std::string> read_text_file(const std::string& path, std::string_view what);

// The same checks on text already in memory (`origin` names it in messages).
Status check_text(std::string_view text, const std::string& origin, std::string_view what);

}  // namespace lathe
