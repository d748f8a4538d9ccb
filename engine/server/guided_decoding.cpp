#include "engine/server/guided_decoding.h"

#include <nlohmann/json.hpp>

#include "engine/grammar/grammar_constraint.h"
#include "engine/grammar/json_schema_regex.h"
#include "engine/server/tool_calls.h"

namespace lathe {

Result<std::string> guided_regex(const OpenAiRequest& r, const std::string& body) {
  const GuidedDecoding& g = r.guided;
  switch (g.kind) {
    case GuidedKind::kNone:
      return std::string();
    case GuidedKind::kJsonObject:
      return json_object_regex();
    case GuidedKind::kRegex:
      return g.regex;
    case GuidedKind::kChoice:
      return choice_regex(g.choices);
    case GuidedKind::kJsonSchema:
      break;
  }
  nlohmann::ordered_json schema;
  try {
    if (!g.schema_text.empty()) {
      schema = nlohmann::ordered_json::parse(g.schema_text);
    } else {
      schema = nlohmann::ordered_json::parse(body).at(
          nlohmann::ordered_json::json_pointer(g.schema_pointer));
    }
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("the schema is not valid JSON: ") + e.what());
  }
  return json_schema_to_regex(schema);
}

MaybeApiError attach_constraint(ServerContext& ctx, const std::string& regex,
                                const std::string& param, OpenAiRequest* request) {
  Result<std::shared_ptr<GrammarConstraint>> c = ctx.grammar(regex);
  if (!c.is_ok()) return bad_request(param + ": " + c.status().message(), param);
  request->spec.sampling.constraint = std::move(c).value();
  return {};
}

void render_tools_into_request(ToolSyntax syntax, OpenAiRequest* r) {
  std::vector<ChatMessage>& messages = r->spec.messages;
  if (syntax == ToolSyntax::kGeneric) {
    // Past calls as the text the model is asked to write.
    for (ChatMessage& m : messages) {
      if (m.extra_json.empty()) continue;
      nlohmann::json extra = nlohmann::json::parse(m.extra_json);
      if (!extra.contains("tool_calls")) continue;
      const std::string calls = generic_calls_text(extra["tool_calls"]);
      m.content = m.content.empty() ? calls : m.content + "\n" + calls;
      extra.erase("tool_calls");
      extra.erase("content");
      m.extra_json = extra.empty() ? std::string() : extra.dump();
    }
  }
  if (!r->uses_tools()) return;
  r->spec.sampling.skip_special_tokens = false;
  if (syntax == ToolSyntax::kGeneric) {
    const std::string prompt = generic_tools_prompt(r->tools_json);
    if (!messages.empty() && messages[0].role == "system") {
      messages[0].content += "\n\n" + prompt;
    } else {
      messages.insert(messages.begin(), ChatMessage{"system", prompt, ""});
    }
  } else {
    r->spec.chat_variables_json = "{\"tools\": " + r->tools_json + "}";
  }
}

MaybeApiError prepare_tools(ServerContext& ctx, const std::string& body, OpenAiRequest* r) {
  render_tools_into_request(tool_syntax_of(ctx.engine.model().chat_template), r);
  if (!r->uses_tools()) return {};
  if (r->tool_choice != ToolChoice::kRequired && r->tool_choice != ToolChoice::kNamed) return {};
  nlohmann::ordered_json tools;
  try {
    tools = nlohmann::ordered_json::parse(body).at("tools");
  } catch (const nlohmann::json::exception& e) {
    return bad_request(std::string("tools: ") + e.what(), "tools");
  }
  Result<std::string> regex = forced_call_regex(tools, r->tool_choice_name,
                                                r->parallel_tool_calls ? kMaxParallelToolCalls : 1);
  if (!regex.is_ok()) return bad_request("tools: " + regex.status().message(), "tools");
  return attach_constraint(ctx, *regex, "tools", r);
}

}  // namespace lathe
