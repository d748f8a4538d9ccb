#include "engine/tokenizer/chat_template.h"

#include "engine/tokenizer/jinja/json.h"
#include "engine/tokenizer/jinja/template.h"

namespace lathe {
namespace {

using jinja::Dict;
using jinja::Value;

// Names transformers copies a message's reasoning under (its _alias_reasoning_fields): the first
// one present becomes "thinking" (prepended) and "reasoning_content" (appended).
constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

Result<Dict> parse_object(const std::string& json, const std::string& what) {
  LATHE_ASSIGN_OR_RETURN(Value v, jinja::parse_json(json));
  if (!v.is_dict()) return invalid_argument(what + " must be a JSON object");
  return v.as_dict();
}

Result<Value> message_value(const ChatMessage& m, size_t index) {
  Dict fields;
  fields.set(Value("role"), Value(m.role));
  fields.set(Value("content"), Value(m.content));
  if (!m.extra_json.empty()) {
    auto extra = parse_object(m.extra_json, "messages[" + std::to_string(index) + "].extra_json");
    if (!extra.is_ok()) return extra.status();
    for (const auto& [k, v] : extra->items()) fields.set(k, v);
  }
  Dict message;  // without None-valued keys, like transformers' _normalize_chat_messages
  const Value* reasoning = nullptr;
  for (const char* name : kReasoningFields) {
    const Value* r = fields.find(std::string_view(name));
    if (r != nullptr && !r->is_none()) {
      reasoning = r;
      break;
    }
  }
  if (reasoning != nullptr) message.set(Value("thinking"), *reasoning);
  for (const auto& [k, v] : fields.items()) {
    if (!v.is_none()) message.set(k, v);
  }
  if (reasoning != nullptr) message.set(Value("reasoning_content"), *reasoning);
  return Value::dict(std::move(message));
}

}  // namespace

Result<ChatTemplate> ChatTemplate::compile(const std::string& source) {
  auto parsed = jinja::Template::parse(source);
  if (!parsed.is_ok()) return parsed.status().with_context("chat template");
  ChatTemplate t;
  t.source_ = source;
  t.tmpl_ = std::move(parsed).value();
  return t;
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                         const ChatRenderOptions& options) const {
  if (!tmpl_) return invalid_argument("chat template: render() called on an empty ChatTemplate");
  std::vector<Value> list;
  list.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    LATHE_ASSIGN_OR_RETURN(Value m, message_value(messages[i], i));
    list.push_back(std::move(m));
  }
  Dict vars;
  vars.set(Value("messages"), Value::list(std::move(list)));
  vars.set(Value("tools"), Value::none());
  vars.set(Value("documents"), Value::none());
  vars.set(Value("add_generation_prompt"), Value(options.add_generation_prompt));
  if (!options.bos_token.empty()) vars.set(Value("bos_token"), Value(options.bos_token));
  if (!options.eos_token.empty()) vars.set(Value("eos_token"), Value(options.eos_token));
  if (!options.variables_json.empty()) {
    LATHE_ASSIGN_OR_RETURN(Dict extra, parse_object(options.variables_json, "variables_json"));
    for (const auto& [k, v] : extra.items()) vars.set(k, v);
  }
  jinja::RenderSettings settings;
  settings.now = options.now;
  bool raised = false;
  auto out = tmpl_->render(vars, settings, &raised);
  // raise_exception() messages are the template author's words for the user: pass them as is.
  if (!out.is_ok() && !raised) return out.status().with_context("chat template");
  return out;
}

}  // namespace lathe
