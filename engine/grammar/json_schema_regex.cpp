#include "engine/grammar/json_schema_regex.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

#include "engine/core/strings.h"
#include "engine/grammar/byte_regex.h"

namespace lathe {
namespace {

using json = nlohmann::ordered_json;

// Pieces of JSON text.
const char* kWs = "[ ]?";  // after ':' and ','
// One character of a JSON string: unescaped (no quote, backslash or control character; any
// non-ASCII character) or an escape.
const char* kStrChar = R"(([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}))";
const char* kNumber = R"(-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?)";
const char* kInteger = R"(-?(0|[1-9][0-9]{0,14}))";
constexpr long long kMaxBound = 999999999999999LL;  // 15 digits

std::string string_regex() {
  return std::string("\"") + kStrChar + "*\"";
}

std::string alt(const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  std::string s = "(";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? "|" : "") + std::string("(") + parts[i] + ")";
  return s + ")";
}

// A free JSON value nested at most `depth` containers deep.
std::string free_value(int depth) {
  std::vector<std::string> parts = {string_regex(), kNumber, "true", "false", "null"};
  if (depth > 0) {
    const std::string v = free_value(depth - 1);
    const std::string member = string_regex() + ":" + kWs + v;
    parts.push_back("\\{(" + member + "(," + kWs + member + ")*)?\\}");
    parts.push_back("\\[(" + v + "(," + kWs + v + ")*)?\\]");
  }
  return alt(parts);
}

// Digits strings a <= b of equal length -> regex.
std::string digit_range(const std::string& a, const std::string& b) {
  if (a.empty()) return "";
  if (a == b) return a;
  if (a.size() == 1) return strformat("[%c-%c]", a[0], b[0]);
  if (a[0] == b[0]) return std::string(1, a[0]) + digit_range(a.substr(1), b.substr(1));
  const size_t rest = a.size() - 1;
  const std::string zeros(rest, '0'), nines(rest, '9');
  if (a.substr(1) == zeros && b.substr(1) == nines)
    return strformat("[%c-%c][0-9]{%zu}", a[0], b[0], rest);
  std::vector<std::string> parts;
  std::string lo = a, hi = b;
  if (a.substr(1) != zeros) {
    parts.push_back(std::string(1, a[0]) + "(" + digit_range(a.substr(1), nines) + ")");
    lo[0] = static_cast<char>(a[0] + 1);
    lo.replace(1, rest, zeros);
  }
  if (b.substr(1) != nines) {
    hi[0] = static_cast<char>(b[0] - 1);
    hi.replace(1, rest, nines);
  }
  if (lo[0] <= hi[0]) parts.push_back(strformat("[%c-%c][0-9]{%zu}", lo[0], hi[0], rest));
  if (b.substr(1) != nines)
    parts.push_back(std::string(1, b[0]) + "(" + digit_range(zeros, b.substr(1)) + ")");
  return alt(parts);
}

// Non-negative integers in [lo, hi] without leading zeros.
std::string natural_range(long long lo, long long hi) {
  std::vector<std::string> parts;
  const std::string ls = std::to_string(lo), hs = std::to_string(hi);
  for (size_t len = ls.size(); len <= hs.size(); ++len) {
    const std::string first = len == ls.size() ? ls : "1" + std::string(len - 1, '0');
    const std::string last = len == hs.size() ? hs : std::string(len, '9');
    parts.push_back(digit_range(first, last));
  }
  return alt(parts);
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  Result<std::string> convert(const json& s, const std::string& where, int ref_depth) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) return err(where, "the schema false matches nothing");
      return free_value(kMaxFreeDepth);
    }
    if (!s.is_object()) return err(where, "a schema must be an object or a boolean");
    static const std::set<std::string> ignored = {
        "title", "description",      "default",        "examples",      "$schema",
        "$id",   "$comment",         "readOnly",       "writeOnly",     "deprecated",
        "$defs", "definitions",      "nullable",       "discriminator", "strict",
        "name",  "contentMediaType", "contentEncoding"};
    static const std::set<std::string> known = {"type",
                                                "enum",
                                                "const",
                                                "anyOf",
                                                "oneOf",
                                                "allOf",
                                                "$ref",
                                                "properties",
                                                "required",
                                                "additionalProperties",
                                                "items",
                                                "prefixItems",
                                                "minItems",
                                                "maxItems",
                                                "minLength",
                                                "maxLength",
                                                "pattern",
                                                "format",
                                                "minimum",
                                                "maximum",
                                                "exclusiveMinimum",
                                                "exclusiveMaximum"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!ignored.count(it.key()) && !known.count(it.key()))
        return err(where, "unsupported keyword " + it.key());
    if (s.contains("$ref")) return ref(s, where, ref_depth);
    if (s.contains("const")) return literal_json(s["const"]);
    if (s.contains("enum")) {
      const json& e = s["enum"];
      if (!e.is_array() || e.empty()) return err(where, "enum must be a non-empty array");
      std::vector<std::string> parts;
      for (const json& v : e) parts.push_back(literal_json(v));
      return alt(parts);
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      const json& list = s[k];
      if (!list.is_array() || list.empty())
        return err(where, std::string(k) + " must be a non-empty array");
      std::vector<std::string> parts;
      for (size_t i = 0; i < list.size(); ++i) {
        LATHE_ASSIGN_OR_RETURN(
            std::string r, convert(list[i], where + "/" + k + "/" + std::to_string(i), ref_depth));
        parts.push_back(r);
      }
      return alt(parts);
    }
    if (s.contains("allOf")) {
      const json& list = s["allOf"];
      if (!list.is_array() || list.size() != 1)
        return err(where, "allOf is supported with exactly one schema");
      return convert(list[0], where + "/allOf/0", ref_depth);
    }
    if (!s.contains("type")) {
      if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
        return object(s, where, ref_depth);
      if (s.contains("items") || s.contains("prefixItems")) return array(s, where, ref_depth);
      return free_value(kMaxFreeDepth);
    }
    const json& t = s["type"];
    if (t.is_array()) {
      if (t.empty()) return err(where, "type must not be an empty list");
      std::vector<std::string> parts;
      for (const json& one : t) {
        if (!one.is_string()) return err(where, "type must be a string or a list of strings");
        LATHE_ASSIGN_OR_RETURN(std::string r, typed(one.get<std::string>(), s, where, ref_depth));
        parts.push_back(r);
      }
      return alt(parts);
    }
    if (!t.is_string()) return err(where, "type must be a string or a list of strings");
    return typed(t.get<std::string>(), s, where, ref_depth);
  }

 private:
  static Status err(const std::string& where, const std::string& what) {
    return invalid_argument("schema at " + (where.empty() ? std::string("/") : where) + ": " +
                            what);
  }

  static std::string literal_json(const json& v) { return regex_escape(v.dump()); }

  Result<std::string> ref(const json& s, const std::string& where, int ref_depth) {
    if (!s["$ref"].is_string()) return err(where, "$ref must be a string");
    const std::string r = s["$ref"].get<std::string>();
    if (ref_depth > 16)
      return err(where, "recursive $ref (" + r + ") is not supported: unroll it to a fixed depth");
    if (r.rfind("#", 0) != 0) return err(where, "only local $ref (#/...) is supported, got " + r);
    const json* target = &root_;
    try {
      target = &root_.at(json::json_pointer(r.substr(1)));
    } catch (const json::exception&) {
      return err(where, "$ref " + r + " points at nothing");
    }
    return convert(*target, r.substr(1), ref_depth + 1);
  }

  Result<std::string> typed(const std::string& type, const json& s, const std::string& where,
                            int ref_depth) {
    if (type == "string") return string(s, where);
    if (type == "integer") return integer(s, where);
    if (type == "number") return number(s, where);
    if (type == "boolean") return std::string("(true|false)");
    if (type == "null") return std::string("null");
    if (type == "object") return object(s, where, ref_depth);
    if (type == "array") return array(s, where, ref_depth);
    return err(where, "unknown type " + type);
  }

  Result<long long> bound(const json& s, const char* key, const std::string& where) {
    const json& v = s[key];
    if (!v.is_number()) return err(where, std::string(key) + " must be a number");
    const double d = v.get<double>();
    if (d != std::floor(d))
      return err(where, std::string(key) +
                            " must be a whole number here (fractional bounds are "
                            "not supported), got " +
                            v.dump());
    if (std::abs(d) > static_cast<double>(kMaxBound))
      return err(where, std::string(key) + " is beyond 15 digits");
    return static_cast<long long>(d);
  }

  // [lo, hi] from minimum/maximum (exclusive ones for integers only).
  Status bounds(const json& s, const std::string& where, bool integral, long long* lo,
                long long* hi) {
    *lo = -kMaxBound;
    *hi = kMaxBound;
    if (s.contains("minimum")) {
      LATHE_ASSIGN_OR_RETURN(*lo, bound(s, "minimum", where));
    }
    if (s.contains("maximum")) {
      LATHE_ASSIGN_OR_RETURN(*hi, bound(s, "maximum", where));
    }
    for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"}) {
      if (!s.contains(k)) continue;
      if (!integral)
        return err(where, std::string(k) + " is supported for integers only; use minimum/maximum");
      LATHE_ASSIGN_OR_RETURN(long long b, bound(s, k, where));
      if (std::string(k) == "exclusiveMinimum")
        *lo = std::max(*lo, b + 1);
      else
        *hi = std::min(*hi, b - 1);
    }
    if (*lo > *hi)
      return err(where, strformat("no value satisfies the bounds [%lld, %lld]", *lo, *hi));
    return Status();
  }

  Result<std::string> integer(const json& s, const std::string& where) {
    if (!s.contains("minimum") && !s.contains("maximum") && !s.contains("exclusiveMinimum") &&
        !s.contains("exclusiveMaximum"))
      return std::string(kInteger);
    long long lo = 0, hi = 0;
    LATHE_RETURN_IF_ERROR(bounds(s, where, true, &lo, &hi));
    return integer_range_regex(lo, hi);
  }

  Result<std::string> number(const json& s, const std::string& where) {
    if (!s.contains("minimum") && !s.contains("maximum") && !s.contains("exclusiveMinimum") &&
        !s.contains("exclusiveMaximum"))
      return std::string(kNumber);
    long long lo = 0, hi = 0;
    LATHE_RETURN_IF_ERROR(bounds(s, where, false, &lo, &hi));
    // Magnitudes in [a, b]: integer part in [a, b - 1] with any fraction, or b with zeros.
    auto magnitude = [](long long a, long long b) {
      std::vector<std::string> parts;
      if (a < b) parts.push_back(natural_range(a, b - 1) + "(\\.[0-9]{1,16})?");
      parts.push_back(std::to_string(b) + "(\\.0{1,16})?");
      return alt(parts);
    };
    std::vector<std::string> parts;
    if (hi >= 0) parts.push_back(magnitude(std::max(lo, 0LL), hi));
    if (lo < 0) parts.push_back("-" + magnitude(hi < 0 ? -hi : 0, -lo));
    return alt(parts);
  }

  Result<std::string> string(const json& s, const std::string& where) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return err(where, "pattern must be a string");
      if (s.contains("minLength") || s.contains("maxLength") || s.contains("format"))
        return err(where, "pattern together with minLength/maxLength/format is not supported");
      const std::string p = s["pattern"].get<std::string>();
      // The pattern describes the string's characters: those a JSON string cannot hold raw
      // (quote, backslash, control characters) are taken out of it, so the value is the text.
      const std::string inner = "(?J:" + strip_anchors(p) + ")";
      Result<ByteNfa> check = compile_regex(inner);
      if (!check.is_ok()) return err(where, "pattern: " + check.status().message());
      return "\"" + inner + "\"";
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) return err(where, "format must be a string");
      const std::string f = s["format"].get<std::string>();
      const char* date = R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))";
      const char* time =
          R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))";
      if (f == "date") return "\"" + std::string(date) + "\"";
      if (f == "time") return "\"" + std::string(time) + "\"";
      if (f == "date-time") return "\"" + std::string(date) + "T" + time + "\"";
      if (f == "uuid")
        return std::string(
            R"("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")");
      if (f == "email")
        return std::string(
            R"("[a-zA-Z0-9._%+-]{1,64}@[a-zA-Z0-9-]{1,63}(\.[a-zA-Z0-9-]{1,63}){1,4}")");
      if (f == "ipv4")
        return std::string(
            R"re("((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])")re");
      return err(where, "unsupported format " + f);
    }
    long long lo = 0, hi = -1;
    if (s.contains("minLength")) {
      LATHE_ASSIGN_OR_RETURN(lo, bound(s, "minLength", where));
    }
    if (s.contains("maxLength")) {
      LATHE_ASSIGN_OR_RETURN(hi, bound(s, "maxLength", where));
    }
    if (lo < 0 || (hi >= 0 && hi < lo) || hi > 10000 || lo > 10000)
      return err(where, "minLength/maxLength must satisfy 0 <= minLength <= maxLength <= 10000");
    if (lo == 0 && hi < 0) return string_regex();
    return strformat("\"%s{%lld,%s}\"", kStrChar, lo, hi < 0 ? "" : std::to_string(hi).c_str());
  }

  static std::string strip_anchors(std::string p) {
    if (!p.empty() && p[0] == '^') p.erase(0, 1);
    if (!p.empty() && p.back() == '$' && (p.size() < 2 || p[p.size() - 2] != '\\')) p.pop_back();
    return p;
  }

  Result<std::string> object(const json& s, const std::string& where, int ref_depth) {
    const json props = s.value("properties", json::object());
    if (!props.is_object()) return err(where, "properties must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return err(where, "required must be an array of names");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return err(where, "required must be an array of names");
        if (!props.contains(r.get<std::string>()))
          return err(where,
                     "required property " + r.get<std::string>() + " is not among the properties");
        required.insert(r.get<std::string>());
      }
    }
    if (props.empty()) {
      // A free object: string keys, values of additionalProperties (or anything).
      json extra = s.value("additionalProperties", json(true));
      if (extra.is_boolean() && !extra.get<bool>()) return std::string("\\{\\}");
      std::string v;
      if (extra.is_boolean()) {
        v = free_value(kMaxFreeDepth - 1);
      } else {
        LATHE_ASSIGN_OR_RETURN(v, convert(extra, where + "/additionalProperties", ref_depth));
      }
      const std::string member = string_regex() + ":" + kWs + v;
      return "\\{(" + member + "(," + kWs + member + ")*)?\\}";
    }
    if (props.size() > 64) return err(where, "more than 64 properties");
    // Properties in order; an optional one may be left out. first[i]: the object's first present
    // property is i; rest[i]: properties after i, each with its comma.
    std::vector<std::string> names, values;
    std::vector<bool> req;
    for (auto it = props.begin(); it != props.end(); ++it) {
      LATHE_ASSIGN_OR_RETURN(std::string v,
                             convert(*it, where + "/properties/" + it.key(), ref_depth));
      names.push_back(regex_escape(json(it.key()).dump()) + ":" + kWs + "(" + v + ")");
      req.push_back(required.count(it.key()) > 0);
    }
    const size_t n = names.size();
    std::vector<std::string> rest(n + 1);
    for (size_t i = n; i-- > 0;) {
      const std::string item = "," + std::string(kWs) + names[i];
      rest[i] = (req[i] ? item : "(" + item + ")?") + rest[i + 1];
    }
    std::vector<std::string> starts;
    for (size_t i = 0; i < n; ++i) {
      starts.push_back(names[i] + rest[i + 1]);
      if (req[i]) break;  // a required property must come first if all before it are absent
    }
    bool all_optional = required.empty();
    std::string body = alt(starts);
    if (all_optional) body = "(" + body + ")?";
    return "\\{" + body + "\\}";
  }

  Result<std::string> array(const json& s, const std::string& where, int ref_depth) {
    long long lo = 0, hi = -1;
    if (s.contains("minItems")) {
      LATHE_ASSIGN_OR_RETURN(lo, bound(s, "minItems", where));
    }
    if (s.contains("maxItems")) {
      LATHE_ASSIGN_OR_RETURN(hi, bound(s, "maxItems", where));
    }
    if (lo < 0 || (hi >= 0 && hi < lo) || lo > 1000 || hi > 1000)
      return err(where, "minItems/maxItems must satisfy 0 <= minItems <= maxItems <= 1000");
    if (s.contains("prefixItems")) {
      const json& p = s["prefixItems"];
      if (!p.is_array()) return err(where, "prefixItems must be an array");
      if (s.contains("items") && !(s["items"].is_boolean() && !s["items"].get<bool>()))
        return err(where, "prefixItems is supported with items: false only");
      std::string r = "\\[";
      for (size_t i = 0; i < p.size(); ++i) {
        LATHE_ASSIGN_OR_RETURN(
            std::string v, convert(p[i], where + "/prefixItems/" + std::to_string(i), ref_depth));
        r += (i ? "," + std::string(kWs) : "") + "(" + v + ")";
      }
      return r + "\\]";
    }
    std::string item;
    if (s.contains("items")) {
      LATHE_ASSIGN_OR_RETURN(item, convert(s["items"], where + "/items", ref_depth));
    } else {
      item = free_value(kMaxFreeDepth - 1);
    }
    item = "(" + item + ")";
    const std::string more = "(," + std::string(kWs) + item + ")";
    std::string body;
    if (hi == 0) return std::string("\\[\\]");
    const std::string tail = hi < 0 ? strformat("{%lld,}", std::max(lo - 1, 0LL))
                                    : strformat("{%lld,%lld}", std::max(lo - 1, 0LL), hi - 1);
    body = item + more + tail;
    if (lo == 0) body = "(" + body + ")?";
    return "\\[" + body + "\\]";
  }

  const json& root_;
};

}  // namespace

Result<std::string> json_schema_to_regex(const nlohmann::ordered_json& schema) {
  Converter c(schema);
  return c.convert(schema, "", 0);
}

std::string json_object_regex() {
  const std::string v = free_value(kMaxFreeDepth - 1);
  const std::string member = string_regex() + ":" + kWs + v;
  return "\\{(" + member + "(," + kWs + member + ")*)?\\}";
}

std::string choice_regex(const std::vector<std::string>& choices) {
  std::vector<std::string> parts;
  for (const std::string& c : choices) parts.push_back(regex_escape(c));
  return alt(parts);
}

std::string integer_range_regex(long long lo, long long hi) {
  std::vector<std::string> parts;
  if (lo < 0) parts.push_back("-" + natural_range(hi < 0 ? -hi : 1, -lo));
  if (hi >= 0) parts.push_back(natural_range(std::max(lo, 0LL), hi));
  return alt(parts);
}

}  // namespace lathe
