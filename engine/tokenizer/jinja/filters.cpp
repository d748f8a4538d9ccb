// Jinja2's built-in filters over sequences and mappings (text and number filters are in
// text_filters.cpp), the filter registry, and call-argument binding.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/filter_table.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/json.h"
#include "engine/tokenizer/jinja/operators.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {

ArgBinder::ArgBinder(std::string_view function, CallArgs& args,
                     std::initializer_list<std::string_view> names)
    : values_(names.size()), present_(names.size(), false) {
  if (args.args.size() > names.size()) {
    fail(std::string(function) + "() takes at most " + std::to_string(names.size()) +
         " argument(s), got " + std::to_string(args.args.size()));
  }
  for (size_t i = 0; i < args.args.size(); ++i) {
    values_[i] = args.args[i];
    present_[i] = true;
  }
  for (auto& [key, value] : args.kwargs) {
    const auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) {
      fail(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    }
    const auto i = static_cast<size_t>(it - names.begin());
    if (present_[i])
      fail(std::string(function) + "() got multiple values for argument '" + key + "'");
    values_[i] = value;
    present_[i] = true;
  }
}

Value ArgBinder::get(size_t i, Value fallback) const {
  return present_[i] ? values_[i] : std::move(fallback);
}

int64_t int_arg(std::string_view function, std::string_view param, const Value& v) {
  if (v.is_int() || v.is_bool()) return v.integer();
  fail(std::string(function) + "(): '" + std::string(param) + "' must be an integer, got " +
       type_name(v));
}

std::string string_arg(std::string_view function, std::string_view param, const Value& v) {
  if (v.is_string()) return v.as_string();
  fail(std::string(function) + "(): '" + std::string(param) + "' must be a string, got " +
       type_name(v));
}

namespace {

size_t length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return code_point_count(v.as_string());
    case Value::Kind::kList:
      if (v.is_iterator()) fail("object of type '" + type_name(v) + "' has no len()");
      return v.as_list().items.size();
    case Value::Kind::kDict:
      return v.as_dict().size();
    default:
      fail("object of type '" + type_name(v) + "' has no len()");
  }
}

// Sort key for sort/unique/min/max/dictsort: strings compare case-insensitively by default.
Value sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  Value key =
      attribute.is_none() || attribute.is_undefined() ? item : in.get_path(item, to_str(attribute));
  if (!case_sensitive && key.is_string()) return Value(to_lower(key.as_string()));
  return key;
}

bool less(const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  return compare(a, b) < 0;
}

Value f_length(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("length", a, {});
  return Value(static_cast<int64_t>(length_of(v)));
}

