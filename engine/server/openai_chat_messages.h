// The conversation of a chat completions request (internal to engine/server): `messages` (roles,
// text content or text parts, assistant tool_calls, tool results) and the `tools` / `tool_choice`
// the model may call. parse_openai_request() calls these for /v1/chat/completions.
#pragma once

#include "engine/server/api_error.h"
#include "engine/server/openai_request.h"
#include "engine/server/request_fields.h"

namespace lathe {

// messages (required, non-empty) into out->spec.messages; an assistant turn's tool_calls and a
// tool message's tool_call_id go to ChatMessage::extra_json for the template. Errors: 400 with
// param "messages", naming the entry ("messages[2].role ...").
MaybeApiError parse_chat_messages(const JsonFields& f, OpenAiRequest* out);

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
// and tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}} into
// out->tools_json, tool_names, tool_choice and tool_choice_name. The legacy functions /
// function_call are refused (400).
MaybeApiError parse_chat_tools(const JsonFields& f, OpenAiRequest* out);

}  // namespace lathe
