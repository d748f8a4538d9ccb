#include "ui/chat/conversation.h"

#include <QJsonArray>
#include <QUuid>

namespace lathe::ui {

Conversation Conversation::create() {
  Conversation c;
  c.id = QUuid::createUuid().toString(QUuid::WithoutBraces);
  c.created = c.updated = QDateTime::currentDateTimeUtc();
  return c;
}

QVector<ChatTurn> Conversation::turns() const {
  QVector<ChatTurn> out;
  if (!systemPrompt.trimmed().isEmpty()) out.push_back({QStringLiteral("system"), systemPrompt});
  for (const ChatMessage& m : messages)
    out.push_back({m.role, m.content, m.toolCalls, m.toolCallId, m.toolName});
  return out;
}

const ChatToolCall* Conversation::unansweredToolCall() const {
  int last = static_cast<int>(messages.size()) - 1;
  while (last >= 0 && messages[last].role == QLatin1String("tool")) --last;
  if (last < 0 || messages[last].role != QLatin1String("assistant")) return nullptr;
  for (const ChatToolCall& call : messages[last].toolCalls) {
    bool answered = false;
    for (int i = last + 1; i < messages.size() && !answered; ++i)
      answered = messages[i].toolCallId == call.id;
    if (!answered) return &call;
  }
  return nullptr;
}

namespace {

QJsonObject statsToJson(const GenerationStats& s) {
  QJsonObject o{{"prompt_tokens", s.promptTokens},
                {"completion_tokens", s.completionTokens},
                {"cached_prompt_tokens", s.cachedPromptTokens},
                {"ttft_ms", s.ttftMs},
                {"tokens_per_second", s.tokensPerSecond},
                {"total_ms", s.totalMs},
                {"finish_reason", s.finishReason}};
  if (!s.error.isEmpty()) o.insert("error", s.error);
  return o;
}

GenerationStats statsFromJson(const QJsonObject& o) {
  GenerationStats s;
  s.promptTokens = o.value("prompt_tokens").toInt();
  s.completionTokens = o.value("completion_tokens").toInt();
  s.cachedPromptTokens = o.value("cached_prompt_tokens").toInt();
  s.ttftMs = o.value("ttft_ms").toDouble(-1.0);
  s.tokensPerSecond = o.value("tokens_per_second").toDouble();
  s.totalMs = o.value("total_ms").toDouble();
  s.finishReason = o.value("finish_reason").toString();
  s.error = o.value("error").toString();
  return s;
}

QJsonObject samplingToJson(const SamplingSettings& s) {
  QJsonObject o{{"temperature", s.temperature},
                {"top_p", s.topP},
                {"top_k", s.topK},
                {"min_p", s.minP},
                {"repetition_penalty", s.repetitionPenalty},
                {"max_tokens", s.maxTokens}};
  if (s.seed) o.insert("seed", QString::number(*s.seed));  // 64-bit: a string keeps every bit
  return o;
}

SamplingSettings samplingFromJson(const QJsonObject& o) {
  SamplingSettings s;
  s.temperature = o.value("temperature").toDouble(s.temperature);
  s.topP = o.value("top_p").toDouble(s.topP);
  s.topK = o.value("top_k").toInt(s.topK);
  s.minP = o.value("min_p").toDouble(s.minP);
  s.repetitionPenalty = o.value("repetition_penalty").toDouble(s.repetitionPenalty);
  s.maxTokens = o.value("max_tokens").toInt(s.maxTokens);
  bool ok = false;
  const quint64 seed = o.value("seed").toString().toULongLong(&ok);
  if (ok) s.seed = seed;
  return s;
}

QJsonObject outputToJson(const ChatOutputSettings& s) {
  return QJsonObject{{"json", s.jsonOutput},
                     {"json_schema", s.jsonSchema},
                     {"tools", s.tools},
                     {"tool_choice", s.toolChoice}};
}

ChatOutputSettings outputFromJson(const QJsonObject& o) {
  ChatOutputSettings s;
  s.jsonOutput = o.value("json").toBool();
  s.jsonSchema = o.value("json_schema").toString();
  s.tools = o.value("tools").toString();
  s.toolChoice = o.value("tool_choice").toString(s.toolChoice);
  return s;
}

// A message's calls as the API writes them (arguments as JSON text).
QJsonArray callsToJson(const QVector<ChatToolCall>& calls) {
  QJsonArray out;
  for (const ChatToolCall& c : calls)
    out.append(QJsonObject{{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  return out;
}

QVector<ChatToolCall> callsFromJson(const QJsonArray& a) {
  QVector<ChatToolCall> out;
  for (const QJsonValue& v : a) {
    const QJsonObject o = v.toObject();
    out.push_back(
        {o.value("id").toString(), o.value("name").toString(), o.value("arguments").toString()});
  }
  return out;
}

}  // namespace

QJsonObject Conversation::toJson() const {
  QJsonArray msgs;
  for (const ChatMessage& m : messages) {
    QJsonObject o{{"role", m.role}, {"content", m.content}};
    if (m.stats) o.insert("stats", statsToJson(*m.stats));
    if (!m.toolCalls.isEmpty()) o.insert("tool_calls", callsToJson(m.toolCalls));
    if (!m.toolCallId.isEmpty()) o.insert("tool_call_id", m.toolCallId);
    if (!m.toolName.isEmpty()) o.insert("name", m.toolName);
    msgs.append(o);
  }
  return QJsonObject{{"format", "lathe-conversation"},
                     {"version", 1},
                     {"id", id},
                     {"title", title},
                     {"created", created.toString(Qt::ISODateWithMs)},
                     {"updated", updated.toString(Qt::ISODateWithMs)},
                     {"system_prompt", systemPrompt},
                     {"model", modelName},
                     {"sampling", samplingToJson(sampling)},
                     {"output", outputToJson(output)},
                     {"messages", msgs}};
}

bool Conversation::fromJson(const QJsonObject& json, Conversation* out, QString* error) {
  auto fail = [error](const QString& why) {
    if (error) *error = why;
    return false;
  };
  if (json.value("format").toString() != QLatin1String("lathe-conversation"))
    return fail(
        QStringLiteral("not a Lathe conversation (\"format\" is not \"lathe-conversation\")"));
  if (!json.value("id").isString() || json.value("id").toString().isEmpty())
    return fail(QStringLiteral("\"id\" is missing"));
  if (!json.value("messages").isArray())
    return fail(QStringLiteral("\"messages\" is not an array"));
  Conversation c;
  c.id = json.value("id").toString();
  c.title = json.value("title").toString();
  c.created = QDateTime::fromString(json.value("created").toString(), Qt::ISODateWithMs);
  c.updated = QDateTime::fromString(json.value("updated").toString(), Qt::ISODateWithMs);
  c.systemPrompt = json.value("system_prompt").toString();
  c.modelName = json.value("model").toString();
  c.sampling = samplingFromJson(json.value("sampling").toObject());
  c.output = outputFromJson(json.value("output").toObject());
  const QJsonArray msgs = json.value("messages").toArray();
  for (qsizetype i = 0; i < msgs.size(); ++i) {
    const QJsonObject o = msgs.at(i).toObject();
    const QString role = o.value("role").toString();
    if (role != QLatin1String("user") && role != QLatin1String("assistant") &&
        role != QLatin1String("tool"))
      return fail(QStringLiteral("message %1 has role \"%2\" (expected user, assistant or tool)")
                      .arg(i)
                      .arg(role));
    ChatMessage m{role, o.value("content").toString(), std::nullopt};
    if (o.value("stats").isObject()) m.stats = statsFromJson(o.value("stats").toObject());
    m.toolCalls = callsFromJson(o.value("tool_calls").toArray());
    m.toolCallId = o.value("tool_call_id").toString();
    m.toolName = o.value("name").toString();
    if (role == QLatin1String("tool") && m.toolCallId.isEmpty())
      return fail(QStringLiteral("message %1 is a tool result without \"tool_call_id\"").arg(i));
    c.messages.push_back(std::move(m));
  }
  *out = std::move(c);
  return true;
}

}  // namespace lathe::ui
