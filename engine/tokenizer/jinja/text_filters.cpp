// Jinja2's built-in filters over strings and numbers, with Hugging Face's tojson (json.dumps
// without HTML escaping) and markupsafe's Markup rules for |safe and |escape.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/filter_table.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/json.h"
#include "engine/tokenizer/jinja/operators.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {
namespace {

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("default", a, {"default_value", "boolean"});
  const bool use_default = v.is_undefined() || (truthy(b.get(1, Value(false))) && !truthy(v));
  return use_default ? b.get(0, Value(std::string())) : v;
}

Value f_upper(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("upper", a, {});
  return like(v, to_upper(to_str(v)));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("lower", a, {});
  return like(v, to_lower(to_str(v)));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("capitalize", a, {});
  return like(v, capitalize(to_str(v)));
}

Value f_title(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("title", a, {});
  return like(v, jinja_title(to_str(v)));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("trim", a, {"chars"});
  const Value& chars = b.get(0, Value::none());
  std::optional<std::string> set;
  if (!chars.is_none() && !chars.is_undefined()) set = string_arg("trim", "chars", chars);
  return like(v, strip(to_str(v), set, true, true));
}

Value f_replace(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("replace", a, {"old", "new", "count"});
  const Value& count = b.get(2, Value::none());
  std::string s = replace(to_str(v), to_str(b.get(0, Value(std::string()))),
                          to_str(b.get(1, Value(std::string()))),
                          count.is_none() ? -1 : int_arg("replace", "count", count));
  in.charge(s.size());
  return Value(std::move(s));
}

Value f_string(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("string", a, {});
  return like(v, to_str(v));
}

// Python's int(str): optional sign, digits with single underscores, surrounding whitespace.
std::optional<int64_t> parse_py_int(std::string s, int base) {
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;  // Python: ValueError
  s = strip(s, std::nullopt, true, true);
  std::string digits;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && i + 1 < s.size() &&
        std::isxdigit(static_cast<unsigned char>(s[i - 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 1]))) {
      continue;
    }
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, base);
  if (end == nullptr || end == digits.c_str() || *end != '\0' || errno != 0) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<double> parse_py_float(const std::string& text) {
  const std::string s = strip(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("int", a, {"default", "base"});
  const Value fallback = b.get(0, Value(0));
  const int base = static_cast<int>(int_arg("int", "base", b.get(1, Value(10))));
  if (v.is_int() || v.is_bool()) return Value(v.integer());
  if (v.is_float()) {
    if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) > 9.2e18) return fallback;
    return Value(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.as_string(), base)) return Value(*i);
    if (auto d = parse_py_float(v.as_string()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
      return Value(static_cast<int64_t>(*d));
    }
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("float", a, {"default"});
  if (v.is_number()) return Value(v.number());
  if (v.is_string()) {
    if (auto d = parse_py_float(v.as_string())) return Value(*d);
  }
  return b.get(0, Value(0.0));
}

Value f_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions opt;
  opt.ensure_ascii = truthy(b.get(0, Value(false)));
  const Value& indent = b.get(1, Value::none());
  if (indent.is_int() || indent.is_bool()) {
    opt.indent =
        std::string(static_cast<size_t>(std::clamp<int64_t>(indent.integer(), 0, 64)), ' ');
  } else if (indent.is_string()) {
    opt.indent = indent.as_string();
  } else if (!indent.is_none()) {
    fail("tojson(): indent must be an integer or a string");
  }
  const Value& seps = b.get(2, Value::none());
  if (!seps.is_none()) {
    if (!seps.is_list() || seps.as_list().items.size() != 2) {
      fail("tojson(): separators must be an (item_separator, key_separator) pair");
    }
    opt.item_separator = to_str(seps.as_list().items[0]);
    opt.key_separator = to_str(seps.as_list().items[1]);
  }
  opt.sort_keys = truthy(b.get(3, Value(false)));
  std::string s = dump_json(v, opt);
  in.charge(s.size());
  return Value(std::move(s));
}

Value f_abs(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("abs", a, {});
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.integer() == INT64_MIN) fail("integer result does not fit in 64 bits");
    return Value(v.integer() < 0 ? -v.integer() : v.integer());
  }
  if (v.is_undefined()) raise_undefined(v);
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("round", a, {"precision", "method"});
  const int64_t precision = int_arg("round", "precision", b.get(0, Value(0)));
  const std::string method = to_str(b.get(1, Value("common")));
  if (method != "common" && method != "ceil" && method != "floor") {
    fail("round(): method must be 'common', 'ceil' or 'floor'");
  }
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_number()) fail("round(): expected a number, got " + type_name(v));
  if (method == "common" && !v.is_float()) return Value(v.integer());
  const double x = v.number();
  if (!std::isfinite(x)) return Value(x);
  if (precision > 330) return Value(x);  // finer than any double's digits
  if (precision < -330) return Value(std::copysign(0.0, x));
  if (method != "common") {
    const double scale = std::pow(10.0, static_cast<double>(precision));
    return Value((method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale)) / scale);
  }
  // Python's round(): the exact binary value rounded half-to-even at `precision` decimals, which
  // is what printf's correctly rounded conversion does.
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)),
                x);
  double r = std::strtod(buf, nullptr);
  if (precision < 0) {
    const double scale = std::pow(10.0, static_cast<double>(-precision));
    r = std::nearbyint(x / scale) * scale;
  }
  return Value(r);
}

