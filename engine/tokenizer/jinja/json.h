// JSON in and out of template values. Output follows Python's json.dumps, which is what the
// tojson filter of Hugging Face's chat template environment calls (ensure_ascii=False by default,
// no HTML escaping, optional indent, separators and sort_keys).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "engine/core/status.h"
#include "engine/tokenizer/jinja/value.h"

namespace lathe::jinja {

struct JsonDumpOptions {
  std::optional<std::string>
      indent;  // json.dumps(indent=...): spaces (or the given string) per level
  std::optional<std::string> item_separator;  // default ", " without indent, "," with indent
  std::optional<std::string> key_separator;   // default ": "
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape non-ASCII as \uXXXX
};

// json.dumps(value). Throws jinja::Error for values JSON cannot hold (Undefined, functions, dict
// keys that are not str/int/float/bool/None) or nesting deeper than 256 levels.
std::string dump_json(const Value& value, const JsonDumpOptions& options);

// Parses JSON text (objects keep their member order; integers that fit in int64 stay integers).
Result<Value> parse_json(std::string_view text);

}  // namespace lathe::jinja
