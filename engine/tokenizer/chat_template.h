// Renders a model's own Jinja chat template (tokenizer_config.json "chat_template" or GGUF
// "tokenizer.chat_template") with Lathe's Jinja interpreter (jinja/). No per-family hard-coding:
// what the template says is what the model sees.
//
// The template sees what Hugging Face transformers' apply_chat_template gives it: `messages` (a
// list of dicts), `add_generation_prompt`, `bos_token` / `eos_token`, `tools` and `documents`
// (None unless given), any extra variables, and the globals raise_exception, strftime_now, range,
// dict, namespace. For the same inputs the output is byte-identical to transformers'.
#pragma once

#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ...
  std::string content;  // plain text
  // Optional JSON object whose members are merged into the message dict, for fields such as
  // "tool_calls", "tool_call_id", "name" or "reasoning_content". A member set to null removes
  // the field (e.g. {"content": null} for an assistant turn that only calls tools), as
  // transformers drops None-valued keys.
  std::string extra_json;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;  // end with the assistant header so the model answers
  std::string bos_token;              // exposed to the template as bos_token; empty: undefined
  std::string eos_token;              // exposed as eos_token; empty: undefined
  // Optional JSON object; each member becomes a template variable, e.g.
  // {"tools": [...], "enable_thinking": false, "date_string": "26 Jul 2024"}. Members override
  // the variables above.
  std::string variables_json;
  // The local date and time strftime_now() reports (Llama 3.2's "Today Date"); unset: now.
  std::optional<std::tm> now;
};

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // Parses the template once. Syntax errors name the line and column:
  // "chat template: line 3, column 14: unexpected '}'".
  static Result<ChatTemplate> compile(const std::string& source);

  // Renders `messages`. Errors from the template itself (raise_exception("...")) come back as
  // kInvalidArgument with the template's message, e.g. "Conversation roles must alternate
  // user/assistant/user/assistant/...". Other failures name the template line and column;
  // runaway templates stop at the interpreter's limits (10 MiB of output, 1M loop iterations)
  // with kResourceExhausted. Thread-safe.
  Result<std::string> render(const std::vector<ChatMessage>& messages,
                             const ChatRenderOptions& options) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> tmpl_;
};

}  // namespace lathe
