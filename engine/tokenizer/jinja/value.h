// Values seen by a template, with Python semantics as Jinja2 gives them: None, bool, int, float,
// str (UTF-8; lengths and indices count code points), list, tuple, dict (insertion-ordered),
// Jinja2's Undefined, and objects (functions, macros, namespace(), the loop variable).
//
// Lists, tuples and dicts are immutable once built (Hugging Face renders templates in Jinja2's
// ImmutableSandboxedEnvironment), so copies share their storage. Only namespace() objects mutate.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace lathe::jinja {

class Value;
class Object;
class Interpreter;
struct List;
class Dict;

// Jinja2's default Undefined: falsy, renders as "", iterates as empty; using it in arithmetic,
// calling it or reading an attribute of it is an error whose message is `hint`.
struct Undefined {
  std::string hint;  // e.g. "'foo' is undefined"
};
struct None {};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kObject
  };

  Value() : v_(Undefined{}) {}
  Value(bool b) : v_(b) {}                                // NOLINT: implicit by design
  Value(int i) : v_(static_cast<int64_t>(i)) {}           // NOLINT
  Value(int64_t i) : v_(i) {}                             // NOLINT
  Value(double d) : v_(d) {}                              // NOLINT
  Value(std::string s) : v_(std::move(s)) {}              // NOLINT
  Value(std::string_view s) : v_(std::string(s)) {}       // NOLINT
  Value(const char* s) : v_(std::string(s)) {}            // NOLINT
  Value(std::shared_ptr<Object> o) : v_(std::move(o)) {}  // NOLINT

  static Value undefined(std::string hint = {}) { return Value(Undefined{std::move(hint)}); }
  static Value none() { return Value(None{}); }
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict(Dict d);
  // What Jinja2's map/select/unique/items filters return: a one-shot Python iterator
  // ("generator", "list_reverseiterator"): always truthy, no len(), not subscriptable, not JSON
  // serialisable, empty once iterated.
  static Value iterator(std::vector<Value> items, const char* type_name = "generator");
  // dict.items() / keys() / values(): sized and re-iterable, but neither subscriptable nor JSON.
  static Value view(std::vector<Value> items, const char* type_name);
  // markupsafe.Markup, made by |safe and |escape: "+" and "%" HTML-escape the plain strings
  // combined with it. Renders like any string.
  static Value markup(std::string s);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }  // Python: bool is an int
  bool is_string() const { return kind() == Kind::kString; }
  bool is_markup() const { return markup_; }
  bool is_list() const;  // list or tuple (not an iterator or view)
  bool is_tuple() const;
  bool is_iterator() const;
  bool is_view() const;
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_object() const { return kind() == Kind::kObject; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(v_); }
  const std::shared_ptr<Object>& as_object() const { return std::get<std::shared_ptr<Object>>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // int, bool or float as a double / int (bool counts as 0 or 1). Only for is_number() values.
  double number() const;
  int64_t integer() const;  // int or bool

  // Identity of the shared storage (lists, dicts, objects), for Jinja's `sameas` test.
  const void* identity() const;

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}
  explicit Value(None n) : v_(n) {}
  explicit Value(std::shared_ptr<const List> l) : v_(std::move(l)) {}
  explicit Value(std::shared_ptr<const Dict> d) : v_(std::move(d)) {}

  std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, std::shared_ptr<Object>>
      v_;
  bool markup_ = false;
};

struct List {
  enum class Flavor : uint8_t { kList, kIterator, kView };
  List() = default;
  List(const List&) = default;
  List& operator=(const List&) = default;
  ~List();  // frees nested containers iteratively: deep nesting cannot overflow the stack
  std::vector<Value> items;
  bool is_tuple = false;
  Flavor flavor = Flavor::kList;
  const char* lazy_type = nullptr;  // Python type name of an iterator or view
  mutable bool consumed = false;    // an iterator that was iterated is empty afterwards
};

// An insertion-ordered dict. set() replaces the value of an existing key in place, as Python does.
class Dict {
 public:
  Dict() = default;
  Dict(const Dict&) = default;
  Dict(Dict&&) = default;
  Dict& operator=(const Dict&) = default;
  Dict& operator=(Dict&&) = default;
  ~Dict();  // frees nested containers iteratively, like ~List
  void set(Value key, Value value);
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<std::pair<Value, Value>> items_;
  std::unordered_map<std::string, size_t> string_index_;  // position of each string key
};

// Arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

// Functions, macros, namespace(), loop: anything with attributes or a call operator.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;  // Python's type name, used in messages
  virtual std::string repr() const;
  // obj.name; an Undefined naming the missing attribute when there is none.
  virtual Value get_attr(std::string_view name) const;
  virtual bool is_callable() const { return false; }
  virtual Value call(Interpreter& interp, CallArgs& args) const;
};

// Nested values deeper than this cannot be printed, compared or serialised (an error, not a
// stack overflow).
inline constexpr int kMaxValueDepth = 256;

// Python truthiness (Undefined and None are false).
bool truthy(const Value& v);
// str(v): what {{ v }} renders. Undefined renders as "".
std::string to_str(const Value& v);
// repr(v), used inside containers: "'a'", "[1, 'b']", "{'k': None}".
std::string repr(const Value& v);
// Python's type name: "str", "int", "NoneType", "dict", ...
std::string type_name(const Value& v);
// Python ==, used by ==, in, dict keys and the equalto test.
bool equals(const Value& a, const Value& b);
// Python ordering (<0, 0, >0) of numbers, strings, lists and tuples; throws otherwise.
int compare(const Value& a, const Value& b);
// repr() of a float: "1.0", "0.1", "1e+20", "inf".
std::string format_float(double d);
// Throws the error an Undefined carries (e.g. "'foo' is undefined").
[[noreturn]] void raise_undefined(const Value& undefined);

}  // namespace lathe::jinja
