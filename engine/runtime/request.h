// What a client submits to the engine and what it gets back. Plain data shared by the CLI, the
// HTTP server and Lathe Studio.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/runtime/model_io.h"
#include "engine/runtime/sampling_params.h"
#include "engine/tokenizer/chat_template.h"

namespace lathe {

using RequestId = uint64_t;
using Clock = std::chrono::steady_clock;
// A Clock duration in seconds.
inline double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

// The prompt comes in exactly one of three forms.
struct RequestSpec {
  std::string prompt;                  // text, tokenized with the model's tokenizer
  std::vector<TokenId> prompt_tokens;  // or ids as given
  std::vector<ChatMessage> messages;   // or a chat, rendered through the chat template
  bool add_generation_prompt = true;   // chat only
  // Chat only: a JSON object of extra template variables (e.g. {"tools": [...]}), as
  // ChatRenderOptions::variables_json; empty for none.
  std::string chat_variables_json;
  SamplingParams sampling;
  std::string client_id;  // echoed in logs and metrics ("chatcmpl-..."); optional
};

// Monotonic timestamps of a request's life. Unset ones are Clock::time_point{}.
struct RequestTimeline {
  Clock::time_point arrival;
  Clock::time_point first_scheduled;
  Clock::time_point first_token;
  Clock::time_point finished;
  std::vector<Clock::time_point> token_times;  // one per generated token
};

struct RequestUsage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_prompt_tokens = 0;  // prompt tokens served from the prefix cache
};

// Delivered once per generated token; the last token's event carries finished = true (an abort or
// an error before or between tokens gets a final event of its own, without tokens). Text deltas
// concatenate to the final text; bytes of an incomplete UTF-8 character, or of a possible
// stop-string prefix, are held back until they resolve. End tokens (EOS, stop_token_ids) appear in
// token_ids and in usage but add no text.
struct StreamEvent {
  RequestId id = 0;
  std::string text;                    // new text since the last event (may be empty)
  std::vector<TokenId> token_ids;      // new token ids since the last event
  std::vector<SampledToken> logprobs;  // per new token, when logprobs were requested
  // With sampling.prompt_logprobs, on the first token's event: one entry per prompt token (entry
  // 0's logprob is NaN: it has no context).
  std::vector<SampledToken> prompt_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;        // finish_reason == kError: what went wrong
  std::string stop_reason;  // the stop string or "eos"/"<token id>" that ended it
  RequestUsage usage;       // running totals
  // The request's timeline; set on the final event, valid only during the callback.
  const RequestTimeline* timeline = nullptr;
};

// Called on the engine thread; must return quickly and must not call back into the engine
// except abort(). Never called again after the event with finished = true.
using StreamCallback = std::function<void(const StreamEvent&)>;

}  // namespace lathe
