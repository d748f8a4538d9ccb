// Typed reading of request-body JSON for the server's parsers (internal to engine/server): what a
// value's type is called in an error, the "must be X, got Y" error, and JsonFields, which reads the
// optional typed fields of one object and names the field in every error (400).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "engine/server/api_error.h"

namespace lathe {

// "a string", "an integer", "a number with a fraction", ... for "got ..." in error messages.
const char* json_type_name(const nlohmann::json& v);

// 400 "<field> must be <expected>, got <type of v>". param: the top-level field to blame (defaults
// to `field`).
ApiError wrong_type(const std::string& field, const char* expected, const nlohmann::json& v,
                    std::string param = {});

// Reads optional typed fields of one JSON object; absent and null leave the output untouched.
// Each reader returns the first problem (400, naming the field) or nothing.
class JsonFields {
 public:
  explicit JsonFields(const nlohmann::json& obj) : obj_(obj) {}

  // The field's value, or null when it is absent or JSON null.
  const nlohmann::json* get(const char* name) const;
  bool has(const char* name) const { return get(name) != nullptr; }

  // A finite number in [lo, hi] ((lo, hi] with lo_open).
  MaybeApiError number(const char* name, float* out, double lo, double hi,
                       bool lo_open = false) const;
  // An integer in [lo, hi].
  MaybeApiError integer(const char* name, int64_t* out, int64_t lo, int64_t hi) const;
  MaybeApiError integer32(const char* name, int32_t* out, int64_t lo, int64_t hi) const;
  MaybeApiError boolean(const char* name, bool* out) const;
  MaybeApiError string(const char* name, std::string* out) const;

 private:
  const nlohmann::json& obj_;
};

}  // namespace lathe
