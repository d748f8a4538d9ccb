#include "engine/tokenizer/jinja/interpreter.h"

#include <unordered_map>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/objects.h"
#include "engine/tokenizer/jinja/operators.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {

struct Interpreter::Frame {
  std::unordered_map<std::string, Value> vars;
};

namespace {

// Statements plus expressions may nest this deep at run time (macro recursion included) before
// rendering stops with an error instead of exhausting the stack.
constexpr int kMaxEvalDepth = 500;

[[noreturn]] void limit_error(std::string message) {
  throw Error(ErrorKind::kLimit, std::move(message));
}

struct DepthGuard {
  explicit DepthGuard(int& depth) : d(depth) {
    if (++d > kMaxEvalDepth)
      limit_error("template evaluation nested too deeply (runaway recursion?)");
  }
  ~DepthGuard() { --d; }
  int& d;
};

// Objects that can close reference cycles (macros capture the scope that holds them; namespaces
// may hold themselves). Cleared when the render ends so every value is freed.
struct CycleRegistry {
  std::vector<std::weak_ptr<Object>> objects;
  ~CycleRegistry() {
    for (auto& weak : objects) {
      auto obj = weak.lock();
      if (!obj) continue;
      if (auto* m = dynamic_cast<MacroObject*>(obj.get())) m->clear();
      if (auto* c = dynamic_cast<CallerObject*>(obj.get())) c->clear();
      if (auto* n = dynamic_cast<Namespace*>(obj.get())) n->clear();
    }
  }
};
thread_local CycleRegistry* g_registry = nullptr;

// Python's negative indices count from the end. Sizes are far below 2^62, so no overflow.
int64_t normalize_index(int64_t i, size_t size) {
  return i < 0 ? i + static_cast<int64_t>(size) : i;
}

}  // namespace

// Registers an object that may take part in a reference cycle (see CycleRegistry).
void register_cyclic(const std::shared_ptr<Object>& obj) {
  if (g_registry != nullptr) g_registry->objects.push_back(obj);
}

Interpreter::Interpreter(const RenderSettings& settings) : settings_(settings) {}

std::string Interpreter::render(const Body& body, const Dict& globals) {
  CycleRegistry registry;
  CycleRegistry* saved = g_registry;
  g_registry = &registry;
  struct Restore {
    CycleRegistry* saved;
    ~Restore() { g_registry = saved; }
  } restore{saved};
  auto root = std::make_shared<Frame>();
  for (const auto& [k, v] : globals.items()) {
    if (k.is_string()) root->vars[k.as_string()] = v;
  }
  scope_ = {root};
  exec_body(body);
  scope_.clear();
  return std::move(out_);
}

void Interpreter::count_iterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > settings_.limits.max_iterations) {
    limit_error("template ran more than " + std::to_string(settings_.limits.max_iterations) +
                " loop iterations (runaway loop?)");
  }
}

void Interpreter::charge(size_t bytes) {
  if (bytes > settings_.limits.max_output_bytes) {
    limit_error("template built a value of " + std::to_string(bytes) + " bytes, over the " +
                std::to_string(settings_.limits.max_output_bytes) + "-byte limit");
  }
  work_bytes_ += bytes;
  if (work_bytes_ > settings_.limits.max_work_bytes) {
    limit_error("template built more than " + std::to_string(settings_.limits.max_work_bytes) +
                " bytes of values (runaway loop?)");
  }
}

void Interpreter::charge_items(size_t count) {
  if (count > settings_.limits.max_work_bytes / sizeof(Value)) {
    limit_error("template built a list of " + std::to_string(count) + " items (runaway loop?)");
  }
  work_bytes_ += count * sizeof(Value);
  if (work_bytes_ > settings_.limits.max_work_bytes) {
    limit_error("template built more than " + std::to_string(settings_.limits.max_work_bytes) +
                " bytes of values (runaway loop?)");
  }
}

void Interpreter::write(std::string_view text) {
  if (out_.size() + text.size() > settings_.limits.max_output_bytes) {
    limit_error("template output exceeds " + std::to_string(settings_.limits.max_output_bytes) +
                " bytes");
  }
  out_.append(text);
}

std::string Interpreter::capture(const Body& body) {
  const size_t start = out_.size();
  exec_body(body);
  std::string s = out_.substr(start);
  out_.resize(start);
  return s;
}

