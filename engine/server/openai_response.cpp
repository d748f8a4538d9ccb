#include "engine/server/openai_response.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace lathe {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json usage_json(const RequestUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_prompt_tokens}}}};
}

// vLLM's stop_reason: the stop string or token id that ended the request; null for EOS / length.
json stop_reason_json(const ResponseFinish& f, const std::vector<std::string>& stop) {
  if (f.reason != FinishReason::kStop || f.stop_reason.empty() || f.stop_reason == "eos")
    return nullptr;
  if (std::find(stop.begin(), stop.end(), f.stop_reason) != stop.end()) return f.stop_reason;
  char* end = nullptr;
  const long id = std::strtol(f.stop_reason.c_str(), &end, 10);
  if (end != f.stop_reason.c_str() && *end == '\0') return id;
  return f.stop_reason;
}

// OpenAI's tool_calls list; a streamed delta also numbers the calls.
json tool_calls_json(const std::vector<ToolCall>& calls, bool delta) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (delta) c["index"] = static_cast<int>(i);
    out.push_back(std::move(c));
  }
  return out;
}

const char* object_name(ApiEndpoint e, bool chunk) {
  if (e == ApiEndpoint::kCompletions) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

}  // namespace

const char* finish_reason_json(FinishReason reason) {
  return reason == FinishReason::kNone ? nullptr : finish_reason_name(reason);
}

LogprobsBuilder::LogprobsBuilder(ApiEndpoint endpoint, const Tokenizer* tokenizer,
                                 int32_t top_logprobs)
    : endpoint_(endpoint), tokenizer_(tokenizer), top_logprobs_(top_logprobs) {}

std::string LogprobsBuilder::token_text(TokenId id) const {
  if (tokenizer_ == nullptr || id < 0 || id >= tokenizer_->vocab_size())
    return "token_id:" + std::to_string(id);
  return tokenizer_->token_bytes(id);
}

json LogprobsBuilder::append(const std::vector<SampledToken>& tokens) {
  if (endpoint_ == ApiEndpoint::kChatCompletions) {
    json content = json::array();
    auto entry = [&](TokenId id, float lp) {
      const std::string text = token_text(id);
      json bytes = json::array();
      for (const unsigned char c : text) bytes.push_back(static_cast<int>(c));
      return json{{"token", text}, {"logprob", lp}, {"bytes", bytes}};
    };
    for (const SampledToken& t : tokens) {
      json e = entry(t.token, t.logprob);
      json top = json::array();
      for (size_t k = 0; k < t.top_logprobs.size() && static_cast<int32_t>(k) < top_logprobs_; ++k)
        top.push_back(entry(t.top_logprobs[k].token, t.top_logprobs[k].logprob));
      e["top_logprobs"] = std::move(top);
      content.push_back(std::move(e));
    }
    return json{{"content", std::move(content)}};
  }
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const SampledToken& t : tokens) {
    const std::string text = token_text(t.token);
    out["tokens"].push_back(text);
    if (std::isnan(t.logprob)) {  // the prompt's first token (echo): no context, no logprob
      out["token_logprobs"].push_back(nullptr);
      out["top_logprobs"].push_back(nullptr);
      out["text_offset"].push_back(text_offset_);
      text_offset_ += static_cast<int64_t>(text.size());
      continue;
    }
    out["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (size_t k = 0; k < t.top_logprobs.size() && static_cast<int32_t>(k) < top_logprobs_; ++k)
      top[token_text(t.top_logprobs[k].token)] = t.top_logprobs[k].logprob;
    // OpenAI lists the chosen token among the alternatives too.
    if (top_logprobs_ > 0 && !top.contains(text)) top[text] = t.logprob;
    out["top_logprobs"].push_back(top_logprobs_ > 0 ? top : json());
    out["text_offset"].push_back(text_offset_);
    text_offset_ += static_cast<int64_t>(text.size());
  }
  return out;
}

std::string completion_response(const ResponseHeader& h, const std::vector<ResponseChoice>& choices,
                                const RequestUsage& usage, const std::vector<std::string>& stop) {
  json out = json::array();
  for (const ResponseChoice& c : choices) {
    json choice = {{"index", c.index}};
    if (h.endpoint == ApiEndpoint::kChatCompletions) {
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) choice["message"]["content"] = nullptr;
        choice["message"]["tool_calls"] = tool_calls_json(c.tool_calls, false);
      }
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = c.logprobs != nullptr ? *c.logprobs : json();
    const char* reason = finish_reason_json(c.finish.reason);
    if (c.finish.tool_calls) reason = "tool_calls";
    choice["finish_reason"] = reason != nullptr ? json(reason) : json();
    choice["stop_reason"] = stop_reason_json(c.finish, stop);
    out.push_back(std::move(choice));
  }
  const json j = {{"id", h.id},
                  {"object", object_name(h.endpoint, false)},
                  {"created", h.created},
                  {"model", h.model},
                  {"choices", std::move(out)},
                  {"usage", usage_json(usage)}};
  return dump(j);
}

std::string stream_chunk_event(const ResponseHeader& h, int32_t index, const std::string& text,
                               bool first, const json* logprobs, const ResponseFinish* finish,
                               const std::vector<std::string>& stop, bool usage_null) {
  json choice = {{"index", index}};
  if (h.endpoint == ApiEndpoint::kChatCompletions) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    // The chunk that only carries the finish reason has an empty delta, as OpenAI's last chunk.
    if (!text.empty() || first || finish == nullptr) delta["content"] = text;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = logprobs != nullptr ? *logprobs : json();
  const char* reason = finish != nullptr ? finish_reason_json(finish->reason) : nullptr;
  if (finish != nullptr && finish->tool_calls) reason = "tool_calls";
  choice["finish_reason"] = reason != nullptr ? json(reason) : json();
  if (finish != nullptr) choice["stop_reason"] = stop_reason_json(*finish, stop);
  json j = {{"id", h.id},
            {"object", object_name(h.endpoint, true)},
            {"created", h.created},
            {"model", h.model},
            {"choices", json::array({std::move(choice)})}};
  if (usage_null) j["usage"] = nullptr;
  return "data: " + dump(j) + "\n\n";
}

std::string tool_calls_chunk_event(const ResponseHeader& h, int32_t index,
                                   const std::vector<ToolCall>& calls, bool first,
                                   bool usage_null) {
  json delta = {{"tool_calls", tool_calls_json(calls, true)}};
  if (first) delta["role"] = "assistant";
  json j = {{"id", h.id},
            {"object", object_name(h.endpoint, true)},
            {"created", h.created},
            {"model", h.model},
            {"choices", json::array({{{"index", index},
                                      {"delta", std::move(delta)},
                                      {"logprobs", nullptr},
                                      {"finish_reason", nullptr}}})}};
  if (usage_null) j["usage"] = nullptr;
  return "data: " + dump(j) + "\n\n";
}

std::string usage_chunk_event(const ResponseHeader& h, const RequestUsage& usage) {
  const json j = {{"id", h.id},
                  {"object", object_name(h.endpoint, true)},
                  {"created", h.created},
                  {"model", h.model},
                  {"choices", json::array()},
                  {"usage", usage_json(usage)}};
  return "data: " + dump(j) + "\n\n";
}

std::string error_event(const std::string& error_json) {
  return "data: " + error_json + "\n\n";
}

}  // namespace lathe
