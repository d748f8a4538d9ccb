#include "engine/tokenizer/jinja/json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {
namespace {

constexpr int kMaxDepth = 256;

void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const size_t start = i;
    const char32_t cp = next_code_point(s, i);
    char buf[16];
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp < 0x20) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          out += buf;
        } else if (ensure_ascii && cp >= 0x80) {
          if (cp >= 0x10000) {
            const char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x",
                          static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          out.append(s.substr(start, i - start));
        }
    }
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return format_float(d);
}

struct Dumper {
  const JsonDumpOptions& opt;
  std::string item_sep;
  std::string key_sep;
  std::string out;

  void newline(int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += *opt.indent;
  }

  std::string key_string(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::kString:
        return k.as_string();
      case Value::Kind::kBool:
        return k.as_bool() ? "true" : "false";
      case Value::Kind::kNone:
        return "null";
      case Value::Kind::kInt:
        return std::to_string(k.as_int());
      case Value::Kind::kFloat:
        return float_json(k.as_float());
      default:
        fail("keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void dump(const Value& v, int level) {
    if (level > kMaxDepth) fail("tojson: value nested more than 256 levels deep");
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return;
      case Value::Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out += std::to_string(v.as_int());
        return;
      case Value::Kind::kFloat:
        out += float_json(v.as_float());
        return;
      case Value::Kind::kString:
        dump_string(out, v.as_string(), opt.ensure_ascii);
        return;
      case Value::Kind::kList: {
        if (!v.is_list()) fail("Object of type " + type_name(v) + " is not JSON serializable");
        const auto& items = v.as_list().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += item_sep;
          if (opt.indent) newline(level + 1);
          dump(items[i], level + 1);
        }
        if (opt.indent) newline(level);
        out += ']';
        return;
      }
      case Value::Kind::kDict: {
        const Dict& d = v.as_dict();
        if (d.empty()) {
          out += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Value*>> members;
        members.reserve(d.size());
        for (const auto& [k, val] : d.items()) members.emplace_back(key_string(k), &val);
        if (opt.sort_keys) {
          std::stable_sort(members.begin(), members.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out += '{';
        for (size_t i = 0; i < members.size(); ++i) {
          if (i > 0) out += item_sep;
          if (opt.indent) newline(level + 1);
          dump_string(out, members[i].first, opt.ensure_ascii);
          out += key_sep;
          dump(*members[i].second, level + 1);
        }
        if (opt.indent) newline(level);
        out += '}';
        return;
      }
      case Value::Kind::kUndefined:
      case Value::Kind::kObject:
        fail("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }
};

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.set(Value(k), from_json(e));
      return Value::dict(std::move(d));
    }
    default:
      return Value::none();
  }
}

}  // namespace

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  Dumper d{options,
           options.item_separator.value_or(options.indent ? "," : ", "),
           options.key_separator.value_or(": "),
           {}};
  d.dump(value, 0);
  return std::move(d.out);
}

Result<Value> parse_json(std::string_view text) {
  // nlohmann's parser recurses per nesting level; reject absurd nesting before it sees the text.
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return invalid_argument("JSON nested more than 256 levels deep");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("invalid JSON: " + std::string(text.substr(0, 80)));
  return from_json(j);
}

}  // namespace lathe::jinja
