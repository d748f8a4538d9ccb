// A chat conversation as Lathe Studio keeps it: system prompt, sampling settings and messages, each
// assistant reply with the stats it was produced with. Saved as one JSON file per conversation
// (ConversationStore). Plain data; no engine types.
#pragma once

#include <QDateTime>
#include <QJsonObject>
#include <QString>
#include <QVector>

#include <optional>

#include "ui/bridge/bridge_types.h"

namespace lathe::ui {

struct ChatMessage {
  QString role;  // "user", "assistant" or "tool" (a function's result)
  QString content;
  std::optional<GenerationStats> stats;  // assistant replies that finished
  QVector<ChatToolCall> toolCalls;       // assistant: the functions it called
  QString toolCallId;                    // tool: the call this result answers
  QString toolName;                      // tool: the function
};

struct Conversation {
  QString id;     // file stem, a UUID without braces
  QString title;  // shown in the list; the first user message until renamed
  QDateTime created;
  QDateTime updated;
  QString systemPrompt;
  SamplingSettings sampling;
  ChatOutputSettings output;  // JSON output and tools
  QString modelName;          // the model that wrote the replies (informative)
  QVector<ChatMessage> messages;

  static Conversation create();  // new id, timestamps now, empty messages

  // The turns sent to the engine: the system prompt (when set), then every message.
  QVector<ChatTurn> turns() const;
  // The first call of the last assistant message that no tool message after it answers; null when
  // every call is answered (or the last reply made none).
  const ChatToolCall* unansweredToolCall() const;

  QJsonObject toJson() const;
  // Reads what toJson() wrote; false (with *error) for missing fields or wrong types.
  static bool fromJson(const QJsonObject& json, Conversation* out, QString* error);
};

}  // namespace lathe::ui
