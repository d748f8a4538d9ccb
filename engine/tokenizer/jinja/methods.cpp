// Methods of str, dict, list and tuple values that templates call ("x".strip(), d.get("k"), ...),
// with the sandbox's rule that methods which would mutate a value are unsafe.
#include <algorithm>
#include <unordered_map>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/objects.h"
#include "engine/tokenizer/jinja/operators.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {
namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs&);

std::optional<std::string> optional_chars(std::string_view fn, const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  return string_arg(fn, "chars", v);
}

// Prefix / suffix tests accept a string or a tuple of strings, and optional start / end.
Value starts_or_ends(const Value& self, CallArgs& a, bool at_start) {
  ArgBinder b(at_start ? "startswith" : "endswith", a, {"prefix", "start", "end"});
  std::string s = self.as_string();
  if (b.has(1) || b.has(2)) {
    const auto offs = code_point_offsets(s);
    const auto n = static_cast<int64_t>(offs.size()) - 1;
    auto clampi = [&](const Value& v, int64_t dflt) {
      if (v.is_none()) return dflt;
      int64_t i = int_arg("startswith", "start", v);
      if (i < 0) i = std::max<int64_t>(0, i + n);
      return std::min(i, n);
    };
    const int64_t start = clampi(b.get(1, Value::none()), 0);
    const int64_t end = clampi(b.get(2, Value::none()), n);
    if (start > end) return Value(false);
    s = s.substr(offs[static_cast<size_t>(start)],
                 offs[static_cast<size_t>(end)] - offs[static_cast<size_t>(start)]);
  }
  const Value& arg = b.get(0, Value());
  std::vector<Value> candidates;
  if (arg.is_tuple())
    candidates = arg.as_list().items;
  else
    candidates.push_back(arg);
  for (const Value& c : candidates) {
    const std::string p = string_arg(at_start ? "startswith" : "endswith", "prefix", c);
    if (at_start ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                 : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
      return Value(true);
    }
  }
  return Value(false);
}

Value split_method(const Value& self, CallArgs& a, bool from_right) {
  ArgBinder b(from_right ? "rsplit" : "split", a, {"sep", "maxsplit"});
  const Value& sep = b.get(0, Value::none());
  std::optional<std::string> s;
  if (!sep.is_none()) s = string_arg("split", "sep", sep);
  auto parts =
      split(self.as_string(), s, int_arg("split", "maxsplit", b.get(1, Value(-1))), from_right);
  if (!parts) fail("empty separator");
  std::vector<Value> out(parts->begin(), parts->end());
  return Value::list(std::move(out));
}

int64_t find_impl(const Value& self, CallArgs& a, bool from_right) {
  ArgBinder b(from_right ? "rfind" : "find", a, {"sub"});
  const std::string sub = string_arg("find", "sub", b.get(0, Value()));
  const std::string& s = self.as_string();
  const size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(code_point_count(std::string_view(s).substr(0, at)));
}

Value pad_method(Interpreter& in, const Value& self, CallArgs& a, char align) {
  ArgBinder b("ljust", a, {"width", "fillchar"});
  const int64_t width = int_arg("ljust", "width", b.get(0, Value(0)));
  const std::string fill = to_str(b.get(1, Value(" ")));
  const std::string& s = self.as_string();
  const auto len = static_cast<int64_t>(code_point_count(s));
  if (width <= len) return self;
  const auto n = static_cast<size_t>(width - len);
  in.charge(n > SIZE_MAX / (fill.size() + 1) ? SIZE_MAX
                                             : n * fill.size() + self.as_string().size());
  auto rep = [&](size_t k) {
    std::string r;
    for (size_t i = 0; i < k; ++i) r += fill;
    return r;
  };
  if (align == '<') return Value(s + rep(n));
  if (align == '>') return Value(rep(n) + s);
  const size_t left = n / 2 + (n & static_cast<size_t>(len) & 1);
  return Value(rep(left) + s + rep(n - left));
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    if (!pred(next_code_point(s, i))) return false;
  }
  return true;
}