Value f_first(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("first", a, {});
  if (v.is_list()) {
    const auto& items = v.as_list().items;
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  std::vector<Value> items = in.iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("last", a, {});
  if (v.is_list()) {
    const auto& items = v.as_list().items;
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  std::vector<Value> items = in.iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_join(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("join", a, {"d", "attribute"});
  const std::string sep = to_str(b.get(0, Value(std::string())));
  std::string out;
  bool first = true;
  for (const Value& item : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    const Value& attribute = b.get(1, Value::none());
    out += to_str(attribute.is_none() ? item : in.get_path(item, to_str(attribute)));
    if (out.size() > in.settings().limits.max_output_bytes) in.charge(out.size());  // throws
  }
  in.charge(out.size());
  return Value(std::move(out));
}

Value f_list(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("list", a, {});
  return Value::list(in.iterate(v));
}

Value f_items(Interpreter&, const Value& v, CallArgs& a) {
  ArgBinder b("items", a, {});
  if (v.is_undefined()) return Value::iterator({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping, got " + type_name(v));
  std::vector<Value> out;
  for (const auto& [k, val] : v.as_dict().items()) out.push_back(Value::tuple({k, val}));
  return Value::iterator(std::move(out));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("reverse", a, {});
  if (v.is_string()) {
    std::vector<Value> chars = in.iterate(v);
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->as_string();
    return Value(std::move(out));
  }
  // Jinja returns reversed(value) where Python has one (an iterator), else a reversed list.
  const char* type = v.is_tuple()  ? "reversed"
                     : v.is_list() ? "list_reverseiterator"
                     : v.is_dict() ? "dict_reversekeyiterator"
                                   : nullptr;
  std::vector<Value> items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  return type != nullptr ? Value::iterator(std::move(items), type) : Value::list(std::move(items));
}

Value f_sort(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("sort", a, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = truthy(b.get(0, Value(false)));
  const bool cs = truthy(b.get(1, Value(false)));
  std::vector<Value> items = in.iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items)
    keyed.emplace_back(sort_key(in, item, b.get(2, Value::none()), cs), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first) : less(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::list(std::move(out));
}

Value f_dictsort(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail("dictsort(): expected a mapping, got " + type_name(v));
  const bool cs = truthy(b.get(0, Value(false)));
  const std::string by = to_str(b.get(1, Value("key")));
  if (by != "key" && by != "value") fail("dictsort(): 'by' must be 'key' or 'value'");
  const bool reverse = truthy(b.get(2, Value(false)));
  std::vector<std::pair<Value, Value>> pairs(v.as_dict().items());
  in.count_iterations(static_cast<int64_t>(pairs.size()));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const auto& x, const auto& y) {
    const Value kx = sort_key(in, by == "key" ? x.first : x.second, Value::none(), cs);
    const Value ky = sort_key(in, by == "key" ? y.first : y.second, Value::none(), cs);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  std::vector<Value> out;
  for (auto& [k, val] : pairs) out.push_back(Value::tuple({k, val}));
  return Value::list(std::move(out));
}

Value f_unique(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("unique", a, {"case_sensitive", "attribute"});
  const bool cs = truthy(b.get(0, Value(false)));
  std::vector<Value> seen;
  std::vector<Value> out;
  for (Value& item : in.iterate(v)) {
    const Value key = sort_key(in, item, b.get(1, Value::none()), cs);
    in.count_iterations(static_cast<int64_t>(seen.size()) / 16 + 1);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); }))
      continue;
    seen.push_back(key);
    out.push_back(std::move(item));
  }
  return Value::iterator(std::move(out));
}

Value min_max(Interpreter& in, const Value& v, CallArgs& a, bool want_max) {
  ArgBinder b(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  const bool cs = truthy(b.get(0, Value(false)));
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(in, items[0], b.get(1, Value::none()), cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(in, items[i], b.get(1, Value::none()), cs);
    if (want_max ? less(best_key, key) : less(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}
Value f_min(Interpreter& in, const Value& v, CallArgs& a) {
  return min_max(in, v, a, false);
}
Value f_max(Interpreter& in, const Value& v, CallArgs& a) {
  return min_max(in, v, a, true);
}

Value f_sum(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("sum", a, {"attribute", "start"});
  Value total = b.get(1, Value(0));
  for (const Value& item : in.iterate(v)) {
    const Value& attr = b.get(0, Value::none());
    total = binary_op(in, BinaryOp::kAdd, total,
                      attr.is_none() ? item : in.get_path(item, to_str(attr)));
  }
  return total;
}

Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  if (!truthy(v)) return Value::iterator({});  // Jinja: "if value:" guards the loop
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [k, val] : a.kwargs) {
    if (k == "attribute")
      attribute = &val;
    else if (k == "default")
      fallback = &val;
  }
  if (attribute != nullptr) {
    for (const Value& item : in.iterate(v))
      out.push_back(in.get_path(item, to_str(*attribute), fallback));
    return Value::iterator(std::move(out));
  }
  if (a.args.empty()) fail("map(): expects a filter name or attribute=");
  const std::string name = to_str(a.args[0]);
  if (filter_support(name) != Support::kImplemented) fail("map(): no filter named '" + name + "'");
  for (const Value& item : in.iterate(v)) {
    CallArgs rest;
    rest.args.assign(a.args.begin() + 1, a.args.end());
    rest.kwargs = a.kwargs;
    out.push_back(apply_filter(in, name, item, rest));
  }
  in.count_iterations(static_cast<int64_t>(out.size()));
  return Value::iterator(std::move(out));
}

// select / reject / selectattr / rejectattr.
Value select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attribute, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (a.args.empty()) fail("selectattr(): expects an attribute name");
    attribute = to_str(a.args[next++]);
  }
  std::string test;
  if (next < a.args.size()) test = to_str(a.args[next++]);
  if (!test.empty() && test_support(test) != Support::kImplemented)
    fail("no test named '" + test + "'");
  std::vector<Value> out;
  if (!truthy(v)) return Value::iterator({});  // Jinja: "if value:" guards the loop
  for (const Value& item : in.iterate(v)) {
    const Value subject = by_attribute ? in.get_path(item, attribute) : item;
    bool passed = false;
    if (test.empty()) {
      passed = truthy(subject);
    } else {
      CallArgs rest;
      rest.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(next), a.args.end());
      rest.kwargs = a.kwargs;
      passed = apply_test(in, test, subject, rest);
    }
    if (passed == keep) out.push_back(item);
  }
  in.count_iterations(static_cast<int64_t>(out.size()));
  return Value::iterator(std::move(out));
}
Value f_select(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, false, true);
}
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, false, false);
}
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, true, true);
}
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return select_impl(in, v, a, true, false);
}

