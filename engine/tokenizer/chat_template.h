// Renders a model's own Jinja chat template (tokenizer_config.json "chat_template" or GGUF
// "tokenizer.chat_template") with Lathe's Jinja interpreter (jinja/). No per-family hard-coding:
// what the template says is what the model sees.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;  // plain text
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;  // end with the assistant header so the model answers
  std::string bos_token;              // exposed to the template as bos_token
  std::string eos_token;              // exposed as eos_token
};

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // Parses the template once. Syntax errors name the line and column.
  static Result<ChatTemplate> compile(const std::string& source);

  // Renders `messages`. Errors from the template itself (raise_exception("...")) come back as
  // kInvalidArgument with the template's message, e.g. "Conversation roles must alternate".
  Result<std::string> render(const std::vector<ChatMessage>& messages,
                             const ChatRenderOptions& options) const;

  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::shared_ptr<const jinja::Template> tmpl_;
};

}  // namespace lathe
