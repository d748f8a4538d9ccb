#include "engine/server/openai_request.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>

#include "engine/core/strings.h"

namespace lathe {
namespace {

using json = nlohmann::json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a number with a fraction";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    default:
      return "an unsupported value";
  }
}

// param: the top-level field to blame (defaults to `field`).
ApiError wrong_type(const std::string& field, const char* expected, const json& v,
                    std::string param = {}) {
  return bad_request(strformat("%s must be %s, got %s", field.c_str(), expected, type_name(v)),
                     param.empty() ? field : std::move(param));
}

// Reads optional typed fields of one JSON object; absent and null leave the output untouched.
class Fields {
 public:
  explicit Fields(const json& obj) : obj_(obj) {}

  const json* get(const char* name) const {
    auto it = obj_.find(name);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const char* name) const { return get(name) != nullptr; }

  MaybeApiError number(const char* name, float* out, double lo, double hi,
                       bool lo_open = false) const {
    const json* v = get(name);
    if (v == nullptr) return {};
    if (!v->is_number()) return wrong_type(name, "a number", *v);
    const double d = v->get<double>();
    if (!std::isfinite(d) || d > hi || d < lo || (lo_open && d == lo))
      return bad_request(
          strformat("%s must be in %c%g, %g], got %g", name, lo_open ? '(' : '[', lo, hi, d), name);
    *out = static_cast<float>(d);
    return {};
  }

  MaybeApiError integer(const char* name, int64_t* out, int64_t lo, int64_t hi) const {
    const json* v = get(name);
    if (v == nullptr) return {};
    if (!v->is_number_integer()) return wrong_type(name, "an integer", *v);
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
      return bad_request(strformat("%s must be in [%lld, %lld], got %llu", name,
                                   static_cast<long long>(lo), static_cast<long long>(hi),
                                   static_cast<unsigned long long>(v->get<uint64_t>())),
                         name);
    const int64_t i = v->get<int64_t>();
    if (i < lo || i > hi)
      return bad_request(
          strformat("%s must be in [%lld, %lld], got %lld", name, static_cast<long long>(lo),
                    static_cast<long long>(hi), static_cast<long long>(i)),
          name);
    *out = i;
    return {};
  }

  MaybeApiError integer32(const char* name, int32_t* out, int64_t lo, int64_t hi) const {
    int64_t i = *out;
    if (auto e = integer(name, &i, lo, hi)) return e;
    *out = static_cast<int32_t>(i);
    return {};
  }

  MaybeApiError boolean(const char* name, bool* out) const {
    const json* v = get(name);
    if (v == nullptr) return {};
    if (!v->is_boolean()) return wrong_type(name, "true or false", *v);
    *out = v->get<bool>();
    return {};
  }

  MaybeApiError string(const char* name, std::string* out) const {
    const json* v = get(name);
    if (v == nullptr) return {};
    if (!v->is_string()) return wrong_type(name, "a string", *v);
    *out = v->get<std::string>();
    return {};
  }

 private:
  const json& obj_;
};

// Fields of each endpoint: implemented ones, and OpenAI ones accepted and ignored.
const std::set<std::string>& common_fields() {
  static const std::set<std::string> s = {
      "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "min_p",
      "seed", "stop", "presence_penalty", "frequency_penalty", "repetition_penalty", "n", "user",
      "ignore_eos", "min_tokens", "stop_token_ids", "skip_special_tokens", "logprobs", "logit_bias",
      "best_of",
      // Accepted and ignored: they do not change what is generated.
      "store", "metadata", "service_tier"};
  return s;
}
const std::set<std::string>& chat_fields() {
  static const std::set<std::string> s = {"messages",
                                          "max_completion_tokens",
                                          "top_logprobs",
                                          "response_format",
                                          "tools",
                                          "tool_choice",
                                          "functions",
                                          "function_call",
                                          "parallel_tool_calls",
                                          "add_generation_prompt"};
  return s;
}
const std::set<std::string>& completion_fields() {
  static const std::set<std::string> s = {"prompt", "echo", "suffix", "add_special_tokens"};
  return s;
}

