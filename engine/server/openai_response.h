// The JSON Lathe answers with, in OpenAI's shapes: chat.completion / text_completion objects,
// their streamed chunks (chat.completion.chunk), usage, and logprobs (chat: choices[].logprobs.
// content[] of {token, logprob, bytes, top_logprobs}; completions: {tokens, token_logprobs,
// top_logprobs, text_offset}). Strings are dumped with invalid UTF-8 replaced, never thrown on.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/request.h"
#include "engine/server/openai_request.h"
#include "engine/server/tool_calls.h"
#include "engine/tokenizer/tokenizer.h"

namespace lathe {

// What every object of one response shares.
struct ResponseHeader {
  ApiEndpoint endpoint = ApiEndpoint::kChatCompletions;
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  std::string model;    // the served model name
  int64_t created = 0;  // Unix seconds
};

// How a request ended, as reported to the client.
struct ResponseFinish {
  FinishReason reason = FinishReason::kNone;
  bool tool_calls = false;  // the reply called tools: finish_reason "tool_calls"
  std::string stop_reason;  // the engine's: a stop string, "eos", or a token id
  RequestUsage usage;
};

// Builds logprobs for consecutive pieces of one response (keeps the completions text offset).
class LogprobsBuilder {
 public:
  LogprobsBuilder(ApiEndpoint endpoint, const Tokenizer* tokenizer, int32_t top_logprobs);
  // Appends entries for `tokens` (completions' text offsets continue) and returns the logprobs
  // object for just these tokens.
  nlohmann::json append(const std::vector<SampledToken>& tokens);

 private:
  std::string token_text(TokenId id) const;
  ApiEndpoint endpoint_;
  const Tokenizer* tokenizer_;  // null: tokens shown as "token_id:<id>"
  int32_t top_logprobs_;
  int64_t text_offset_ = 0;
};

// "stop" / "length" / "abort" / "error" (null while running).
const char* finish_reason_json(FinishReason reason);

// One choice of a complete response.
struct ResponseChoice {
  int32_t index = 0;
  std::string text;
  ResponseFinish finish;
  const nlohmann::json* logprobs = nullptr;  // null pointer for JSON null
  std::vector<ToolCall> tool_calls;          // chat: message.tool_calls (content null if empty)
};

// A complete non-streaming response: its choices in index order and the request's usage.
std::string completion_response(const ResponseHeader& header,
                                const std::vector<ResponseChoice>& choices,
                                const RequestUsage& usage, const std::vector<std::string>& stop);

// One SSE event ("data: {...}\n\n") carrying a text delta of choice `index`. first: chat's first
// chunk of a choice also carries the role. finish: set on the choice's last content chunk.
// usage_null: include "usage": null (when stream_options.include_usage asked for a final usage
// chunk).
std::string stream_chunk_event(const ResponseHeader& header, int32_t index, const std::string& text,
                               bool first, const nlohmann::json* logprobs,
                               const ResponseFinish* finish, const std::vector<std::string>& stop,
                               bool usage_null);
// A chunk carrying choice `index`'s tool calls whole (delta.tool_calls with ids, names and
// arguments).
std::string tool_calls_chunk_event(const ResponseHeader& header, int32_t index,
                                   const std::vector<ToolCall>& calls, bool first, bool usage_null);
// The last chunk of a stream with include_usage: no choices, just usage.
std::string usage_chunk_event(const ResponseHeader& header, const RequestUsage& usage);
// An error inside a stream (after the 200 status went out): data: {"error": {...}}.
std::string error_event(const std::string& error_json);
inline const char* done_event() {
  return "data: [DONE]\n\n";
}

}  // namespace lathe
