#include "engine/server/in_process_chat.h"

#include <nlohmann/json.hpp>

#include "engine/grammar/byte_regex.h"
#include "engine/server/guided_decoding.h"

namespace lathe {
namespace {

bool is_blank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

// "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..." (as the server says
// it of a body).
std::string parse_error_text(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (const size_t close = what.find("] "); close != std::string::npos)
    what = what.substr(close + 2);
  return what;
}

// `text` as compact JSON with its members in the written order, or as a JSON string when it does
// not parse (the server then says what is wrong with the field).
std::string ordered_dump(const std::string& text) {
  try {
    return nlohmann::ordered_json::parse(text).dump();
  } catch (const nlohmann::json::exception&) {
    return nlohmann::json(text).dump();
  }
}

ChatOptionsProblem problem(const std::string& param, const std::string& message) {
  return ChatOptionsProblem{param, param + ": " + message};
}

}  // namespace

std::string chat_request_body(const nlohmann::json& messages, const ChatOutputOptions& o) {
  std::string body = "{\"messages\": " + messages.dump();
  if (o.json_output) {
    if (is_blank(o.json_schema)) {
      body += ", \"response_format\": {\"type\": \"json_object\"}";
    } else {
      body +=
          ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": "
          "\"output\", \"schema\": " +
          ordered_dump(o.json_schema) + "}}";
    }
  }
  if (!is_blank(o.tools)) {
    body += ", \"tools\": " + ordered_dump(o.tools);
    body += ", \"tool_choice\": " + nlohmann::json(o.tool_choice).dump();
  }
  return body + "}";
}

std::optional<ChatOptionsProblem> check_chat_output_options(const ChatOutputOptions& o) {
  if (o.json_output && !is_blank(o.json_schema)) {
    try {
      const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(o.json_schema);
      (void)schema;
    } catch (const nlohmann::json::exception& e) {
      return problem("response_format", "the schema is not valid JSON: " + parse_error_text(e));
    }
  }
  nlohmann::ordered_json tools;
  if (!is_blank(o.tools)) {
    try {
      tools = nlohmann::ordered_json::parse(o.tools);
    } catch (const nlohmann::json::exception& e) {
      return problem("tools", "not valid JSON: " + parse_error_text(e));
    }
  }
  const std::string body =
      chat_request_body(nlohmann::json::array({{{"role", "user"}, {"content", "."}}}), o);
  nlohmann::json parsed;
  OpenAiRequest r;
  MaybeApiError e = parse_json_body(body, &parsed);
  if (!e) e = parse_openai_request(ApiEndpoint::kChatCompletions, parsed, &r);
  if (e) return ChatOptionsProblem{e->param.empty() ? "tools" : e->param, e->message};
  if (r.guided.kind != GuidedKind::kNone) {
    Result<std::string> regex = guided_regex(r, body);
    if (!regex.is_ok()) return problem(r.guided.param, regex.status().message());
    Result<ByteNfa> nfa = compile_regex(*regex);
    if (!nfa.is_ok()) return problem(r.guided.param, nfa.status().message());
  }
  if (!r.tools_json.empty()) {
    // Every tool's parameters as tool_choice "required" compiles them.
    Result<std::string> regex = forced_call_regex(tools, "", kMaxParallelToolCalls);
    if (!regex.is_ok()) return problem("tools", regex.status().message());
    Result<ByteNfa> nfa = compile_regex(*regex);
    if (!nfa.is_ok()) return problem("tools", nfa.status().message());
  }
  return std::nullopt;
}

InProcessChat::InProcessChat(Engine& engine)
    : ctx_(engine, ServerConfig{}, std::string()),
      syntax_(tool_syntax_of(engine.model().chat_template)) {}

Result<OpenAiRequest> InProcessChat::prepare(const std::string& body) {
  nlohmann::json parsed;
  OpenAiRequest r;
  MaybeApiError e = parse_json_body(body, &parsed);
  if (!e) e = parse_openai_request(ApiEndpoint::kChatCompletions, parsed, &r);
  if (!e) e = prepare_tools(ctx_, body, &r);
  if (!e && r.guided.kind != GuidedKind::kNone) {
    Result<std::string> regex = guided_regex(r, body);
    if (!regex.is_ok())
      e = bad_request(r.guided.param + ": " + regex.status().message(), r.guided.param);
    else
      e = attach_constraint(ctx_, *regex, r.guided.param, &r);
  }
  if (e) return invalid_argument(e->message);
  return r;
}

}  // namespace lathe
