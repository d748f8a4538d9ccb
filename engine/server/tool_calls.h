// Tool calling for the chat API: which syntax a chat template's model calls tools in, the prompt
// side (tools for the template, or a system prompt for templates that take none), and parsing the
// model's output back into OpenAI tool_calls.
//
// Syntaxes (detected from the template source):
//   kHermes   Qwen2.5 / Qwen3 / Hermes: <tool_call>\n{"name": ..., "arguments":
//   {...}}\n</tool_call>
//             (several in a row); text before the first call is content.
//   kLlama3   Llama 3.1 / 3.2: {"name": ..., "parameters": {...}} as the whole reply (optionally
//             after <|python_tag|>, several separated by ';').
//   kMistral  [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (or
//   [TOOL_CALLS]name[ARGS]{...}). kGeneric  a template that renders no tools: Lathe describes the
//   tools in a system message
//             and asks for the Hermes syntax, and renders past calls as that text.
// tool_choice "required" and a named function are enforced by constrained decoding instead, as
// vLLM does: the reply is a JSON array of {"name", "parameters"} (required) or the named
// function's arguments object (forced_call_regex, parse_forced_calls).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

enum class ToolSyntax { kHermes, kLlama3, kMistral, kGeneric };

ToolSyntax tool_syntax_of(const std::string& template_source);
const char* tool_syntax_name(ToolSyntax s);

struct ToolCall {
  std::string id;  // 9 alphanumerics (what Mistral's templates require)
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ParsedReply {
  std::string content;  // text outside the calls
  std::vector<ToolCall> calls;
};

// The calls in `text` in `syntax`, naming functions of `names` with object arguments; text that
// is not a well-formed call stays content.
ParsedReply parse_tool_calls(ToolSyntax syntax, const std::string& text,
                             const std::vector<std::string>& names);

// Where a call may begin in streamed text: the length of `text`'s prefix that is surely content
// (what can be sent now); the rest may be, or is, the start of a call and is held back.
size_t tool_call_safe_prefix(ToolSyntax syntax, const std::string& text);

// Forced calls. named: the function's parameters schema; required: an array of 1 to max_calls
// {"name": <a tool>, "parameters": <its schema>}. `tools` is the request's (validated) list.
inline constexpr int kMaxParallelToolCalls = 8;
Result<std::string> forced_call_regex(const nlohmann::ordered_json& tools, const std::string& named,
                                      int max_calls = kMaxParallelToolCalls);
std::vector<ToolCall> parse_forced_calls(const std::string& text, const std::string& named);

// kGeneric: the system message describing `tools` (a JSON array) and how to call them.
std::string generic_tools_prompt(const std::string& tools_json);
// kGeneric: an assistant turn's calls as the text the model is asked to write.
std::string generic_calls_text(const nlohmann::json& tool_calls);

// A fresh call id.
std::string new_tool_call_id();

}  // namespace lathe