MaybeApiError check_known_fields(ApiEndpoint endpoint, const json& body) {
  const auto& own = endpoint == ApiEndpoint::kChatCompletions ? chat_fields() : completion_fields();
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (common_fields().count(it.key()) || own.count(it.key())) continue;
    std::string hint;
    if (endpoint == ApiEndpoint::kChatCompletions && it.key() == "prompt")
      hint = " (chat completions take \"messages\"; \"prompt\" belongs to /v1/completions)";
    if (endpoint == ApiEndpoint::kCompletions && it.key() == "messages")
      hint = " (/v1/completions takes \"prompt\"; \"messages\" belongs to /v1/chat/completions)";
    return bad_request("Unrecognized request argument supplied: " + it.key() + hint, it.key());
  }
  return {};
}

MaybeApiError parse_stop(const Fields& f, SamplingParams* p) {
  const json* v = f.get("stop");
  if (v == nullptr) return {};
  auto add = [&](const json& s, const std::string& field) -> MaybeApiError {
    if (!s.is_string()) return wrong_type(field, "a string", s, "stop");
    std::string str = s.get<std::string>();
    if (str.empty()) return bad_request(field + " must not be empty", "stop");
    if (str.size() > 1024) return bad_request(field + " is longer than 1024 bytes", "stop");
    p->stop.push_back(std::move(str));
    return {};
  };
  if (v->is_string()) return add(*v, "stop");
  if (!v->is_array()) return wrong_type("stop", "a string or an array of strings", *v);
  if (v->size() > 16)
    return bad_request(strformat("stop takes at most 16 strings, got %zu", v->size()), "stop");
  for (size_t i = 0; i < v->size(); ++i)
    if (auto e = add((*v)[i], strformat("stop[%zu]", i))) return e;
  return {};
}

MaybeApiError parse_token_ids(const json& arr, const std::string& field,
                              std::vector<TokenId>* out) {
  if (arr.empty()) return bad_request(field + " must not be empty", field);
  if (static_cast<int64_t>(arr.size()) > kMaxPromptTokenIds)
    return bad_request(strformat("%s has %zu token ids; at most %lld are accepted", field.c_str(),
                                 arr.size(), static_cast<long long>(kMaxPromptTokenIds)),
                       field);
  out->reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const json& t = arr[i];
    if (!t.is_number_integer())
      return wrong_type(strformat("%s[%zu]", field.c_str(), i), "a token id (an integer)", t,
                        field);
    const int64_t id =
        t.is_number_unsigned() && t.get<uint64_t>() > (1ull << 31) ? -1 : t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      return bad_request(strformat("%s[%zu] is not a valid token id", field.c_str(), i), field);
    out->push_back(static_cast<TokenId>(id));
  }
  return {};
}

