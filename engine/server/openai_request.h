// Parsing and checking the bodies of POST /v1/chat/completions and /v1/completions.
//
// parse_json_body() turns bytes into JSON (rejecting broken JSON, invalid UTF-8 and absurd
// nesting); parse_openai_request() checks every field's type and range and fills an
// OpenAiRequest. Checks that need the model (prompt length against max-model-len, token ids against
// the vocabulary) happen in the generation handler, after tokenization.
//
// Accepted fields follow OpenAI's API plus vLLM's extensions (top_k, min_p, repetition_penalty,
// ignore_eos, min_tokens, stop_token_ids, skip_special_tokens, add_special_tokens,
// add_generation_prompt). Like OpenAI, an unknown field is an error ("Unrecognized request
// argument supplied: foo"); known OpenAI fields Lathe does not implement (best_of above n,
// suffix, ...) get a 400 that says so. null counts as absent.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/request.h"
#include "engine/server/api_error.h"

namespace lathe {

enum class ApiEndpoint { kChatCompletions, kCompletions };

// Structured output asked for (constrained decoding); the generation handler compiles it.
enum class GuidedKind { kNone, kJsonObject, kJsonSchema, kRegex, kChoice };
struct GuidedDecoding {
  GuidedKind kind = GuidedKind::kNone;
  std::string param;                 // the field that asked ("response_format", "guided_json")
  std::string schema_pointer;        // kJsonSchema: JSON pointer of the schema in the body
  std::string schema_text;           // or the schema as JSON text (guided_json given as a string)
  std::string regex;                 // kRegex
  std::vector<std::string> choices;  // kChoice
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

struct OpenAiRequest {
  ApiEndpoint endpoint = ApiEndpoint::kChatCompletions;
  std::string model;               // as sent; "" when absent (the served model is meant)
  RequestSpec spec;                // prompt (text or ids) or messages, and sampling parameters
  bool add_special_tokens = true;  // completions with a text prompt: BOS etc. per the tokenizer
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage: a last chunk with usage
  bool max_tokens_given = false;  // else chat runs to max-model-len, completions stop at 16
  bool logprobs = false;          // return the chosen tokens' logprobs
  int32_t top_logprobs = 0;       // and this many alternatives per token
  int32_t n = 1;                  // choices: n engine requests of the one prompt
  bool echo = false;              // completions: the prompt comes back before the completion
  std::string echo_text;          // the prompt as text (set once tokenized)
  GuidedDecoding guided;
  // Chat tools: the validated `tools` array as JSON text ("" for none), their names, the choice.
  std::string tools_json;
  std::vector<std::string> tool_names;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;     // kNamed
  bool parallel_tool_calls = true;  // false: tool_choice required makes exactly one call
  bool uses_tools() const { return !tools_json.empty() && tool_choice != ToolChoice::kNone; }
};

// Most tokens in a token-id prompt, and deepest JSON nesting accepted.
inline constexpr int64_t kMaxPromptTokenIds = 1 << 20;
inline constexpr int kMaxJsonDepth = 64;
inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr int32_t kMaxChoices = 16;  // n at most

// Parses `body` as a JSON object. Errors (400) name the problem and its byte offset.
MaybeApiError parse_json_body(const std::string& body, nlohmann::json* out);

// Fills `out` from a parsed body, or returns the first problem (400, naming the field).
MaybeApiError parse_openai_request(ApiEndpoint endpoint, const nlohmann::json& body,
                                   OpenAiRequest* out);

}  // namespace lathe
