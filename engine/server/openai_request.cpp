#include "engine/server/openai_request.h"
#include "engine/server/json_nesting.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>

#include "engine/core/strings.h"
#include "engine/server/openai_chat_messages.h"
#include "engine/server/request_fields.h"

namespace lathe {
namespace {

using json = nlohmann::json;

// Fields of each endpoint: implemented ones, and OpenAI ones accepted and ignored.
const std::set<std::string>& common_fields() {
  static const std::set<std::string> s = {
      "model", "stream", "stream_options", "max_tokens", "temperature", "top_p", "top_k", "min_p",
      "seed", "stop", "presence_penalty", "frequency_penalty", "repetition_penalty", "n", "user",
      "ignore_eos", "min_tokens", "stop_token_ids", "skip_special_tokens", "logprobs", "logit_bias",
      "best_of", "response_format", "guided_json", "guided_regex", "guided_choice",
      "guided_grammar",
      // Accepted and ignored: they do not change what is generated.
      "store", "metadata", "service_tier", "guided_decoding_backend"};
  return s;
}
const std::set<std::string>& chat_fields() {
  static const std::set<std::string> s = {
      "messages",      "max_completion_tokens", "top_logprobs",
      "tools",         "tool_choice",           "functions",
      "function_call", "parallel_tool_calls",   "add_generation_prompt"};
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

MaybeApiError parse_stop(const JsonFields& f, SamplingParams* p) {
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

// logit_bias: {"<token id>": bias in [-100, 100], ...}; ids against the vocabulary are checked
// once the model is known (SamplingParams::validate).
MaybeApiError parse_logit_bias(const JsonFields& f, SamplingParams* p) {
  const json* v = f.get("logit_bias");
  if (v == nullptr) return {};
  if (!v->is_object()) return wrong_type("logit_bias", "an object mapping token ids to biases", *v);
  if (v->size() > kMaxLogitBias)
    return bad_request(
        strformat("logit_bias takes at most %zu tokens, got %zu", kMaxLogitBias, v->size()),
        "logit_bias");
  std::set<TokenId> seen;
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    char* end = nullptr;
    const long long id = std::strtoll(key.c_str(), &end, 10);
    if (key.empty() || end == key.c_str() || *end != '\0' || id < 0 ||
        id > std::numeric_limits<int32_t>::max())
      return bad_request(strformat("logit_bias: key \"%s\" is not a token id (a non-negative "
                                   "integer as a string)",
                                   key.c_str()),
                         "logit_bias");
    if (!it->is_number())
      return wrong_type("logit_bias[\"" + key + "\"]", "a number", *it, "logit_bias");
    const double b = it->get<double>();
    if (!std::isfinite(b) || b < -100.0 || b > 100.0)
      return bad_request(
          strformat("logit_bias[\"%s\"] must be in [-100, 100], got %g", key.c_str(), b),
          "logit_bias");
    if (!seen.insert(static_cast<TokenId>(id)).second)
      return bad_request(strformat("logit_bias names token %lld twice", id), "logit_bias");
    p->logit_bias.push_back(TokenBias{static_cast<TokenId>(id), static_cast<float>(b)});
  }
  return {};
}

// response_format (OpenAI) and vLLM's guided_json / guided_regex / guided_choice: at most one.
// Schemas are only located here; the generation handler compiles them (it needs the tokenizer).
MaybeApiError parse_guided(const JsonFields& f, GuidedDecoding* g) {
  int given = 0;
  std::string first;
  auto count = [&](const char* name) {
    if (!f.has(name)) return;
    if (given++ == 0) first = name;
  };
  for (const char* name : {"guided_json", "guided_regex", "guided_choice", "guided_grammar"})
    count(name);
  if (const json* v = f.get("response_format")) {
    if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string())
      return bad_request(
          "response_format must be an object like {\"type\": \"json_object\"}, got " +
              v->dump().substr(0, 80),
          "response_format");
    const std::string type = (*v)["type"].get<std::string>();
    for (auto it = v->begin(); it != v->end(); ++it)
      if (it.key() != "type" && it.key() != "json_schema")
        return bad_request("response_format: unrecognized field " + it.key(), "response_format");
    if (type == "json_object") {
      count("response_format");
      g->kind = GuidedKind::kJsonObject;
    } else if (type == "json_schema") {
      count("response_format");
      const json* js = v->contains("json_schema") ? &(*v)["json_schema"] : nullptr;
      if (js == nullptr || !js->is_object())
        return bad_request(
            "response_format.json_schema must be an object like {\"name\": \"...\", "
            "\"schema\": {...}}",
            "response_format");
      if (!js->contains("schema") || !((*js)["schema"].is_object() || (*js)["schema"].is_boolean()))
        return bad_request("response_format.json_schema.schema (a JSON schema object) is required",
                           "response_format");
      g->kind = GuidedKind::kJsonSchema;
      g->schema_pointer = "/response_format/json_schema/schema";
    } else if (type != "text") {
      return bad_request(
          "response_format.type must be text, json_object or json_schema, got \"" + type + "\"",
          "response_format");
    }
  }
  if (given > 1)
    return bad_request(
        "ask for one kind of structured output at a time (" + first + " and another were given)",
        first);
  if (given == 0) return {};
  g->param = first;
  if (first == "response_format") return {};
  const json& v = *f.get(first.c_str());
  if (first == "guided_grammar")
    return bad_request("guided_grammar is not supported by Lathe; use guided_regex or guided_json",
                       first);
  if (first == "guided_json") {
    if (v.is_string()) {
      g->schema_text = v.get<std::string>();
    } else if (!v.is_object()) {
      return wrong_type("guided_json", "a JSON schema (an object or its JSON text)", v);
    }
    g->kind = GuidedKind::kJsonSchema;
    g->schema_pointer = "/guided_json";
  } else if (first == "guided_regex") {
    if (!v.is_string()) return wrong_type("guided_regex", "a string", v);
    if (v.get<std::string>().size() > 16384)
      return bad_request("guided_regex is longer than 16384 bytes", first);
    g->kind = GuidedKind::kRegex;
    g->regex = v.get<std::string>();
  } else {
    if (!v.is_array() || v.empty())
      return bad_request("guided_choice must be a non-empty array of strings", first);
    for (const json& c : v) {
      if (!c.is_string() || c.get<std::string>().empty())
        return bad_request("guided_choice must hold non-empty strings", first);
      g->choices.push_back(c.get<std::string>());
    }
    g->kind = GuidedKind::kChoice;
  }
  return {};
}

MaybeApiError parse_common(const JsonFields& f, OpenAiRequest* out) {
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
  if (n < 1 || n > kMaxChoices)
    return bad_request(strformat("n must be in [1, %d] (choices of one prompt), got %lld",
                                 kMaxChoices, static_cast<long long>(n)),
                       "n");
  out->n = static_cast<int32_t>(n);
  int64_t best_of = n;
  if (auto e = f.integer("best_of", &best_of, std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max()))
    return e;
  if (best_of != n)
    return bad_request(strformat("best_of must equal n (%lld), got %lld: Lathe does not rank "
                                 "samples; ask for n=%lld and choose among them yourself",
                                 static_cast<long long>(n), static_cast<long long>(best_of),
                                 static_cast<long long>(std::max<int64_t>(best_of, 1))),
                       "best_of");
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
  if (auto e = parse_logit_bias(f, &p)) return e;
  if (auto e = parse_guided(f, &out->guided)) return e;
  std::string ignored;
  if (auto e = f.string("user", &ignored)) return e;
  if (auto e = f.string("service_tier", &ignored)) return e;
  if (const json* v = f.get("metadata"); v != nullptr && !v->is_object())
    return wrong_type("metadata", "an object", *v);
  bool store = false;
  if (auto e = f.boolean("store", &store)) return e;
  return {};
}

MaybeApiError parse_chat(const JsonFields& f, OpenAiRequest* out) {
  if (auto e = parse_chat_messages(f, out)) return e;
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
  if (auto e = parse_chat_tools(f, out)) return e;
  if (out->uses_tools() && out->guided.kind != GuidedKind::kNone)
    return bad_request(
        "use tools or structured output (" + out->guided.param + "), not both in one request",
        "tools");
  if (auto e = f.boolean("parallel_tool_calls", &out->parallel_tool_calls)) return e;
  return {};
}

MaybeApiError parse_prompt(const JsonFields& f, OpenAiRequest* out) {
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

MaybeApiError parse_completion(const JsonFields& f, OpenAiRequest* out) {
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
  if (auto e = f.boolean("echo", &out->echo)) return e;
  // With echo, logprobs cover the prompt too (what harnesses read for log-likelihoods).
  if (out->echo && out->logprobs) out->spec.sampling.prompt_logprobs = out->top_logprobs;
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
  JsonNesting nesting;
  for (const char c : body)
    if (nesting.feed(c) > kMaxJsonDepth)
      return bad_request(strformat("the request body nests deeper than %d levels", kMaxJsonDepth));
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
                       json_type_name(*out));
  return {};
}

MaybeApiError parse_openai_request(ApiEndpoint endpoint, const nlohmann::json& body,
                                   OpenAiRequest* out) {
  if (!body.is_object()) return bad_request("the request body must be a JSON object");
  out->endpoint = endpoint;
  // OpenAI's defaults: completions stop after 16 tokens unless told; chat runs to the context end.
  out->spec.sampling.max_tokens = 16;
  if (auto e = check_known_fields(endpoint, body)) return e;
  const JsonFields f(body);
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
