#include "engine/tokenizer/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "engine/tokenizer/jinja/error.h"

namespace lathe::jinja {

namespace {

// Containers whose last owner is going away are moved here and released one at a time, so a
// list nested a million levels deep is freed by a loop instead of a million nested destructors.
thread_local std::vector<Value>* t_graveyard = nullptr;

bool holds_container(const Value& v) {
  return v.is_list() || v.is_dict() || v.is_object();
}

void release(std::vector<Value>& values) {
  if (t_graveyard != nullptr) {
    for (Value& v : values) {
      if (holds_container(v)) t_graveyard->push_back(std::move(v));
    }
    return;
  }
  std::vector<Value> pending;
  t_graveyard = &pending;
  for (Value& v : values) {
    if (holds_container(v)) pending.push_back(std::move(v));
  }
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
  }  // each v released here may append its own children to `pending`
  t_graveyard = nullptr;
}

// Bounds recursion in the printers and comparisons below.
struct NestingGuard {
  NestingGuard() {
    if (++depth > kMaxValueDepth) {
      --depth;
      fail("value nested more than " + std::to_string(kMaxValueDepth) + " levels deep");
    }
  }
  ~NestingGuard() { --depth; }
  static thread_local int depth;
};
thread_local int NestingGuard::depth = 0;

}  // namespace

List::~List() {
  release(items);
}

Dict::~Dict() {
  std::vector<Value> values;
  for (auto& [k, v] : items_) {
    if (holds_container(k)) values.push_back(std::move(k));
    if (holds_container(v)) values.push_back(std::move(v));
  }
  release(values);
}

Value Value::list(std::vector<Value> items) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  return Value(std::shared_ptr<const List>(std::move(l)));
}

Value Value::tuple(std::vector<Value> items) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->is_tuple = true;
  return Value(std::shared_ptr<const List>(std::move(l)));
}

Value Value::dict(Dict d) {
  return Value(std::shared_ptr<const Dict>(std::make_shared<Dict>(std::move(d))));
}

Value Value::iterator(std::vector<Value> items, const char* type_name) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->flavor = List::Flavor::kIterator;
  l->lazy_type = type_name;
  return Value(std::shared_ptr<const List>(std::move(l)));
}

Value Value::view(std::vector<Value> items, const char* type_name) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  l->flavor = List::Flavor::kView;
  l->lazy_type = type_name;
  return Value(std::shared_ptr<const List>(std::move(l)));
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.markup_ = true;
  return v;
}

bool Value::is_list() const {
  return kind() == Kind::kList && as_list().flavor == List::Flavor::kList;
}
bool Value::is_tuple() const {
  return kind() == Kind::kList && as_list().is_tuple;
}
bool Value::is_iterator() const {
  return kind() == Kind::kList && as_list().flavor == List::Flavor::kIterator;
}
bool Value::is_view() const {
  return kind() == Kind::kList && as_list().flavor == List::Flavor::kView;
}

double Value::number() const {
  switch (kind()) {
    case Kind::kBool:
      return as_bool() ? 1.0 : 0.0;
    case Kind::kInt:
      return static_cast<double>(as_int());
    case Kind::kFloat:
      return as_float();
    default:
      return 0.0;
  }
}

int64_t Value::integer() const {
  return is_bool() ? (as_bool() ? 1 : 0) : as_int();
}

const void* Value::identity() const {
  switch (kind()) {
    case Kind::kList:
      return &as_list();
    case Kind::kDict:
      return &as_dict();
    case Kind::kObject:
      return as_object().get();
    default:
      return nullptr;
  }
}