Interpreter::Flow Interpreter::exec_body(const Body& body) {
  for (const auto& node : body) {
    const Flow flow = exec(*node);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Node& node) {
  DepthGuard guard(eval_depth_);
  try {
    switch (node.kind) {
      case NodeKind::kText:
        write(static_cast<const TextNode&>(node).text);
        break;
      case NodeKind::kOutput:
        write(to_str(eval(*static_cast<const OutputNode&>(node).expr)));
        break;
      case NodeKind::kIf: {
        const auto& n = static_cast<const IfNode&>(node);
        for (const auto& [cond, body] : n.branches) {
          if (truthy(eval(*cond))) return exec_body(body);
        }
        return exec_body(n.else_body);
      }
      case NodeKind::kFor: {
        const auto& n = static_cast<const ForNode&>(node);
        exec_for(n, eval(*n.iterable), 0);
        break;
      }
      case NodeKind::kSet: {
        const auto& n = static_cast<const SetNode&>(node);
        assign(n.target, eval(*n.value), n.pos);
        break;
      }
      case NodeKind::kSetBlock: {
        const auto& n = static_cast<const SetBlockNode&>(node);
        Value v(capture(n.body));
        if (n.filter) {
          block_inputs_.push_back(&v);
          Value filtered = eval(*n.filter);
          block_inputs_.pop_back();
          v = std::move(filtered);
        }
        assign(n.target, v, n.pos);
        break;
      }
      case NodeKind::kMacro: {
        const auto& n = static_cast<const MacroNode&>(node);
        auto macro = std::make_shared<MacroObject>(n, scope_);
        register_cyclic(macro);
        scope_.back()->vars[n.name] = Value(std::shared_ptr<Object>(macro));
        break;
      }
      case NodeKind::kCallBlock: {
        const auto& n = static_cast<const CallBlockNode&>(node);
        auto caller = std::make_shared<CallerObject>(n, scope_);
        register_cyclic(caller);
        const Value fn = eval(*n.call->operands[0]);
        CallArgs args;
        eval_args(*n.call, args);
        auto* macro = fn.is_object() ? dynamic_cast<MacroObject*>(fn.as_object().get()) : nullptr;
        if (macro == nullptr) fail("{% call %} needs a macro, got " + type_name(fn));
        write(to_str(macro->call_with_caller(*this, args, Value(std::shared_ptr<Object>(caller)))));
        break;
      }
      case NodeKind::kFilterBlock: {
        const auto& n = static_cast<const FilterBlockNode&>(node);
        const Value body(capture(n.body));
        block_inputs_.push_back(&body);
        const Value v = eval(*n.filter);
        block_inputs_.pop_back();
        write(to_str(v));
        break;
      }
      case NodeKind::kWith: {
        const auto& n = static_cast<const WithNode&>(node);
        std::vector<Value> values;
        for (const auto& [target, expr] : n.assignments) values.push_back(eval(*expr));
        scope_.push_back(std::make_shared<Frame>());
        for (size_t i = 0; i < values.size(); ++i) assign(n.assignments[i].first, values[i], n.pos);
        const Flow flow = exec_body(n.body);
        scope_.pop_back();
        return flow;
      }
      case NodeKind::kScope:
        return exec_body(static_cast<const ScopeNode&>(node).body);
      case NodeKind::kBreak:
        return Flow::kBreak;
      case NodeKind::kContinue:
        return Flow::kContinue;
    }
  } catch (Error& e) {
    if (e.pos() == kNoPos) e.set_pos(node.pos);
    throw;
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const ForNode& node, const Value& iterable, int depth) {
  std::vector<Value> items = iterate(iterable);
  if (node.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      count_iterations(1);
      scope_.push_back(std::make_shared<Frame>());
      assign(node.target, item, node.pos);
      const bool keep = truthy(eval(*node.filter));
      scope_.pop_back();
      if (keep) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    scope_.push_back(std::make_shared<Frame>());
    exec_body(node.else_body);
    scope_.pop_back();
    return;
  }
  auto shared = std::make_shared<const std::vector<Value>>(std::move(items));
  auto loop = std::make_shared<LoopObject>(node, shared, depth);
  const Value loop_value{std::shared_ptr<Object>(loop)};
  for (size_t i = 0; i < shared->size(); ++i) {
    count_iterations(1);
    loop->set_index(i);
    scope_.push_back(std::make_shared<Frame>());
    scope_.back()->vars["loop"] = loop_value;
    assign(node.target, (*shared)[i], node.pos);
    const Flow flow = exec_body(node.body);
    scope_.pop_back();
    if (flow == Flow::kBreak) break;
  }
}

std::string Interpreter::render_loop(const ForNode& node, const Value& iterable, int depth) {
  const size_t start = out_.size();
  exec_for(node, iterable, depth);
  std::string s = out_.substr(start);
  out_.resize(start);
  return s;
}

void Interpreter::assign(const Target& target, const Value& value, size_t pos) {
  if (!target.attribute.empty()) {
    const Value ns = lookup(target.names[0]);
    auto* n = ns.is_object() ? dynamic_cast<Namespace*>(ns.as_object().get()) : nullptr;
    if (n == nullptr) {
      throw Error(ErrorKind::kRuntime,
                  "cannot assign attribute on non-namespace object '" + target.names[0] + "'", pos);
    }
    n->set_attr(target.attribute, value);
    return;
  }
  if (!target.is_tuple) {
    scope_.back()->vars[target.names[0]] = value;
    return;
  }
  if (value.is_undefined()) raise_undefined(value);
  std::vector<Value> items = iterate(value);
  if (items.size() != target.names.size()) {
    throw Error(ErrorKind::kRuntime,
                (items.size() > target.names.size() ? "too many" : "not enough") +
                    std::string(" values to unpack (expected ") +
                    std::to_string(target.names.size()) + ", got " + std::to_string(items.size()) +
                    ")",
                pos);
  }
  for (size_t i = 0; i < items.size(); ++i) scope_.back()->vars[target.names[i]] = items[i];
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
    auto found = (*it)->vars.find(name);
    if (found != (*it)->vars.end()) return found->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  std::vector<Value> items;
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return items;
    case Value::Kind::kList: {
      const List& l = v.as_list();
      if (l.flavor == List::Flavor::kIterator) {
        if (l.consumed) return items;
        l.consumed = true;
      }
      items = l.items;
      break;
    }
    case Value::Kind::kDict:
      items.reserve(v.as_dict().size());
      for (const auto& [k, val] : v.as_dict().items()) items.push_back(k);
      break;
    case Value::Kind::kString: {
      const std::string& s = v.as_string();
      for (size_t i = 0; i < s.size();) {
        const size_t start = i;
        next_code_point(s, i);
        items.emplace_back(s.substr(start, i - start));
      }
      break;
    }
    default:
      fail("'" + type_name(v) + "' object is not iterable");
  }
  count_iterations(static_cast<int64_t>(items.size()) / 16);
  charge_items(items.size());
  return items;
}

Value Interpreter::getattr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) raise_undefined(obj);
  if (obj.is_object()) return obj.as_object()->get_attr(name);
  // Jinja's sandboxed getattr: a (safe or unsafe) method wins over a dict item of the same name.
  Value method = get_method(obj, name);
  if (!method.is_undefined() || !method.undefined_hint().empty()) return method;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
  }
  return Value::undefined("'" + type_name(obj) + " object' has no attribute '" + std::string(name) +
                          "'");
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      raise_undefined(obj);
    case Value::Kind::kDict:
      if (const Value* v = obj.as_dict().find(key)) return *v;
      break;
    case Value::Kind::kList:
    case Value::Kind::kString:
      if (obj.kind() == Value::Kind::kList && !obj.is_list()) {
        fail("'" + type_name(obj) + "' object is not subscriptable");
      }
      if (key.is_int() || key.is_bool()) {
        if (obj.is_list()) {
          const auto& items = obj.as_list().items;
          const int64_t i = normalize_index(key.integer(), items.size());
          if (i >= 0 && i < static_cast<int64_t>(items.size()))
            return items[static_cast<size_t>(i)];
        } else {
          const std::string& s = obj.as_string();
          const auto offs = code_point_offsets(s);
          const int64_t i = normalize_index(key.integer(), offs.size() - 1);
          if (i >= 0 && i < static_cast<int64_t>(offs.size()) - 1) {
            const auto k = static_cast<size_t>(i);
            return Value(s.substr(offs[k], offs[k + 1] - offs[k]));
          }
        }
        return Value::undefined("'" + type_name(obj) + " object' has no attribute " + to_str(key));
      }
      break;
    default:
      break;
  }
  if (key.is_string()) return getattr(obj, key.as_string());
  return Value::undefined("'" + type_name(obj) + " object' has no attribute " + repr(key));
}

