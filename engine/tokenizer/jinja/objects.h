// The object values of a render: built-in functions and bound methods, namespace(), macros and
// call-block callers, and the `loop` variable of a for loop.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/value.h"

namespace lathe::jinja {

// Registers an object that can close a reference cycle (a macro capturing the scope that holds it,
// a namespace holding itself) with the running render, which clears it when the render ends.
void register_cyclic(const std::shared_ptr<Object>& obj);

// A built-in function or a method bound to its receiver.
class NativeFunction : public Object {
 public:
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  NativeFunction(std::string name, Fn fn, std::string kind = "builtin_function_or_method")
      : name_(std::move(name)), fn_(std::move(fn)), kind_(std::move(kind)) {}
  std::string type_name() const override { return kind_; }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) const override { return fn_(interp, args); }

 private:
  std::string name_;
  Fn fn_;
  std::string kind_;
};

// namespace(): the one mutable object, assigned with {% set ns.attr = value %}.
class Namespace : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  Value get_attr(std::string_view name) const override;
  // Throws for names starting with "_" (Hugging Face's TemplateNamespace forbids them).
  void set_attr(const std::string& name, Value value);
  void clear() { attrs_ = Dict(); }  // breaks reference cycles when a render ends

 private:
  Dict attrs_;
  mutable bool in_repr_ = false;  // a namespace may contain itself
};

class MacroObject : public Object {
 public:
  MacroObject(const MacroNode& node, Interpreter::Scope closure)
      : node_(node), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + node_.name + "'>"; }
  Value get_attr(std::string_view name) const override;
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) const override {
    return interp.call_macro(node_, closure_, args, Value());
  }
  Value call_with_caller(Interpreter& interp, CallArgs& args, const Value& caller) const {
    return interp.call_macro(node_, closure_, args, caller);
  }
  void clear() { closure_.clear(); }  // breaks the frame -> macro -> frame cycle after a render

 private:
  const MacroNode& node_;
  Interpreter::Scope closure_;
};

class CallerObject : public Object {
 public:
  CallerObject(const CallBlockNode& node, Interpreter::Scope closure)
      : node_(node), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro 'caller'>"; }
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) const override {
    return interp.call_caller(node_, closure_, args);
  }
  void clear() { closure_.clear(); }

 private:
  const CallBlockNode& node_;
  Interpreter::Scope closure_;
};

// The `loop` variable: index, index0, revindex, revindex0, first, last, length, depth, depth0,
// previtem, nextitem, cycle(...), changed(...), and loop(items) in recursive loops.
class LoopObject : public Object {
 public:
  LoopObject(const ForNode& node, std::shared_ptr<const std::vector<Value>> items, int depth)
      : node_(node), items_(std::move(items)), depth_(depth) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override;
  Value get_attr(std::string_view name) const override;
  bool is_callable() const override { return node_.recursive; }
  Value call(Interpreter& interp, CallArgs& args) const override;
  void set_index(size_t i) { index_ = i; }

 private:
  const ForNode& node_;
  std::shared_ptr<const std::vector<Value>> items_;
  int depth_;
  size_t index_ = 0;
  std::shared_ptr<Value> last_changed_ = std::make_shared<Value>();
};

}  // namespace lathe::jinja
