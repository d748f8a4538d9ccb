#include "engine/server/request_fields.h"

#include <cmath>

#include "engine/core/strings.h"

namespace lathe {

using json = nlohmann::json;

const char* json_type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a number with a fraction";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    default:
      return "an unsupported value";
  }
}

ApiError wrong_type(const std::string& field, const char* expected, const json& v,
                    std::string param) {
  return bad_request(strformat("%s must be %s, got %s", field.c_str(), expected, json_type_name(v)),
                     param.empty() ? field : std::move(param));
}

const json* JsonFields::get(const char* name) const {
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

MaybeApiError JsonFields::number(const char* name, float* out, double lo, double hi,
                                 bool lo_open) const {
  const json* v = get(name);
  if (v == nullptr) return {};
  if (!v->is_number()) return wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo))
    return bad_request(
        strformat("%s must be in %c%g, %g], got %g", name, lo_open ? '(' : '[', lo, hi, d), name);
  *out = static_cast<float>(d);
  return {};
}

MaybeApiError JsonFields::integer(const char* name, int64_t* out, int64_t lo, int64_t hi) const {
  const json* v = get(name);
  if (v == nullptr) return {};
  if (!v->is_number_integer()) return wrong_type(name, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    return bad_request(
        strformat("%s must be in [%lld, %lld], got %llu", name, static_cast<long long>(lo),
                  static_cast<long long>(hi), static_cast<unsigned long long>(v->get<uint64_t>())),
        name);
  const int64_t i = v->get<int64_t>();
  if (i < lo || i > hi)
    return bad_request(
        strformat("%s must be in [%lld, %lld], got %lld", name, static_cast<long long>(lo),
                  static_cast<long long>(hi), static_cast<long long>(i)),
        name);
  *out = i;
  return {};
}

MaybeApiError JsonFields::integer32(const char* name, int32_t* out, int64_t lo, int64_t hi) const {
  int64_t i = *out;
  if (auto e = integer(name, &i, lo, hi)) return e;
  *out = static_cast<int32_t>(i);
  return {};
}

MaybeApiError JsonFields::boolean(const char* name, bool* out) const {
  const json* v = get(name);
  if (v == nullptr) return {};
  if (!v->is_boolean()) return wrong_type(name, "true or false", *v);
  *out = v->get<bool>();
  return {};
}

MaybeApiError JsonFields::string(const char* name, std::string* out) const {
  const json* v = get(name);
  if (v == nullptr) return {};
  if (!v->is_string()) return wrong_type(name, "a string", *v);
  *out = v->get<std::string>();
  return {};
}

}  // namespace lathe
