#include "ui/bridge/chat_request.h"

#include <nlohmann/json.hpp>

#include "engine/server/in_process_chat.h"

namespace lathe::ui {

namespace {

ChatOutputOptions toOptions(const ChatOutputSettings& s) {
  ChatOutputOptions o;
  o.json_output = s.jsonOutput;
  o.json_schema = s.jsonSchema.toStdString();
  o.tools = s.tools.toStdString();
  o.tool_choice = s.toolChoice.toStdString();
  return o;
}

nlohmann::json messageJson(const ChatTurn& t) {
  nlohmann::json m = {{"role", t.role.toStdString()}, {"content", t.content.toStdString()}};
  if (!t.toolCalls.isEmpty()) {
    nlohmann::json calls = nlohmann::json::array();
    for (const ChatToolCall& c : t.toolCalls)
      calls.push_back(
          {{"id", c.id.toStdString()},
           {"type", "function"},
           {"function",
            {{"name", c.name.toStdString()}, {"arguments", c.arguments.toStdString()}}}});
    m["tool_calls"] = std::move(calls);
  }
  if (!t.toolCallId.isEmpty()) m["tool_call_id"] = t.toolCallId.toStdString();
  if (!t.toolName.isEmpty()) m["name"] = t.toolName.toStdString();
  return m;
}

}  // namespace

ChatOutputProblem checkChatOutput(const ChatOutputSettings& settings) {
  ChatOutputProblem out;
  const std::optional<ChatOptionsProblem> p = check_chat_output_options(toOptions(settings));
  if (!p) return out;
  out.field = p->param == "tools" || p->param == "tool_choice" ? ChatOutputField::kTools
                                                               : ChatOutputField::kJsonSchema;
  out.message = QString::fromStdString(p->message);
  return out;
}

QByteArray chatRequestBody(const GenerationRequest& request) {
  nlohmann::json messages = nlohmann::json::array();
  for (const ChatTurn& t : request.messages) messages.push_back(messageJson(t));
  return QByteArray::fromStdString(chat_request_body(messages, toOptions(request.output)));
}

QString prettyJson(const QString& json) {
  try {
    return QString::fromStdString(nlohmann::ordered_json::parse(json.toStdString()).dump(2));
  } catch (const nlohmann::json::exception&) {
    return json;
  }
}

}  // namespace lathe::ui