MaybeApiError parse_common(const Fields& f, OpenAiRequest* out) {
  SamplingParams& p = out->spec.sampling;
  if (auto e = f.string("model", &out->model)) return e;
  if (auto e = f.boolean("stream", &out->stream)) return e;
  if (const json* so = f.get("stream_options")) {
    if (!so->is_object()) return wrong_type("stream_options", "an object", *so);
    if (!out->stream)
      return bad_request("stream_options is only allowed when stream is true", "stream_options");
    for (auto it = so->begin(); it != so->end(); ++it) {
      if (it.key() == "include_usage") {
        if (!it->is_null() && !it->is_boolean())
          return wrong_type("stream_options.include_usage", "true or false", *it, "stream_options");
        out->include_usage = it->is_boolean() && it->get<bool>();
      } else if (it.key() != "continuous_usage_stats") {
        return bad_request("Unrecognized request argument supplied: stream_options." + it.key(),
                           "stream_options");
      }
    }
  }
  int64_t n = 1;
  if (auto e = f.integer("n", &n, std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max()))
    return e;
  if (n != 1)
    return bad_request(
        strformat("n must be 1 (Lathe returns one choice per request), got %lld; send "
                  "separate requests for more samples",
                  static_cast<long long>(n)),
        "n");
  int64_t best_of = 1;
  if (auto e = f.integer("best_of", &best_of, std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max()))
    return e;
  if (best_of != 1)
    return bad_request("best_of must be 1; Lathe does not rank several samples", "best_of");
  if (f.has("max_tokens")) {
    if (auto e = f.integer32("max_tokens", &p.max_tokens, 1, std::numeric_limits<int32_t>::max()))
      return e;
    out->max_tokens_given = true;
  }
  if (auto e = f.number("temperature", &p.temperature, 0.0, 2.0)) return e;
  if (auto e = f.number("top_p", &p.top_p, 0.0, 1.0, /*lo_open=*/true)) return e;
  if (auto e = f.integer32("top_k", &p.top_k, -1, 1 << 24)) return e;
  if (p.top_k < 0) p.top_k = 0;
  if (auto e = f.number("min_p", &p.min_p, 0.0, 1.0)) return e;
  if (auto e = f.number("presence_penalty", &p.presence_penalty, -2.0, 2.0)) return e;
  if (auto e = f.number("frequency_penalty", &p.frequency_penalty, -2.0, 2.0)) return e;
  if (auto e = f.number("repetition_penalty", &p.repetition_penalty, 0.0, 10.0, /*lo_open=*/true))
    return e;
  if (const json* v = f.get("seed")) {
    if (!v->is_number_integer()) return wrong_type("seed", "an integer", *v);
    p.seed =
        v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (auto e = parse_stop(f, &p)) return e;
  if (const json* v = f.get("stop_token_ids")) {
    if (!v->is_array()) return wrong_type("stop_token_ids", "an array of token ids", *v);
    if (v->size() > 256)
      return bad_request("stop_token_ids takes at most 256 ids", "stop_token_ids");
    if (!v->empty())
      if (auto e = parse_token_ids(*v, "stop_token_ids", &p.stop_token_ids)) return e;
  }
  if (auto e = f.boolean("ignore_eos", &p.ignore_eos)) return e;
  if (auto e = f.integer32("min_tokens", &p.min_tokens, 0, std::numeric_limits<int32_t>::max()))
    return e;
  if (auto e = f.boolean("skip_special_tokens", &p.skip_special_tokens)) return e;
  if (const json* v = f.get("logit_bias")) {
    if (!v->is_object()) return wrong_type("logit_bias", "an object", *v);
    if (!v->empty())
      return bad_request("logit_bias is not supported by Lathe; leave it out", "logit_bias");
  }
  std::string ignored;
  if (auto e = f.string("user", &ignored)) return e;
  if (auto e = f.string("service_tier", &ignored)) return e;
  if (const json* v = f.get("metadata"); v != nullptr && !v->is_object())
    return wrong_type("metadata", "an object", *v);
  bool store = false;
  if (auto e = f.boolean("store", &store)) return e;
  return {};
}

MaybeApiError parse_content(const json& content, const std::string& field, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return {};
  }
  if (!content.is_array())
    return wrong_type(field, "a string or an array of text parts", content, "messages");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string pf = strformat("%s[%zu]", field.c_str(), i);
    if (!part.is_object())
      return wrong_type(pf, "an object like {\"type\": \"text\", \"text\": \"...\"}", part,
                        "messages");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      return bad_request(pf + ".type must be a string such as \"text\"", "messages");
    if (*type != "text")
      return bad_request(strformat("%s: only text parts are supported, not \"%s\"", pf.c_str(),
                                   type->get<std::string>().c_str()),
                         "messages");
    auto t = part.find("text");
    if (t == part.end() || !t->is_string())
      return bad_request(pf + ".text must be a string", "messages");
    if (i > 0) text += "\n";
    text += t->get<std::string>();
  }
  *out = std::move(text);
  return {};
}

