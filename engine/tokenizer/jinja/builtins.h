// Jinja's built-in filters ({{ x | trim }}), tests ({% if x is defined %}), the methods of str,
// dict and list values that templates call ({{ s.strip() }}), and the globals of Hugging Face's
// chat template environment (range, dict, namespace, raise_exception, strftime_now, ...).
#pragma once

#include <string>
#include <string_view>

#include "engine/tokenizer/jinja/value.h"

namespace lathe::jinja {

enum class Support {
  kImplemented,
  kUnsupported,  // a Jinja2 built-in Lathe does not implement: an error only if it is reached
  kUnknown,      // not a Jinja2 name at all: a syntax error, as in Jinja2
};

Support filter_support(std::string_view name);
Support test_support(std::string_view name);

// {{ input | name(args) }}.
Value apply_filter(Interpreter& interp, std::string_view name, const Value& input, CallArgs& args);
// {{ input is name(args) }}.
bool apply_test(Interpreter& interp, std::string_view name, const Value& input, CallArgs& args);

// A method bound to its receiver (the value of `s.strip`), or an Undefined when `receiver` has no
// such method. Mutating methods (list.append, dict.update, ...) give an Undefined that raises the
// sandbox's "unsafe" error when called, as in Jinja2's ImmutableSandboxedEnvironment.
Value get_method(const Value& receiver, std::string_view name);

// The global names every template sees, added to `globals`.
void add_globals(Dict& globals);

// Binds call arguments to named parameters like a Python signature: positional first, then
// keywords; missing ones keep the given defaults. Throws for unknown keywords and extra arguments.
class ArgBinder {
 public:
  ArgBinder(std::string_view function, CallArgs& args,
            std::initializer_list<std::string_view> names);
  // The bound value of parameter i, or `fallback` when it was not passed. By value, so binding
  // the result to a const reference is always safe.
  Value get(size_t i, Value fallback) const;
  bool has(size_t i) const { return present_[i]; }

 private:
  std::vector<Value> values_;
  std::vector<bool> present_;
};

// Shared argument conversions that name the function and parameter in their errors.
int64_t int_arg(std::string_view function, std::string_view param, const Value& v);
std::string string_arg(std::string_view function, std::string_view param, const Value& v);

}  // namespace lathe::jinja