const std::unordered_map<std::string_view, Method>& string_methods() {
  static const std::unordered_map<std::string_view, Method> table = {
      {"strip",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("strip", a, {"chars"});
         std::string r =
             strip(s.as_string(), optional_chars("strip", b.get(0, Value::none())), true, true);
         return s.is_markup() ? Value::markup(std::move(r)) : Value(std::move(r));
       }},
      {"lstrip",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("lstrip", a, {"chars"});
         std::string r =
             strip(s.as_string(), optional_chars("lstrip", b.get(0, Value::none())), true, false);
         return s.is_markup() ? Value::markup(std::move(r)) : Value(std::move(r));
       }},
      {"rstrip",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("rstrip", a, {"chars"});
         std::string r =
             strip(s.as_string(), optional_chars("rstrip", b.get(0, Value::none())), false, true);
         return s.is_markup() ? Value::markup(std::move(r)) : Value(std::move(r));
       }},
      {"split",
       [](Interpreter&, const Value& s, CallArgs& a) { return split_method(s, a, false); }},
      {"rsplit",
       [](Interpreter&, const Value& s, CallArgs& a) { return split_method(s, a, true); }},
      {"splitlines",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("splitlines", a, {"keepends"});
         const auto lines = splitlines(s.as_string(), truthy(b.get(0, Value(false))));
         return Value::list(std::vector<Value>(lines.begin(), lines.end()));
       }},
      {"startswith",
       [](Interpreter&, const Value& s, CallArgs& a) { return starts_or_ends(s, a, true); }},
      {"endswith",
       [](Interpreter&, const Value& s, CallArgs& a) { return starts_or_ends(s, a, false); }},
      {"upper",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("upper", a, {});
         return Value(to_upper(s.as_string()));
       }},
      {"lower",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("lower", a, {});
         return Value(to_lower(s.as_string()));
       }},
      {"casefold",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("casefold", a, {});
         return Value(to_lower(s.as_string()));
       }},
      {"title",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("title", a, {});
         return Value(py_title(s.as_string()));
       }},
      {"capitalize",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("capitalize", a, {});
         return Value(capitalize(s.as_string()));
       }},
      {"replace",
       [](Interpreter& in, const Value& s, CallArgs& a) {
         ArgBinder b("replace", a, {"old", "new", "count"});
         std::string r = replace(s.as_string(), string_arg("replace", "old", b.get(0, Value())),
                                 string_arg("replace", "new", b.get(1, Value())),
                                 int_arg("replace", "count", b.get(2, Value(-1))));
         in.charge(r.size());
         return Value(std::move(r));
       }},
      {"find",
       [](Interpreter&, const Value& s, CallArgs& a) { return Value(find_impl(s, a, false)); }},
      {"rfind",
       [](Interpreter&, const Value& s, CallArgs& a) { return Value(find_impl(s, a, true)); }},
      {"index",
       [](Interpreter&, const Value& s, CallArgs& a) {
         const int64_t i = find_impl(s, a, false);
         if (i < 0) fail("substring not found");
         return Value(i);
       }},
      {"rindex",
       [](Interpreter&, const Value& s, CallArgs& a) {
         const int64_t i = find_impl(s, a, true);
         if (i < 0) fail("substring not found");
         return Value(i);
       }},
      {"count",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("count", a, {"sub"});
         return Value(
             count_occurrences(s.as_string(), string_arg("count", "sub", b.get(0, Value()))));
       }},
      {"join",
       [](Interpreter& in, const Value& s, CallArgs& a) {
         ArgBinder b("join", a, {"iterable"});
         std::string out;
         bool first = true;
         for (const Value& item : in.iterate(b.get(0, Value::list({})))) {
           if (!first) out += s.as_string();
           first = false;
           out += string_arg("join", "iterable item", item);
           if (out.size() > in.settings().limits.max_output_bytes) in.charge(out.size());
         }
         in.charge(out.size());
         return Value(std::move(out));
       }},
      {"format",
       [](Interpreter& in, const Value& s, CallArgs& a) {
         std::string r = brace_format(s.as_string(), a);
         in.charge(r.size());
         return Value(std::move(r));
       }},
      {"removeprefix",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("removeprefix", a, {"prefix"});
         const std::string p = string_arg("removeprefix", "prefix", b.get(0, Value()));
         const std::string& str = s.as_string();
         return str.compare(0, p.size(), p) == 0 && str.size() >= p.size()
                    ? Value(str.substr(p.size()))
                    : s;
       }},
      {"removesuffix",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("removesuffix", a, {"suffix"});
         const std::string p = string_arg("removesuffix", "suffix", b.get(0, Value()));
         const std::string& str = s.as_string();
         return !p.empty() && str.size() >= p.size() &&
                        str.compare(str.size() - p.size(), p.size(), p) == 0
                    ? Value(str.substr(0, str.size() - p.size()))
                    : s;
       }},
      {"partition",
       [](Interpreter&, const Value& s, CallArgs& a) {
         ArgBinder b("partition", a, {"sep"});
         const std::string sep = string_arg("partition", "sep", b.get(0, Value()));
         if (sep.empty()) fail("empty separator");
         const std::string& str = s.as_string();
         const size_t at = str.find(sep);
         if (at == std::string::npos) return Value::tuple({s, Value(""), Value("")});
         return Value::tuple(
             {Value(str.substr(0, at)), Value(sep), Value(str.substr(at + sep.size()))});
       }},
      {"ljust",
       [](Interpreter& in, const Value& s, CallArgs& a) { return pad_method(in, s, a, '<'); }},
      {"rjust",
       [](Interpreter& in, const Value& s, CallArgs& a) { return pad_method(in, s, a, '>'); }},
      {"center",
       [](Interpreter& in, const Value& s, CallArgs& a) { return pad_method(in, s, a, '^'); }},
      {"zfill",
       [](Interpreter& in, const Value& s, CallArgs& a) {
         ArgBinder b("zfill", a, {"width"});
         std::string str = s.as_string();
         const int64_t width = int_arg("zfill", "width", b.get(0, Value(0)));
         const auto len = static_cast<int64_t>(code_point_count(str));
         if (width <= len) return s;
         in.charge(static_cast<size_t>(width - len) + str.size());
         const size_t sign = (!str.empty() && (str[0] == '-' || str[0] == '+')) ? 1 : 0;
         str.insert(sign, static_cast<size_t>(width - len), '0');
         return Value(std::move(str));
       }},
      {"isdigit",
       [](Interpreter&, const Value& s, CallArgs&) {
         return Value(all_chars(s.as_string(), [](char32_t c) { return c >= '0' && c <= '9'; }));
       }},
      {"isnumeric",
       [](Interpreter&, const Value& s, CallArgs&) {
         return Value(all_chars(s.as_string(), [](char32_t c) { return c >= '0' && c <= '9'; }));
       }},
      {"isdecimal",
       [](Interpreter&, const Value& s, CallArgs&) {
         return Value(all_chars(s.as_string(), [](char32_t c) { return c >= '0' && c <= '9'; }));
       }},
      {"isalpha",
       [](Interpreter&, const Value& s, CallArgs&) {
         return Value(all_chars(s.as_string(),
                                [](char32_t c) { return is_alnum(c) && !(c >= '0' && c <= '9'); }));
       }},
      {"isalnum", [](Interpreter&, const Value& s,
                     CallArgs&) { return Value(all_chars(s.as_string(), is_alnum)); }},
      {"isspace", [](Interpreter&, const Value& s,
                     CallArgs&) { return Value(all_chars(s.as_string(), is_space)); }},
      {"islower",
       [](Interpreter&, const Value& s, CallArgs&) { return Value(is_lower(s.as_string())); }},
      {"isupper",
       [](Interpreter&, const Value& s, CallArgs&) { return Value(is_upper(s.as_string())); }},
  };
  return table;
}

