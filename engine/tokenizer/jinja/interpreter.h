// Walks a parsed template and produces its output, with Jinja2's semantics as Hugging Face
// configures them (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols).
//
// Scoping follows Jinja2: each for-loop iteration, macro call and with-block gets a fresh scope
// whose assignments vanish when it ends (namespace() objects carry values out); top-level
// {% set %} writes the template's global scope, which macros read at call time.
//
// An Interpreter renders once and is then discarded; it is not thread-safe, but many may run at
// once over the same (immutable) parsed template. Recursion is bounded (nesting depth, macro call
// depth), so a render needs well under 1 MiB of stack whatever the template does.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/value.h"

namespace lathe::jinja {

// Bounds that keep a hostile or buggy template from hanging or exhausting memory. Exceeding one is
// an error (ErrorKind::kLimit), never a truncated result.
struct RenderLimits {
  size_t max_output_bytes = size_t{10} << 20;  // rendered text, and any single string built
  int64_t max_iterations = 1'000'000;          // loop iterations and items filters walk, in total
  int64_t max_calls = 100'000;                 // macro and caller() invocations, in total
  int max_call_depth = 64;                     // nested macro calls (recursion)
  size_t max_work_bytes = size_t{1} << 30;     // bytes of all strings and lists built, in total
};

struct RenderSettings {
  RenderLimits limits;
  // The local date and time strftime_now() formats; unset: the current local time.
  std::optional<std::tm> now;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderSettings& settings);

  // Renders `body` with `globals` as the outermost scope. Throws jinja::Error.
  std::string render(const Body& body, const Dict& globals);

  // ---- services for filters, tests, methods and globals ----

  // obj.name: an attribute or method first, then an item (Jinja's getattr).
  Value getattr(const Value& obj, std::string_view name);
  // obj[key]: an item first, then an attribute (Jinja's getitem).
  Value getitem(const Value& obj, const Value& key);
  // Looks up a dotted path ("function.name", "0") item-first, as filters' attribute= does
  // (Jinja's make_attrgetter). With `fallback`, an Undefined step is replaced by it and the walk
  // goes on from there.
  Value get_path(const Value& obj, std::string_view path, const Value* fallback = nullptr);
  Value call(const Value& fn, CallArgs& args);
  // The items of an iterable, materialised (dict: keys; str: code points; Undefined: none).
  // Throws for non-iterables. Counts against max_iterations.
  std::vector<Value> iterate(const Value& v);
  void count_iterations(int64_t n);
  // Records that a string of `bytes` was built; throws when one string is larger than
  // max_output_bytes or the total passes max_work_bytes.
  void charge(size_t bytes);
  // Records that a list of `count` items was built (counts against max_work_bytes).
  void charge_items(size_t count);
  const RenderSettings& settings() const { return settings_; }

  // ---- used by macro and loop objects ----
  struct Frame;
  using Scope = std::vector<std::shared_ptr<Frame>>;
  Value call_macro(const MacroNode& macro, const Scope& closure, CallArgs& args,
                   const Value& caller);
  Value call_caller(const CallBlockNode& block, const Scope& closure, CallArgs& args);
  std::string render_loop(const ForNode& node, const Value& iterable, int depth);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body);
  Flow exec(const Node& node);
  void exec_for(const ForNode& node, const Value& iterable, int depth);
  void assign(const Target& target, const Value& value, size_t pos);
  std::string capture(const Body& body);
  void write(std::string_view text);

  Value eval(const Expr& e);
  Value eval_impl(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_slice(const Expr& e);
  void eval_args(const Expr& e, CallArgs& out);
  Value lookup(const std::string& name) const;
  Value bind_call(const Params& params, const std::string& name, CallArgs& args, bool varargs,
                  bool kwargs, const Scope& closure, const Body& body, const Value& caller);

  RenderSettings settings_;
  Scope scope_;
  std::string out_;
  std::vector<const Value*> block_inputs_;  // values of kBlockInput (filter blocks being applied)
  int64_t iterations_ = 0;
  int64_t calls_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  size_t work_bytes_ = 0;
};

}  // namespace lathe::jinja