Value f_center(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("center", a, {"width"});
  const std::string s = to_str(v);
  const int64_t width = int_arg("center", "width", b.get(0, Value(80)));
  const auto len = static_cast<int64_t>(code_point_count(s));
  if (width <= len) return Value(s);
  in.charge(static_cast<size_t>(width));
  const auto total = static_cast<size_t>(width - len);
  // Python's str.center puts the extra space on the right when len is even, left when odd.
  const size_t left = total / 2 + (total & static_cast<size_t>(len) & 1);
  return Value(std::string(left, ' ') + s + std::string(total - left, ' '));
}

Value f_indent(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("indent", a, {"width", "first", "blank"});
  const Value& width = b.get(0, Value(4));
  std::string indentation;
  if (width.is_string()) {
    indentation = width.as_string();
  } else {
    const int64_t n = std::max<int64_t>(int_arg("indent", "width", width), 0);
    in.charge(static_cast<size_t>(std::min<int64_t>(n, INT64_MAX / 2)));
    indentation.assign(static_cast<size_t>(n), ' ');
  }
  const bool first = truthy(b.get(1, Value(false)));
  const bool blank = truthy(b.get(2, Value(false)));
  const std::vector<std::string> lines = splitlines(to_str(v) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if ((i > 0 || first) && (blank || !lines[i].empty())) out += indentation;
    out += lines[i];
  }
  in.charge(out.size());
  return like(v, std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("wordcount", a, {});
  const std::string s = to_str(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t cp = next_code_point(s, i);
    const bool w = cp == '_' || is_alnum(cp);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("truncate", a, {"length", "killwords", "end", "leeway"});
  const std::string s = to_str(v);
  const int64_t length = int_arg("truncate", "length", b.get(0, Value(255)));
  const std::string end = to_str(b.get(2, Value("...")));
  const int64_t leeway = int_arg("truncate", "leeway", b.get(3, Value(5)));
  const auto end_len = static_cast<int64_t>(code_point_count(end));
  if (length < end_len || leeway < 0) fail("truncate(): length must be at least len(end)");
  const auto offs = code_point_offsets(s);
  const auto len = static_cast<int64_t>(offs.size()) - 1;
  if (len - leeway <= length) return Value(s);  // len <= length + leeway, without overflow
  std::string head = s.substr(0, offs[static_cast<size_t>(length - end_len)]);
  if (!truthy(b.get(1, Value(false)))) {
    const size_t space = head.rfind(' ');
    if (space != std::string::npos) head.resize(space);
  }
  return Value(head + end);
}

Value f_format(Interpreter& in, const Value& v, CallArgs& a) {
  if (!a.args.empty() && !a.kwargs.empty())
    fail("format(): can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.kwargs.empty()) {
    Dict d;
    for (const auto& [k, val] : a.kwargs) d.set(Value(k), val);
    args = Value::dict(std::move(d));
  } else {
    args = Value::tuple(a.args);
  }
  std::string s = percent_format(to_str(v), args, v.is_markup());
  in.charge(s.size());
  return like(v, std::move(s));
}

Value f_safe(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("safe", a, {});
  return Value::markup(to_str(v));
}

Value f_escape(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("escape", a, {});
  return v.is_markup() ? v : Value::markup(html_escape(to_str(v)));
}

Value f_forceescape(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("forceescape", a, {});
  return Value::markup(html_escape(to_str(v)));
}

}  // namespace

Value like(const Value& input, std::string s) {
  return input.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
}

void add_text_filters(FilterTable& t) {
  t.emplace("abs", f_abs);
  t.emplace("capitalize", f_capitalize);
  t.emplace("center", f_center);
  t.emplace("d", f_default);
  t.emplace("default", f_default);
  t.emplace("e", f_escape);
  t.emplace("escape", f_escape);
  t.emplace("float", f_float);
  t.emplace("forceescape", f_forceescape);
  t.emplace("format", f_format);
  t.emplace("indent", f_indent);
  t.emplace("int", f_int);
  t.emplace("lower", f_lower);
  t.emplace("replace", f_replace);
  t.emplace("round", f_round);
  t.emplace("safe", f_safe);
  t.emplace("string", f_string);
  t.emplace("title", f_title);
  t.emplace("tojson", f_tojson);
  t.emplace("trim", f_trim);
  t.emplace("truncate", f_truncate);
  t.emplace("upper", f_upper);
  t.emplace("wordcount", f_wordcount);
}

}  // namespace lathe::jinja