Value Interpreter::get_path(const Value& obj, std::string_view path, const Value* fallback) {
  Value cur = obj;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part(path.substr(start, dot == std::string_view::npos ? dot : dot - start));
    const bool numeric = !part.empty() && part.size() < 18 &&
                         part.find_first_not_of("0123456789") == std::string::npos;
    cur = getitem(cur, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (fallback != nullptr && cur.is_undefined()) cur = *fallback;
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) raise_undefined(fn);
  if (fn.is_object() && fn.as_object()->is_callable()) return fn.as_object()->call(*this, args);
  fail("'" + type_name(fn) + "' object is not callable");
}

Value Interpreter::bind_call(const Params& params, const std::string& name, CallArgs& args,
                             bool varargs, bool kwargs, const Scope& closure, const Body& body,
                             const Value& caller) {
  if (++calls_ > settings_.limits.max_calls) {
    limit_error("template made more than " + std::to_string(settings_.limits.max_calls) +
                " macro calls");
  }
  if (call_depth_ >= settings_.limits.max_call_depth) {
    limit_error("macro calls nested more than " + std::to_string(settings_.limits.max_call_depth) +
                " deep (runaway recursion in '" + name + "'?)");
  }
  if (args.args.size() > params.names.size() && !varargs) {
    fail("macro '" + name + "' takes not more than " + std::to_string(params.names.size()) +
         " argument(s)");
  }
  Scope saved = std::move(scope_);
  scope_ = closure;
  scope_.push_back(std::make_shared<Frame>());
  auto& vars = scope_.back()->vars;
  std::vector<bool> bound(params.names.size(), false);
  for (size_t i = 0; i < args.args.size() && i < params.names.size(); ++i) {
    vars[params.names[i]] = args.args[i];
    bound[i] = true;
  }
  Dict extra_kwargs;
  for (auto& [key, value] : args.kwargs) {
    size_t i = 0;
    while (i < params.names.size() && params.names[i] != key) ++i;
    if (i == params.names.size()) {
      if (!kwargs) fail("macro '" + name + "' takes no keyword argument '" + key + "'");
      extra_kwargs.set(Value(key), value);
      continue;
    }
    if (bound[i]) fail("macro '" + name + "' got multiple values for argument '" + key + "'");
    vars[key] = value;
    bound[i] = true;
  }
  for (size_t i = 0; i < params.names.size(); ++i) {
    if (bound[i]) continue;
    vars[params.names[i]] = params.defaults[i]
                                ? eval(*params.defaults[i])
                                : Value::undefined("'" + params.names[i] + "' is undefined");
  }
  std::vector<Value> extra_args;
  for (size_t i = params.names.size(); i < args.args.size(); ++i)
    extra_args.push_back(args.args[i]);
  vars["varargs"] = Value::tuple(std::move(extra_args));
  vars["kwargs"] = Value::dict(std::move(extra_kwargs));
  if (!caller.is_undefined()) vars["caller"] = caller;
  ++call_depth_;
  const size_t start = out_.size();
  exec_body(body);
  std::string result = out_.substr(start);
  out_.resize(start);
  --call_depth_;
  scope_ = std::move(saved);
  return Value(std::move(result));
}

