// A compiled Jinja template: Lathe's interpreter for the Jinja2 subset that chat templates use,
// with Hugging Face's environment (trim_blocks, lstrip_blocks, loopcontrols, raise_exception,
// strftime_now, tojson without HTML escaping). Immutable after parse: render() may be called from
// many threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/core/status.h"
#include "engine/tokenizer/jinja/interpreter.h"
#include "engine/tokenizer/jinja/value.h"

namespace lathe::jinja {

class Template {
 public:
  // Parses `source`. Errors (kInvalidArgument; kUnsupported for Jinja features Lathe lacks) read
  // "line 3, column 14: unexpected '}'".
  static Result<std::shared_ptr<const Template>> parse(std::string_view source);

  // Renders with `variables` (plus the environment's globals, which variables may shadow).
  //  - raise_exception("msg") in the template: kInvalidArgument whose message is exactly "msg";
  //  - other template errors: kInvalidArgument (kUnsupported for unimplemented features), message
  //    "line L, column C: <what went wrong>";
  //  - a limit in settings.limits exceeded: kResourceExhausted, same form.
  // `raised`, when given, is set to whether the error came from raise_exception().
  Result<std::string> render(const Dict& variables, const RenderSettings& settings = {},
                             bool* raised = nullptr) const;

  ~Template();

 private:
  struct Impl;
  explicit Template(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace lathe::jinja