const std::unordered_map<std::string_view, Method>& dict_methods() {
  static const std::unordered_map<std::string_view, Method> table = {
      {"items",
       [](Interpreter&, const Value& d, CallArgs& a) {
         ArgBinder b("items", a, {});
         std::vector<Value> out;
         for (const auto& [k, v] : d.as_dict().items()) out.push_back(Value::tuple({k, v}));
         return Value::view(std::move(out), "dict_items");
       }},
      {"keys",
       [](Interpreter&, const Value& d, CallArgs& a) {
         ArgBinder b("keys", a, {});
         std::vector<Value> out;
         for (const auto& [k, v] : d.as_dict().items()) out.push_back(k);
         return Value::view(std::move(out), "dict_keys");
       }},
      {"values",
       [](Interpreter&, const Value& d, CallArgs& a) {
         ArgBinder b("values", a, {});
         std::vector<Value> out;
         for (const auto& [k, v] : d.as_dict().items()) out.push_back(v);
         return Value::view(std::move(out), "dict_values");
       }},
      {"get",
       [](Interpreter&, const Value& d, CallArgs& a) {
         ArgBinder b("get", a, {"key", "default"});
         const Value* v = d.as_dict().find(b.get(0, Value()));
         return v != nullptr ? *v : b.get(1, Value::none());
       }},
      {"copy",
       [](Interpreter&, const Value& d, CallArgs& a) {
         ArgBinder b("copy", a, {});
         return d;
       }},
  };
  return table;
}

