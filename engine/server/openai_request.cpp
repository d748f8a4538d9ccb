#include "engine/server/openai_request.h"
#include "engine/server/json_nesting.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
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

// logit_bias: {"<token id>": bias in [-100, 100], ...}; ids against the vocabulary are checked
// once the model is known (SamplingParams::validate).
MaybeApiError parse_logit_bias(const Fields& f, SamplingParams* p) {
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
MaybeApiError parse_guided(const Fields& f, GuidedDecoding* g) {
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

// An assistant message's tool_calls (OpenAI: [{"id", "type": "function", "function": {"name",
// "arguments": JSON text}}]) into the message dict templates read, arguments as objects (as
// transformers' templates and vLLM expect).
MaybeApiError parse_message_tool_calls(const json& v, const std::string& field, json* extra) {
  if (!v.is_array()) return wrong_type(field, "an array", v, "messages");
  json calls = json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string cf = strformat("%s[%zu]", field.c_str(), i);
    const json& c = v[i];
    if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
      return bad_request(cf + " must be {\"id\", \"type\": \"function\", \"function\": "
                              "{\"name\", \"arguments\"}}",
                         "messages");
    const json& fn = c["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      return bad_request(cf + ".function.name must be a string", "messages");
    json args = json::object();
    if (fn.contains("arguments") && !fn["arguments"].is_null()) {
      if (fn["arguments"].is_string()) {
        try {
          args = json::parse(fn["arguments"].get<std::string>());
        } catch (const json::exception&) {
          return bad_request(cf + ".function.arguments is not valid JSON", "messages");
        }
      } else {
        args = fn["arguments"];
      }
    }
    json call = {{"type", "function"},
                 {"function", {{"name", fn["name"]}, {"arguments", std::move(args)}}}};
    if (c.contains("id") && c["id"].is_string()) call["id"] = c["id"];
    calls.push_back(std::move(call));
  }
  (*extra)["tool_calls"] = std::move(calls);
  return {};
}

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
// and tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}}.
MaybeApiError parse_tools(const Fields& f, OpenAiRequest* out) {
  for (const char* legacy : {"functions", "function_call"})
    if (f.has(legacy))
      return bad_request(std::string(legacy) +
                             " is deprecated and not supported; use tools and "
                             "tool_choice",
                         legacy);
  if (const json* v = f.get("tools")) {
    if (!v->is_array()) return wrong_type("tools", "an array", *v);
    if (v->size() > 128) return bad_request("tools takes at most 128 functions", "tools");
    for (size_t i = 0; i < v->size(); ++i) {
      const json& t = (*v)[i];
      const std::string tf = strformat("tools[%zu]", i);
      if (!t.is_object() || t.value("type", json()) != "function" || !t.contains("function") ||
          !t["function"].is_object())
        return bad_request(tf + " must be {\"type\": \"function\", \"function\": {\"name\": "
                                "..., \"parameters\": {...}}}",
                           "tools");
      const json& fn = t["function"];
      if (!fn.contains("name") || !fn["name"].is_string())
        return bad_request(tf + ".function.name is required (a string)", "tools");
      const std::string name = fn["name"].get<std::string>();
      const bool name_ok =
          !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
          });
      if (!name_ok)
        return bad_request(
            tf + ".function.name must be 1 to 64 letters, digits, '_' or '-', got \"" + name + "\"",
            "tools");
      if (std::find(out->tool_names.begin(), out->tool_names.end(), name) != out->tool_names.end())
        return bad_request("tools: two functions are named " + name, "tools");
      if (fn.contains("description") && !fn["description"].is_string())
        return bad_request(tf + ".function.description must be a string", "tools");
      if (fn.contains("parameters") && !fn["parameters"].is_object())
        return bad_request(tf + ".function.parameters must be a JSON schema object", "tools");
      out->tool_names.push_back(name);
    }
    if (!v->empty()) out->tools_json = v->dump();
  }
  const json* c = f.get("tool_choice");
  if (c == nullptr) return {};
  if (c->is_string()) {
    const std::string s = c->get<std::string>();
    if (s == "none") {
      out->tool_choice = ToolChoice::kNone;
    } else if (s == "auto") {
      out->tool_choice = ToolChoice::kAuto;
    } else if (s == "required") {
      out->tool_choice = ToolChoice::kRequired;
    } else {
      return bad_request(
          "tool_choice must be none, auto, required or {\"type\": \"function\", "
          "\"function\": {\"name\": ...}}, got \"" +
              s + "\"",
          "tool_choice");
    }
  } else if (c->is_object() && c->contains("function") && (*c)["function"].is_object() &&
             (*c)["function"].contains("name") && (*c)["function"]["name"].is_string()) {
    out->tool_choice = ToolChoice::kNamed;
    out->tool_choice_name = (*c)["function"]["name"].get<std::string>();
    if (std::find(out->tool_names.begin(), out->tool_names.end(), out->tool_choice_name) ==
        out->tool_names.end())
      return bad_request("tool_choice names the function " + out->tool_choice_name +
                             ", which is not among the tools",
                         "tool_choice");
  } else {
    return bad_request(
        "tool_choice must be none, auto, required or {\"type\": \"function\", "
        "\"function\": {\"name\": ...}}",
        "tool_choice");
  }
  if ((out->tool_choice == ToolChoice::kRequired) && out->tools_json.empty())
    return bad_request("tool_choice required needs tools", "tool_choice");
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
    json extra = json::object();
    for (auto it = m.begin(); it != m.end(); ++it) {
      const std::string& k = it.key();
      if (k == "role") {
        if (!it->is_string()) return wrong_type(mf + ".role", "a string", *it, "messages");
        msg.role = it->get<std::string>();
      } else if (k == "content") {
        if (!it->is_null())
          if (auto e = parse_content(*it, mf + ".content", &msg.content)) return e;
      } else if (k == "name" || k == "refusal" || k == "tool_call_id") {
        if (!it->is_null() && !it->is_string())
          return wrong_type(mf + "." + k, "a string", *it, "messages");
        if (it->is_string() && k != "refusal") extra[k] = *it;
      } else if (k == "tool_calls") {
        if (it->is_null() || (it->is_array() && it->empty())) continue;
        if (auto e = parse_message_tool_calls(*it, mf + ".tool_calls", &extra)) return e;
      } else {
        return bad_request(strformat("%s: unrecognized field \"%s\"", mf.c_str(), k.c_str()),
                           "messages");
      }
    }
    if (msg.role.empty())
      return bad_request(mf + ".role is required (system, user or assistant)", "messages");
    if (msg.role == "developer") msg.role = "system";
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool")
      return bad_request(strformat("%s.role must be system, user, assistant or tool, got \"%s\"",
                                   mf.c_str(), msg.role.c_str()),
                         "messages");
    if (extra.contains("tool_calls") && msg.role != "assistant")
      return bad_request(mf + ".tool_calls belongs to assistant messages", "messages");
    if (msg.role == "tool" && !extra.contains("tool_call_id"))
      return bad_request(mf + ".tool_call_id is required for a tool message (the id of the call "
                              "it answers)",
                         "messages");
    const bool calls_only = extra.contains("tool_calls");
    if ((!m.contains("content") && !calls_only) ||
        (m.contains("content") && m["content"].is_null() && msg.role != "assistant"))
      return bad_request(mf + ".content is required", "messages");
    // An assistant turn that only calls tools keeps content "" (templates such as Qwen3's read it).
    if (!extra.empty()) msg.extra_json = extra.dump();
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
  if (auto e = parse_tools(f, out)) return e;
  if (out->uses_tools() && out->guided.kind != GuidedKind::kNone)
    return bad_request(
        "use tools or structured output (" + out->guided.param + "), not both in one request",
        "tools");
  if (auto e = f.boolean("parallel_tool_calls", &out->parallel_tool_calls)) return e;
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
