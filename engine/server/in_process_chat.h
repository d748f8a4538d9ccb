// The chat API's request path for in-process clients (Lathe Studio's chat): a chat request goes
// through the same parsing, structured-output compilation and tool preparation as POST
// /v1/chat/completions, so the same inputs make the same engine requests, and bad input gets the
// same message as the server's 400.
//
//   InProcessChat chat(engine);
//   Result<OpenAiRequest> r = chat.prepare(chat_request_body(messages, options));
//   engine.submit(r->spec, ...);          // then ToolReply(*r, chat.tool_syntax()) on the text
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>

#include "engine/core/status.h"
#include "engine/server/openai_request.h"
#include "engine/server/server_context.h"
#include "engine/server/tool_calls.h"

namespace lathe {

// What a chat asks for beyond plain text.
struct ChatOutputOptions {
  bool json_output = false;          // response_format json_object, or json_schema with a schema
  std::string json_schema;           // JSON text of a schema; empty (or blank): any JSON object
  std::string tools;                 // JSON text of an OpenAI `tools` array; blank: none
  std::string tool_choice = "auto";  // "auto", "none" or "required"
};

// A problem with the options: the field to blame ("response_format" or "tools") and the message the
// server's 400 carries.
struct ChatOptionsProblem {
  std::string param;
  std::string message;
};

// Checks the options without a model: the schema compiles, the tools are well-formed and every
// tool's parameters schema compiles (as tool_choice "required" needs), and the combination is
// allowed. nullopt when they are usable.
std::optional<ChatOptionsProblem> check_chat_output_options(const ChatOutputOptions& options);

// The JSON text of a chat request: `messages` (an array of OpenAI chat messages) with the options.
std::string chat_request_body(const nlohmann::json& messages, const ChatOutputOptions& options);

class InProcessChat {
 public:
  // `engine` must outlive this object.
  explicit InProcessChat(Engine& engine);

  // The request of `body` (a chat request's JSON text), prepared as the server prepares it: its
  // spec carries the messages, the tools for the chat template and the grammar constraint.
  // Errors are the server's 400 messages.
  Result<OpenAiRequest> prepare(const std::string& body);
  // The syntax the loaded model calls tools in (for ToolReply).
  ToolSyntax tool_syntax() const { return syntax_; }

 private:
  ServerContext ctx_;
  ToolSyntax syntax_;
};

}  // namespace lathe