Value Interpreter::call_macro(const MacroNode& macro, const Scope& closure, CallArgs& args,
                              const Value& caller) {
  return bind_call(macro.params, macro.name, args, macro.uses_varargs, macro.uses_kwargs, closure,
                   macro.body, caller);
}

Value Interpreter::call_caller(const CallBlockNode& block, const Scope& closure, CallArgs& args) {
  return bind_call(block.caller_params, "caller", args, false, false, closure, block.body, Value());
}

void Interpreter::eval_args(const Expr& e, CallArgs& out) {
  out.args.reserve(e.args.size());
  for (const auto& a : e.args) out.args.push_back(eval(*a));
  for (const auto& [k, v] : e.kwargs) out.kwargs.emplace_back(k, eval(*v));
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(eval_depth_);
  try {
    return eval_impl(e);
  } catch (Error& err) {
    if (err.pos() == kNoPos) err.set_pos(e.pos);
    throw;
  }
}

Value Interpreter::eval_impl(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.value;
    case ExprKind::kName:
      return lookup(e.name);
    case ExprKind::kBlockInput:
      return *block_inputs_.back();
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.operands.size());
      for (const auto& op : e.operands) items.push_back(eval(*op));
      return e.kind == ExprKind::kList ? Value::list(std::move(items))
                                       : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.operands.size(); i += 2) {
        Value key = eval(*e.operands[i]);
        if ((key.kind() == Value::Kind::kList && !key.is_tuple()) || key.is_dict() ||
            key.is_undefined()) {
          if (key.is_undefined()) raise_undefined(key);
          fail("unhashable type: '" + type_name(key) + "'");
        }
        d.set(std::move(key), eval(*e.operands[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetattr:
      return getattr(eval(*e.operands[0]), e.name);
    case ExprKind::kGetitem:
      return getitem(eval(*e.operands[0]), eval(*e.operands[1]));
    case ExprKind::kSlice:
      return eval_slice(e);
    case ExprKind::kCall: {
      const Value fn = eval(*e.operands[0]);
      CallArgs args;
      eval_args(e, args);
      return call(fn, args);
    }
    case ExprKind::kFilter: {
      const Value input = eval(*e.operands[0]);
      CallArgs args;
      eval_args(e, args);
      return apply_filter(*this, e.name, input, args);
    }
    case ExprKind::kTest: {
      const Value input = eval(*e.operands[0]);
      CallArgs args;
      eval_args(e, args);
      return Value(apply_test(*this, e.name, input, args));
    }
    case ExprKind::kNeg:
      return negate(eval(*e.operands[0]));
    case ExprKind::kPos: {
      Value v = eval(*e.operands[0]);
      if (v.is_undefined()) raise_undefined(v);
      if (!v.is_number()) fail("bad operand type for unary +: '" + type_name(v) + "'");
      return v.is_bool() ? Value(v.integer()) : v;
    }
    case ExprKind::kNot:
      return Value(!truthy(eval(*e.operands[0])));
    case ExprKind::kBinary:
      return binary_op(*this, e.binary_op, eval(*e.operands[0]), eval(*e.operands[1]));
    case ExprKind::kCompare:
      return eval_compare(e);
    case ExprKind::kAnd: {
      Value a = eval(*e.operands[0]);
      return truthy(a) ? eval(*e.operands[1]) : a;
    }
    case ExprKind::kOr: {
      Value a = eval(*e.operands[0]);
      return truthy(a) ? a : eval(*e.operands[1]);
    }
    case ExprKind::kCondExpr:
      if (truthy(eval(*e.operands[0]))) return eval(*e.operands[1]);
      if (e.operands[2]) return eval(*e.operands[2]);
      return Value::undefined(
          "the inline if-expression evaluated to false and has no else section");
  }
  return Value();
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.operands[0]);
  for (size_t i = 0; i < e.compare_ops.size(); ++i) {
    Value right = eval(*e.operands[i + 1]);
    bool result = false;
    switch (e.compare_ops[i]) {
      case CompareOp::kEq:
        result = equals(left, right);
        break;
      case CompareOp::kNe:
        result = !equals(left, right);
        break;
      case CompareOp::kIn:
      case CompareOp::kNotIn:
        if (right.is_undefined() && !left.is_undefined()) {
          result = false;
        } else {
          if (left.is_undefined() && right.is_string()) raise_undefined(left);
          result = contains(right, left);
        }
        if (e.compare_ops[i] == CompareOp::kNotIn) result = !result;
        break;
      default: {
        if (left.is_undefined()) raise_undefined(left);
        if (right.is_undefined()) raise_undefined(right);
        const int c = compare(left, right);
        switch (e.compare_ops[i]) {
          case CompareOp::kLt:
            result = c < 0;
            break;
          case CompareOp::kLe:
            result = c <= 0;
            break;
          case CompareOp::kGt:
            result = c > 0;
            break;
          default:
            result = c >= 0;
            break;
        }
      }
    }
    if (!result) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval_slice(const Expr& e) {
  const Value obj = eval(*e.operands[0]);
  if (obj.is_undefined()) raise_undefined(obj);
  auto bound = [&](size_t i) -> std::optional<int64_t> {
    if (!e.operands[i]) return std::nullopt;
    const Value v = eval(*e.operands[i]);
    if (v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool())
      fail("slice indices must be integers or None, not " + type_name(v));
    return v.integer();
  };
  const std::optional<int64_t> start = bound(1), stop = bound(2), step_opt = bound(3);
  const int64_t step = step_opt.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  std::vector<size_t> offsets;
  size_t n = 0;
  if (obj.is_string()) {
    offsets = code_point_offsets(obj.as_string());
    n = offsets.size() - 1;
  } else if (obj.is_list()) {
    n = obj.as_list().items.size();
  } else {
    fail("'" + type_name(obj) + "' object is not subscriptable");
  }
  // Python's PySlice_AdjustIndices.
  const auto len = static_cast<int64_t>(n);
  auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = step < 0 ? len - 1 : len;
    }
    return x;
  };
  const int64_t b = adjust(start, step < 0 ? len - 1 : 0);
  const int64_t en = adjust(stop, step < 0 ? -1 : len);
  std::vector<int64_t> idx;
  for (int64_t i = b; step > 0 ? i < en : i > en; i += step) idx.push_back(i);
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    std::string out;
    for (int64_t i : idx) {
      const auto k = static_cast<size_t>(i);
      out.append(s, offsets[k], offsets[k + 1] - offsets[k]);
    }
    return Value(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(idx.size());
  for (int64_t i : idx) out.push_back(obj.as_list().items[static_cast<size_t>(i)]);
  charge_items(out.size());
  return obj.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

}  // namespace lathe::jinja
