// Fuzz target: the Jinja lexer, parser and interpreter on template text, rendered with a fixed
// conversation (system, user, assistant with a tool call, tool, user) and tools.
#include "engine/tokenizer/chat_template.h"
#include "tests/fuzz/fuzz_support.h"

using namespace lathe;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<ChatMessage> messages = {
      {"system", "You are helpful.", ""},
      {"user", "Hi <b>there</b> {{ not a template }}", ""},
      {"assistant", "",
       R"({"content": null, "tool_calls": [{"type": "function", "function": {"name": "f",
          "arguments": {"x": 1, "y": [1, 2.5, "s"]}}}]})"},
      {"tool", "42", R"({"tool_call_id": "call_1", "name": "f"})"},
      {"user", "Thanks \xE2\x9C\x93", ""},
  };
  Result<ChatTemplate> tmpl =
      ChatTemplate::compile(std::string(reinterpret_cast<const char*>(data), size));
  if (!tmpl.is_ok()) {
    LATHE_FUZZ_CHECK(!tmpl.status().message().empty());
    return 0;
  }
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.variables_json =
      R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
          "enable_thinking": false})";
  std::tm now{};
  now.tm_year = 126;
  now.tm_mday = 2;
  options.now = now;
  (void)tmpl->render(messages, options);
  return 0;
}