const std::unordered_map<std::string_view, Method>& list_methods() {
  static const std::unordered_map<std::string_view, Method> table = {
      {"index",
       [](Interpreter&, const Value& l, CallArgs& a) {
         ArgBinder b("index", a, {"value"});
         const auto& items = l.as_list().items;
         for (size_t i = 0; i < items.size(); ++i) {
           if (equals(items[i], b.get(0, Value()))) return Value(static_cast<int64_t>(i));
         }
         fail(repr(b.get(0, Value())) + " is not in list");
       }},
      {"count",
       [](Interpreter&, const Value& l, CallArgs& a) {
         ArgBinder b("count", a, {"value"});
         const auto& items = l.as_list().items;
         return Value(
             static_cast<int64_t>(std::count_if(items.begin(), items.end(), [&](const Value& v) {
               return equals(v, b.get(0, Value()));
             })));
       }},
      {"copy",
       [](Interpreter&, const Value& l, CallArgs& a) {
         ArgBinder b("copy", a, {});
         return Value::list(l.as_list().items);
       }},
  };
  return table;
}

Value unsafe(const Value& receiver, std::string_view name) {
  return Value::undefined("access to attribute '" + std::string(name) + "' of '" +
                          type_name(receiver) + "' object is unsafe.");
}

}  // namespace

Value get_method(const Value& receiver, std::string_view name) {
  const std::unordered_map<std::string_view, Method>* table = nullptr;
  if (receiver.is_string()) {
    table = &string_methods();
  } else if (receiver.is_dict()) {
    table = &dict_methods();
    static const char* const kMutating[] = {"clear", "pop", "popitem", "setdefault", "update"};
    for (const char* m : kMutating) {
      if (name == m) return unsafe(receiver, name);
    }
  } else if (receiver.is_list()) {
    table = &list_methods();
    static const char* const kMutating[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};
    for (const char* m : kMutating) {
      if (!receiver.is_tuple() && name == m) return unsafe(receiver, name);
    }
  }
  if (table == nullptr) return Value::undefined();
  const auto it = table->find(name);
  if (it == table->end()) return Value::undefined();
  const Method method = it->second;
  return Value(std::make_shared<NativeFunction>(
      std::string(name),
      [receiver, method](Interpreter& in, CallArgs& args) { return method(in, receiver, args); }));
}

}  // namespace lathe::jinja
