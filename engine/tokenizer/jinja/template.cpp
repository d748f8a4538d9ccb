#include "engine/tokenizer/jinja/template.h"

#include <algorithm>
#include <new>

#include "engine/tokenizer/jinja/builtins.h"
#include "engine/tokenizer/jinja/error.h"
#include "engine/tokenizer/jinja/lexer.h"
#include "engine/tokenizer/jinja/parser.h"
#include "engine/tokenizer/jinja/text.h"

namespace lathe::jinja {

struct Template::Impl {
  std::string source;               // normalised source, which node positions index
  std::vector<size_t> line_starts;  // byte offset of each line
  Body body;

  // "line 3, column 14" (1-based; columns count code points).
  std::string location(size_t pos) const {
    if (pos == kNoPos) return "";
    pos = std::min(pos, source.size());
    const auto it = std::upper_bound(line_starts.begin(), line_starts.end(), pos);
    const size_t line = static_cast<size_t>(it - line_starts.begin());
    const size_t begin = line_starts[line - 1];
    const size_t column = code_point_count(std::string_view(source).substr(begin, pos - begin)) + 1;
    return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": ";
  }

  Status to_status(const Error& e) const {
    switch (e.kind()) {
      case ErrorKind::kRaised:
        return invalid_argument(e.message());
      case ErrorKind::kUnsupported:
        return unsupported(location(e.pos()) + e.message());
      case ErrorKind::kLimit:
        return resource_exhausted(location(e.pos()) + e.message());
      case ErrorKind::kSyntax:
      case ErrorKind::kRuntime:
        break;
    }
    return invalid_argument(location(e.pos()) + e.message());
  }
};

Template::Template(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Template::~Template() = default;

Result<std::shared_ptr<const Template>> Template::parse(std::string_view source) {
  auto impl = std::make_unique<Impl>();
  impl->source = normalize_source(source);
  impl->line_starts.push_back(0);
  for (size_t i = 0; i < impl->source.size(); ++i) {
    if (impl->source[i] == '\n') impl->line_starts.push_back(i + 1);
  }
  try {
    impl->body = parse_template(tokenize(impl->source));
  } catch (const Error& e) {
    return impl->to_status(e);
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory while parsing the template");
  }
  return std::shared_ptr<const Template>(new Template(std::move(impl)));
}

Result<std::string> Template::render(const Dict& variables, const RenderSettings& settings,
                                     bool* raised) const {
  if (raised != nullptr) *raised = false;
  try {
    Dict globals;
    add_globals(globals);
    for (const auto& [k, v] : variables.items()) globals.set(k, v);
    Interpreter interp(settings);
    return interp.render(impl_->body, globals);
  } catch (const Error& e) {
    if (raised != nullptr) *raised = e.kind() == ErrorKind::kRaised;
    return impl_->to_status(e);
  } catch (const std::bad_alloc&) {
    return out_of_memory("out of memory while rendering the template");
  } catch (const std::exception& e) {
    return internal_error(std::string("template render failed: ") + e.what());
  }
}

}  // namespace lathe::jinja