MaybeApiError parse_messages(const Fields& f, OpenAiRequest* out) {
  const json* v = f.get("messages");
  if (v == nullptr)
    return bad_request("messages is required: a list of {\"role\", \"content\"} objects",
                       "messages");
  if (!v->is_array()) return wrong_type("messages", "an array", *v);
  if (v->empty()) return bad_request("messages must not be empty", "messages");
  if (v->size() > 100000) return bad_request("messages has more than 100000 entries", "messages");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string mf = strformat("messages[%zu]", i);
    if (!m.is_object()) return wrong_type(mf, "an object", m, "messages");
    ChatMessage msg;
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string& k = it.key();
      if (k == "role") {
        if (!it->is_string()) return wrong_type(mf + ".role", "a string", *it, "messages");
        msg.role = it->get<std::string>();
      } else if (k == "content") {
        if (!it->is_null())
          if (auto e = parse_content(*it, mf + ".content", &msg.content)) return e;
      } else if (k == "name" || k == "refusal") {
        if (!it->is_null() && !it->is_string())
          return wrong_type(mf + "." + k, "a string", *it, "messages");
      } else if (k == "tool_calls") {
        if (!it->is_null() && !(it->is_array() && it->empty()))
          return bad_request(mf + ".tool_calls: tool calls are not supported by Lathe", "messages");
      } else {
        return bad_request(strformat("%s: unrecognized field \"%s\"", mf.c_str(), k.c_str()),
                           "messages");
      }
    }
    if (msg.role.empty())
      return bad_request(mf + ".role is required (system, user or assistant)", "messages");
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
      return bad_request(strformat("%s.role must be system, user or assistant, got \"%s\"",
                                   mf.c_str(), msg.role.c_str()),
                         "messages");
    if (!m.contains("content") || (m["content"].is_null() && msg.role != "assistant"))
      return bad_request(mf + ".content is required", "messages");
    out->spec.messages.push_back(std::move(msg));
  }
  return {};
}

MaybeApiError parse_chat(const Fields& f, OpenAiRequest* out) {
  if (auto e = parse_messages(f, out)) return e;
  if (f.has("max_completion_tokens")) {
    if (auto e = f.integer32("max_completion_tokens", &out->spec.sampling.max_tokens, 1,
                             std::numeric_limits<int32_t>::max()))
      return e;
    out->max_tokens_given = true;
  }
  if (auto e = f.boolean("logprobs", &out->logprobs)) return e;
  if (f.has("top_logprobs")) {
    if (auto e = f.integer32("top_logprobs", &out->top_logprobs, 0, kMaxTopLogprobs)) return e;
    if (!out->logprobs)
      return bad_request("top_logprobs requires logprobs to be true", "top_logprobs");
  }
  if (auto e = f.boolean("add_generation_prompt", &out->spec.add_generation_prompt)) return e;
  if (const json* v = f.get("response_format")) {
    if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string())
      return bad_request("response_format must be an object like {\"type\": \"text\"}",
                         "response_format");
    if ((*v)["type"] != "text")
      return bad_request(
          "response_format: only {\"type\": \"text\"} is supported; JSON modes are not",
          "response_format");
  }
  for (const char* name : {"tools", "functions"}) {
    if (const json* v = f.get(name)) {
      if (!v->is_array()) return wrong_type(name, "an array", *v);
      if (!v->empty())
        return bad_request(std::string(name) + ": tool calling is not supported by Lathe", name);
    }
  }
  for (const char* name : {"tool_choice", "function_call"}) {
    if (const json* v = f.get(name)) {
      if (!v->is_string() || (*v != "none" && *v != "auto"))
        return bad_request(std::string(name) + ": tool calling is not supported by Lathe", name);
    }
  }
  bool parallel = false;
  if (auto e = f.boolean("parallel_tool_calls", &parallel)) return e;
  return {};
}