Value f_batch(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("batch", a, {"linecount", "fill_with"});
  const int64_t n = int_arg("batch", "linecount", b.get(0, Value(1)));
  if (n <= 0) fail("batch(): linecount must be positive");
  std::vector<Value> out;
  std::vector<Value> cur;
  for (Value& item : in.iterate(v)) {
    cur.push_back(std::move(item));
    if (static_cast<int64_t>(cur.size()) == n) out.push_back(Value::list(std::exchange(cur, {})));
  }
  if (!cur.empty()) {
    if (b.has(1) && !b.get(1, Value()).is_none()) {
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(b.get(1, Value()));
    }
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::iterator(std::move(out));
}

Value f_attr(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("attr", a, {"name"});
  const std::string name = to_str(b.get(0, Value(std::string())));
  if (v.is_dict()) {  // attr() never reads items
    const Value m = get_method(v, name);
    return m.is_undefined() && m.undefined_hint().empty()
               ? Value::undefined("'dict object' has no attribute '" + name + "'")
               : m;
  }
  return in.getattr(v, name);
}

Value f_slice(Interpreter& in, const Value& v, CallArgs& a) {
  ArgBinder b("slice", a, {"slices", "fill_with"});
  const int64_t slices = int_arg("slice", "slices", b.get(0, Value(1)));
  if (slices <= 0 || slices > 100000) fail("slice(): slices must be between 1 and 100000");
  std::vector<Value> items = in.iterate(v);
  const size_t n = static_cast<size_t>(slices);
  const size_t per = items.size() / n;
  const size_t with_extra = items.size() % n;
  std::vector<Value> out;
  size_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t start = offset + i * per;
    if (i < with_extra) ++offset;
    const size_t end = offset + (i + 1) * per;
    std::vector<Value> part(items.begin() + static_cast<std::ptrdiff_t>(start),
                            items.begin() + static_cast<std::ptrdiff_t>(end));
    if (b.has(1) && !b.get(1, Value()).is_none() && i >= with_extra && with_extra > 0) {
      part.push_back(b.get(1, Value()));
    }
    out.push_back(Value::list(std::move(part)));
  }
  return Value::iterator(std::move(out));
}

const FilterTable& filter_table() {
  static const FilterTable table = [] {
    FilterTable t = {
        {"attr", f_attr},         {"batch", f_batch},   {"count", f_length},
        {"dictsort", f_dictsort}, {"first", f_first},   {"items", f_items},
        {"join", f_join},         {"last", f_last},     {"length", f_length},
        {"list", f_list},         {"map", f_map},       {"max", f_max},
        {"min", f_min},           {"reject", f_reject}, {"rejectattr", f_rejectattr},
        {"reverse", f_reverse},   {"select", f_select}, {"selectattr", f_selectattr},
        {"slice", f_slice},       {"sort", f_sort},     {"sum", f_sum},
        {"unique", f_unique},
    };
    add_text_filters(t);
    return t;
  }();
  return table;
}

}  // namespace

Support filter_support(std::string_view name) {
  if (filter_table().count(name) != 0) return Support::kImplemented;
  static const char* const kJinjaOnly[] = {"filesizeformat", "groupby",   "pprint",
                                           "random",         "striptags", "urlencode",
                                           "urlize",         "wordwrap",  "xmlattr"};
  for (const char* n : kJinjaOnly) {
    if (name == n) return Support::kUnsupported;
  }
  return Support::kUnknown;
}

Value apply_filter(Interpreter& interp, std::string_view name, const Value& input, CallArgs& args) {
  const auto& table = filter_table();
  const auto it = table.find(name);
  if (it == table.end()) {
    if (filter_support(name) == Support::kUnknown)
      fail("no filter named '" + std::string(name) + "'");
    throw Error(ErrorKind::kUnsupported, "the '" + std::string(name) + "' filter is not supported");
  }
  return it->second(interp, input, args);
}

}  // namespace lathe::jinja