void Dict::set(Value key, Value value) {
  if (key.is_string()) {
    auto it = string_index_.find(key.as_string());
    if (it != string_index_.end()) {
      items_[it->second].second = std::move(value);
      return;
    }
    string_index_.emplace(key.as_string(), items_.size());
  } else {
    for (auto& item : items_) {
      if (equals(item.first, key)) {
        item.second = std::move(value);
        return;
      }
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

const Value* Dict::find(std::string_view key) const {
  auto it = string_index_.find(std::string(key));
  return it == string_index_.end() ? nullptr : &items_[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& item : items_) {
    if (!item.first.is_string() && equals(item.first, key)) return &item.second;
  }
  return nullptr;
}

std::string Object::repr() const {
  return std::string("<").append(type_name()).append(" object>");
}

Value Object::get_attr(std::string_view name) const {
  return Value::undefined(std::string("'").append(type_name()) + " object' has no attribute '" +
                          std::string(name) + "'");
}

Value Object::call(Interpreter&, CallArgs&) const {
  fail("'" + type_name() + "' object is not callable");
}

void raise_undefined(const Value& undefined) {
  const std::string& hint = undefined.undefined_hint();
  fail(hint.empty() ? "a value is undefined" : hint);
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return v.as_bool();
    case Value::Kind::kInt:
      return v.as_int() != 0;
    case Value::Kind::kFloat:
      return v.as_float() != 0.0;
    case Value::Kind::kString:
      return !v.as_string().empty();
    case Value::Kind::kList:
      return v.is_iterator() || !v.as_list().items.empty();
    case Value::Kind::kDict:
      return !v.as_dict().empty();
    case Value::Kind::kObject:
      return true;
  }
  return false;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-tripping digits, laid out as Python's float.__repr__ does: positional for
  // exponents in [-4, 16), scientific otherwise ("1e+16", "1.5e-05").
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
             digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

namespace {

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    switch (c) {
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
      default:
        if (c == static_cast<unsigned char>(quote)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return repr_string(v.as_string());
    case Value::Kind::kUndefined:
      return "Undefined";
    default:
      break;
  }
  return to_str(v);
}

std::string to_str(const Value& v) {
  NestingGuard guard;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return v.as_bool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(v.as_int());
    case Value::Kind::kFloat:
      return format_float(v.as_float());
    case Value::Kind::kString:
      return v.as_string();
    case Value::Kind::kList: {
      const List& l = v.as_list();
      if (l.flavor == List::Flavor::kIterator) return std::string("<") + l.lazy_type + " object>";
      std::string out = l.flavor == List::Flavor::kView ? std::string(l.lazy_type) + "(["
                                                        : (l.is_tuple ? "(" : "[");
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += repr(l.items[i]);
      }
      if (l.is_tuple && l.items.size() == 1) out += ",";
      out += l.flavor == List::Flavor::kView ? "])" : (l.is_tuple ? ")" : "]");
      return out;
    }
    case Value::Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.as_dict().items()) {
        if (!first) out += ", ";
        first = false;
        out += repr(k) + ": " + repr(val);
      }
      return out + "}";
    }
    case Value::Kind::kObject:
      return v.as_object()->repr();
  }
  return "";
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      if (v.as_list().lazy_type != nullptr) return v.as_list().lazy_type;
      return v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kObject:
      return v.as_object()->type_name();
  }
  return "object";
}

bool equals(const Value& a, const Value& b) {
  NestingGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.number() == b.number();
    return a.integer() == b.integer();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.flavor == List::Flavor::kIterator || y.flavor == List::Flavor::kIterator)
        return &x == &y;
      if (x.is_tuple != y.is_tuple || x.flavor != y.flavor || x.items.size() != y.items.size()) {
        return false;
      }
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, val] : x.items()) {
        const Value* other = y.find(k);
        if (other == nullptr || !equals(val, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kObject:
      return a.as_object() == b.as_object();
    default:
      return false;
  }
}

int compare(const Value& a, const Value& b) {
  NestingGuard guard;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.number();
      const double y = b.number();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    const int64_t x = a.integer();
    const int64_t y = b.integer();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // Byte order of UTF-8 equals code point order, which is Python's string order.
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

}  // namespace lathe::jinja
