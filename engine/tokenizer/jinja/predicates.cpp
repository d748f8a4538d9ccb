// Jinja2's built-in tests: {% if x is defined %}, {% if n is divisibleby 3 %}, ...
#include <cmath>
#include <unordered_map>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/operators.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {
namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

const Value& one_arg(std::string_view test, CallArgs& a) {
  if (a.args.size() + a.kwargs.size() != 1)
    fail("test '" + std::string(test) + "' takes one argument");
  return a.args.empty() ? a.kwargs[0].second : a.args[0];
}

void no_args(std::string_view test, CallArgs& a) {
  if (!a.args.empty() || !a.kwargs.empty())
    fail("test '" + std::string(test) + "' takes no arguments");
}

int ordered(const Value& a, const Value& b) {
  if (a.is_undefined()) raise_undefined(a);
  if (b.is_undefined()) raise_undefined(b);
  return compare(a, b);
}

int64_t int_mod(const Value& v, int64_t m) {
  if (v.is_undefined()) raise_undefined(v);
  if (!v.is_int() && !v.is_bool()) {
    if (v.is_float()) return std::fmod(v.as_float(), static_cast<double>(m)) == 0.0 ? 0 : 1;
    fail("test needs a number, got " + type_name(v));
  }
  if (m == 0) fail("integer division or modulo by zero");
  return v.integer() % m;
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("defined", a);
         return !v.is_undefined();
       }},
      {"undefined",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("undefined", a);
         return v.is_undefined();
       }},
      {"none",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("none", a);
         return v.is_none();
       }},
      {"boolean",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("boolean", a);
         return v.is_bool();
       }},
      {"true",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("true", a);
         return v.is_bool() && v.as_bool();
       }},
      {"false",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("false", a);
         return v.is_bool() && !v.as_bool();
       }},
      {"integer",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("integer", a);
         return v.is_int();
       }},
      {"float",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("float", a);
         return v.is_float();
       }},
      {"number",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("number", a);
         return v.is_number();
       }},
      {"string",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("string", a);
         return v.is_string();
       }},
      {"mapping",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("mapping", a);
         return v.is_dict();
       }},
      // Jinja2's Undefined defines __iter__, __len__ and __getitem__, so it counts as both.
      {"iterable",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("iterable", a);
         return v.is_undefined() || v.is_string() || v.kind() == Value::Kind::kList || v.is_dict();
       }},
      {"sequence",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("sequence", a);
         return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
       }},
      {"callable",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("callable", a);
         return v.is_object() && v.as_object()->is_callable();
       }},
      {"escaped",
       [](Interpreter&, const Value&, CallArgs& a) {
         no_args("escaped", a);
         return false;
       }},
      {"sameas",
       [](Interpreter&, const Value& v, CallArgs& a) {
         const Value& o = one_arg("sameas", a);
         if (v.identity() != nullptr || o.identity() != nullptr)
           return v.identity() == o.identity();
         return v.kind() == o.kind() && equals(v, o);
       }},
      {"in",
       [](Interpreter&, const Value& v, CallArgs& a) { return contains(one_arg("in", a), v); }},
      {"odd",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("odd", a);
         return int_mod(v, 2) != 0;
       }},
      {"even",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("even", a);
         return int_mod(v, 2) == 0;
       }},
      {"divisibleby",
       [](Interpreter&, const Value& v, CallArgs& a) {
         return int_mod(v, int_arg("divisibleby", "num", one_arg("divisibleby", a))) == 0;
       }},
      {"eq", [](Interpreter&, const Value& v, CallArgs& a) { return equals(v, one_arg("eq", a)); }},
      {"ne",
       [](Interpreter&, const Value& v, CallArgs& a) { return !equals(v, one_arg("ne", a)); }},
      {"lt",
       [](Interpreter&, const Value& v, CallArgs& a) { return ordered(v, one_arg("lt", a)) < 0; }},
      {"le",
       [](Interpreter&, const Value& v, CallArgs& a) { return ordered(v, one_arg("le", a)) <= 0; }},
      {"gt",
       [](Interpreter&, const Value& v, CallArgs& a) { return ordered(v, one_arg("gt", a)) > 0; }},
      {"ge",
       [](Interpreter&, const Value& v, CallArgs& a) { return ordered(v, one_arg("ge", a)) >= 0; }},
      {"lower",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("lower", a);
         return is_lower(to_str(v));
       }},
      {"upper",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("upper", a);
         return is_upper(to_str(v));
       }},
      {"filter",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("filter", a);
         return v.is_string() && filter_support(v.as_string()) == Support::kImplemented;
       }},
      {"test",
       [](Interpreter&, const Value& v, CallArgs& a) {
         no_args("test", a);
         return v.is_string() && test_support(v.as_string()) == Support::kImplemented;
       }},
  };
  return table;
}

std::string_view canonical(std::string_view name) {
  if (name == "==" || name == "equalto") return "eq";
  if (name == "!=") return "ne";
  if (name == "<" || name == "lessthan") return "lt";
  if (name == "<=") return "le";
  if (name == ">" || name == "greaterthan") return "gt";
  if (name == ">=") return "ge";
  return name;
}

}  // namespace

Support test_support(std::string_view name) {
  return test_table().count(canonical(name)) != 0 ? Support::kImplemented : Support::kUnknown;
}

bool apply_test(Interpreter& interp, std::string_view name, const Value& input, CallArgs& args) {
  const auto it = test_table().find(canonical(name));
  if (it == test_table().end()) fail("no test named '" + std::string(name) + "'");
  return it->second(interp, input, args);
}

}  // namespace lathe::jinja