MaybeApiError parse_prompt(const Fields& f, OpenAiRequest* out) {
  const json* v = f.get("prompt");
  if (v == nullptr)
    return bad_request("prompt is required: a string or a list of token ids", "prompt");
  const json* p = v;
  if (v->is_array() && !v->empty() && (v->front().is_string() || v->front().is_array())) {
    // A batch: one prompt is the same as a single prompt; more are not supported.
    if (v->size() != 1)
      return bad_request(
          strformat("prompt: a list of %zu prompts is not supported; send one prompt per request",
                    v->size()),
          "prompt");
    p = &v->front();
  }
  if (p->is_string()) {
    out->spec.prompt = p->get<std::string>();
    return {};
  }
  if (p->is_array()) return parse_token_ids(*p, "prompt", &out->spec.prompt_tokens);
  return wrong_type("prompt", "a string or a list of token ids", *p);
}

MaybeApiError parse_completion(const Fields& f, OpenAiRequest* out) {
  if (auto e = parse_prompt(f, out)) return e;
  if (const json* v = f.get("logprobs")) {
    if (v->is_boolean()) {
      return bad_request(
          "logprobs must be an integer (alternatives per token, 0 to 20) for /v1/completions",
          "logprobs");
    }
    if (auto e = f.integer32("logprobs", &out->top_logprobs, 0, kMaxTopLogprobs)) return e;
    out->logprobs = true;
  }
  bool echo = false;
  if (auto e = f.boolean("echo", &echo)) return e;
  if (echo)
    return bad_request("echo is not supported by Lathe; leave it out or set it to false", "echo");
  std::string suffix;
  if (auto e = f.string("suffix", &suffix)) return e;
  if (!suffix.empty()) return bad_request("suffix is not supported by Lathe", "suffix");
  if (auto e = f.boolean("add_special_tokens", &out->add_special_tokens)) return e;
  return {};
}

}  // namespace

MaybeApiError parse_json_body(const std::string& body, nlohmann::json* out) {
  if (body.empty()) return bad_request("the request body is empty; send a JSON object");
  // Depth is checked before parsing so that absurd nesting costs nothing (and nothing recurses).
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth)
        return bad_request(
            strformat("the request body nests deeper than %d levels", kMaxJsonDepth));
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  try {
    *out = json::parse(body);
  } catch (const json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..."
    if (const size_t close = what.find("] "); close != std::string::npos)
      what = what.substr(close + 2);
    return bad_request("the request body is not valid JSON: " + what);
  }
  if (!out->is_object())
    return bad_request(std::string("the request body must be a JSON object, got ") +
                       type_name(*out));
  return {};
}

MaybeApiError parse_openai_request(ApiEndpoint endpoint, const nlohmann::json& body,
                                   OpenAiRequest* out) {
  if (!body.is_object()) return bad_request("the request body must be a JSON object");
  out->endpoint = endpoint;
  // OpenAI's defaults: completions stop after 16 tokens unless told; chat runs to the context end.
  out->spec.sampling.max_tokens = 16;
  if (auto e = check_known_fields(endpoint, body)) return e;
  const Fields f(body);
  if (auto e = parse_common(f, out)) return e;
  if (auto e =
          endpoint == ApiEndpoint::kChatCompletions ? parse_chat(f, out) : parse_completion(f, out))
    return e;
  if (out->logprobs) out->spec.sampling.logprobs = out->top_logprobs;
  if (out->max_tokens_given && out->spec.sampling.min_tokens > out->spec.sampling.max_tokens)
    return bad_request(strformat("min_tokens (%d) must not exceed max_tokens (%d)",
                                 out->spec.sampling.min_tokens, out->spec.sampling.max_tokens),
                       "min_tokens");
  return {};
}

}  // namespace lathe
