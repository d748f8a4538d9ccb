#include "engine/tokenizer/jinja/objects.h"

#include "engine/tokenizer/jinja/error.h"

namespace lathe::jinja {

std::string Namespace::repr() const {
  if (in_repr_) return "<Namespace ...>";
  in_repr_ = true;
  std::string s = "<Namespace " + to_str(Value::dict(attrs_)) + ">";
  in_repr_ = false;
  return s;
}

Value Namespace::get_attr(std::string_view name) const {
  if (const Value* v = attrs_.find(name)) return *v;
  return Object::get_attr(name);
}

void Namespace::set_attr(const std::string& name, Value value) {
  if (!name.empty() && name[0] == '_') {
    fail("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
         name + "'. Please rename the attribute.");
  }
  attrs_.set(Value(name), std::move(value));
}

Value MacroObject::get_attr(std::string_view name) const {
  if (name == "name") return Value(node_.name);
  if (name == "arguments") {
    std::vector<Value> names(node_.params.names.begin(), node_.params.names.end());
    return Value::tuple(std::move(names));
  }
  return Object::get_attr(name);
}

std::string LoopObject::repr() const {
  return "<LoopContext " + std::to_string(index_ + 1) + "/" + std::to_string(items_->size()) + ">";
}

Value LoopObject::get_attr(std::string_view name) const {
  const auto n = static_cast<int64_t>(items_->size());
  const auto i = static_cast<int64_t>(index_);
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "revindex") return Value(n - i);
  if (name == "revindex0") return Value(n - i - 1);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(static_cast<int64_t>(depth_) + 1);
  if (name == "depth0") return Value(static_cast<int64_t>(depth_));
  if (name == "previtem") {
    return i > 0 ? (*items_)[index_ - 1] : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? (*items_)[index_ + 1] : Value::undefined("there is no next item");
  }
  if (name == "cycle") {
    const size_t index = index_;
    return Value(std::make_shared<NativeFunction>("cycle", [index](Interpreter&, CallArgs& a) {
      if (a.args.empty()) fail("no items for cycling given");
      return a.args[index % a.args.size()];
    }));
  }
  if (name == "changed") {
    auto last = last_changed_;
    return Value(std::make_shared<NativeFunction>("changed", [last](Interpreter&, CallArgs& a) {
      Value current = Value::list(a.args);
      if (!last->is_undefined() && equals(*last, current)) return Value(false);
      *last = std::move(current);
      return Value(true);
    }));
  }
  return Object::get_attr(name);
}

Value LoopObject::call(Interpreter& interp, CallArgs& args) const {
  if (!node_.recursive) return Object::call(interp, args);
  if (args.args.size() != 1 || !args.kwargs.empty()) fail("loop() takes exactly one argument");
  return Value(interp.render_loop(node_, args.args[0], depth_ + 1));
}

}  // namespace lathe::jinja
